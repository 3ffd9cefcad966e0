//! Wrappers' options, read getopt style from a table: where a wrapper's operands (its command)
//! start, and which options it was given. An option not in the table makes the line uncertain,
//! because it might take a value and shift where the command starts.

use super::Parse;
use super::word::Arg;

/// Each wrapper's options, getopt style: a `:` after a short option and a `=` after a long one
/// mark those that take a value. Anything not listed makes the line uncertain, because an unknown
/// option may take a value and shift where the command starts.
#[rustfmt::skip] // a table reads best one wrapper per line
const WRAPPER_OPTIONS: &[(&str, &str, &str)] = &[
    ("nice",    "n:",       "adjustment="),
    ("ionice",  "c:n:t",    "class= classdata= ignore"),
    ("setsid",  "fwc",      "fork wait ctty"),
    ("stdbuf",  "i:o:e:",   "input= output= error="),
    ("time",    "pvaqo:f:", "portability verbose append quiet output= format="),
    ("strace",  "cCdDfFhiknqrtTvVwxyYzZa:b:e:E:I:o:O:P:s:S:u:U:X:", ""),
    ("ltrace",  "bcCdDfhiLrStTVa:A:e:F:l:n:o:s:u:w:x:X:", ""),
    ("env",     "i0vu:C:S:", "ignore-environment null debug unset= chdir= split-string="),
    ("timeout", "vfps:k:",  "preserve-status foreground verbose signal= kill-after="),
    ("command", "pvV",      ""),
    ("exec",    "cla:",     ""),
    ("doas",    "nsLu:a:",  ""),
    ("chroot",  "",         "skip-chdir userspec= groups="),
    ("sudo",    "AbEHiKknPSsBNu:g:C:D:p:r:t:T:U:R:", "askpass background preserve-env set-home \
        login non-interactive stdin shell preserve-groups user= group= chdir= prompt= role= type= \
        close-from= command-timeout= other-user= chroot="),
    ("flock",   "sxeunoFvw:E:", "shared exclusive unlock nonblock nb close no-fork verbose \
        fcntl timeout= wait= conflict-exit-code="),
    ("watch",   "bcCdegprtwxn:q:", "differences precise no-title beep errexit chgexit color \
        no-color exec no-wrap no-rerun interval= equexit="),
    ("xargs",   "0rtpxon:L:I:d:P:s:a:E:", "null no-run-if-empty verbose interactive exit \
        open-tty replace max-args= max-lines= delimiter= max-procs= max-chars= arg-file= eof= \
        process-slot-var="),
];

/// Options seen while skipping a wrapper's options, with their values.
pub(super) type Seen = Vec<(String, Option<String>)>;

/// Skips the options of `tool` at the start of `args`, returning where its operands start.
pub(super) fn options(tool: &str, args: &[Arg]) -> Parse<(usize, Seen)> {
    let (short, long) = WRAPPER_OPTIONS
        .iter()
        .find(|(name, ..)| *name == tool)
        .map_or(("", ""), |(_, short, long)| (*short, *long));
    // Whether long option `name` takes a value, if it exists.
    let long_takes_value = |name: &str| {
        long.split_whitespace()
            .find(|o| o.trim_end_matches('=') == name)
            .map(|o| o.ends_with('='))
    };
    let mut seen = Vec::new();
    let mut i = 0;
    // A value in the next argument; an expansion there could split into more words.
    let next_value = |i: &mut usize, option: &str| match args.get(*i) {
        Some(arg) if arg.dynamic.is_none() => {
            *i += 1;
            Ok(arg.text.clone())
        }
        Some(arg) => Err(not_known(&arg.text, tool)),
        None => Err(format!("option `{option}` of `{tool}` needs a value")),
    };
    while let Some(arg) = args.get(i) {
        let a = arg.text.as_str();
        if arg.dynamic.is_some() {
            return Err(not_known(a, tool));
        }
        if a == "--" {
            return Ok((i + 1, seen));
        }
        if a == "-" || !a.starts_with('-') {
            break;
        }
        i += 1;
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let value = match (long_takes_value(name), inline) {
                (Some(true), None) => Some(next_value(&mut i, a)?),
                (Some(_), inline) => inline,
                (None, _) => return Err(unknown_option(tool, a)),
            };
            seen.push((format!("--{name}"), value));
            continue;
        }
        for (at, c) in a.char_indices().skip(1) {
            let Some(found) = short.find(c).filter(|_| c != ':') else {
                return Err(unknown_option(tool, &format!("-{c}")));
            };
            let option = format!("-{c}");
            if !short[found + 1..].starts_with(':') {
                seen.push((option, None));
                continue;
            }
            let attached = &a[at + c.len_utf8()..];
            let value = if attached.is_empty() {
                next_value(&mut i, &option)?
            } else {
                attached.to_owned()
            };
            seen.push((option, Some(value)));
            break;
        }
    }
    Ok((i, seen))
}

pub(super) fn unknown_option(tool: &str, option: &str) -> String {
    format!("unknown option `{option}` to `{tool}`")
}

pub(super) fn not_known(text: &str, tool: &str) -> String {
    format!("`{text}` is expanded by the shell before the command of `{tool}`")
}
