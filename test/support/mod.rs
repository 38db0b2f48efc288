//! The harness shared by the integration tests: one real local control plane per test run.
//!
//! Include it from a test binary with
//! ```ignore
//! #[path = "support/mod.rs"]
//! mod support;
//! ```
//! and call [`env()`] for the shared environment (kube-apiserver + etcd + controller-manager +
//! scheduler + kwok + a docker-registry, with the project's CRDs installed). `hack/test.sh` starts
//! it once for the whole run and passes its env file in `OLMV1_TEST_ENV`; without that variable
//! the first call starts a private one with `hack/local-up.sh`, stopped when the test process
//! exits. When it cannot start, every test that needs it panics with the reason: nothing is skipped.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Display;
use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub mod hostile;
pub mod promql;
pub mod proxy;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Names the env file written by `hack/local-up.sh`; set by `hack/test.sh`.
pub const TEST_ENV_VAR: &str = "OLMV1_TEST_ENV";

/// `1`: the real-node tests must run (they fail when the environment has no real node), and a
/// private environment is started with a real node beside kwok (`OLMV1_NODE=kwok+real`).
pub const REAL_NODE_REQUIRED_VAR: &str = "OLMV1_E2E_REAL_NODE";

/// The taint of the real node when kwok's node is beside it (effect NoSchedule, value `true`).
pub const REAL_NODE_TAINT: &str = "olmv1.dev/real-node";

/// The label of the real node (value `true`), for nodeSelectors.
pub const REAL_NODE_LABEL: &str = "olmv1.dev/real-node";

/// Whether [`REAL_NODE_REQUIRED_VAR`] is `1`.
pub fn real_node_required() -> bool {
    std::env::var(REAL_NODE_REQUIRED_VAR).is_ok_and(|v| v == "1")
}

/// The default deadline for `wait_for` in tests: generous, because 2 busy cores are slow.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The running local control plane, as described by its env file.
#[derive(Debug, Clone)]
pub struct TestEnv {
    /// The environment directory (certificates, data, logs/, pids/).
    pub dir: PathBuf,
    /// The admin kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub api_server: String,
    /// The CA that signed the API server's serving certificate.
    pub ca_cert: PathBuf,
    /// The shared docker-registry as `127.0.0.1:<port>` (plain HTTP, delete enabled).
    pub registry: String,
    /// The directory holding kubectl, kube-apiserver, etcd, kwok, ...
    pub tools_bin: PathBuf,
    /// The kubectl built with the control plane (same version as the API server).
    pub kubectl: PathBuf,
    /// The fake Node that kwok keeps Ready (`OLMV1_KWOK_NODE`; none when only a real node runs).
    pub kwok_node: Option<String>,
    /// The real Node (kubelet + containerd, `OLMV1_REAL_NODE`), started by
    /// `OLMV1_NODE=real|kwok+real hack/local-up.sh`; with kwok beside it, it carries the taint
    /// [`REAL_NODE_TAINT`]`=true:NoSchedule` and, always, the label [`REAL_NODE_LABEL`]`=true`.
    pub real_node: Option<String>,
    /// Kubernetes version of the control plane, e.g. `v1.34.4`.
    pub kube_version: String,
    /// etcd version, e.g. `v3.6.4`.
    pub etcd_version: String,
    /// Every `export K='V'` of the env file.
    pub vars: BTreeMap<String, String>,
}

