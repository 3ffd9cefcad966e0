//! What it costs to start one tool process at each isolation level, next to what it would cost
//! without Toolwarden (a bare `posix_spawn`) and with the usual alternative (bubblewrap), all of
//! the same command in the same run, so the ratios the sandbox's goals are stated in can be
//! quoted from one output:
//!
//! - spawn latency of `/bin/true` (goal, issue 20: strict median <= 1.5x bare and <= 0.3x bubblewrap,
//!   p95 <= 3 ms);
//! - the same with the runtime holding 1 GiB of touched memory (goal: unchanged). A `pre_exec`
//!   anywhere on the spawn path makes std fall back to `fork`, whose cost grows with the
//!   parent's page tables; this is the measurement that catches it;
//! - the memory the sandbox's own processes cost per running tool (goal: <= 1 MiB);
//! - strict runs back to back with no wait for the pool (a burst), and strict runs of two tools
//!   in turn (two shapes), with how many of them a helper made ahead served.
//!
//! The cases: `bare` (`tokio::process::Command`, the baseline the goals use, since the runtime
//! spawns through tokio too), `bare_std` (a blocking `std::process::Command`, for scale),
//! `bwrap`, and `standard`, `strict`, `restricted` through [`Sandbox::run`]. Those three are runs
//! the pool of helpers made ahead serves (each timed run waits, untimed, until a helper is
//! ready, as a call that comes after the last one's refill would), and `strict_cold` and
//! `standard_cold` are runs built on the spot (a `Sandbox` with no pool: the first run of a
//! new shape, or one that finds the pool drained by a burst). Criterion measures
//! each (groups `spawn` and `spawn_1gib`); a separate timing loop then prints the
//! `spawn summary:` lines (medians, p95s and ratios) that the goals are checked against, with
//! both conditions measured in alternating rounds so that load elsewhere on the machine cannot
//! pass for an effect of the ballast. Figures are printed, never asserted.
// tw-sandbox is the one crate that spawns processes; the bare and bubblewrap baselines spawn
// directly because measuring the spawn without the sandbox is their whole point.
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs
)]

use std::hint::black_box;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tw_core::IsolationLevel;
use tw_sandbox::process::{DEFAULT_POOL_SIZE, HELPER_ENV};
use tw_sandbox::{ProcessSpec, RunOutcome, Sandbox, SandboxConfig};

/// The command every case runs: as little work as a process can do, so what is measured is the
/// spawn.
const TRUE: &str = "/bin/true";
/// Where bubblewrap is installed by Debian (`scripts/setup` installs it).
const BWRAP: &str = "/usr/bin/bwrap";
/// Memory the runtime holds in the `spawn_1gib` cases.
const BALLAST_BYTES: usize = 1 << 30;
/// Iterations of the summary's own timing loop, per case.
const SUMMARY_ITERS: usize = 200;
/// Concurrent executions whose helpers are measured for the memory overhead.
const CONCURRENT: usize = 20;
/// Per-run buffers the runtime allocates in `Sandbox::run` (two 64 KiB stream buffers and a
/// 4 KiB report buffer); see `READ_CHUNK` in `process.rs`.
const RUNTIME_BUFFERS_KIB: u64 = 64 + 64 + 4;

/// One way of running `/bin/true`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// `tokio::process::Command`, as the runtime spawns: the baseline the goals are stated
    /// against.
    Bare,
    /// A blocking `std::process::Command`, for scale: what the spawn costs without an async
    /// runtime's wake-ups.
    BareStd,
    Bwrap,
    Level(IsolationLevel),
    /// Strict, built on the spot.
    StrictCold,
    /// Standard, built on the spot.
    StandardCold,
}

impl Case {
    const ALL: [Case; 8] = [
        Case::Bare,
        Case::BareStd,
        Case::Bwrap,
        Case::Level(IsolationLevel::Standard),
        Case::Level(IsolationLevel::Strict),
        Case::Level(IsolationLevel::Restricted),
        Case::StrictCold,
        Case::StandardCold,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::Bare => "bare",
            Case::BareStd => "bare_std",
            Case::Bwrap => "bwrap",
            Case::Level(IsolationLevel::Standard) => "standard",
            Case::Level(IsolationLevel::Strict) => "strict",
            Case::Level(IsolationLevel::Restricted) => "restricted",
            Case::Level(IsolationLevel::None) => "none",
            Case::StrictCold => "strict_cold",
            Case::StandardCold => "standard_cold",
        }
    }
}

