//! Starting a run's helper: on the spot (`Sandbox::launch`, with its request) or taken from the
//! pool of helpers built ahead (`Sandbox::launch_pooled`, with its run), in the run's cgroups
//! either way, and the guard that stops it if the run is dropped.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Stdio;

use rustix::process::{Pid, Signal};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::time::Instant;

use super::{Level, Prepared, ProcessSpec, ResourceLimits, Sandbox, cgroup, host, pool};
use crate::error::{Result, SandboxError};
use crate::helper::wire;

impl Sandbox {
    /// Starts the helper for a prepared run, moves it into the run's cgroups and sends it the
    /// request, with an interactive run's stdin pipe attached. The tool's input (if any) and the
    /// end of the socket's writing side are the caller's.
    pub(super) async fn launch(
        &self,
        spec: &ProcessSpec,
        prepared: Prepared<'_>,
        stdin_pipe: Option<OwnedFd>,
    ) -> Result<Launched> {
        let Prepared {
            level,
            helper,
            env,
            program,
            shared,
            request,
            sandbox_id,
        } = prepared;
        let frame = wire::encode_request(&request).map_err(|e| {
            SandboxError::InvalidSpec(format!("the run cannot be described to the helper: {e}"))
        })?;
        // The descriptors go in the order the request names them (see `Host::request`).
        let mut fds: Vec<RawFd> = shared
            .map(|ns| vec![ns.userns.as_raw_fd(), ns.netns.as_raw_fd()])
            .unwrap_or_default();
        fds.extend(stdin_pipe.as_ref().map(AsRawFd::as_raw_fd));
        let start = Instant::now();
        let started = start_helper(helper, &frame, &fds, Some(&env));
        // The pipe's read end is in flight to the helper; one kept here would leave a writer
        // blocked on a full pipe instead of failing once the tool is gone.
        drop(stdin_pipe);
        let (child, mut ctl) = started.map_err(|source| SandboxError::Spawn {
            program: spec.program.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or(0);
        let guard = HelperGuard::new(pid)?;
        // Into the run's cgroups before it reads its request, so before it starts anything.
        let cgroup = self.enter_cgroups(spec, level, pid)?;
        tracing::debug!(pid, sandbox_id, program = %program.display(), "spawned sandbox helper");
        // A helper that died early cannot read; its report says why.
        let _ = ctl.write_all(&frame[4..]).await;
        Ok(Launched {
            child,
            ctl,
            guard,
            cgroup,
            pid,
            start,
        })
    }

    /// Hands a prepared run to a helper the pool made ahead (see [`pool`]), already in the run's
    /// cgroups: sends it the run. `None` when the pool had no helper
    /// for the run's shape, or the run is not one the pool serves (the caller builds it on the
    /// spot); the pool then makes the next helper in the background.
    pub(super) async fn launch_pooled(
        &self,
        spec: &ProcessSpec,
        prepared: &Prepared<'_>,
    ) -> Result<Option<Launched>> {
        let servable =
            spec.egress.is_none() && spec.stdin.is_none() && prepared.request.stdin_fd.is_none();
        if !servable {
            return Ok(None);
        }
        let start = Instant::now();
        let shape = pool::shape(&prepared.request);
        let mut claimed = self.host.pool().claim(&shape);
        // One killed while it waited (by hand, by the OOM killer) cannot take the run.
        while let Some(p) = claimed.as_mut()
            && !matches!(p.child.try_wait(), Ok(None))
        {
            claimed = self.host.pool().claim(&shape);
        }
        let Some(pooled) = claimed else {
            return Ok(None);
        };
        let (child, mut ctl, pid, cgroup) = pooled.into_parts();
        let guard = HelperGuard::new(pid)?;
        tracing::debug!(pid, sandbox_id = prepared.sandbox_id, program = %prepared.program.display(), "handed the run to a pooled sandbox helper");
        let run = pool::run_of(&prepared.request, &prepared.env);
        // A helper that died since cannot read; the run then ends with its report, or without
        // one as a helper that exited before starting the tool.
        let _ = pool::send_run(&mut ctl, &run).await;
        Ok(Some(Launched {
            child,
            ctl,
            guard,
            cgroup,
            pid,
            start,
        }))
    }

    /// The run's cgroups, where runs get them, with the helper `pid` moved in.
    fn enter_cgroups(
        &self,
        spec: &ProcessSpec,
        level: Level,
        pid: u32,
    ) -> Result<Option<cgroup::RunCgroup>> {
        let limits = host::Host::limits(spec, level);
        run_cgroups(&self.host, &limits, level, pid).map_err(|e| SandboxError::Setup {
            level: spec.isolation,
            step: "making the run's cgroups (its tree's memory and process caps)".to_owned(),
            error: e.to_string(),
        })
    }
}

/// Cgroups for a run at `level` with `limits` (where runs get them), with its helper `pid`
/// moved in; the process cap leaves room for the helper and, above standard, its init.
pub(super) fn run_cgroups(
    host: &host::Host,
    limits: &ResourceLimits,
    level: Level,
    pid: u32,
) -> io::Result<Option<cgroup::RunCgroup>> {
    let Some(c) = host.cgroups() else {
        return Ok(None);
    };
    let helpers = if level == Level::Standard { 1 } else { 2 };
    c.take(limits.memory_bytes, limits.max_processes, helpers)
        .and_then(|cg| cg.enter(pid).map(|()| Some(cg)))
}

/// Spawns the sandbox helper with `frame` waiting for it: the frame's header, with `fds`
/// attached, is in the socket before the helper starts; the body (which may not fit in the
/// socket's buffer) is the caller's to write, once the helper is in its cgroups. The helper's
/// environment is `env` (the tool's, at a run built on the spot) or empty (a pooled helper,
/// told the tool's with its run).
pub(super) fn start_helper(
    helper: &Path,
    frame: &[u8],
    fds: &[RawFd],
    env: Option<&BTreeMap<String, String>>,
) -> io::Result<(tokio::process::Child, tokio::net::UnixStream)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    crate::helper::send_with_fds(ours.as_raw_fd(), frame.get(..4).unwrap_or_default(), fds)?;
    let mut cmd = Command::new(helper);
    cmd.arg0("tw-sandbox-helper")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    if let Some(env) = env {
        cmd.envs(env);
    }
    let spawned = cmd.spawn();
    // The command holds the helper's end of the socket; it must go for EOF to arrive.
    drop(cmd);
    let child = spawned.map_err(|source| {
        io::Error::new(
            source.kind(),
            format!(
                "the sandbox helper {} did not start: {source}",
                helper.display()
            ),
        )
    })?;
    ours.set_nonblocking(true)?;
    Ok((child, tokio::net::UnixStream::from_std(ours)?))
}

/// A helper that was started and sent its request.
pub(super) struct Launched {
    pub(super) child: tokio::process::Child,
    /// The runtime's end of the control socket, its writing side still open.
    pub(super) ctl: tokio::net::UnixStream,
    pub(super) guard: HelperGuard,
    pub(super) cgroup: Option<cgroup::RunCgroup>,
    /// The helper's process id.
    pub(super) pid: u32,
    pub(super) start: Instant,
}

/// Stops the helper if the future running it is dropped: SIGTERM, on which the helper stops
/// and reaps the tool's whole tree by itself.
pub(super) struct HelperGuard {
    pid: Pid,
    pub(super) armed: bool,
}

impl HelperGuard {
    pub(super) fn new(pid: u32) -> Result<Self> {
        match i32::try_from(pid).ok().and_then(Pid::from_raw) {
            Some(pid) => Ok(Self { pid, armed: true }),
            None => Err(SandboxError::Child {
                pid,
                source: io::Error::other("the helper has no usable process id"),
            }),
        }
    }

    pub(super) fn signal(&self, sig: Signal) {
        // ESRCH only means the helper has already exited.
        if let Err(e) = rustix::process::kill_process(self.pid, sig)
            && e != rustix::io::Errno::SRCH
        {
            tracing::warn!(pid = self.pid.as_raw_pid(), error = %e, "could not signal the sandbox helper");
        }
    }
}

impl Drop for HelperGuard {
    fn drop(&mut self) {
        if self.armed {
            self.signal(Signal::TERM);
        }
    }
}