impl TestEnv {
    /// Reads an env file written by `hack/local-up.sh`.
    pub fn from_env_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the env file {}: {e}", path.display()))?;
        let vars = parse_env_file(&text);
        let get = |key: &str| {
            vars.get(key)
                .cloned()
                .ok_or_else(|| format!("the env file {} has no {key}", path.display()))
        };
        Ok(Self {
            dir: get("OLMV1_ENV_DIR")?.into(),
            kubeconfig: get("KUBECONFIG")?.into(),
            api_server: get("OLMV1_API_SERVER")?,
            ca_cert: get("OLMV1_CA_CERT")?.into(),
            registry: get("OLMV1_REGISTRY")?,
            tools_bin: get("OLMV1_TOOLS_BIN")?.into(),
            kubectl: get("OLMV1_KUBECTL")?.into(),
            kwok_node: vars.get("OLMV1_KWOK_NODE").cloned(),
            real_node: vars.get("OLMV1_REAL_NODE").cloned(),
            kube_version: get("OLMV1_KUBE_VERSION")?,
            etcd_version: get("OLMV1_ETCD_VERSION")?,
            vars,
        })
    }

    /// The admin client configuration (from the env's kubeconfig).
    pub async fn config(&self) -> kube::Config {
        olmv1::tls_profile::install_default_provider();
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", self.kubeconfig.display()));
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", self.kubeconfig.display()))
    }

    /// A new admin client. A `kube::Client` belongs to the tokio runtime it was made on, and each
    /// `#[tokio::test]` has its own, so make one per test rather than sharing one.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("admin kube client")
    }

    /// `http://<registry>`.
    pub fn registry_url(&self) -> String {
        format!("http://{}", self.registry)
    }

    /// A command for PROGRAM with `KUBECONFIG` and `OLMV1_REGISTRY` set to this environment.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("OLMV1_REGISTRY", &self.registry);
        cmd
    }
}

/// Parses the `export K='V'` lines of an env file (single-quoted values; `'\''` is a quote).
/// Lines whose value is not a single-quoted string (e.g. the PATH line) are left out.
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let Some(assignment) = line.trim().strip_prefix("export ") else {
            continue;
        };
        let Some((key, raw)) = assignment.split_once('=') else {
            continue;
        };
        if let Some(value) = unquote_single(raw) {
            vars.insert(key.to_string(), value);
        }
    }
    vars
}

/// `'a'\''b'` -> `a'b`; None when RAW is anything else.
fn unquote_single(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = raw;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("\\'") {
            out.push('\'');
            rest = after;
        } else if let Some(after) = rest.strip_prefix('\'') {
            let end = after.find('\'')?;
            out.push_str(&after[..end]);
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// The repository root (where Cargo.toml, hack/ and charts/ are).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The objects of install manifest VARIANT (`default`, `openshift` or `controller-identity`):
/// `hack/manifest.sh` with a placeholder image, so the chart (charts/olmv1) is their one source.
/// Rendered once per variant and test process.
pub fn install_manifest(variant: &str) -> Vec<serde_json::Value> {
    install_manifest_with(variant, &[])
}

/// [`install_manifest`] with more chart values (`hack/manifest.sh`'s HELM_ARGS, e.g.
/// `--set operatorConditions=install`).
pub fn install_manifest_with(variant: &str, values: &[&str]) -> Vec<serde_json::Value> {
    static RENDERED: std::sync::Mutex<BTreeMap<String, Vec<serde_json::Value>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut rendered = RENDERED.lock().unwrap_or_else(|e| e.into_inner());
    rendered
        .entry(format!("{variant} {}", values.join(" ")))
        .or_insert_with(|| {
            let image = format!("olmv1.invalid/olmv1@sha256:{}", "0".repeat(64));
            let out = run(Command::new(repo_root().join("hack/manifest.sh"))
                .args([&image, variant])
                .args(values));
            let stream = out.ok();
            let mut objects = Vec::new();
            for document in stream.split("\n---\n") {
                let object: serde_json::Value = serde_saphyr::from_str(document)
                    .unwrap_or_else(|e| panic!("hack/manifest.sh {variant}: not YAML ({e}):\n{document}"));
                objects.push(object);
            }
            objects
        })
        .clone()
}

/// The Namespace and every RBAC object (ServiceAccounts, roles, bindings) of install manifest
/// VARIANT with chart `values` (see [`install_manifest_with`]): the identities the components
/// run with.
pub fn install_manifest_rbac(variant: &str, values: &[&str]) -> Vec<serde_json::Value> {
    install_manifest_with(variant, values)
        .into_iter()
        .filter(|object| {
            matches!(
                object["kind"].as_str(),
                Some(
                    "Namespace"
                        | "ServiceAccount"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "Role"
                        | "RoleBinding"
                )
            )
        })
        .collect()
}

/// The `olmv1` binary built for this test run (cargo names it to tests and benches; the interop
/// example, which does not start it, falls back to the debug build).
pub fn olmv1_bin() -> PathBuf {
    option_env!("CARGO_BIN_EXE_olmv1")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/debug/olmv1"))
}

static ENV: OnceLock<Result<TestEnv, String>> = OnceLock::new();

/// The shared environment: from `OLMV1_TEST_ENV`, or started once for this test process.
/// Panics with the reason when it cannot be had (every later call panics with the same reason).
#[track_caller]
pub fn env() -> &'static TestEnv {
    match ENV.get_or_init(load_or_start) {
        Ok(env) => env,
        Err(reason) => panic!("the local control plane is not available: {reason}"),
    }
}

/// A new admin client for the shared environment.
pub async fn client() -> kube::Client {
    env().client().await
}

/// The shared registry as `127.0.0.1:<port>`.
#[track_caller]
pub fn registry() -> &'static str {
    &env().registry
}

