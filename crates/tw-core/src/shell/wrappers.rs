//! How each wrapper runs the command it is given, recognised by the basename of the program:
//! plain wrappers (`nice`, `nohup`, `strace`, ...) run their operands; `env` and `sudo` add
//! variables; `xargs` and `find -exec` add arguments; `flock -c`, `watch` and the shells run a
//! script; `command -v` runs nothing. Also the files a wrapper writes itself (`strace -o`).

use super::options::{Seen, not_known, options, unknown_option};
use super::redirect::Redir;
use super::word::{Arg, is_name};
use super::{Effect, Parse};

/// Wrappers that take options and then run the rest of their arguments as a command.
const PLAIN_WRAPPERS: [&str; 9] = [
    "nice", "ionice", "nohup", "builtin", "setsid", "stdbuf", "time", "strace", "ltrace",
];
/// Shells, which run their `-c SCRIPT`.
const SHELLS: [&str; 10] = [
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "posh", "rbash",
];

/// How a program relates to the commands it runs.
pub(super) enum Step {
    /// Not a wrapper, or a wrapper with nothing to run: judge the program itself.
    Run,
    /// Nothing runs (`command -v`, a bare `exec`).
    Nothing,
    /// A wrapper's command, unwrapped in turn.
    Inner(Inner),
    /// A shell script given as text (`bash -c SCRIPT`, `flock -c`, `watch`).
    Script { label: String, script: Arg },
    /// `find` itself and each command it runs with `-exec`.
    Find(Vec<Inner>),
}

/// The command a wrapper runs and what the wrapper adds to it.
pub(super) struct Inner {
    pub(super) label: String,
    pub(super) args: Vec<Arg>,
    pub(super) assignments: Vec<(String, Arg)>,
    pub(super) dynamic: bool,
    /// The wrapper adds arguments after `args` (`xargs`).
    pub(super) appended: bool,
    pub(super) placeholder: Option<String>,
    /// Why the wrapper runs the command in another directory.
    pub(super) moved: Option<String>,
}

impl Inner {
    fn new(label: &str, args: &[Arg]) -> Self {
        Self {
            label: label.to_owned(),
            args: args.to_vec(),
            assignments: Vec::new(),
            dynamic: false,
            appended: false,
            placeholder: None,
            moved: None,
        }
    }
}

fn tail(args: &[Arg], at: usize) -> &[Arg] {
    args.get(at..).unwrap_or_default()
}

fn inner_or(label: &str, args: &[Arg], empty: Step) -> Step {
    if args.is_empty() {
        empty
    } else {
        Step::Inner(Inner::new(label, args))
    }
}

fn seen_any(seen: &Seen, options: &[&str]) -> bool {
    seen.iter().any(|(o, _)| options.contains(&o.as_str()))
}

/// What running `args` does, recognising wrappers by the basename of the program.
pub(super) fn unwrap(args: &[Arg]) -> Parse<Step> {
    let Some((program, rest)) = args.split_first() else {
        return Ok(Step::Run);
    };
    let written = program.text.as_str();
    let name = written.rsplit('/').next().unwrap_or(written);
    if PLAIN_WRAPPERS.contains(&name) {
        return plain(name, written, rest);
    }
    match name {
        "env" => env(name, written, rest),
        "sudo" | "doas" => sudo(name, written, rest),
        "timeout" => {
            let (at, _) = options(name, rest)?;
            Ok(inner_or(written, tail(rest, at + 1), Step::Run))
        }
        "command" => command(name, written, rest),
        "exec" => {
            let (at, _) = options(name, rest)?;
            Ok(inner_or(written, tail(rest, at), Step::Nothing))
        }
        "chroot" => chroot(name, written, rest),
        "flock" => flock(name, written, rest),
        "watch" => watch(name, written, rest),
        "xargs" => xargs(name, written, rest),
        "find" => find(written, rest),
        "busybox" => Ok(match rest.first() {
            Some(applet) if !applet.text.starts_with('-') => inner_or(written, rest, Step::Run),
            _ => Step::Run,
        }),
        _ if SHELLS.contains(&name) => shell(name, written, rest),
        _ => Ok(Step::Run),
    }
}

/// A plain wrapper runs its operands after its options.
fn plain(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    // `nice -5 cmd` is the old spelling of `nice -n 5 cmd`.
    let numeric = rest.first().is_some_and(|a| {
        a.text
            .strip_prefix('-')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    });
    let skip = usize::from(name == "nice" && numeric);
    let (at, _) = options(name, tail(rest, skip))?;
    Ok(inner_or(written, tail(rest, skip + at), Step::Run))
}

