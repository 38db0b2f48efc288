//! The hostile-catalog fuzzer: catalogs generated per family of attack (proptest, seeded), each
//! run against every command that reads catalogs (the `olmv1` binary as a child process;
//! `migrate check` and `status`, which read the cluster too, in a child: [`crate::cluster`]), the
//! controller's dependency check (a library call) and catalogd (`olmv1 catalogd serve`, a child
//! process), holding each run to the product's promise (docs/limits-and-faults.md, "The
//! hostile-catalog fuzzer"):
//!
//! - CPU (user + system of the child, from `wait4`) at most [`MAX_CPU`];
//! - peak RSS (the child's `ru_maxrss`) at most [`MAX_RSS`];
//! - output (stdout + stderr) at most [`MAX_OUTPUT`], or the legitimate size of the answer
//!   ([`Case::legitimate_output`]) when the family makes a large answer on purpose;
//! - a refusal (a limit named on stderr) is one sentence: one line;
//! - no crash: exit status 0, 1 or 2, never a signal.
//!
//! The shape, for every family (part A's in [`families`], more in their own modules): a
//! [`Family`] names itself and gives a proptest strategy of [`Case`]s at a [`Scale`]; the case is
//! the catalog's lines (FBC objects), the package the commands ask about, an installed bundle for
//! `upgrades` and `explain`, and what catalogd is asked. [`check_family`] runs the family's cases
//! and asserts; one `#[test]` per family calls it. Add a family by writing its strategy and one
//! such test.
//!
//! Case count: `OLMV1_FUZZ_CASES` (default [`DEFAULT_CASES`] per family, the bounded run of
//! `hack/test.sh`); seed: `OLMV1_FUZZ_SEED` (default fixed, so a run is repeatable); size:
//! `OLMV1_FUZZ_SCALE=large` generates catalogs up to 10 MB (the long run for the benchmark
//! notes, a release build of the fuzzer: `cargo test --release --test fuzz`). Each run's figures are
//! printed (`fuzz: family command cpu rss output`) and the worst per family at the end; a
//! failing case's catalog is kept and its directory printed.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use proptest::{
    strategy::{BoxedStrategy, Strategy, ValueTree},
    test_runner::{Config, RngAlgorithm, TestRng, TestRunner},
};
use serde_json::Value;

/// The most CPU one command, check or catalogd run may take.
pub const MAX_CPU: Duration = Duration::from_secs(2);
/// The largest peak resident set of one command or catalogd run.
pub const MAX_RSS: u64 = 256 << 20;
/// The most output one command may print from a hostile catalog (unless the answer is
/// legitimately larger: [`Case::legitimate_output`]).
pub const MAX_OUTPUT: u64 = 1 << 20;
/// Cases per family in the bounded run (`hack/test.sh`).
pub const DEFAULT_CASES: u32 = 1;

/// How large the generated catalogs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Up to about 1 MB: the bounded run of the tests.
    Bounded,
    /// Up to about 10 MB: the long run (`OLMV1_FUZZ_SCALE=large`).
    Large,
}

impl Scale {
    /// The scale asked for by `OLMV1_FUZZ_SCALE`.
    pub fn from_env() -> Scale {
        match std::env::var("OLMV1_FUZZ_SCALE").as_deref() {
            Ok("large") => Scale::Large,
            _ => Scale::Bounded,
        }
    }

    /// `bounded` in the bounded run, `large` in the long one.
    pub fn pick(self, bounded: usize, large: usize) -> usize {
        match self {
            Scale::Bounded => bounded,
            Scale::Large => large,
        }
    }

    /// The largest catalog a case may be: the promise is for inputs under 10 MB (the long run),
    /// and the bounded run stays near 1 MB. [`check_case`] asserts it, so a family's dimensions
    /// cannot multiply past it unseen (one did: 104 MB).
    pub fn max_catalog_bytes(self) -> usize {
        self.pick(2_000_000, 10_000_000)
    }

    /// `count` cut so that `count` items of at most `bytes_each` bytes take at most `share` of
    /// [`Scale::max_catalog_bytes`] (at least 1): a family's dimension that multiplies the others.
    pub fn fit(self, count: usize, bytes_each: usize, share: f64) -> usize {
        let room = (self.max_catalog_bytes() as f64 * share) as usize;
        count.min(room / bytes_each.max(1)).max(1)
    }
}