fn load_or_start() -> Result<TestEnv, String> {
    match std::env::var_os(TEST_ENV_VAR) {
        Some(path) if !path.is_empty() => TestEnv::from_env_file(Path::new(&path))
            .map_err(|e| format!("{TEST_ENV_VAR} is set but unusable: {e}")),
        _ => start_private_env(),
    }
}

/// Runs hack/local-up.sh in a new temp dir, with a watchdog that runs hack/local-down.sh when this
/// process exits (however it exits).
fn start_private_env() -> Result<TestEnv, String> {
    let root = repo_root();
    let dir = std::env::temp_dir().join(format!("olmv1-test-env-{}-{}", std::process::id(), rand_suffix()));
    let down = root.join("hack/local-down.sh");
    // The watchdog is started first so that even a start-up cut short is cleaned up. `setsid`
    // keeps it out of the terminal's process group: a Ctrl-C of the tests does not kill it.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         if [ \"${{OLMV1_KEEP_ENV:-}}\" = 1 ]; then exec \"$0\" --keep \"$1\"; else exec \"$0\" \"$1\"; fi",
        pid = std::process::id()
    );
    Command::new("setsid")
        .arg("sh")
        .arg("-c")
        .arg(watchdog)
        .arg(&down)
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the clean-up watchdog (setsid sh): {e}"))?;
    eprintln!(
        "support: {TEST_ENV_VAR} is not set; starting a local control plane in {} (hack/test.sh shares one)",
        dir.display()
    );
    let mut up = Command::new(root.join("hack/local-up.sh"));
    up.env("OLMV1_ENV_DIR", &dir).env("OLMV1_BIN", olmv1_bin());
    if real_node_required() && std::env::var_os("OLMV1_NODE").is_none() {
        up.env("OLMV1_NODE", "kwok+real");
    }
    let output = up
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run hack/local-up.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "hack/local-up.sh failed ({}); its output is above; the logs of each part are in {}/logs (removed when this process exits unless OLMV1_KEEP_ENV=1)",
            output.status,
            dir.display()
        ));
    }
    let env_file = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    TestEnv::from_env_file(Path::new(&env_file))
}

fn rand_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

static NAME_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name no other test of this run uses: `<prefix>-<random>-<n>`, a valid DNS-1123 label.
/// PREFIX should be lowercase alphanumerics and '-'; it is cut to keep the name within 63 chars.
pub fn fresh_name(prefix: &str) -> String {
    let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed);
    let prefix: String = prefix.chars().take(45).collect();
    format!("{prefix}-{:06x}-{n}", rand::random::<u32>() & 0xff_ffff)
}

/// Creates a namespace with a fresh name and returns the name. It is not deleted: the whole
/// environment goes at the end of the run.
pub async fn fresh_namespace(client: &kube::Client, prefix: &str) -> String {
    let name = fresh_name(prefix);
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([("olmv1.test/fresh".to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
    name
}

/// Polls CHECK until it returns `Ok`, for at most TIMEOUT, and returns its value. CHECK returns
/// `Err(what it saw)` while the condition does not hold; the last one is in the panic message,
/// with the caller's file and line.
#[track_caller]
pub fn wait_for<T, E, F, Fut>(what: &str, timeout: Duration, check: F) -> impl Future<Output = T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    poll_until(
        std::panic::Location::caller(),
        what.to_string(),
        timeout,
        Duration::from_millis(100),
        check,
    )
}

/// [`wait_for`] with a given poll interval.
#[track_caller]
pub fn wait_for_every<T, E, F, Fut>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    check: F,
) -> impl Future<Output = T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    poll_until(
        std::panic::Location::caller(),
        what.to_string(),
        timeout,
        poll,
        check,
    )
}