/// Everything the cases share: the runtime, the sandbox, a workspace to run in, and the
/// bubblewrap command line if bubblewrap works here.
struct Bench {
    rt: Runtime,
    sandbox: Sandbox,
    /// The same sandbox with no pool: every strict run built on the spot.
    cold: Sandbox,
    /// The pooled case `settle` last readied the pool for.
    pooled: std::cell::Cell<Option<Case>>,
    workspace: tempfile::TempDir,
    bwrap: Option<Vec<String>>,
}

impl Bench {
    fn new() -> Self {
        // Like the real runtime: a multi-threaded tokio runtime with a worker per core.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let sandbox = Sandbox::with_config(SandboxConfig {
            helper: Some(helper_path()),
            ..SandboxConfig::default()
        });
        let cold = Sandbox::with_config(SandboxConfig {
            helper: Some(helper_path()),
            pool_size: 0,
            ..SandboxConfig::default()
        });
        let workspace = tempfile::TempDir::new().unwrap();
        let mut bench = Self {
            rt,
            sandbox,
            cold,
            pooled: std::cell::Cell::new(None),
            workspace,
            bwrap: None,
        };
        bench.bwrap = bench.find_bwrap();
        // The first strict check runs the escape self-test once; it is not part of a spawn.
        for case in Case::ALL {
            if bench.available(case) {
                bench.run(case);
            }
        }
        bench
    }

    /// bubblewrap's command line, if it is installed and can build its sandbox here.
    fn find_bwrap(&self) -> Option<Vec<String>> {
        if !Path::new(BWRAP).is_file() {
            println!("spawn summary: note: {BWRAP} is not installed; the bwrap cases are skipped");
            return None;
        }
        let mut args: Vec<String> = [
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        .map(str::to_owned)
        .to_vec();
        // Merged-/usr systems have these as symlinks, older ones as directories.
        for top in ["/bin", "/sbin", "/lib", "/lib64"] {
            let path = Path::new(top);
            if let Ok(target) = std::fs::read_link(path) {
                args.extend([
                    "--symlink".to_owned(),
                    target.to_string_lossy().into(),
                    top.into(),
                ]);
            } else if path.is_dir() {
                args.extend(["--ro-bind".to_owned(), top.into(), top.into()]);
            }
        }
        args.extend(
            ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", TRUE].map(str::to_owned),
        );
        // `output` spawns at once, so it must be called inside the runtime.
        let out = self.rt.block_on(async {
            tokio::process::Command::new(BWRAP)
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .await
        });
        match out {
            Ok(o) if o.status.success() => Some(args),
            Ok(o) => {
                println!(
                    "spawn summary: note: bwrap cannot build its sandbox here ({}: {}); the bwrap \
                     cases are skipped",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!(
                    "spawn summary: note: bwrap did not start ({e}); the bwrap cases are skipped"
                );
                None
            }
        }
    }

    fn available(&self, case: Case) -> bool {
        case != Case::Bwrap || self.bwrap.is_some()
    }

    /// Waits, untimed, until the pool has a helper ready for a pooled case and builds none. Each
    /// level is a shape of its own, and the pool makes helpers for a shape once it came twice: a
    /// case that follows another first runs twice untimed. Panics if no helper gets
    /// ready, so a broken pool never passes for a cold figure.
    fn settle(&self, case: Case) {
        if !matches!(case, Case::Level(_)) {
            return;
        }
        if self.pooled.replace(Some(case)) != Some(case) {
            self.run(case);
            self.run(case);
        }
        let until = Instant::now() + Duration::from_secs(10);
        self.rt.block_on(async {
            // Ready, and nothing being built beside the run: a call that comes after the
            // pool refilled.
            while !matches!(self.sandbox.helpers_ahead(), (1.., 0)) {
                assert!(
                    Instant::now() < until,
                    "no pooled helper got ready for {}: {:?} (ready, being made)",
                    case.name(),
                    self.sandbox.helpers_ahead()
                );
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        });
    }

    /// One timed run of `case`, after [`Bench::settle`].
    fn timed(&self, case: Case) -> Duration {
        self.settle(case);
        let start = Instant::now();
        self.run(case);
        start.elapsed()
    }

    fn spec(&self, level: IsolationLevel, program: &str, args: &[&str]) -> ProcessSpec {
        let mut spec = ProcessSpec::new(program, self.workspace.path());
        spec.args = args.iter().map(|a| (*a).to_owned()).collect();
        spec.isolation = level;
        spec.timeout = Duration::from_secs(30);
        spec
    }

    /// One spawn of `/bin/true`, to its exit; panics if it did not run, so a broken case never
    /// passes for a fast one.
    fn run(&self, case: Case) {
        let status = match case {
            Case::BareStd => {
                std::process::Command::new(TRUE)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap()
                    .status
            }
            Case::Bare => self.rt.block_on(async {
                tokio::process::Command::new(TRUE)
                    .stdin(Stdio::null())
                    .output()
                    .await
                    .unwrap()
                    .status
            }),
            Case::Bwrap => self.rt.block_on(async {
                let args = self.bwrap.as_ref().expect("bwrap is available");
                tokio::process::Command::new(BWRAP)
                    .args(args)
                    .stdin(Stdio::null())
                    .output()
                    .await
                    .unwrap()
                    .status
            }),
            Case::Level(_) | Case::StrictCold | Case::StandardCold => {
                let (sandbox, level) = match case {
                    Case::Level(level) => (&self.sandbox, level),
                    Case::StandardCold => (&self.cold, IsolationLevel::Standard),
                    _ => (&self.cold, IsolationLevel::Strict),
                };
                let spec = self.spec(level, TRUE, &[]);
                let outcome = self
                    .rt
                    .block_on(sandbox.run(spec, CancellationToken::new(), None))
                    .unwrap_or_else(|e| panic!("{} run failed: {e}", case.name()));
                match outcome {
                    RunOutcome::Exited(o) if o.exit.code == Some(0) => return,
                    other => panic!("{} run did not succeed: {other:?}", case.name()),
                }
            }
        };
        assert!(
            status.success(),
            "{} /bin/true failed: {status}",
            case.name()
        );
    }
}

/// The 1-minute load average, as `/proc/loadavg` gives it.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// 1 GiB with every page written, so the process really holds it (and its page tables).
fn ballast() -> Vec<u8> {
    let mut v = vec![0u8; BALLAST_BYTES];
    for page in v.chunks_mut(4096) {
        page[0] = 1;
    }
    black_box(v)
}

fn criterion_cases(c: &mut Criterion, bench: &Bench, group: &str) {
    let mut g = c.benchmark_group(group);
    g.sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for case in Case::ALL {
        if bench.available(case) {
            g.bench_function(case.name(), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| bench.timed(case)).sum())
            });
        }
    }
    g.finish();
}

