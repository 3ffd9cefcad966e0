//! Following a command through its wrappers: `sudo env X=1 nice bash -c 'a; b'` runs `a` and `b`,
//! each with the wrappers' chain, variables and redirections. The program and every variable are
//! checked at each step; a `-c` script is parsed as a script of its own.

use super::checks::{check_arguments, check_program, check_variable};
use super::parser::parse_script;
use super::redirect::Redir;
use super::word::Arg;
use super::wrappers::{Inner, Step, unwrap, wrapper_writes};
use super::{Context, Effect, MAX_DEPTH, Parse, SimpleCommand, too_deep};

/// A command whose words are known but whose wrappers are not yet unwrapped.
#[derive(Debug, Clone, Default)]
pub(super) struct Pending {
    pub(super) assignments: Vec<(String, Arg)>,
    pub(super) args: Vec<Arg>,
    pub(super) redirects: Vec<Redir>,
    pub(super) wrappers: Vec<String>,
    pub(super) dynamic: bool,
    pub(super) appended: bool,
    pub(super) set_before: Vec<String>,
    pub(super) moved: Option<String>,
}

impl Pending {
    fn finish(self) -> SimpleCommand {
        let dynamic = self.dynamic
            || self.args.iter().any(|a| a.dynamic.is_some())
            || self.assignments.iter().any(|(_, v)| v.dynamic.is_some())
            || self.redirects.iter().any(|r| r.target.dynamic.is_some());
        SimpleCommand {
            computed: self.args.iter().map(|a| a.dynamic.is_some()).collect(),
            argv: self.args.into_iter().map(|a| a.text).collect(),
            assignments: self
                .assignments
                .into_iter()
                .map(|(n, v)| (n, v.text))
                .collect(),
            redirects: self.redirects.iter().map(Redir::finish).collect(),
            wrappers: self.wrappers,
            dynamic,
            substituted: false,
            appended: self.appended,
            set_before: self.set_before,
            moved: self.moved,
        }
    }

    /// The command a wrapper runs, inheriting the wrapper's chain, environment and redirections.
    fn enter(mut self, inner: Inner) -> Self {
        self.wrappers.push(inner.label);
        self.assignments.extend(inner.assignments);
        self.args = inner.args;
        self.dynamic |= inner.dynamic;
        self.appended |= inner.appended;
        if let Some(why) = inner.moved {
            self.moved.get_or_insert(why);
        }
        if let Some(placeholder) = &inner.placeholder {
            for arg in self
                .args
                .iter_mut()
                .filter(|a| a.text.contains(placeholder))
            {
                arg.dynamic
                    .get_or_insert("a placeholder replaced per input");
            }
        }
        self
    }
}

/// Unwraps `command` and appends every command it runs to `out`.
pub(super) fn expand(command: Pending, depth: usize, out: &mut Vec<SimpleCommand>) -> Parse<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    for (name, _) in &command.assignments {
        check_variable(name)?;
    }
    let Some(program) = command.args.first() else {
        return nothing_runs(&command);
    };
    check_program(program)?;
    let mut command = command;
    command.redirects.extend(wrapper_writes(&command.args));
    match unwrap(&command.args)? {
        Step::Run => {
            check_arguments(&command.args)?;
            out.push(command.finish());
        }
        Step::Nothing => nothing_runs(&command)?,
        Step::Inner(inner) => expand(command.enter(inner), depth + 1, out)?,
        Step::Find(execs) => {
            out.push(command.clone().finish());
            for inner in execs {
                expand(command.clone().enter(inner), depth + 1, out)?;
            }
        }
        Step::Script { label, script } => {
            if let Some(why) = script.dynamic {
                return Err(format!("the script of `{label}` is not known ({why})"));
            }
            let mut outer = command;
            outer.args = Vec::new();
            outer.wrappers.push(label);
            let outer = outer.finish();
            // The script's shell inherits the directory and whatever was exported to it.
            let mut ctx = Context {
                moved: outer.moved.clone(),
                assigned: Vec::new(),
            };
            for name in &outer.set_before {
                ctx.assign(name);
            }
            for mut inner in parse_script(&script.text, depth + 1, ctx)? {
                inner.wrappers.splice(0..0, outer.wrappers.iter().cloned());
                inner
                    .assignments
                    .splice(0..0, outer.assignments.iter().cloned());
                inner
                    .redirects
                    .splice(0..0, outer.redirects.iter().cloned());
                inner.dynamic |= outer.dynamic;
                out.push(inner);
            }
        }
    }
    Ok(())
}

/// No program runs, but the shell still opens redirect targets: `> file` truncates it.
fn nothing_runs(command: &Pending) -> Parse<()> {
    let harmless = |r: &Redir| {
        r.target.dynamic.is_none()
            && (r.target.text == "/dev/null"
                || matches!(r.effect, Effect::Duplicate | Effect::Close))
    };
    match command.redirects.iter().find(|r| !harmless(r)) {
        Some(r) => Err(format!(
            "redirection `{}{}` without a command",
            r.op, r.target.text
        )),
        None => Ok(()),
    }
}