async fn poll_until<T, E, F, Fut>(
    caller: &'static std::panic::Location<'static>,
    what: String,
    timeout: Duration,
    poll: Duration,
    mut check: F,
) -> T
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(seen) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what} (at {caller}); last seen: {seen}")
            }
            Err(_) => tokio::time::sleep(poll).await,
        }
    }
}

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct CmdOutput {
    /// The command line, for messages.
    pub command: String,
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CmdOutput {
    fn from_output(command: String, output: Output) -> Self {
        Self {
            command,
            success: output.status.success(),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The stdout of a command that succeeded; panics with its stderr otherwise.
    #[track_caller]
    pub fn ok(self) -> String {
        assert!(
            self.success,
            "`{}` failed ({:?}):\nstdout: {}\nstderr: {}",
            self.command, self.code, self.stdout, self.stderr
        );
        self.stdout
    }

    /// The stderr of a command that failed; panics when it succeeded.
    #[track_caller]
    pub fn err(self) -> String {
        assert!(
            !self.success,
            "`{}` succeeded but should have failed:\nstdout: {}",
            self.command, self.stdout
        );
        self.stderr
    }
}

/// Runs the environment's kubectl with ARGS (as admin). Blocking; fine for short commands.
pub fn kubectl(args: &[&str]) -> CmdOutput {
    kubectl_with_stdin(args, "")
}

/// Waits, within 90 s, until each CRD (`crd/NAME`) is Established. `kubectl wait` alone fails at
/// once when it reads a CRD whose `status.conditions` is still null, a moment after its creation.
#[track_caller]
pub fn wait_crds_established(crds: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend_from_slice(crds);
    loop {
        let out = kubectl(&args);
        if out.success {
            return;
        }
        let not_yet = out.stderr.contains("accessor error");
        if !not_yet || Instant::now() > deadline {
            out.ok();
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs kubectl with ARGS and STDIN as its standard input (e.g. `apply -f -`).
pub fn kubectl_with_stdin(args: &[&str], stdin: &str) -> CmdOutput {
    run_with_stdin(env().command(&env().kubectl).args(args), stdin)
}

/// `kubectl apply -f -` of YAML.
pub fn kubectl_apply(yaml: &str) -> CmdOutput {
    kubectl_with_stdin(&["apply", "-f", "-"], yaml)
}

/// Runs CMD, feeding STDIN, and collects its output.
pub fn run_with_stdin(cmd: &mut Command, stdin: &str) -> CmdOutput {
    use std::io::Write;
    let command = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
    let mut input = child.stdin.take().expect("piped stdin");
    let data = stdin.as_bytes().to_vec();
    // Written from a thread so a child that prints a lot before reading cannot deadlock us.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("cannot wait for {command}: {e}"));
    let _ = writer.join();
    CmdOutput::from_output(command, output)
}

/// Runs CMD with no input and collects its output.
pub fn run(cmd: &mut Command) -> CmdOutput {
    run_with_stdin(cmd, "")
}

// ---------------------------------------------------------------------------------------------
// Extra registries

/// How to configure an extra docker-registry started by [`start_registry`].
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Basic auth with this htpasswd file (bcrypt entries; see [`htpasswd_file`]).
    pub htpasswd: Option<PathBuf>,
    /// Serve HTTPS with this certificate and key (see [`TestTls::generate`]).
    pub tls: Option<TlsFiles>,
    /// Bearer-token auth (distribution's `auth.token`), e.g. against a token server in the test.
    pub token: Option<TokenAuth>,
    /// The address to listen on instead of 127.0.0.1 (e.g. [`host_address`]).
    pub host: Option<String>,
}

/// A certificate and its private key (PEM files).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// distribution's `auth.token` settings.
#[derive(Debug, Clone)]
pub struct TokenAuth {
    /// The token endpoint URL clients are sent to (the `realm` of the challenge).
    pub realm: String,
    pub service: String,
    pub issuer: String,
    /// PEM certificate(s) whose keys sign the tokens.
    pub root_cert_bundle: PathBuf,
}

/// A docker-registry process; killed (and its storage removed) on drop.
#[derive(Debug)]
pub struct RegistryProcess {
    /// `127.0.0.1:<port>`.
    pub host_port: String,
    /// `http://...` or `https://...`.
    pub url: String,
    /// Its storage and log directory.
    pub dir: tempfile::TempDir,
    child: Child,
}

impl RegistryProcess {
    /// What the registry logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Kills the registry, keeping its storage: it is unreachable until [`Self::restart`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the registry again on the same port with the same storage, and waits until it
    /// accepts connections.
    pub fn restart(&mut self) {
        self.child = spawn_registry(self.dir.path());
        let addr: SocketAddr = self.host_port.parse().expect("socket address");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline && self.child.try_wait().ok().flatten().is_none(),
                "docker-registry did not listen again on {}:\n{}",
                self.host_port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs docker-registry with the `config.yml` in `dir`, appending to `dir/registry.log`.
fn spawn_registry(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("registry.log"))
        .expect("registry log");
    Command::new("docker-registry")
        .arg("serve")
        .arg(dir.join("config.yml"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run docker-registry (install it: hack/install-deps.sh): {e}"))
}

impl Drop for RegistryProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a docker-registry on a free loopback port with OPTIONS and waits until it accepts
/// connections. Panics with the reason (and its log) when it cannot start.
pub fn start_registry(options: &RegistryOptions) -> RegistryProcess {
    let mut last_log = String::new();
    for _attempt in 0..3 {
        let dir = tempfile::Builder::new()
            .prefix("olmv1-registry-")
            .tempdir()
            .expect("temp dir");
        let port = free_port();
        let host_port = format!("{}:{port}", options.host.as_deref().unwrap_or("127.0.0.1"));
        let config = registry_config(dir.path(), &host_port, options);
        std::fs::write(dir.path().join("config.yml"), config).expect("write registry config");
        let child = spawn_registry(dir.path());
        let scheme = if options.tls.is_some() { "https" } else { "http" };
        let mut registry = RegistryProcess {
            url: format!("{scheme}://{host_port}"),
            host_port,
            dir,
            child,
        };
        let addr: SocketAddr = registry.host_port.parse().expect("socket address");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return registry;
            }
            if let Ok(Some(status)) = registry.child.try_wait() {
                last_log = registry.log();
                if last_log.contains("address already in use") {
                    break; // another process took the port: try another one
                }
                panic!("docker-registry exited ({status}) at start-up:\n{last_log}");
            }
            if Instant::now() >= deadline {
                panic!(
                    "docker-registry did not listen on {} within 30s:\n{}",
                    registry.host_port,
                    registry.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("docker-registry could not get a free port in 3 attempts:\n{last_log}")
}

fn registry_config(dir: &Path, host_port: &str, options: &RegistryOptions) -> String {
    let mut config = format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {root}\n  delete:\n    enabled: true\nhttp:\n  addr: {host_port}\n",
        root = dir.join("storage").display()
    );
    if let Some(tls) = &options.tls {
        config.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            tls.cert.display(),
            tls.key.display()
        ));
    }
    if let Some(htpasswd) = &options.htpasswd {
        config.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: olmv1-test\n    path: {}\n",
            htpasswd.display()
        ));
    } else if let Some(token) = &options.token {
        config.push_str(&format!(
            "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
            token.realm,
            token.service,
            token.issuer,
            token.root_cert_bundle.display()
        ));
    }
    config
}

/// This machine's first non-loopback IPv4 address (`hostname -I`): a host that is not loopback,
/// for what must behave as for a remote one (an egress proxy never proxies loopback). Panics
/// when the machine has none.
pub fn host_address() -> String {
    let out = run(Command::new("hostname").arg("-I")).ok();
    out.split_whitespace()
        .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| !ip.is_loopback()))
        .unwrap_or_else(|| panic!("this machine has no non-loopback IPv4 address (hostname -I: {out:?})"))
        .to_string()
}

/// A free loopback port (bound, read, released; a rare clash is retried by the callers).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// Writes DIR/htpasswd with one bcrypt entry for USER:PASSWORD (the only hash docker-registry
/// accepts), using `htpasswd` from apache2-utils.
pub fn htpasswd_file(dir: &Path, user: &str, password: &str) -> PathBuf {
    let out = run(Command::new("htpasswd").args(["-B", "-b", "-n", user, password])).ok();
    let path = dir.join("htpasswd");
    std::fs::write(&path, out.trim_end().to_string() + "\n").expect("write htpasswd");
    path
}

/// A test CA and a serving certificate for 127.0.0.1 and localhost signed by it.
#[derive(Debug, Clone)]
pub struct TestTls {
    /// The CA certificate clients must trust.
    pub ca_cert: PathBuf,
    /// The serving certificate and key.
    pub serving: TlsFiles,
}

impl TestTls {
    /// Generates the CA and serving certificate in DIR with openssl.
    pub fn generate(dir: &Path) -> TestTls {
        Self::generate_for(dir, &[])
    }

    /// [`TestTls::generate`], the certificate also valid for `ips`.
    pub fn generate_for(dir: &Path, ips: &[&str]) -> TestTls {
        let p = |name: &str| dir.join(name);
        let openssl = |args: &[&str]| {
            run(Command::new("openssl").args(args)).ok();
        };
        let s = |path: &PathBuf| path.to_str().expect("utf-8 temp path").to_string();
        let (ca_key, ca_cert, key, csr, cert, ext) = (
            p("ca.key"),
            p("ca.crt"),
            p("tls.key"),
            p("tls.csr"),
            p("tls.crt"),
            p("tls.ext"),
        );
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "365",
            "-keyout",
            &s(&ca_key),
            "-out",
            &s(&ca_cert),
            "-subj",
            "/CN=olmv1-test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        let extra: String = ips.iter().map(|ip| format!(",IP:{ip}")).collect();
        std::fs::write(
            &ext,
            format!(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
                 extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost{extra}\n"
            ),
        )
        .expect("write tls.ext");
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &s(&key),
            "-out",
            &s(&csr),
            "-subj",
            "/CN=127.0.0.1",
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &s(&csr),
            "-CA",
            &s(&ca_cert),
            "-CAkey",
            &s(&ca_key),
            "-CAcreateserial",
            "-days",
            "365",
            "-extfile",
            &s(&ext),
            "-out",
            &s(&cert),
        ]);
        TestTls {
            ca_cert,
            serving: TlsFiles { cert, key },
        }
    }
}

/// Writes a kubeconfig that authenticates as `namespace/account` with a TokenRequest token (24 h)
/// to `path`, for running a component with its own least-privilege identity.
pub fn service_account_kubeconfig(namespace: &str, account: &str, path: &Path) -> PathBuf {
    let env = env();
    let token = kubectl(&["-n", namespace, "create", "token", account, "--duration=24h"]).ok();
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "default",
        "clusters": [{"name": "local", "cluster": {"server": env.api_server, "certificate-authority": env.ca_cert}}],
        "users": [{"name": account, "user": {"token": token.trim()}}],
        "contexts": [{"name": "default", "context": {"cluster": "local", "user": account}}]
    });
    std::fs::write(path, kubeconfig.to_string())
        .unwrap_or_else(|e| panic!("cannot write kubeconfig {}: {e}", path.display()));
    path.to_path_buf()
}