/// One generated hostile catalog and what to ask about it.
#[derive(Debug, Clone)]
pub struct Case {
    /// The catalog: FBC objects, one per line of `catalog.json`.
    pub lines: Vec<Value>,
    /// The package every command asks about.
    pub package: String,
    /// The installed bundle (`BUNDLE@VERSION`) for `upgrades` and `explain`, if any.
    pub installed: Option<String>,
    /// Bytes of output an answer legitimately has (the catalog's own text shown once); the
    /// output bound is the larger of this and [`MAX_OUTPUT`].
    pub legitimate_output: u64,
    /// catalogd: slow clients held open (each reading nothing) while the server's memory is
    /// read; 0 for none.
    pub slow_clients: usize,
}

impl Case {
    /// A case over `lines` asking about `package`.
    pub fn new(package: &str, lines: Vec<Value>) -> Case {
        Case {
            lines,
            package: package.to_string(),
            installed: None,
            legitimate_output: 0,
            slow_clients: 0,
        }
    }

    /// With `bundle@version` installed.
    pub fn installed(mut self, bundle: &str, version: &str) -> Case {
        self.installed = Some(format!("{bundle}@{version}"));
        self
    }

    /// The catalog's text, as written.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

/// A family of attack: its name and its cases.
pub struct Family {
    /// The name, as reported.
    pub name: &'static str,
    /// Its cases at a scale.
    pub cases: fn(Scale) -> BoxedStrategy<Case>,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// What ran.
    pub what: String,
    /// User + system CPU.
    pub cpu: Duration,
    /// Peak resident set, bytes (0 when not measured: in-process runs).
    pub rss: u64,
    /// Bytes written to stdout and stderr.
    pub output: u64,
    /// Exit status (`None`: killed by a signal).
    pub code: Option<i32>,
    /// The first 64 KiB of stderr.
    pub stderr: String,
    /// The first bytes of stdout (as many as asked for; none by default).
    pub stdout: String,
}

/// The binary the fuzzer runs: `OLMV1_FUZZ_BIN`, else the test build's.
pub fn binary() -> PathBuf {
    std::env::var_os("OLMV1_FUZZ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_olmv1")))
}

/// How much slower a debug build runs a work unit than a release build, at most, over the kinds
/// of work (`cargo bench --bench meter` in both profiles): the bounded run on the test build's
/// (debug) binary divides the budgets by it, so that a debug run at its budget takes the CPU a
/// release run at the real budget takes, and the 2 s promise is checked as it is on a release
/// build. A release binary (`OLMV1_FUZZ_BIN`) runs with the real budgets.
pub const DEBUG_SLOWDOWN: u64 = 20;

/// The budgets' divisor for the `olmv1` binary under test: `OLMV1_FUZZ_WORK_DIVISOR`, else
/// [`DEBUG_SLOWDOWN`] for the test build's own binary when it is a debug build and 1 for one
/// named by `OLMV1_FUZZ_BIN` (a release binary).
pub fn work_divisor() -> u64 {
    if std::env::var_os("OLMV1_FUZZ_BIN").is_some() {
        divisor_override().unwrap_or(1)
    } else {
        own_work_divisor()
    }
}

/// The budgets' divisor for the library's own work in a child of this test binary (the
/// controller's check, `migrate check`, `status`): it runs this binary's code, debug or release
/// whatever `OLMV1_FUZZ_BIN` names; `OLMV1_FUZZ_WORK_DIVISOR` overrides it.
pub fn own_work_divisor() -> u64 {
    divisor_override().unwrap_or(if cfg!(debug_assertions) { DEBUG_SLOWDOWN } else { 1 })
}

fn divisor_override() -> Option<u64> {
    std::env::var("OLMV1_FUZZ_WORK_DIVISOR")
        .ok()
        .and_then(|d| d.parse().ok())
}

/// A command of the binary under test, with the admin command's budget divided by
/// [`work_divisor`].
pub fn olmv1(args: &[String]) -> Command {
    let mut command = Command::new(binary());
    command.args(args);
    with_divided_budget(&mut command, work_divisor());
    command
}

/// `command` with the admin command's budget divided by `divisor`.
pub fn with_divided_budget(command: &mut Command, divisor: u64) -> &mut Command {
    if divisor > 1 {
        command.env(
            olmv1::admin::WORK_UNITS_ENV,
            (olmv1::admin::COMMAND_WORK_UNITS / divisor).to_string(),
        );
    }
    command
}