/// How many alternations of "without ballast" and "with ballast" the summary's timing loop makes.
const SUMMARY_ROUNDS: usize = 8;
/// Unmeasured spawns at the start of each block of the summary's timing loop.
const BLOCK_WARM_UP: usize = 3;

/// The summary's own timing loop: `iters` spawns of each case without and with the ballast.
/// The runs are split into rounds; in each, every case runs a block of consecutive spawns, and
/// the two conditions alternate (in either order), so a change in the machine's load during
/// the run shifts every figure alike instead of skewing the ratios. Each block starts with a
/// few unmeasured spawns, so work the previous case left to the kernel (a network namespace is
/// torn down by a kernel worker after its last process exits) is not billed to the next case.
fn summary_samples(bench: &Bench, iters: usize) -> (Figures, Figures) {
    let cases: Vec<Case> = Case::ALL
        .into_iter()
        .filter(|c| bench.available(*c))
        .collect();
    let mut ms = [vec![Vec::new(); cases.len()], vec![Vec::new(); cases.len()]];
    let rounds = SUMMARY_ROUNDS.min(iters);
    for round in 0..rounds {
        let per_round = iters / rounds + usize::from(round < iters % rounds);
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for heavy in order {
            let held = heavy.then(ballast);
            for (i, case) in cases.iter().enumerate() {
                for _ in 0..BLOCK_WARM_UP {
                    bench.run(*case);
                }
                for _ in 0..per_round {
                    let took = bench.timed(*case);
                    ms[usize::from(heavy)][i].push(took.as_secs_f64() * 1e3);
                }
            }
            drop(black_box(held));
        }
    }
    let [plain, heavy] = ms.map(|per_case| Figures::new(&cases, per_case));
    (plain, heavy)
}