/// The environment's authenticating registry (hack/local-up.sh's htpasswd docker-registry):
/// `(host:port, user, password)`. A test needing it fails when the environment has none.
pub fn auth_registry() -> (String, String, String) {
    let vars = &env().vars;
    let get = |key: &str| {
        vars.get(key).cloned().unwrap_or_else(|| {
            panic!("the environment has no {key}: hack/local-up.sh starts the authenticating registry")
        })
    };
    (
        get("OLMV1_AUTH_REGISTRY"),
        get("OLMV1_AUTH_REGISTRY_USER"),
        get("OLMV1_AUTH_REGISTRY_PASSWORD"),
    )
}

/// The real OpenShift CRDs (ClusterOperator, ClusterVersion, OLM) in `../shared/openshift-api/`,
/// copied unchanged from openshift/api; a test needing them fails when they are missing.
pub fn openshift_crd_files() -> Vec<PathBuf> {
    let root = repo_root().join("../shared/openshift-api");
    let files: Vec<PathBuf> = [
        "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
        "0000_10_operator-lifecycle-manager_01_olms.crd.yaml",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    for f in &files {
        assert!(
            f.is_file(),
            "OpenShift CRD not found at {f:?} (see ../shared/openshift-api/README.md)"
        );
    }
    files
}

/// A ClusterVersion `status` the real CRD accepts (it requires `availableUpdates`, `desired`,
/// `observedGeneration` and `versionHash`), desiring `version`.
pub fn cluster_version_status(version: &str) -> serde_json::Value {
    serde_json::json!({"status": {
        "desired": {"version": version, "image": "example.com/release@sha256:0000"},
        "availableUpdates": [],
        "observedGeneration": 1,
        "versionHash": "test",
    }})
}

/// The shared real catalogs (`../shared/catalogs`); a test that needs them fails when they are
/// missing.
pub fn shared_catalogs_root() -> PathBuf {
    let root = repo_root().join("../shared/catalogs");
    assert!(
        root.is_dir(),
        "real catalogs not found at {root:?} (see ../shared/catalogs/README.md)"
    );
    root
}

/// What a test does with its snapshot files. Tests compare; only the ignored `write_snapshots`
/// test of each binary writes, run by the explicit command `hack/update-snapshots.sh`, so no
/// environment setting can turn a comparing test into one that rewrites its expectations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshots {
    /// Compare with the committed file; a missing or different file is an error.
    Compare,
    /// Write the file (hack/update-snapshots.sh only).
    Write,
}

