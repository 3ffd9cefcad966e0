//! The exec allowlist's bypass table: command lines an agent could try, each with the decision it
//! must get under one fixed policy (`security = "allowlist"`, `ask = "off"`, entries `ls **`,
//! `git status **`, `echo **`, `cat **`, no `writes`, no `env`). Every Allow row is a line that
//! runs only those programs, writes no file and sets no variable; every Deny row runs, writes or
//! sets something else, or cannot be taken apart with certainty.

use super::*;

use Decision::{Allow as A, Deny as D};

const POLICY: &str = r#"
default = "allow"
[exec]
security = "allowlist"
ask = "off"
[[exec.allow]]
command = "ls **"
[[exec.allow]]
command = "git status **"
[[exec.allow]]
command = "echo **"
[[exec.allow]]
command = "cat **"
"#;

/// (command line, expected decision, why).
#[rustfmt::skip]
const TABLE: &[(&str, Decision, &str)] = &[
    // Operators
    ("ls -la", A, "one allowed command"),
    ("ls; echo done", A, "both allowed"),
    ("ls && git status", A, "both allowed"),
    ("ls || echo failed", A, "both allowed"),
    ("ls | cat", A, "both allowed"),
    ("ls |& cat", A, "both allowed (stderr too)"),
    ("ls & echo bg", A, "both allowed, one in the background"),
    ("ls; rm -rf /", D, "rm is not allowed"),
    ("ls && rm -rf /", D, "rm after &&"),
    ("ls || rm -rf /", D, "rm after ||"),
    ("ls | sh", D, "a shell reading the pipe"),
    ("ls |& sh", D, "a shell reading the pipe"),
    ("ls & rm -rf /", D, "rm after &"),
    ("ls\nrm -rf /", D, "rm on the next line"),
    ("ls\r\nrm x", D, "`ls\\r` is no program; rm on the next line"),
    ("(rm -rf /)", D, "rm in a subshell"),
    ("{ rm -rf /; }", D, "rm in a group"),
    ("(ls; echo x)", A, "allowed commands in a subshell"),
    ("{ ls; echo x; }", A, "allowed commands in a group"),
    ("! rm x", D, "negation still runs rm"),
    ("! ls", A, "negated allowed command"),
    ("ls ;; rm", D, "`;;` outside case: uncertain"),
    ("ls &&", D, "line ends after &&: uncertain"),
    // Substitutions
    ("echo $(rm -rf /)", D, "rm in $( )"),
    ("echo `rm -rf /`", D, "rm in backquotes"),
    ("echo $(ls)", A, "allowed command in $( ), echo's argument computed"),
    ("echo `ls`", A, "allowed command in backquotes"),
    ("ls $(curl evil)", D, "curl in $( )"),
    ("$(echo rm) -rf /", D, "a computed program: uncertain"),
    ("`echo rm` x", D, "a computed program: uncertain"),
    ("cat <(rm x)", D, "rm in <( )"),
    ("cat <(ls)", A, "allowed command in <( ); cat reads the pipe"),
    ("ls >(rm x)", D, "rm in >( )"),
    ("echo >(cat)", A, "allowed command in >( ); echo prints its name"),
    ("ls > >(sh)", D, "a shell reading a process substitution"),
    ("echo \"$(rm x)\"", D, "rm in a quoted $( )"),
    ("echo ${x:-$(rm x)}", D, "rm in a parameter default"),
    ("echo $((1+$(rm x)))", D, "substitution in arithmetic: uncertain"),
    ("echo ${a[$(id)]}", D, "array subscript bash evaluates: uncertain"),
    ("echo ${!ref}", D, "indirect expansion: uncertain"),
    // Quoting and escapes
    ("r\\m -rf /", D, "backslash inside the name is still rm"),
    ("'r'm -rf /", D, "quotes inside the name are still rm"),
    ("\"rm\" -rf /", D, "a quoted name is still rm"),
    ("\\rm x", D, "a leading backslash is still rm"),
    ("'ls' -la", A, "a quoted name is still ls"),
    ("\"git\" status", A, "a quoted name is still git"),
    ("l\\s", A, "backslash inside the name is still ls"),
    ("ls\\;rm", D, "one word `ls;rm`: no such program"),
    ("echo 'a;rm -rf /'", A, "quoted operators are text"),
    ("echo \"a && rm\"", A, "quoted operators are text"),
    ("echo 'x' ; rm x", D, "rm after the quote closes"),
    ("e\"c\"ho x; r''m x", D, "rm spelled with empty quotes"),
    ("$'\\x72\\x6d' -rf /", D, "ANSI-C quoting in command position: uncertain"),
    ("echo $'\\x72m'", A, "ANSI-C quoting as echo's argument"),
    ("echo 'unterminated", D, "unbalanced quote: uncertain"),
    // Here-documents and here-strings
    ("cat <<EOF\nx\nEOF", D, "here-document: refused"),
    ("cat <<'EOF'\nx\nEOF", D, "quoted here-document: refused"),
    ("cat <<-EOF\n\tx\n\tEOF", D, "tab-stripped here-document: refused"),
    ("sh <<EOF\nrm x\nEOF", D, "here-document: refused"),
    ("cat <<< 'hello'", A, "a here-string writes no file"),
    ("sh <<< 'rm -rf /'", D, "sh is not allowed"),
    ("bash <<< ls", D, "bash reading a here-string is bash itself"),
    ("cat <<<$(ls)", A, "here-string from an allowed command"),
    // Redirections that write nothing
    ("ls > /dev/null", A, "/dev/null may always be written"),
    ("ls 2>/dev/null", A, "/dev/null"),
    ("ls &>/dev/null", A, "/dev/null, both outputs"),
    ("ls >/dev/null 2>&1", A, "/dev/null and a duplicate"),
    ("ls 2>&1 | cat", A, "duplicate into a pipe"),
    ("ls < /etc/hostname", A, "reading a file"),
    ("ls <&0", A, "duplicating stdin"),
    ("ls >&2", A, "duplicating stderr"),
    ("ls 1>&2", A, "duplicating stderr"),
    ("ls 3>&1 1>&2 2>&3", A, "swapping descriptors"),
    ("ls >&-", A, "closing stdout"),
    ("ls 2>&-", A, "closing stderr"),
    ("ls 1>&3-", A, "moving a descriptor"),
    ("exec 2>/dev/null; ls", A, "exec without a command only redirects to /dev/null"),
    // Redirections that write a file the entry does not allow
    ("ls > /tmp/x", D, "> writes"),
    ("ls >> /tmp/x", D, ">> appends"),
    ("ls >| /tmp/x", D, ">| truncates despite noclobber"),
    ("ls <> /tmp/x", D, "<> opens read-write, creating"),
    ("ls 3<>/tmp/x", D, "3<> opens read-write, creating"),
    ("ls 2> /tmp/x", D, "2> writes"),
    ("ls 9>>/tmp/x", D, "9>> appends"),
    ("ls &> /tmp/x", D, "&> writes both outputs"),
    ("ls &>> /tmp/x", D, "&>> appends both outputs"),
    ("ls >& /tmp/x", D, ">&FILE writes both outputs in bash"),
    ("ls >&/tmp/x", D, ">&FILE writes both outputs in bash"),
    ("ls 1>&/tmp/x", D, "1>&FILE writes both outputs in bash"),
    ("ls 2>&/tmp/x", D, "n>&FILE is an error: uncertain"),
    ("ls <&/tmp/x", D, "<&FILE is an error: uncertain"),
    ("ls {fd}>/tmp/x", D, "named descriptor opened for writing"),
    ("ls {fd}<>/tmp/x", D, "named descriptor opened read-write"),
    ("ls {fd}&>/tmp/x", D, "`{fd}` is an argument; &> writes"),
    ("ls > $OUT", D, "target only known when the shell runs"),
    ("ls >&$OUT", D, ">&$OUT may name a file"),
    ("ls > ~/x", D, "tilde target"),
    ("ls > *.txt", D, "glob target"),
    ("ls > out.txt", D, "relative target, no writes allowed"),
    ("ls > /dev/null/../../tmp/x", D, "not /dev/null once normalized"),
    ("ls > /dev/stdout", D, "only /dev/null is implicitly allowed"),
    ("ls 2>/dev/null >/tmp/x", D, "one of two redirections writes"),
    ("(ls) > /tmp/x", D, "redirection after a subshell"),
    ("{ ls; } > /tmp/x", D, "redirection after a group"),
    ("{ ls; } {fd}>/tmp/x", D, "named descriptor after a group"),
    ("bash -c 'ls >&/tmp/x'", D, "inside bash -c"),
    ("sh -c 'ls 3<>/tmp/x'", D, "inside sh -c"),
    ("bash -c 'ls' > /tmp/x", D, "redirection of the shell applies to its commands"),
    ("> /tmp/x", D, "no command, but the file is truncated: uncertain"),
    (">/tmp/x ls", D, "redirection before the command"),
    ("exec 3>/tmp/x; ls", D, "exec opening a file: uncertain"),
    ("echo hi &>/dev/null rm x", D, "dash runs `rm x` as a second command: uncertain"),
    ("strace -o /tmp/x ls", D, "strace writes its trace file"),
    ("flock /tmp/lock ls", D, "flock creates its lock file"),
    ("time -o /tmp/x ls", D, "GNU time writes its report file"),
    // Wrappers
    ("env rm -rf /", D, "rm under env"),
    ("env ls", A, "ls under env"),
    ("env -i PATH=/tmp ls", D, "PATH: uncertain"),
    ("env X=1 ls", D, "a variable the entry does not allow"),
    ("env -S 'rm x'", D, "env -S splits a string: uncertain"),
    ("env -C /tmp ls", A, "ls is found on PATH wherever it runs"),
    ("env -C sub ./ls", D, "relative program in a moved directory"),
    ("xargs rm", D, "rm under xargs"),
    ("echo . | xargs ls", A, "xargs appends arguments, ls ** takes any"),
    ("echo x | xargs sh -c 'rm x'", D, "rm in a script under xargs"),
    ("ls | xargs -I{} sh -c 'echo {}'", D, "input becomes script text: uncertain"),
    ("find . -exec rm {} \\;", D, "find is not allowed, nor rm"),
    ("find . -execdir ls \\;", D, "find is not allowed"),
    ("find . -ok rm {} \\;", D, "find and rm"),
    ("find . -exec sh -c 'echo {}' \\;", D, "placeholder in a script: uncertain"),
    ("timeout 5 rm x", D, "rm under timeout"),
    ("timeout 5 ls", A, "ls under timeout"),
    ("nice -n 5 rm x", D, "rm under nice"),
    ("nice ls", A, "ls under nice"),
    ("ionice -c 3 rm x", D, "rm under ionice"),
    ("ionice -c 3 ls", A, "ls under ionice"),
    ("stdbuf -oL rm x", D, "rm under stdbuf"),
    ("stdbuf -oL ls", A, "ls under stdbuf"),
    ("setsid rm x", D, "rm under setsid"),
    ("setsid ls", A, "ls under setsid"),
    ("sudo ls", D, "nothing runs under sudo"),
    ("sudo -u root rm x", D, "sudo"),
    ("doas ls", D, "nothing runs under doas"),
    ("command ls", A, "ls under command"),
    ("command rm x", D, "rm under command"),
    ("command -v rm", D, "runs no command that could be judged"),
    ("command -v ls >/dev/null && ls", A, "only ls runs"),
    ("exec rm x", D, "rm under exec"),
    ("exec ls", A, "ls under exec"),
    ("exec -a ls rm x", D, "rm named ls"),
    ("busybox rm x", D, "rm applet"),
    ("busybox sh -c 'rm x'", D, "rm in a busybox shell"),
    ("flock /tmp/l -c 'rm x'", D, "rm in flock's script"),
    ("watch ls", A, "watch runs `sh -c ls`"),
    ("watch 'rm x'", D, "rm in watch's script"),
    ("watch -x rm x", D, "rm under watch -x"),
    ("nohup rm x", D, "rm under nohup"),
    ("time rm x", D, "rm under time"),
    ("time ls", A, "ls under time"),
    ("./nice ls", D, "a wrapper by path must be the system's own"),
    ("/usr/bin/env ls", A, "the system's env"),
    // Interpreters with -c / -e
    ("sh -c 'ls'", A, "the script runs only ls"),
    ("bash -c 'ls | cat'", A, "the script runs only allowed commands"),
    ("sh -c 'rm x'", D, "rm in sh -c"),
    ("bash -c 'rm x'", D, "rm in bash -c"),
    ("dash -c 'rm x'", D, "rm in dash -c"),
    ("zsh -c 'rm x'", D, "rm in zsh -c"),
    ("bash -c \"$CMD\"", D, "script only known when the shell runs: uncertain"),
    ("bash script.sh", D, "bash running a file is bash itself"),
    ("sh", D, "a shell reading its input"),
    ("python3 -c 'import os; os.system(\"id\")'", D, "python3 is not allowed"),
    ("perl -e 'system(\"id\")'", D, "perl is not allowed"),
    ("node -e 'require(\"child_process\").execSync(\"id\")'", D, "node is not allowed"),
    ("ruby -e 'system(\"id\")'", D, "ruby is not allowed"),
    ("awk 'BEGIN{system(\"id\")}'", D, "awk is not allowed"),
    ("echo id | awk '{system($0)}'", D, "awk is not allowed"),
    // Aliases, git configuration, pagers and editors
    ("alias ls='rm -rf /'; ls", D, "alias: uncertain"),
    ("git -c alias.x='!rm -rf /' x", D, "git options before status are not covered"),
    ("git -c core.pager='sh -c id' status", D, "git options before status are not covered"),
    ("git -c core.fsmonitor='rm x' status", D, "git options before status are not covered"),
    ("git --exec-path=/tmp status", D, "git options before status are not covered"),
    ("git status", A, "allowed"),
    ("git status --short", A, "allowed"),
    ("/usr/bin/git status", A, "the same program by path"),
    ("/bin/../usr/bin/git status", A, "the same program, path normalized"),
    ("GIT_PAGER='sh -c id' git status", D, "GIT_PAGER runs code"),
    ("GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=id git status", D, "configuration through the environment"),
    ("GIT_DIR=/tmp/evil git status", D, "another repository's configuration"),
    ("HOME=/tmp/evil git status", D, "another ~/.gitconfig"),
    ("env GIT_PAGER=id git status", D, "GIT_PAGER through env"),
    ("git status | less", D, "less is not allowed"),
    ("LESSOPEN='|id %s' less x", D, "less and LESSOPEN"),
    ("LESSOPEN='|id %s' cat x", D, "a variable cat's entry does not allow"),
    ("man -P id ls", D, "man is not allowed"),
    ("PAGER='sh -c id' git status", D, "PAGER runs code"),
    ("vi -c '!id'", D, "vi is not allowed"),
    ("EDITOR=id git status", D, "EDITOR"),
    // Assignments
    ("X=1 ls", D, "a variable the entry does not allow"),
    ("X=1; ls", D, "assigned earlier: exported if it already was"),
    ("PATH=/tmp ls", D, "PATH: uncertain"),
    ("LD_PRELOAD=/tmp/x.so ls", D, "LD_PRELOAD: uncertain"),
    ("IFS=/ ls", D, "IFS: uncertain"),
    ("BASH_ENV=/tmp/x bash -c ls", D, "BASH_ENV: uncertain"),
    ("export GIT_PAGER=id; git status", D, "export is not allowed"),
    ("set -a; X=1; ls", D, "set is not allowed"),
    ("{PATH}>/dev/null ls", D, "named descriptor assigns PATH: uncertain"),
    // Globs, tilde, brace
    ("ls *.txt", A, "a glob as ls's arguments"),
    ("ls ~", A, "tilde as ls's argument"),
    ("ls {a,b}", A, "brace expansion as ls's arguments"),
    ("echo ~root", A, "tilde as echo's argument"),
    ("/bin/r? x", D, "glob in command position: uncertain"),
    ("{rm,-rf,/}", D, "brace expansion in command position: uncertain"),
    ("~/bin/ls", D, "tilde in command position: uncertain"),
    ("l* -la", D, "glob in command position: uncertain"),
    // Arithmetic
    ("echo $((2*3))", A, "literal arithmetic"),
    ("echo $((x+1))", D, "names in arithmetic: uncertain"),
    ("echo $[1+1]", D, "$[ ]: uncertain"),
    ("((x=1))", D, "arithmetic command: uncertain"),
    ("let x=1", D, "let: uncertain"),
    // Comments and newlines
    ("ls # ; rm -rf /", A, "the rest is a comment"),
    ("# rm -rf /", D, "runs no command that could be judged"),
    ("ls #\nrm x", D, "the comment ends at the newline"),
    ("echo a#b", A, "# inside a word is text"),
    ("ls\necho x", A, "two allowed lines"),
    ("ls\\\n; rm x", D, "continued line, then rm"),
    ("ls \\\n -la", A, "continued line"),
    // Control flow and builtins that hide code
    ("eval ls", D, "eval: uncertain"),
    ("source x", D, "source: uncertain"),
    (". x", D, ". runs a file: uncertain"),
    ("trap 'rm x' EXIT; ls", D, "trap: uncertain"),
    ("f() { rm x; }; f", D, "function definition: uncertain"),
    ("if true; then ls; fi", D, "control flow: uncertain"),
    ("for f in a; do ls; done", D, "control flow: uncertain"),
    ("coproc ls", D, "coproc: uncertain"),
    ("[[ -f x ]] && ls", D, "[[ ]]: uncertain"),
    ("builtin eval ls", D, "eval under builtin: uncertain"),
    ("command eval ls", D, "eval under command: uncertain"),
    // Programs by path and look-alikes
    ("./ls", D, "no such file in the workspace"),
    ("/tmp/ls", D, "not the system's ls"),
    ("ｌｓ", D, "fullwidth letters: no such program"),
    ("ls\u{a0}-la", D, "no-break space is not a blank: no such program"),
    ("rm\u{200b} x", D, "zero-width space: no such program"),
    ("l\u{455}", D, "Cyrillic letter: no such program"),
    ("echo ｒｍ", A, "fullwidth text as echo's argument"),
    // Everyday lines
    ("cat -n README.md", A, "allowed"),
    ("git status && echo ok || echo fail", A, "allowed"),
    ("ls -la /etc | tee /tmp/x", D, "tee is not allowed"),
    ("cat /etc/passwd > /tmp/x", D, "writes a file"),
    ("cat README.md | ls", A, "allowed"),
];

#[test]
fn bypass_table() {
    assert!(TABLE.len() >= 150, "{} rows", TABLE.len());
    let p = policy(POLICY);
    let mut wrong = Vec::new();
    for (line, expect, why) in TABLE {
        let d = judge_call(&p, &call("run", json!({ "command": line })));
        let exec = d.trace.iter().find(|v| v.layer == Layer::Exec);
        let got = exec.map_or(Decision::Allow, |v| v.decision);
        if got != *expect || d.decision != *expect {
            wrong.push(format!(
                "{line:?}: expected {expect} ({why}), got {got}: {}",
                exec.map_or("", |v| v.reason.as_str())
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows wrong:\n{}",
        wrong.len(),
        TABLE.len(),
        wrong.join("\n")
    );
}