/// `env` runs its command with the variables it is given; `-S` splits a string into a command
/// line, which is refused, and `-C` moves it to another directory.
fn env(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, seen) = options(name, rest)?;
    if seen_any(&seen, &["-S", "--split-string"]) {
        return Err("`env -S` splits a string into a command line".to_owned());
    }
    let at = at + usize::from(tail(rest, at).first().is_some_and(|a| a.text == "-"));
    let (at, assignments) = leading_assignments(name, rest, at, false)?;
    let mut inner = Inner::new(written, tail(rest, at));
    inner.assignments = assignments;
    if seen_any(&seen, &["-C", "--chdir"]) {
        inner.moved = Some(format!("`{written} -C` runs it in another directory"));
    }
    Ok(if inner.args.is_empty() {
        Step::Run
    } else {
        Step::Inner(inner)
    })
}

/// `sudo` and `doas` run their command (with `sudo`'s variables); without one, `-s` and `-i`
/// open a shell, which is refused.
fn sudo(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, seen) = options(name, rest)?;
    let (at, assignments) = leading_assignments(name, rest, at, name == "doas")?;
    let shell = seen_any(&seen, &["-i", "-s", "--login", "--shell"]);
    if at >= rest.len() {
        if shell {
            return Err(format!("`{name}` without a command opens a shell"));
        }
        return Ok(Step::Run);
    }
    // With -s/-i sudo escapes the command for the target shell, except `$`.
    if shell && tail(rest, at).iter().any(|a| a.text.contains('$')) {
        return Err(format!("`{name} -s` expands `$` in its command"));
    }
    let mut inner = Inner::new(written, tail(rest, at));
    inner.assignments = assignments;
    if seen_any(&seen, &["-D", "--chdir"]) {
        inner.moved = Some(format!("`{written} -D` runs it in another directory"));
    }
    Ok(Step::Inner(inner))
}

/// `command` runs its operands, except with `-v` or `-V`, which only look the name up.
fn command(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, seen) = options(name, rest)?;
    Ok(if seen_any(&seen, &["-v", "-V"]) {
        Step::Nothing
    } else {
        inner_or(written, tail(rest, at), Step::Nothing)
    })
}

/// `chroot DIR CMD` runs its command; without one it runs an interactive shell, which is refused.
fn chroot(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, _) = options(name, rest)?;
    if tail(rest, at + 1).is_empty() {
        return Err("`chroot` without a command runs an interactive shell".to_owned());
    }
    Ok(inner_or(written, tail(rest, at + 1), Step::Run))
}

/// `flock FILE CMD` runs its command, and `flock FILE -c SCRIPT` a script.
fn flock(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, _) = options(name, rest)?;
    let after = tail(rest, at + 1);
    Ok(match after.first().map(|a| a.text.as_str()) {
        None => Step::Run,
        Some("-c" | "--command") => match after.get(1) {
            Some(script) => Step::Script {
                label: format!("{written} -c"),
                script: script.clone(),
            },
            None => return Err("`flock -c` without a command".to_owned()),
        },
        Some(_) => inner_or(written, after, Step::Run),
    })
}

/// `watch -x` runs its command; without `-x` its arguments are joined into a script.
fn watch(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, seen) = options(name, rest)?;
    let command = tail(rest, at);
    if command.is_empty() || seen_any(&seen, &["-x", "--exec"]) {
        return Ok(inner_or(written, command, Step::Run));
    }
    // Without -x, watch joins its arguments and hands them to `sh -c`.
    let text: Vec<&str> = command.iter().map(|a| a.text.as_str()).collect();
    let dynamic = command.iter().find_map(|a| a.dynamic);
    Ok(Step::Script {
        label: written.to_owned(),
        script: Arg {
            text: text.join(" "),
            dynamic,
        },
    })
}

/// `xargs` runs its command (`echo` if none) with words read from its input: appended, or in
/// place of the `-I` placeholder.
fn xargs(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    let (at, seen) = options(name, rest)?;
    let mut inner = Inner::new(written, tail(rest, at));
    if inner.args.is_empty() {
        inner.args.push(Arg::literal("echo"));
    }
    inner.dynamic = true;
    inner.placeholder = seen.into_iter().find_map(|(o, v)| match o.as_str() {
        "-I" => v,
        "--replace" => Some(v.unwrap_or_else(|| "{}".to_owned())),
        _ => None,
    });
    // With -I each input line replaces the placeholder; otherwise it is appended.
    inner.appended = inner.placeholder.is_none();
    Ok(Step::Inner(inner))
}