impl Snapshots {
    /// Compares `actual` with the file at `path`, or writes it; the error names the file and
    /// the first differing line.
    pub fn check(self, path: &Path, actual: &str) -> Result<(), String> {
        if self == Snapshots::Write {
            std::fs::create_dir_all(path.parent().expect("a snapshot file has a directory"))
                .and_then(|()| std::fs::write(path, actual))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            return Ok(());
        }
        let expected = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "{}: {e} (create it with hack/update-snapshots.sh, then review it)",
                path.display()
            )
        })?;
        if expected == actual {
            return Ok(());
        }
        let first = expected
            .lines()
            .zip(actual.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| format!("line {}:\n  snapshot: {a}\n  actual:   {b}", i + 1))
            .unwrap_or_else(|| "the end (one is a prefix of the other)".into());
        Err(format!(
            "{} differs ({} vs {} lines), first difference at {first}\n\
             (if the change is intended: hack/update-snapshots.sh, then review the diff)",
            path.display(),
            expected.lines().count(),
            actual.lines().count()
        ))
    }
}

/// A bundle of a real catalog that carries its manifests in `olm.bundle.object` properties.
pub struct CatalogBundle {
    /// Catalog folder name, e.g. `community-operators-v4.16`.
    pub catalog: String,
    /// The bundle's package.
    pub package: String,
    /// The bundle's name.
    pub name: String,
    /// Its properties (manifests included).
    pub properties: Vec<olmv1::catalog::Property>,
}