/// Runs `command` to its end, reading its output as it comes (counted, not kept beyond the first
/// 64 KiB of stderr), and measures it with `wait4` (which reaps it: std's `wait` is not used).
pub fn run_measured(what: &str, command: &mut Command) -> Measured {
    run_measured_keeping(what, command, 0)
}

/// [`run_measured`], keeping the first `keep` bytes of stdout.
#[allow(clippy::zombie_processes)]
pub fn run_measured_keeping(what: &str, command: &mut Command, keep: usize) -> Measured {
    let mut child = forked(command)
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let count = |mut pipe: Box<dyn Read + Send>, keep: usize| {
        std::thread::spawn(move || {
            let (mut total, mut kept, mut buf) = (0u64, Vec::new(), vec![0u8; 64 << 10]);
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        total += n as u64;
                        let room = keep.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
            (total, kept)
        })
    };
    let stdout = count(Box::new(child.stdout.take().expect("piped")), keep);
    let stderr = count(Box::new(child.stderr.take().expect("piped")), 64 << 10);
    let (status, usage) = wait4(child.id());
    let (out_bytes, out_text) = stdout.join().expect("stdout reader");
    let (err_bytes, err_text) = stderr.join().expect("stderr reader");
    Measured {
        what: what.to_string(),
        cpu: usage.0,
        rss: usage.1,
        output: out_bytes + err_bytes,
        code: status,
        stderr: String::from_utf8_lossy(&err_text).into_owned(),
        stdout: String::from_utf8_lossy(&out_text).into_owned(),
    }
}

/// `command`, spawned by `fork` and `exec` rather than `posix_spawn`, so that the child's peak
/// RSS (`ru_maxrss`) is its own. At `exec` Linux records the replaced address space's peak as the
/// process's: `posix_spawn`'s child shares this process's address space until it execs (a
/// `vfork`), so it would be reported at least this process's peak, which a large generated case
/// makes hundreds of MiB; a forked child's copy starts at this process's resident set at the fork,
/// which holds no catalog then (a few MiB, printed beside each family's worst).
pub fn forked(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook does nothing; any hook makes std fork and exec instead of posix_spawn.
    unsafe { command.pre_exec(|| Ok(())) }
}