/// Files a wrapper itself writes, as writing redirections of the command it runs: the output
/// file of `strace -o`, `ltrace -o` and `time -o`, and the lock file `flock` creates. A tracer may
/// add a process id to the name, so its file is never a known path.
pub(super) fn wrapper_writes(args: &[Arg]) -> Vec<Redir> {
    let Some((program, rest)) = args.split_first() else {
        return Vec::new();
    };
    let name = program.text.rsplit('/').next().unwrap_or(&program.text);
    let Ok((at, seen)) = options(name, rest) else {
        return Vec::new();
    };
    let write = |op: String, target: Arg| Redir {
        op,
        target,
        effect: Effect::Write,
        named: None,
    };
    match name {
        "strace" | "ltrace" | "time" => seen
            .into_iter()
            .filter(|(o, _)| o == "-o" || o == "--output")
            .filter_map(|(o, v)| {
                let dynamic = (name != "time").then_some("a file name the tracer extends");
                Some(write(format!("{name} {o} "), Arg { text: v?, dynamic }))
            })
            .collect(),
        "flock" => match rest.get(at) {
            Some(file) if !file.text.chars().all(|c| c.is_ascii_digit()) => {
                vec![write("flock ".to_owned(), file.clone())]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// `VAR=value` words a wrapper takes before its command. `env` accepts any name; `sudo` only
/// shell names.
fn leading_assignments(
    tool: &str,
    args: &[Arg],
    mut at: usize,
    none: bool,
) -> Parse<(usize, Vec<(String, Arg)>)> {
    let mut assignments = Vec::new();
    while let Some(arg) = args.get(at).filter(|_| !none) {
        let Some((name, value)) = arg.text.split_once('=') else {
            break;
        };
        if name.is_empty() || (tool != "env" && !is_name(name)) {
            break;
        }
        if arg.dynamic.is_some() {
            return Err(not_known(&arg.text, tool));
        }
        assignments.push((name.to_owned(), Arg::literal(value)));
        at += 1;
    }
    Ok((at, assignments))
}

/// `find` runs the commands after `-exec`, `-execdir`, `-ok` and `-okdir` up to `;` or `{} +`.
fn find(written: &str, rest: &[Arg]) -> Parse<Step> {
    if let Some(arg) = rest.iter().find(|a| a.dynamic.is_some()) {
        return Err(format!(
            "`find` argument `{}` is expanded by the shell and could add -exec",
            arg.text
        ));
    }
    let mut execs = Vec::new();
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        i += 1;
        let action = arg.text.as_str();
        if !matches!(action, "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        loop {
            let Some(word) = rest.get(i) else {
                return Err(format!("`find {action}` without a closing `;` or `+`"));
            };
            let after_braces = i > start && rest.get(i - 1).is_some_and(|p| p.text == "{}");
            if word.text == ";" || (word.text == "+" && after_braces) {
                break;
            }
            i += 1;
        }
        let command = rest.get(start..i).unwrap_or_default();
        if command.is_empty() {
            return Err(format!("`find {action}` without a command"));
        }
        let mut inner = Inner::new(&format!("{written} {action}"), command);
        inner.dynamic = true;
        inner.placeholder = Some("{}".to_owned());
        if action.ends_with("dir") {
            inner.moved = Some(format!(
                "`{written} {action}` runs it in the directory of each file found"
            ));
        }
        execs.push(inner);
        i += 1;
    }
    Ok(if execs.is_empty() {
        Step::Run
    } else {
        Step::Find(execs)
    })
}

/// A shell runs its `-c SCRIPT`; with a script file or stdin it is judged as itself.
fn shell(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    const FLAGS: &str = "abefhiklmnprstuvxBCEHPT";
    const LONG: [&str; 7] = [
        "norc",
        "noprofile",
        "login",
        "posix",
        "noediting",
        "restricted",
        "verbose",
    ];
    const LONG_WITH_VALUE: [&str; 2] = ["rcfile", "init-file"];
    let mut i = 0;
    let mut command = false;
    while let Some(arg) = rest.get(i) {
        let a = arg.text.as_str();
        if arg.dynamic.is_some() {
            if command {
                break; // the script, judged below
            }
            return Err(not_known(a, name));
        }
        if a == "-" || a == "--" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            if LONG_WITH_VALUE.contains(&long) {
                i += 1;
            } else if !LONG.contains(&long) {
                return Err(unknown_option(name, a));
            }
            i += 1;
            continue;
        }
        let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        i += 1;
        for c in flags.chars() {
            match c {
                'c' if a.starts_with('-') => command = true,
                // `-o pipefail`, `-O extglob`: the option name is the next word.
                'o' | 'O' => i += 1,
                c if FLAGS.contains(c) => {}
                _ => return Err(unknown_option(name, &format!("-{c}"))),
            }
        }
    }
    if let Some(arg) = rest
        .get(..i)
        .unwrap_or(rest)
        .iter()
        .find(|a| a.dynamic.is_some())
    {
        return Err(not_known(&arg.text, name));
    }
    if !command {
        return Ok(Step::Run);
    }
    match rest.get(i) {
        Some(script) => Ok(Step::Script {
            label: format!("{written} -c"),
            script: script.clone(),
        }),
        None => Err(format!("`{name} -c` without a script")),
    }
}