/// Median and p95 of each case, in milliseconds.
struct Figures {
    rows: Vec<(Case, f64, f64)>,
}

impl Figures {
    fn new(cases: &[Case], samples: Vec<Vec<f64>>) -> Self {
        let rows = cases
            .iter()
            .zip(samples)
            .map(|(case, mut ms)| {
                ms.sort_by(f64::total_cmp);
                (*case, percentile(&ms, 0.50), percentile(&ms, 0.95))
            })
            .collect();
        Self { rows }
    }

    fn get(&self, case: Case) -> Option<(f64, f64)> {
        self.rows
            .iter()
            .find(|(c, ..)| *c == case)
            .map(|(_, m, p)| (*m, *p))
    }

    fn print(&self, label: &str, iters: usize) {
        println!(
            "spawn summary: {label} ({iters} runs each of {TRUE}, timed in blocks \
             alternating with the other condition)"
        );
        println!(
            "spawn summary:   {:<13} {:>9} {:>9}",
            "case", "median", "p95"
        );
        for (case, median, p95) in &self.rows {
            println!(
                "spawn summary:   {:<13} {:>6.3} ms {:>6.3} ms",
                case.name(),
                median,
                p95
            );
        }
        let strict = Case::Level(IsolationLevel::Strict);
        let Some((strict_median, strict_p95)) = self.get(strict) else {
            return;
        };
        if let Some((bare, _)) = self.get(Case::Bare) {
            println!(
                "spawn summary:   strict/bare  median ratio {:.2}x (goal <= 1.5x)",
                strict_median / bare
            );
        }
        if let Some((bare_std, _)) = self.get(Case::BareStd) {
            println!(
                "spawn summary:   strict/bare_std median ratio {:.2}x (for scale; no goal)",
                strict_median / bare_std
            );
        }
        match self.get(Case::Bwrap) {
            Some((bwrap, _)) => println!(
                "spawn summary:   strict/bwrap median ratio {:.2}x (goal <= 0.3x)",
                strict_median / bwrap
            ),
            None => println!("spawn summary:   strict/bwrap median ratio: n/a (no bwrap)"),
        }
        println!("spawn summary:   strict p95 {strict_p95:.3} ms (goal <= 3 ms)");
        if let Some((cold, cold_p95)) = self.get(Case::StrictCold) {
            let bare = self.get(Case::Bare).map_or(f64::NAN, |b| b.0);
            let bwrap = self.get(Case::Bwrap).map_or(f64::NAN, |b| b.0);
            println!(
                "spawn summary:   strict_cold (built on the spot, no pool) median {cold:.3} ms, \
                 p95 {cold_p95:.3} ms: {:.2}x bare, {:.2}x bwrap; pooled/cold {:.2}x",
                cold / bare,
                cold / bwrap,
                strict_median / cold
            );
        }
        if let (Some((standard, _)), Some((cold, _)), Some((bare, _))) = (
            self.get(Case::Level(IsolationLevel::Standard)),
            self.get(Case::StandardCold),
            self.get(Case::Bare),
        ) {
            println!(
                "spawn summary:   standard pooled {:.2}x bare, standard_cold (built on the spot) \
                 {:.2}x bare; pooled/cold {:.2}x (no goal)",
                standard / bare,
                cold / bare,
                standard / cold
            );
        }
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Memory of one process, from `/proc/<pid>/smaps_rollup`, in KiB.
#[derive(Default, Clone, Copy)]
struct Mem {
    rss: u64,
    pss: u64,
    private: u64,
}

fn smaps_rollup(pid: u32) -> std::io::Result<Mem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    let mut mem = Mem::default();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let kib: u64 = value.parse().unwrap_or(0);
        match key {
            "Rss:" => mem.rss += kib,
            "Pss:" => mem.pss += kib,
            "Private_Clean:" | "Private_Dirty:" => mem.private += kib,
            _ => {}
        }
    }
    Ok(mem)
}