impl CatalogBundle {
    /// The decoded manifests, in property order.
    pub fn manifests(&self) -> Vec<Vec<u8>> {
        use base64::Engine as _;
        self.properties
            .iter()
            .filter(|p| &*p.type_ == "olm.bundle.object")
            .map(|p| {
                let value = p.value.to_value();
                let data = value
                    .get("data")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_else(|e| panic!("{}: olm.bundle.object is not base64: {e}", self.name))
            })
            .collect()
    }

    /// Writes the bundle as a registry+v1 directory: `manifests/` and `metadata/annotations.yaml`.
    pub fn write_dir(&self, dir: &Path) {
        std::fs::create_dir_all(dir.join("manifests")).unwrap();
        std::fs::create_dir_all(dir.join("metadata")).unwrap();
        std::fs::write(
            dir.join("metadata/annotations.yaml"),
            format!(
                "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  \
                 operators.operatorframework.io.bundle.package.v1: {}\n",
                self.package
            ),
        )
        .unwrap();
        for (i, manifest) in self.manifests().iter().enumerate() {
            std::fs::write(dir.join(format!("manifests/{i:03}.json")), manifest).unwrap();
        }
    }
}

/// Every bundle carrying `olm.bundle.object` under `dir` (a catalog, or one package of it), read
/// with the project's FBC reader; `catalog` names the catalog they come from.
pub fn read_catalog_bundles(dir: &Path, catalog: &str) -> Vec<CatalogBundle> {
    let mut out = Vec::new();
    olmv1::catalog::for_each_dir_meta(dir, |meta| {
        if &*meta.schema != olmv1::catalog::SCHEMA_BUNDLE {
            return Ok(());
        }
        let bundle: olmv1::catalog::Bundle = serde_json::from_slice(&meta.blob).expect("olm.bundle parses");
        if bundle.properties.iter().any(|p| &*p.type_ == "olm.bundle.object") {
            out.push(CatalogBundle {
                catalog: catalog.to_string(),
                package: bundle.package,
                name: bundle.name,
                properties: bundle.properties,
            });
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("reading {dir:?}: {e}"));
    out
}

/// Every such bundle of the `*-v4.16` shared catalogs, catalog by catalog.
pub fn read_v4_16_bundles() -> Vec<CatalogBundle> {
    let root = shared_catalogs_root();
    let mut catalogs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("list catalogs")
        .map(|e| e.expect("catalog entry").path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with("-v4.16"))
        })
        .collect();
    catalogs.sort();
    assert!(!catalogs.is_empty(), "no *-v4.16 catalogs under {root:?}");
    let bundles: Vec<CatalogBundle> = catalogs
        .iter()
        .flat_map(|dir| read_catalog_bundles(dir, &dir.file_name().unwrap().to_string_lossy()))
        .collect();
    // The two catalogs hold 600; far fewer means they were not all read, and every test looping
    // over them would pass on too little.
    assert!(
        bundles.len() >= MIN_V4_16_BUNDLES,
        "only {} bundles with manifests under {root:?} (expected at least {MIN_V4_16_BUNDLES})",
        bundles.len()
    );
    bundles
}

