//! The host-inspection tools of seed 004: `system_metrics_snapshot` (CPU, load, memory, swap,
//! disks, network counters, uptime) and `check_process_health` (a process by name or pid:
//! running, CPU, memory, threads, open files, uptime). Both read `/proc` and `/sys` through
//! `sysinfo`; they change nothing.
//!
//! CPU use is a rate, so it is measured over a short window the call chooses (`sample_ms`,
//! 200 ms unless told): one reading, a wait, a second reading. The readings are blocking file
//! reads (every process's `/proc` entries for a lookup by name), so they run on the blocking
//! pool, and the wait is an async sleep the call's time limit can cut.
//!
//! Which processes may be looked at is the config's (`[system] processes`, name globs): a name
//! outside them is refused before anything is read, and a pid is judged by the name of the
//! process it turns out to be, without saying that name.

use std::sync::Arc;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use sysinfo::{
    CpuRefreshKind, Disks, MemoryRefreshKind, Networks, Pid, Process, ProcessRefreshKind,
    ProcessesToUpdate, System, ThreadKind, UpdateKind,
};
use tw_core::{ErrorCode, IsolationLevel, ToolCategory, ToolDefinition, ToolStatus};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, blocking, lit};
use crate::config::SystemSettings;

/// The CPU sampling window unless the call says otherwise.
const DEFAULT_SAMPLE_MS: u64 = 200;
/// The longest sampling window a call may ask for.
const MAX_SAMPLE_MS: u64 = 2_000;
/// The most disks and network interfaces listed (a container host can mount hundreds).
const MAX_LISTED: usize = 64;
/// The most processes one lookup by name returns unless told.
const DEFAULT_PROCESS_LIMIT: u64 = 20;
/// The most processes one lookup by name may return.
const MAX_PROCESS_LIMIT: u64 = 100;

/// The `sample_ms` argument's schema, shared by both tools.
fn sample_schema() -> Value {
    json!({
        "type": "integer", "minimum": 0, "maximum": MAX_SAMPLE_MS,
        "description": "How long to measure CPU use over, in milliseconds (default 200; 0 skips CPU use)."
    })
}

/// A host tool's definition: group `system`, run in the runtime (it only reads), with room for
/// a host's worth of disks, interfaces or processes.
fn definition(
    name: &str,
    description: &str,
    params: Value,
    output: Value,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut d = ToolDefinition::new(
        lit::name(name)?,
        description,
        ToolCategory::System,
        lit::group("system")?,
        lit::params(params)?,
    );
    d.output_schema = lit::output(output)?;
    d.constraints.isolation = IsolationLevel::None;
    d.constraints.max_execution_time_ms = 10_000;
    d.constraints.max_output_bytes = 256 << 10;
    Ok(d)
}

/// What the blocking reads are called in a failure.
const READING: &str = "reading the system's state";

fn unsupported(what: &str, e: impl std::fmt::Display) -> ToolFailure {
    ToolFailure::failed(
        ErrorCode::EXECUTION_FAILED,
        format!("cannot read {what} on this system: {e}"),
    )
}

/// Rounds a percentage to one decimal: the sampling window does not measure finer.
fn percent(p: f32) -> f64 {
    (f64::from(p) * 10.0).round() / 10.0
}

#[derive(Deserialize)]
struct SnapshotArgs {
    #[serde(default = "default_sample")]
    sample_ms: u64,
}

fn default_sample() -> u64 {
    DEFAULT_SAMPLE_MS
}

struct SystemMetricsSnapshot;