/// `(comm, ppid)` of a process.
fn comm_ppid(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may itself contain spaces or parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let ppid = stat
        .get(close + 2..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((comm, ppid))
}

/// Helper processes that descend from this process (the outer helper of each run and, at
/// strict, the namespace's init), so helpers of anything else running on the machine are not
/// counted. `comm` is cut to 15 bytes by the kernel.
fn our_helpers() -> Vec<u32> {
    let me = std::process::id();
    let procs: Vec<(u32, String, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| comm_ppid(pid).map(|(comm, ppid)| (pid, comm, ppid)))
        .collect();
    let parent_of = |pid: u32| procs.iter().find(|(p, ..)| *p == pid).map(|(.., pp)| *pp);
    procs
        .iter()
        .filter(|(_, comm, _)| comm == "tw-sandbox-help")
        .filter(|(pid, ..)| {
            let mut cur = *pid;
            for _ in 0..8 {
                match parent_of(cur) {
                    Some(pp) if pp == me => return true,
                    Some(pp) if pp > 1 => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .map(|(pid, ..)| *pid)
        .collect()
}

fn sum(mems: &[Mem]) -> Mem {
    mems.iter().fold(Mem::default(), |a, m| Mem {
        rss: a.rss + m.rss,
        pss: a.pss + m.pss,
        private: a.private + m.private,
    })
}

/// Reads each pid's memory; a pid whose figures cannot be read is named in a printed note, so
/// a total that leaves it out says so.
fn measure(pids: &[u32]) -> Vec<Mem> {
    let mut mems = Vec::new();
    let mut failed = Vec::new();
    for pid in pids {
        match smaps_rollup(*pid) {
            Ok(m) => mems.push(m),
            Err(e) => failed.push(format!("{pid}: {e}")),
        }
    }
    if !failed.is_empty() {
        println!(
            "spawn summary: note: smaps_rollup unreadable for {} helper(s): {}",
            failed.len(),
            failed.join("; ")
        );
    }
    mems
}

/// Starts `n` concurrent runs of `sleep 2` at `level`, measures the helpers while the tools
/// sleep, and prints the per-execution figures. Helper processes that were already running
/// before (ones a [`Sandbox`] keeps for all its runs) are not part of any one execution; they
/// are reported on their own line.
fn memory_overhead(bench: &Bench, level: IsolationLevel, n: usize) {
    let name = Case::Level(level).name();
    let shared = our_helpers();
    let helpers = bench.rt.block_on(async {
        let runs: Vec<_> = (0..n)
            .map(|_| {
                // A pooled run has the same two processes; the pool's idle helpers are measured
                // on their own (`idle_pool_memory`).
                let sandbox = bench.cold.clone();
                let spec = bench.spec(level, "/bin/sleep", &["2"]);
                tokio::spawn(async move { sandbox.run(spec, CancellationToken::new(), None).await })
            })
            .collect();
        // Every helper has built its sandbox and exec'd the tool well within a second.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let helpers: Vec<u32> = our_helpers()
            .into_iter()
            .filter(|pid| !shared.contains(pid))
            .collect();
        let mems = measure(&helpers);
        for run in runs {
            match run.await.unwrap() {
                Ok(RunOutcome::Exited(o)) if o.exit.code == Some(0) => {}
                other => panic!("{name} sleep run did not succeed: {other:?}"),
            }
        }
        (helpers.len(), sum(&mems))
    });
    let (count, total) = helpers;
    let per = |kib: u64| kib as f64 / n as f64;
    println!(
        "spawn summary: memory overhead per execution ({name}, {n} concurrent `sleep 2`, {count} \
         helper processes measured): {:.0} KiB (PSS), {:.0} KiB (private), {:.0} KiB (RSS) \
         (goal <= 1024 KiB)",
        per(total.pss),
        per(total.private),
        per(total.rss),
    );
    if !shared.is_empty() {
        let kept = sum(&measure(&shared));
        println!(
            "spawn summary:   plus {} helper process(es) the Sandbox keeps for all runs: {} KiB \
             (PSS), {} KiB (private), {} KiB (RSS) in total, not per execution",
            shared.len(),
            kept.pss,
            kept.private,
            kept.rss
        );
    }
}

/// The memory an idle pooled helper holds: at strict and restricted the helper and its
/// namespace's init, confined and waiting for a run; at standard the helper alone. The pool is
/// filled for strict `/bin/true` (the other levels' shapes have their helpers from the cases
/// before), then every helper process directly below this one that is not holding the shared
/// namespaces is measured: with its init if it has one, alone otherwise.
fn idle_pool_memory(bench: &Bench) {
    bench.settle(Case::Level(IsolationLevel::Strict));
    bench.run(Case::Level(IsolationLevel::Strict));
    let until = Instant::now() + Duration::from_secs(10);
    while !matches!(bench.sandbox.helpers_ahead(), (ready, 0) if ready >= DEFAULT_POOL_SIZE) {
        assert!(Instant::now() < until, "the pool did not fill");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The run's own helper tears its namespaces down after it reported the run's end: let it
    // go before the helpers are listed, so only idle ones are measured.
    std::thread::sleep(Duration::from_millis(200));
    let me = std::process::id();
    let parent = |pid: u32| comm_ppid(pid).map(|(_, ppid)| ppid);
    let helpers: Vec<u32> = our_helpers()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !String::from_utf8_lossy(&c).contains("--hold-namespaces"))
        })
        .collect();
    let (top, inits): (Vec<u32>, Vec<u32>) =
        helpers.iter().partition(|&&pid| parent(pid) == Some(me));
    let (with_init, alone): (Vec<u32>, Vec<u32>) = top
        .iter()
        .partition(|&&pid| inits.iter().any(|&i| parent(i) == Some(pid)));
    let report = |what: &str, helpers: &[u32], processes: Vec<u32>| {
        if helpers.is_empty() {
            println!(
                "spawn summary: memory per idle pooled helper ({what}): none ready to measure"
            );
            return;
        }
        let total = sum(&measure(&processes));
        let per = |kib: u64| kib as f64 / helpers.len() as f64;
        println!(
            "spawn summary: memory per idle pooled helper ({what}; {} ready, {} processes \
             measured): {:.0} KiB (PSS), {:.0} KiB (private), {:.0} KiB (RSS)",
            helpers.len(),
            processes.len(),
            per(total.pss),
            per(total.private),
            per(total.rss)
        );
    };
    let strict: Vec<u32> = with_init
        .iter()
        .copied()
        .chain(
            inits
                .iter()
                .copied()
                .filter(|&i| parent(i).is_some_and(|p| with_init.contains(&p))),
        )
        .collect();
    report("strict and restricted: helper and init", &with_init, strict);
    report("standard: the helper alone", &alone, alone.clone());
}

/// Strict runs one after another with no wait for the pool (a burst): each run takes a helper
/// if one is ready and builds on the spot otherwise, while the pool makes the next ones on the
/// other core.
fn burst(bench: &Bench, n: usize) {
    let mut ms = Vec::with_capacity(n);
    let mut ahead = 0;
    for _ in 0..n {
        let spec = bench.spec(IsolationLevel::Strict, TRUE, &[]);
        let start = Instant::now();
        let outcome = bench
            .rt
            .block_on(bench.sandbox.run(spec, CancellationToken::new(), None))
            .unwrap();
        ms.push(start.elapsed().as_secs_f64() * 1e3);
        ahead += usize::from(outcome.output().metrics.prepared_ahead);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "spawn summary: strict back to back, no wait for the pool ({n} runs): median {:.3} ms, \
         p95 {:.3} ms; {ahead} of {n} served by a pooled helper",
        percentile(&ms, 0.5),
        percentile(&ms, 0.95)
    );
}

/// Strict runs of two tools in turn (two shapes: each tool's own file limit), each after the
/// pool refilled (as calls an agent's think time apart): an agent alternating between tools
/// should find helpers for each, not have every run built on the spot.
fn alternating(bench: &Bench, n: usize) {
    let spec = |files: u64| {
        let mut spec = bench.spec(IsolationLevel::Strict, TRUE, &[]);
        spec.limits.max_open_files = Some(files);
        spec
    };
    let run = |files: u64| {
        let start = Instant::now();
        let outcome = bench
            .rt
            .block_on(
                bench
                    .sandbox
                    .run(spec(files), CancellationToken::new(), None),
            )
            .unwrap();
        (
            start.elapsed().as_secs_f64() * 1e3,
            outcome.output().metrics.prepared_ahead,
        )
    };
    // Each shape twice, untimed: the pool makes helpers for a shape once it came twice.
    for files in [300, 400, 300, 400] {
        run(files);
    }
    let mut ms = Vec::with_capacity(n);
    let mut ahead = 0;
    for i in 0..n {
        let until = Instant::now() + Duration::from_secs(10);
        while !matches!(bench.sandbox.helpers_ahead(), (ready, 0) if ready >= 2 * DEFAULT_POOL_SIZE)
        {
            assert!(
                Instant::now() < until,
                "the pool did not fill for both shapes: {:?}",
                bench.sandbox.helpers_ahead()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let (took, pooled) = run(if i % 2 == 0 { 300 } else { 400 });
        ms.push(took);
        ahead += usize::from(pooled);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "spawn summary: strict, two tools in turn ({n} runs, the pool refilled before each): \
         median {:.3} ms, p95 {:.3} ms; {ahead} of {n} served by a pooled helper",
        percentile(&ms, 0.5),
        percentile(&ms, 0.95)
    );
}

/// The helper to measure: `$TOOLWARDEN_SANDBOX_HELPER` (`scripts/bench` points it at the
/// statically linked build that `scripts/run` installs), else the one cargo built for this bench.
fn helper_path() -> std::path::PathBuf {
    std::env::var_os(HELPER_ENV).map_or_else(
        || env!("CARGO_BIN_EXE_tw-sandbox-helper").into(),
        std::path::PathBuf::from,
    )
}

/// Whether an ELF executable needs the dynamic loader (has a `PT_INTERP` program header).
fn dynamically_linked(path: &Path) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(path).ok()?;
    let word = |at: usize, n: usize| -> Option<u64> {
        let bytes = elf.get(at..at + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0, |acc, &b| (acc << 8) | u64::from(b)),
        )
    };
    let (phoff, phentsize, phnum) = (word(0x20, 8)?, word(0x36, 2)?, word(0x38, 2)?);
    (0..phnum)
        .map(|i| word(usize::try_from(phoff + i * phentsize).ok()?, 4))
        .try_fold(false, |found, p| Some(found || p? == u64::from(PT_INTERP)))
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) criterion runs each
    // case once, and the summary shrinks to a smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 3 } else { SUMMARY_ITERS };
    let concurrent = if quick { 2 } else { CONCURRENT };

    if quick {
        println!(
            "spawn summary: note: smoke run (no --bench): a few runs each, figures not meaningful"
        );
    }
    let load_before = loadavg();
    let helper = helper_path();
    println!(
        "spawn summary: helper: {} ({})",
        helper.display(),
        match dynamically_linked(&helper) {
            Some(false) => "statically linked, as scripts/run installs it",
            Some(true) => "dynamically linked: scripts/bench measures the static build",
            None => "linkage unknown",
        }
    );
    let bench = Bench::new();
    let mut c = Criterion::default().configure_from_args();
    criterion_cases(&mut c, &bench, "spawn");
    let held = ballast();
    criterion_cases(&mut c, &bench, "spawn_1gib");
    drop(black_box(held));
    c.final_summary();

    let (plain, heavy) = summary_samples(&bench, iters);
    memory_overhead(&bench, IsolationLevel::Standard, concurrent);
    memory_overhead(&bench, IsolationLevel::Strict, concurrent);
    idle_pool_memory(&bench);
    burst(&bench, iters);
    alternating(&bench, iters);

    plain.print("spawn latency", iters);
    heavy.print(
        "spawn latency with 1 GiB of touched memory held by the runtime",
        iters,
    );
    for (case, median, _) in &heavy.rows {
        if let Some((before, _)) = plain.get(*case) {
            println!(
                "spawn summary:   {:<13} median with 1 GiB / without: {:.2}x (goal: unchanged)",
                case.name(),
                median / before
            );
        }
    }
    println!(
        "spawn summary: machine: {} cores, 1-minute load average {load_before} at the start, {} \
         at the end (a busy machine makes every figure slower and noisier)",
        std::thread::available_parallelism().map_or(0, usize::from),
        loadavg()
    );
    println!(
        "spawn summary: runtime-side buffers per execution: {RUNTIME_BUFFERS_KIB} KiB allocated \
         by Sandbox::run for the output and report streams (not counted above)"
    );
}