/// The fewest `olm.bundle.object` bundles the `*-v4.16` shared catalogs may yield.
pub const MIN_V4_16_BUNDLES: usize = 550;

/// Requests the API server dispatched for service accounts (flow schema `service-accounts`): the
/// control plane's own components act with certificates, so these are the products'.
pub async fn service_account_requests(client: &kube::Client) -> u64 {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_flowcontrol_dispatched_requests_total{"))
        .filter(|l| l.contains("flow_schema=\"service-accounts\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A small tmpfs mounted on a directory for one test (unmounted when dropped): `read-only` makes
/// a directory no process can write, even as root; a `size` makes one that fills up. Mounting
/// needs root (or `sudo -n`, as hack/deploy-test.sh): without it the test fails with the reason.
pub struct TmpfsMount {
    path: PathBuf,
}

fn as_root(args: &[&str]) -> Command {
    let root = run(Command::new("id").arg("-u")).ok().trim() == "0";
    let mut command = if root {
        Command::new(args[0])
    } else {
        let mut sudo = Command::new("sudo");
        sudo.args(["-n", args[0]]);
        sudo
    };
    command.args(&args[1..]);
    command
}

impl TmpfsMount {
    /// Mounts a tmpfs with `options` (e.g. `ro,size=1m` or `size=256k`) on `path` (created).
    pub fn new(path: &Path, options: &str) -> TmpfsMount {
        std::fs::create_dir_all(path).unwrap();
        let out = run(&mut as_root(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            options,
            "tmpfs",
            path.to_str().unwrap(),
        ]));
        assert!(
            out.success,
            "this test mounts a tmpfs on {} ({options}) and needs root or sudo -n for it: {}",
            path.display(),
            out.stderr
        );
        TmpfsMount {
            path: path.to_path_buf(),
        }
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = run(&mut as_root(&["umount", "-l", self.path.to_str().unwrap()]));
    }
}