impl BuiltinTool for SystemMetricsSnapshot {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let bytes = json!({"type": "integer", "minimum": 0});
        definition(
            "system_metrics_snapshot",
            "A snapshot of the host's health: CPU use (measured over a short window), load \
             averages, memory and swap, the memory limit of the runtime's cgroup, mounted disks \
             with their free space, network interfaces' counters, uptime. Reads only.",
            json!({
                "type": "object",
                "properties": {"sample_ms": sample_schema()},
                "additionalProperties": false
            }),
            json!({
            "type": "object",
            "properties": {
                "host": {"type": "object"},
                "uptime_secs": bytes,
                "booted_at": bytes,
                "load": {"type": "object", "required": ["one", "five", "fifteen"]},
                "cpu": {"type": "object", "required": ["count", "usage_percent"]},
                "memory": {"type": "object", "required": ["total_bytes", "used_bytes", "available_bytes"]},
                "swap": {"type": "object", "required": ["total_bytes", "used_bytes"]},
                "cgroup": {"type": ["object", "null"]},
                "disks": {"type": "array", "maxItems": MAX_LISTED},
                "network": {"type": "array", "maxItems": MAX_LISTED},
                "sample_ms": bytes
            },
            "required": ["host", "uptime_secs", "load", "cpu", "memory", "swap", "disks", "network", "sample_ms"]
            }),
        )
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: SnapshotArgs = args(raw)?;
            let cpu = CpuRefreshKind::nothing().with_usage();
            let mut sys = blocking(READING, move || {
                let mut sys = System::new().map_err(|e| unsupported("CPU use", e))?;
                sys.refresh_cpu_specifics(cpu);
                Ok(sys)
            })
            .await?;
            let wait = Duration::from_millis(a.sample_ms);
            if a.sample_ms > 0 {
                tokio::time::sleep(wait.max(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL)).await;
            }
            let sample_ms = a.sample_ms;
            blocking(READING, move || {
                sys.refresh_cpu_specifics(cpu);
                sys.refresh_memory_specifics(MemoryRefreshKind::everything());
                snapshot(&sys, sample_ms)
            })
            .await
        })
    }
}