/// Waits for child `pid` and returns its exit status (`None` when a signal ended it) and its CPU
/// (user + system) and peak RSS in bytes.
pub fn wait4(pid: u32) -> (Option<i32>, (Duration, u64)) {
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 writes the status and one `rusage` into the pointers it is given, which are
    // valid for them; the child is ours and not waited for elsewhere.
    let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(
        rc,
        pid as libc::pid_t,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: zero-initialised and filled by a successful wait4.
    let usage = unsafe { usage.assume_init() };
    let time =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (
        code,
        (
            time(usage.ru_utime) + time(usage.ru_stime),
            u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        ),
    )
}

/// Gives the memory this process freed back to the system.
fn trim() {
    // SAFETY: malloc_trim only releases free memory of glibc's heap.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// This process's resident set, bytes (the floor of its children's reported peak RSS).
fn own_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// The CPU the calling thread has used.
pub fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A refusal names a limit: then it must be one sentence on one line.
fn names_a_limit(stderr: &str) -> bool {
    [
        "budget",
        "over the limit",
        "over the output limit",
        "takes longer than",
        "more than the limit",
    ]
    .iter()
    .any(|w| stderr.contains(w))
}

/// Asserts the promise on one run (see the module comment).
pub fn assert_bounded(family: &str, case: &Case, m: &Measured, kept: &Path) {
    let context = || format!("{family}: {} (catalog kept in {})", m.what, kept.display());
    assert!(
        m.code.is_some_and(|c| (0..=2).contains(&c)),
        "{}: exit status {:?}; stderr: {}",
        context(),
        m.code,
        m.stderr
    );
    assert!(
        m.cpu <= MAX_CPU,
        "{}: {:?} of CPU, over {MAX_CPU:?}",
        context(),
        m.cpu
    );
    assert!(
        m.rss <= MAX_RSS,
        "{}: peak RSS {} MiB, over {} MiB",
        context(),
        m.rss >> 20,
        MAX_RSS >> 20
    );
    let allowed = MAX_OUTPUT.max(case.legitimate_output);
    assert!(
        m.output <= allowed,
        "{}: {} bytes of output, over {allowed}",
        context(),
        m.output
    );
    if m.code != Some(0) && names_a_limit(&m.stderr) {
        let lines: Vec<&str> = m.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            lines.len() == 1 && m.stderr.len() <= 1024,
            "{}: a refusal in more than one short sentence: {}",
            context(),
            m.stderr
        );
    }
}

/// One family's worst figures: name, CPU, RSS, output, and the runs they are the worst of.
type Worst = (String, Duration, u64, u64, u32);

/// The worst figures of each family, printed at the end of each family's run.
static WORST: Mutex<Vec<Worst>> = Mutex::new(Vec::new());

pub fn record(family: &str, m: &Measured) {
    println!(
        "fuzz: {family:<20} {:<44} cpu {:>8.3} s  rss {:>6} MiB  output {:>10} B  exit {:?}",
        m.what,
        m.cpu.as_secs_f64(),
        m.rss >> 20,
        m.output,
        m.code
    );
    let mut worst = WORST.lock().unwrap_or_else(|p| p.into_inner());
    match worst.iter_mut().find(|w| w.0 == family) {
        Some(w) => {
            w.1 = w.1.max(m.cpu);
            w.2 = w.2.max(m.rss);
            w.3 = w.3.max(m.output);
            w.4 += 1;
        }
        None => worst.push((family.to_string(), m.cpu, m.rss, m.output, 1)),
    }
}

/// The commands run on every case: every command that reads catalogs, `upgrades` in each output.
fn commands(case: &Case, catalog: &str) -> Vec<(String, Vec<String>)> {
    let p = case.package.as_str();
    let with = |args: &[&str]| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--catalog".to_string(), catalog.to_string()]);
        v
    };
    let mut out = vec![
        ("versions".to_string(), with(&["versions", p])),
        ("search".to_string(), with(&["search", p, "--no-pull"])),
        (
            "search -o json".to_string(),
            with(&["search", p, "--no-pull", "-o", "json"]),
        ),
        ("resolve".to_string(), with(&["resolve", "--package", p])),
        (
            "resolve --with-dependencies".to_string(),
            with(&["resolve", "--package", p, "--with-dependencies"]),
        ),
        (
            "resolve --with-dependencies -o json".to_string(),
            with(&["resolve", "--package", p, "--with-dependencies", "-o", "json"]),
        ),
        ("explain".to_string(), with(&["explain", "--package", p])),
    ];
    if let Some(installed) = &case.installed {
        let i = installed.as_str();
        out.extend([
            (
                "explain --installed".to_string(),
                with(&["explain", "--package", p, "--installed", i]),
            ),
            (
                "upgrades".to_string(),
                with(&["upgrades", "--package", p, "--installed", i]),
            ),
            (
                "upgrades -o json".to_string(),
                with(&["upgrades", "--package", p, "--installed", i, "-o", "json"]),
            ),
            (
                "upgrades -o dot".to_string(),
                with(&["upgrades", "--package", p, "--installed", i, "-o", "dot"]),
            ),
        ]);
    }
    out
}

/// The controller's dependency check of every bundle of the case's package against the other
/// packages' first bundles installed, as the controller runs it (one meter per check, reading
/// the requirements included), in a child process (this test binary again, running
/// [`controller_check_child`]): its RSS is the child's, its CPU the worst single check's (each
/// check is one reconcile's work), measured on the check's thread.
fn controller_check(case: &Case, dir: &Path) -> Measured {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"));
    child
        .args([
            "--exact",
            "harness::controller_check_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("OLMV1_FUZZ_CHECK_DIR", dir)
        .env("OLMV1_FUZZ_CHECK_PACKAGE", &case.package)
        .env(
            "OLMV1_FUZZ_CHECK_UNITS",
            (olmv1::dependencies::CHECK_WORK_UNITS / own_work_divisor()).to_string(),
        );
    let m = run_measured_keeping("controller check", &mut child, 1 << 20);
    // "check <cpu ns> <refusal or empty>" per bundle.
    let (mut worst, mut checks, mut refusals) = (Duration::ZERO, 0, Vec::new());
    for line in m.stdout.lines() {
        let Some(rest) = line.strip_prefix("fuzz-check ") else {
            continue;
        };
        let (ns, refusal) = rest.split_once(' ').unwrap_or((rest, ""));
        worst = worst.max(Duration::from_nanos(ns.parse().unwrap_or(u64::MAX)));
        checks += 1;
        if !refusal.is_empty() {
            refusals.push(refusal.to_string());
        }
    }
    assert!(
        m.code == Some(0) && m.stdout.contains("fuzz-check-done"),
        "the controller check's child failed ({:?}): {}",
        m.code,
        m.stderr
    );
    Measured {
        what: format!("controller check ({checks} checks, {} refused)", refusals.len()),
        cpu: worst,
        rss: m.rss,
        output: 0,
        code: Some(if refusals.is_empty() { 0 } else { 1 }),
        stderr: refusals.first().cloned().unwrap_or_default(),
        stdout: String::new(),
    }
}

/// The child of [`controller_check`] (run only by it: ignored otherwise).
#[test]
#[ignore = "run by the fuzzer in a child process"]
fn controller_check_child() {
    use olmv1::{
        catalog::{CatalogIndex, read_dir_metas},
        dependencies::{
            DependencyError, InstalledExtension, check_dependencies_within, check_meter, requirements_of,
        },
    };
    let (Some(dir), Some(package)) = (
        std::env::var_os("OLMV1_FUZZ_CHECK_DIR"),
        std::env::var("OLMV1_FUZZ_CHECK_PACKAGE").ok(),
    ) else {
        panic!("run by the fuzzer: OLMV1_FUZZ_CHECK_DIR and OLMV1_FUZZ_CHECK_PACKAGE are not set");
    };
    let metas = read_dir_metas(Path::new(&dir)).expect("the generated catalog reads");
    let index = CatalogIndex::from_metas(&metas).expect("the generated catalog indexes");
    drop(metas);
    let installed: Vec<InstalledExtension> = index
        .packages()
        .filter(|p| *p.name != *package)
        .filter_map(|p| p.bundles.first().map(|b| (p, b)))
        .map(|(p, b)| InstalledExtension {
            extension: p.name.to_string(),
            package: p.name.to_string(),
            bundle: b.name.to_string(),
            version: "1.0.0".to_string(),
            properties: b.properties.clone(),
        })
        .collect();
    for bundle in index
        .package(&package)
        .map(|p| &p.bundles[..])
        .unwrap_or_default()
    {
        let started = thread_cpu();
        let mut meter = check_meter();
        let refusal = match requirements_of(&bundle.name, &bundle.properties, &mut meter) {
            Ok(requirements) => check_dependencies_within(&requirements, &installed, &[], None, &mut meter)
                .err()
                .map(|e| format!("checking the dependencies of bundle {:?} {e}", bundle.name)),
            Err(e @ DependencyError::Exhausted { .. }) => Some(e.to_string()),
            Err(_) => None,
        };
        let cpu = thread_cpu() - started;
        println!("fuzz-check {} {}", cpu.as_nanos(), refusal.unwrap_or_default());
    }
    println!("fuzz-check-done");
}

/// catalogd serving the case's catalog: started, `/api/v1/all` and `/api/v1/metas` read whole,
/// the case's slow clients held open while its memory is read, then stopped (and reaped by
/// `wait4`).
#[allow(clippy::zombie_processes)]
fn catalogd(case: &Case, dir: &Path) -> Measured {
    let mut command = olmv1(&[
        "catalogd".into(),
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let mut child = forked(&mut command)
        .arg("--catalog")
        .arg(format!("fuzz={}", dir.display()))
        .env("RUST_LOG", "off")
        .env("OLMV1_EXIT_WITH_PARENT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run olmv1 catalogd serve");
    let mut stdout = child.stdout.take().expect("piped");
    // "serving catalogs on http://127.0.0.1:PORT/catalogs/"
    let mut announced = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        announced.push(byte[0]);
    }
    let announced = String::from_utf8_lossy(&announced).into_owned();
    let Some(address) = announced
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string)
    else {
        // It refused the catalog: its status says why.
        let (code, (cpu, rss)) = wait4(child.id());
        return Measured {
            what: "catalogd (refused the catalog)".to_string(),
            cpu,
            rss,
            output: 0,
            code: code.map(|c| c.min(2)),
            stderr: String::new(),
            stdout: String::new(),
        };
    };
    let base = "/catalogs/fuzz/api/v1";
    let mut served = 0u64;
    served += http_get(&address, &format!("{base}/all"));
    served += http_get(&address, &format!("{base}/metas?schema=olm.bundle"));
    served += http_get(&address, &format!("{base}/metas?package={}", case.package));
    // Slow clients: each asks for every bundle and reads nothing.
    let slow: Vec<TcpStream> = (0..case.slow_clients)
        .filter_map(|_| {
            let mut s = TcpStream::connect(&address).ok()?;
            let request = format!("GET {base}/metas?schema=olm.bundle HTTP/1.1\r\nHost: {address}\r\n\r\n");
            s.write_all(request.as_bytes()).ok()?;
            Some(s)
        })
        .collect();
    if !slow.is_empty() {
        // Long enough for the server to have read and queued what it will for each.
        std::thread::sleep(Duration::from_millis(500));
        served += http_get(&address, &format!("{base}/metas?package={}", case.package));
    }
    drop(slow);
    // SAFETY: kill sends a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let (code, (cpu, rss)) = wait4(child.id());
    drop(stdout);
    Measured {
        what: format!("catalogd ({} slow clients)", case.slow_clients),
        cpu,
        rss,
        output: 0,
        // Stopped by our SIGTERM: a clean stop exits 0.
        code: code.or(Some(0)).map(|c| c.min(2)),
        stderr: format!("served {served} bytes"),
        stdout: String::new(),
    }
}

/// A plain HTTP/1.1 GET read to its end (the connection closed); the bytes received.
fn http_get(address: &str, path: &str) -> u64 {
    let Ok(mut s) = TcpStream::connect(address) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    total
}

/// Runs `case` everywhere and asserts the promise on each run; the catalog's size in bytes.
pub fn check_case(family: &str, mut case: Case) -> usize {
    let kept = tempfile::Builder::new()
        .prefix(&format!("olmv1-fuzz-{family}-"))
        .tempdir()
        .expect("a temporary directory");
    let dir = kept.path().join("catalog");
    std::fs::create_dir(&dir).unwrap();
    let text = case.text();
    let size = text.len();
    let max = Scale::from_env().max_catalog_bytes();
    assert!(
        size <= max,
        "{family}: a case of {size} bytes, over the scale's {max}: its generator must fit its dimensions"
    );
    std::fs::write(dir.join("catalog.json"), &text).unwrap();
    // This process stays small: its children's peak RSS counts its own at the fork.
    drop(text);
    case.lines = Vec::new();
    trim();
    let case = &case;
    let catalog = format!("fuzz={}", dir.display());
    // Kept only when an assertion fails (the panic skips the removal at the end).
    let path = kept.keep();
    for (what, args) in commands(case, &catalog) {
        let m = run_measured(&what, &mut olmv1(&args));
        record(family, &m);
        assert_bounded(family, case, &m, &path);
    }
    let m = controller_check(case, &dir);
    record(family, &m);
    assert_bounded(family, case, &m, &path);
    for command in ["migrate check", "status"] {
        for output in ["text", "json"] {
            let m = crate::cluster::cluster_command(case, &dir, command, output);
            record(family, &m);
            assert_bounded(family, case, &m, &path);
        }
    }
    let m = catalogd(case, &dir);
    record(family, &m);
    assert_bounded(family, case, &m, &path);
    let _ = std::fs::remove_dir_all(&path);
    size
}

/// The cases of `family` (count and seed from the environment), each checked by [`check_case`].
pub fn check_family(family: &Family) {
    let cases: u32 = std::env::var("OLMV1_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let seed: u64 = std::env::var("OLMV1_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(35);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    // The family's name too: each family draws its own sequence.
    for (i, b) in family.name.bytes().enumerate() {
        bytes[8 + i % 24] ^= b;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let strategy = (family.cases)(Scale::from_env());
    let started = Instant::now();
    let mut bytes_total = 0usize;
    for _ in 0..cases {
        let case = strategy
            .new_tree(&mut runner)
            .expect("a case generated")
            .current();
        bytes_total += check_case(family.name, case);
    }
    let worst = WORST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, cpu, rss, output, runs)) = worst.iter().find(|w| w.0 == family.name) {
        println!(
            "fuzz: {} done: {cases} cases ({} KB of catalogs, seed {seed}), {runs} runs in {:.0} s; worst cpu {:.3} s, rss {} MiB, output {} B (this process: {} MiB, the floor of a child's reported RSS)",
            family.name,
            bytes_total / 1000,
            started.elapsed().as_secs_f64(),
            cpu.as_secs_f64(),
            rss >> 20,
            output,
            own_rss() >> 20
        );
    }
}