/// The snapshot, read from `sys` (CPU already sampled) and the system's other sources.
fn snapshot(sys: &System, sample_ms: u64) -> Result<Value, ToolFailure> {
    let load = System::load_average().map_err(|e| unsupported("the load average", e))?;
    let uptime = System::uptime().map_err(|e| unsupported("the uptime", e))?;
    let booted = System::boot_time().ok();
    let measured = sample_ms > 0;
    let cpus = sys.cpus();
    let per_cpu: Vec<Value> = if measured {
        cpus.iter().map(|c| json!(percent(c.usage()))).collect()
    } else {
        Vec::new()
    };
    let disks = Disks::new_with_refreshed_list()
        .map(|d| {
            d.iter()
                .take(MAX_LISTED)
                .map(|d| {
                    json!({
                        "mount_point": d.mount_point().to_string_lossy(),
                        "device": d.name().to_string_lossy(),
                        "file_system": d.file_system().to_string_lossy(),
                        "kind": d.kind().to_string(),
                        "total_bytes": d.total_space(),
                        "available_bytes": d.available_space(),
                        "read_only": d.is_read_only(),
                        "removable": d.is_removable(),
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut network: Vec<Value> = Networks::new_with_refreshed_list()
        .map(|n| {
            n.iter()
                .map(|(name, d)| {
                    json!({
                        "interface": name.to_string_lossy(),
                        "received_bytes": d.total_received(),
                        "transmitted_bytes": d.total_transmitted(),
                        "packets_received": d.total_packets_received(),
                        "packets_transmitted": d.total_packets_transmitted(),
                        "errors_received": d.total_errors_on_received(),
                        "errors_transmitted": d.total_errors_on_transmitted(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    network.sort_by(|a, b| a["interface"].as_str().cmp(&b["interface"].as_str()));
    network.truncate(MAX_LISTED);
    let cgroup = sys.cgroup_limits().map(|c| {
        json!({
            "memory_limit_bytes": c.total_memory,
            "memory_free_bytes": c.free_memory,
            "swap_free_bytes": c.free_swap,
            "rss_bytes": c.rss,
        })
    });
    Ok(json!({
        "host": {
            "name": System::host_name().ok(),
            "os": System::long_os_version().ok(),
            "kernel": System::kernel_version().ok(),
            "arch": System::cpu_arch(),
        },
        "uptime_secs": uptime,
        "booted_at": booted,
        "load": {"one": load.one, "five": load.five, "fifteen": load.fifteen},
        "cpu": {
            "count": cpus.len(),
            "physical_cores": System::physical_core_count().ok(),
            "usage_percent": measured.then(|| percent(sys.global_cpu_usage())),
            "per_cpu_percent": per_cpu,
        },
        "memory": {
            "total_bytes": sys.total_memory(),
            "used_bytes": sys.used_memory(),
            "available_bytes": sys.available_memory(),
            "free_bytes": sys.free_memory(),
        },
        "swap": {
            "total_bytes": sys.total_swap(),
            "used_bytes": sys.used_swap(),
            "free_bytes": sys.free_swap(),
        },
        "cgroup": cgroup,
        "disks": disks,
        "network": network,
        "sample_ms": sample_ms,
    }))
}

#[derive(Deserialize)]
struct HealthArgs {
    name: Option<String>,
    pid: Option<u32>,
    #[serde(default = "default_sample")]
    sample_ms: u64,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    DEFAULT_PROCESS_LIMIT
}

fn bad_glob(e: globset::Error) -> tw_core::CoreError {
    tw_core::CoreError::InvalidDefinition {
        field: "system.processes".to_owned(),
        message: e.to_string(),
    }
}

/// What the config lets `check_process_health` look at.
struct Allowed {
    /// `None`: every process.
    names: Option<(GlobSet, Vec<String>)>,
}

impl Allowed {
    fn new(settings: &SystemSettings) -> Result<Self, tw_core::CoreError> {
        let Some(written) = &settings.processes else {
            return Ok(Self { names: None });
        };
        let mut b = GlobSetBuilder::new();
        for g in written {
            // The config checked every glob when it was parsed.
            b.add(Glob::new(g).map_err(bad_glob)?);
        }
        let set = b.build().map_err(bad_glob)?;
        Ok(Self {
            names: Some((set, written.clone())),
        })
    }

    fn allows(&self, name: &str) -> bool {
        self.names
            .as_ref()
            .is_none_or(|(set, _)| set.is_match(name))
    }

    fn refused(&self, what: String) -> ToolFailure {
        let listed = self
            .names
            .as_ref()
            .map(|(_, w)| w.join(", "))
            .unwrap_or_default();
        ToolFailure {
            status: ToolStatus::PermissionDenied,
            code: ErrorCode::POLICY_DENIED.to_owned(),
            message: format!(
                "{what} is not among the processes the config lets this tool look at \
                 ([system] processes: {listed})"
            ),
        }
    }
}

struct CheckProcessHealth {
    allowed: Arc<Allowed>,
}

impl BuiltinTool for CheckProcessHealth {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        definition(
            "check_process_health",
            "Check a process by name or pid: whether it runs, its state, CPU use (measured over \
             a short window), memory, threads, open files, when it started. A name matches the \
             process name or its executable's file name; every matching process is listed. \
             Reads only; the administrator may limit which processes can be looked at.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 256,
                             "description": "The process name (as ps shows it) or its executable's file name. Give name or pid."},
                    "pid": {"type": "integer", "minimum": 1, "maximum": 4_194_304,
                            "description": "The process id."},
                    "sample_ms": sample_schema(),
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PROCESS_LIMIT,
                              "description": "The most matching processes to list (default 20)."}
                },
                "additionalProperties": false
            }),
            json!({
            "type": "object",
            "properties": {
                "running": {"type": "boolean"},
                "matched": {"type": "integer"},
                "processes": {"type": "array", "maxItems": MAX_PROCESS_LIMIT},
                "truncated": {"type": "boolean"},
                "sample_ms": {"type": "integer"}
            },
            "required": ["running", "matched", "processes", "truncated", "sample_ms"]
            }),
        )
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: HealthArgs = args(raw)?;
            // Checked here, not in the schema: a `oneOf` at the top of an input schema is
            // refused by the OpenAI and Anthropic tool formats the schema is exported to.
            if a.name.is_some() == a.pid.is_some() {
                return Err(ToolFailure {
                    status: ToolStatus::ValidationError,
                    code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
                    message: "name, pid: give exactly one of them".to_owned(),
                });
            }
            if let Some(name) = &a.name
                && !self.allowed.allows(name)
            {
                return Err(self.allowed.refused(format!("{name:?}")));
            }
            let kind = ProcessRefreshKind::nothing()
                .with_cpu()
                .with_memory()
                .with_exe(UpdateKind::OnlyIfNotSet)
                .with_user(UpdateKind::OnlyIfNotSet)
                .with_tasks();
            let allowed = Arc::clone(&self.allowed);
            let (name, pid, limit) = (a.name.clone(), a.pid, a.limit);
            let (mut sys, pids, matched) = blocking(READING, move || {
                let mut sys = System::new().map_err(|e| unsupported("processes", e))?;
                let matched = find(&mut sys, name.as_deref(), pid, kind, &allowed)?;
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                let pids: Vec<Pid> = matched.iter().take(limit).copied().collect();
                Ok((sys, pids, matched.len()))
            })
            .await?;
            if a.sample_ms > 0 && !pids.is_empty() {
                let wait = Duration::from_millis(a.sample_ms);
                tokio::time::sleep(wait.max(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL)).await;
            }
            let sample_ms = a.sample_ms;
            blocking(READING, move || {
                if sample_ms > 0 && !pids.is_empty() {
                    sys.refresh_processes_specifics(ProcessesToUpdate::Some(&pids), true, kind);
                }
                let processes: Vec<Value> = pids
                    .iter()
                    .filter_map(|p| sys.process(*p))
                    .map(|p| describe(p, sample_ms > 0))
                    .collect();
                let running = processes.iter().any(|p| p["running"] == true);
                Ok(json!({
                    "running": running,
                    "matched": matched,
                    "processes": processes,
                    "truncated": matched > pids.len(),
                    "sample_ms": sample_ms,
                }))
            })
            .await
        })
    }
}

/// The pids of the processes asked for (threads left out), in pid order, after checking a
/// process asked for by pid against the config.
fn find(
    sys: &mut System,
    name: Option<&str>,
    pid: Option<u32>,
    kind: ProcessRefreshKind,
    allowed: &Allowed,
) -> Result<Vec<Pid>, ToolFailure> {
    if let Some(pid) = pid {
        let pid = Pid::from_u32(pid);
        sys.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, kind);
        return match sys.process(pid) {
            Some(p) if !allowed.allows(&p.name().to_string_lossy()) => {
                Err(allowed.refused(format!("process {pid}")))
            }
            Some(_) => Ok(vec![pid]),
            None => Ok(Vec::new()),
        };
    }
    let Some(name) = name else {
        return Ok(Vec::new());
    };
    sys.refresh_processes_specifics(ProcessesToUpdate::All, true, kind);
    let mut pids: Vec<Pid> = sys
        .processes()
        .values()
        .filter(|p| p.thread_kind() != Some(ThreadKind::Userland))
        .filter(|p| {
            p.name() == name
                || p.exe()
                    .and_then(|e| e.file_name())
                    .is_some_and(|f| f == name)
        })
        .map(Process::pid)
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// One process's health as JSON.
fn describe(p: &Process, measured: bool) -> Value {
    let status = p.status();
    let running = !matches!(
        status,
        sysinfo::ProcessStatus::Zombie | sysinfo::ProcessStatus::Dead
    );
    json!({
        "pid": p.pid().as_u32(),
        "parent_pid": p.parent().map(Pid::as_u32),
        "name": p.name().to_string_lossy(),
        "exe": p.exe().map(|e| e.to_string_lossy()),
        "status": status.to_string(),
        "running": running,
        "cpu_percent": measured.then(|| percent(p.cpu_usage())),
        "memory_bytes": p.memory(),
        "virtual_memory_bytes": p.virtual_memory(),
        "threads": p.tasks().map(|t| t.len() + 1),
        "open_files": p.open_files(),
        "open_files_limit": p.open_files_limit(),
        "started_at": p.start_time(),
        "uptime_secs": p.run_time(),
        "user_id": p.user_id().map(|u| u.to_string()),
    })
}

pub(super) fn tools(
    settings: &SystemSettings,
) -> Result<Vec<Arc<dyn BuiltinTool>>, tw_core::CoreError> {
    Ok(vec![
        Arc::new(SystemMetricsSnapshot),
        Arc::new(CheckProcessHealth {
            allowed: Arc::new(Allowed::new(settings)?),
        }),
    ])
}
