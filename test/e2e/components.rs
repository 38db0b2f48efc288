//! The product's processes for end-to-end tests: `olmv1 catalogd` and `olmv1 controller`, run
//! once per test process against the shared local control plane, and helpers to drive them.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Mutex, OnceLock},
    time::Duration,
};

use k8s_openapi::{
    api::{
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::Condition,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::json;

use crate::{fixtures::scratch_dir, support};

/// The system namespace the controller keeps its records in.
pub const SYSTEM_NAMESPACE: &str = "olmv1-system";

/// How long an install may take on 2 busy cores (pull, apply, scheduler, kwok).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Tests share the cluster; the kube-apiserver restart test takes it exclusively.
static CLUSTER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A test's hold on the cluster, for its whole life.
pub enum ClusterShare {
    /// Alongside other tests.
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'static, ()>),
    /// Alone: no other test runs meanwhile.
    Exclusive(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'static, ()>),
}

/// A share of the cluster alongside other tests.
pub async fn shared_cluster() -> ClusterShare {
    ClusterShare::Shared(CLUSTER.read().await)
}

/// The cluster alone, for tests that disturb it.
pub async fn exclusive_cluster() -> ClusterShare {
    ClusterShare::Exclusive(CLUSTER.write().await)
}

/// Restarts kube-apiserver with the command line it runs with and waits for it to be ready
/// again. Only for a test holding [`exclusive_cluster`].
pub async fn restart_api_server(share: &ClusterShare) {
    assert!(
        matches!(share, ClusterShare::Exclusive(_)),
        "restarting kube-apiserver needs the cluster alone"
    );
    let env = support::env();
    let pid_file = env.dir.join("pids/kube-apiserver.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    // SIGTERM first; kube-apiserver's graceful shutdown can wait long on open watches, so a
    // crash-like SIGKILL follows after a few seconds.
    assert!(Command::new("kill").arg(&pid).status().unwrap().success());
    let exited = |pid: &str| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Its parent is gone, so nobody may reap it: a zombie has exited too.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .trim_start()
            .starts_with('Z'),
        Err(_) => true,
    };
    for _ in 0..50 {
        if exited(&pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !exited(&pid) {
        Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    }
    support::wait_for(
        "the old kube-apiserver to exit",
        Duration::from_secs(30),
        || async { if exited(&pid) { Ok(()) } else { Err("running") } },
    )
    .await;
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(env.dir.join("logs/kube-apiserver.log"))
        .unwrap();
    let child = Command::new("setsid")
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("restart kube-apiserver");
    // setsid execs the server in place: the pid is the server's, for local-down.sh.
    std::fs::write(&pid_file, child.id().to_string()).unwrap();
    // Reaped when hack/local-down.sh stops it at the end of the run.
    std::thread::spawn(move || {
        let mut child = child;
        child.wait().ok();
    });
    support::wait_for_every(
        "kube-apiserver to be ready again",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || async {
            let out = support::kubectl(&["get", "--raw", "/readyz"]);
            if out.success {
                Ok(())
            } else {
                Err(out.stderr.clone())
            }
        },
    )
    .await;
}

/// cert-manager's informers back off (up to 30 s) while kube-apiserver is away and see nothing
/// written until their next list: a Secret made in that window is missing to cert-manager, which
/// then issues a new certificate over it (a migration test that followed a restart saw classic's
/// serving certificate replaced). Restarted, cert-manager lists all it watches before its
/// controllers run. Called, after a kube-apiserver restart, by the test that holds the cluster
/// alone, before it lets the others in. Nothing when cert-manager is not applied yet (its first
/// start lists everything).
pub async fn restart_cert_manager() {
    const NS: &str = "cert-manager";
    let deployments = ["cert-manager", "cert-manager-cainjector", "cert-manager-webhook"];
    if !support::kubectl(&["-n", NS, "get", "deployment", deployments[0]]).success {
        return;
    }
    for d in deployments {
        let out = support::kubectl(&["-n", NS, "rollout", "restart", &format!("deployment/{d}")]);
        assert!(out.success, "restarting {d}: {}", out.stderr);
    }
    for d in deployments {
        let out = support::kubectl(&[
            "-n",
            NS,
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=180s",
        ]);
        assert!(out.success, "{d} after its restart: {}", out.stderr);
    }
    // The controller's pod alone (the old one gone), its caches filled.
    support::wait_for(
        "cert-manager's new controller to list what it watches",
        Duration::from_secs(120),
        || async {
            let pods = support::kubectl(&[
                "-n",
                NS,
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/instance=cert-manager,app.kubernetes.io/component=controller",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ]);
            let pods: Vec<&str> = pods.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
            let [pod] = pods[..] else {
                return Err(format!("controller pods: {pods:?}"));
            };
            let pod = pod.trim();
            if pod.contains(' ') {
                return Err(format!("{pod} is terminating"));
            }
            let logs = support::kubectl(&["-n", NS, "logs", pod]).stdout;
            let missing: Vec<&str> = [
                "*v1.Secret",
                "*v1.Certificate",
                "*v1.CertificateRequest",
                "*v1.Issuer",
            ]
            .into_iter()
            .filter(|kind| !logs.contains(&format!("\"Caches populated\" type=\"{kind}\"")))
            .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{pod}: caches not populated yet: {missing:?}"))
            }
        },
    )
    .await;
}

struct Components {
    catalogd: Mutex<Option<Child>>,
    controller: Mutex<Option<Child>>,
    /// The shared controller's arguments beyond [`controller_args`]'s (each restart reuses them).
    controller_extra: &'static [&'static str],
    /// Where catalogd serves catalogs.
    catalogd_address: String,
    /// Where catalogd and the controller serve `/metrics` and their probes.
    catalogd_operations: Operations,
    controller_operations: Operations,
    /// The controller's metrics certificate, and the CA that signed it.
    metrics_tls: support::TestTls,
}

/// The addresses (`host:port`) of a component's metrics and probe servers.
#[derive(Clone)]
pub struct Operations {
    /// `/metrics`.
    pub metrics: String,
    /// `/healthz` and `/readyz`.
    pub probes: String,
}

impl Operations {
    fn free() -> Self {
        Self {
            metrics: format!("127.0.0.1:{}", support::free_port()),
            probes: format!("127.0.0.1:{}", support::free_port()),
        }
    }

    /// Ports the system picks (nothing reads them).
    pub fn unread() -> Self {
        Self {
            metrics: "127.0.0.1:0".into(),
            probes: "127.0.0.1:0".into(),
        }
    }

    pub fn args(&self) -> [&str; 4] {
        [
            "--metrics-bind-address",
            &self.metrics,
            "--health-probe-bind-address",
            &self.probes,
        ]
    }
}

static COMPONENTS: OnceLock<Components> = OnceLock::new();

/// The shared controller of the end-to-end tests keeps OLM classic's OperatorConditions, as it
/// does by default wherever classic's CRD is served (OpenShift): it installs the CRD when absent
/// (the chart's `operatorConditions: install`), so that every test process sees the same.
pub const OPERATOR_CONDITIONS_ON: &[&str] = &["--operator-conditions", "install"];

/// Starts catalogd and the controller once for this test process (the controller with
/// [`OPERATOR_CONDITIONS_ON`]).
pub fn ensure_running() {
    ensure_running_with(OPERATOR_CONDITIONS_ON);
}

/// [`ensure_running`] with `controller_extra` as the shared controller's extra arguments; the
/// first call of the process decides.
pub fn ensure_running_with(controller_extra: &'static [&'static str]) {
    COMPONENTS.get_or_init(|| {
        support::kubectl_apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SYSTEM_NAMESPACE}\n"
        ))
        .ok();
        // The OpenShift config API, so that the controller's Upgradeable gating is active from
        // the start (it looks for the API only now and then while it is absent).
        for path in support::openshift_crd_files() {
            support::kubectl(&["apply", "--server-side", "-f", path.to_str().unwrap()]).ok();
        }
        support::wait_crds_established(&[
            "crd/clusterversions.config.openshift.io",
            "crd/clusteroperators.config.openshift.io",
        ]);
        // The components run with the identities and RBAC of the default install manifest (the
        // chart; with operatorConditions=install when the controller installs classic's CRD):
        // the tests prove that the least privilege written there is enough.
        let values: &[&str] = if controller_extra == OPERATOR_CONDITIONS_ON {
            &["--set", "operatorConditions=install"]
        } else {
            &[]
        };
        let rbac = support::install_manifest_rbac("default", values);
        support::kubectl_apply(&json!({"apiVersion": "v1", "kind": "List", "items": rbac}).to_string()).ok();
        let catalogd_address = format!("127.0.0.1:{}", support::free_port());
        // catalogd serves catalogs in plain HTTP here, and so its metrics (on loopback); the
        // controller serves its metrics over HTTPS to callers allowed get /metrics, as installed.
        let catalogd_operations = Operations::free();
        let catalogd = spawn_catalogd("catalogd", &catalogd_address, &catalogd_operations, &[]);
        let metrics_tls = support::TestTls::generate(&scratch_dir("metrics-tls"));
        let controller_operations = Operations::free();
        let controller = spawn_controller(
            "controller",
            &controller_operations,
            &metrics_tls,
            controller_extra,
        );
        if controller_extra == OPERATOR_CONDITIONS_ON {
            // Created by the controller as it starts (or there already).
            let crd = "crd/operatorconditions.operators.coreos.com";
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while !support::kubectl(&["get", crd]).success {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the controller did not install {crd} (see logs/controller.log)"
                );
                std::thread::sleep(Duration::from_millis(250));
            }
            support::wait_crds_established(&[crd]);
        }
        Components {
            catalogd: Mutex::new(Some(catalogd)),
            controller: Mutex::new(Some(controller)),
            controller_extra,
            catalogd_address,
            catalogd_operations,
            controller_operations,
            metrics_tls,
        }
    });
}

/// Starts `olmv1 catalogd` serving at `address`, its log in `logs/<name>.log`.
fn spawn_catalogd(name: &str, address: &str, operations: &Operations, extra: &[&str]) -> Child {
    let cache = scratch_dir(name);
    let registries_conf = registries_conf_path();
    let mut args = vec![
        "catalogd",
        "--catalogs-server-addr",
        address,
        "--external-address",
        address,
        "--cache-dir",
        cache.to_str().unwrap(),
        "--poll-interval-unit-seconds",
        "1",
        // Not the catalogs of test/catalogd.rs, which runs its own catalogd.
        "--selector",
        "!olmv1.test/catalogd",
        "--global-pull-secret",
        GLOBAL_PULL_SECRET_KEY,
        "--registries-conf",
        &registries_conf,
    ];
    args.extend_from_slice(&operations.args());
    args.extend_from_slice(extra);
    spawn("catalogd", name, &args)
}

/// The name of the global pull secret in the system namespace; only the pull-secret test
/// creates it.
pub const GLOBAL_PULL_SECRET: &str = "olmv1-e2e-global-pull-secret";
/// `--global-pull-secret` of both components.
const GLOBAL_PULL_SECRET_KEY: &str = "olmv1-system/olmv1-e2e-global-pull-secret";

/// A registry name that resolves nowhere: the components pull it from [`mirror_location`]
/// (`test/e2e/mirrors.rs`).
pub const MIRRORED_REGISTRY: &str = "mirrored.registry.invalid";
/// A registry the components' registries.conf blocks.
pub const BLOCKED_REGISTRY: &str = "blocked.registry.invalid";
/// A registry name that resolves nowhere, mirrored for references by digest only.
pub const DIGEST_ONLY_REGISTRY: &str = "digest-only.registry.invalid";

/// Where the mirrors of [`MIRRORED_REGISTRY`] and [`DIGEST_ONLY_REGISTRY`] are: a path of the
/// test registry that nothing else uses.
pub fn mirror_location() -> String {
    format!("{}/mirrored", support::registry())
}

/// The containers-registries.conf(5) both components read (`--registries-conf`): the machine's
/// /etc/containers/registries.conf is never used or changed.
pub fn registries_conf_path() -> String {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = scratch_dir("registries-conf").join("registries.conf");
        let mirror = mirror_location();
        let text = format!(
            "[[registry]]\nlocation = \"{MIRRORED_REGISTRY}\"\n\n[[registry.mirror]]\nlocation = \"{mirror}\"\n\n\
             [[registry]]\nlocation = \"{BLOCKED_REGISTRY}\"\nblocked = true\n\n\
             [[registry]]\nlocation = \"{DIGEST_ONLY_REGISTRY}\"\nmirror-by-digest-only = true\n\n\
             [[registry.mirror]]\nlocation = \"{mirror}\"\n"
        );
        std::fs::write(&path, text).expect("write registries.conf");
        path
    })
    .to_str()
    .unwrap()
    .to_string()
}

/// `--bundle-cache-grace` of the controllers the tests start.
const BUNDLE_CACHE_GRACE_SECONDS: &str = "15";

/// Seconds in one `progressDeadlineMinutes` unit of the controllers the tests start
/// (`--progress-deadline-unit-seconds`): a rollout reaches its deadline (10 at least) in 30 s.
pub const PROGRESS_DEADLINE_UNIT_SECONDS: u64 = 3;
const PROGRESS_DEADLINE_UNIT: &str = "3";

/// `--drift-check-seconds` of the controllers the tests start.
const DRIFT_CHECK_SECONDS: &str = "10";

/// Starts `olmv1 controller`, its log in `logs/<name>.log`; `/metrics` over HTTPS with `tls`.
fn spawn_controller(name: &str, operations: &Operations, tls: &support::TestTls, extra: &[&str]) -> Child {
    spawn_controller_as("controller", name, operations, tls, extra)
}

/// [`spawn_controller`] as ServiceAccount `olmv1-<role>`.
fn spawn_controller_as(
    role: &str,
    name: &str,
    operations: &Operations,
    tls: &support::TestTls,
    extra: &[&str],
) -> Child {
    let args = controller_args(name, operations, tls, extra);
    spawn(role, name, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The arguments of an e2e controller replica `name`: metrics over HTTPS with `tls`, its own
/// cache, the shared pull-secret, registries.conf and short cache grace and deadline unit.
pub fn controller_args(
    name: &str,
    operations: &Operations,
    tls: &support::TestTls,
    extra: &[&str],
) -> Vec<String> {
    let cache = scratch_dir(name);
    let registries_conf = registries_conf_path();
    let mut args = vec![
        "controller",
        "--system-namespace",
        SYSTEM_NAMESPACE,
        "--tls-cert",
        tls.serving.cert.to_str().unwrap(),
        "--tls-key",
        tls.serving.key.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--global-pull-secret",
        GLOBAL_PULL_SECRET_KEY,
        // Short, so that the cache test sees unused bundles go without waiting 10 minutes.
        "--bundle-cache-grace",
        BUNDLE_CACHE_GRACE_SECONDS,
        "--registries-conf",
        &registries_conf,
        // Short, so that a rollout reaches its deadline (10 minutes at least) in 30 seconds.
        "--progress-deadline-unit-seconds",
        PROGRESS_DEADLINE_UNIT,
        // Short, so that drift on the kinds the controller does not watch is found in seconds.
        "--drift-check-seconds",
        DRIFT_CHECK_SECONDS,
    ];
    args.extend_from_slice(&operations.args());
    args.extend_from_slice(extra);
    args.into_iter().map(str::to_string).collect()
}

/// Runs `olmv1 <args>` as the component `role`'s ServiceAccount, as replica `name` (its
/// `POD_NAME`, which the controller's User-Agent and Lease name).
fn spawn(role: &str, name: &str, args: &[&str]) -> Child {
    spawn_with(role, name, args, &[], |_| {})
}

/// [`spawn`] with extra environment variables, and the replica's kubeconfig as `kubeconfig`
/// leaves it (it gets the parsed kubeconfig of the ServiceAccount).
pub fn spawn_with(
    role: &str,
    name: &str,
    args: &[&str],
    vars: &[(&str, &str)],
    kubeconfig: impl FnOnce(&mut serde_json::Value),
) -> Child {
    let env = support::env();
    // Appended to: a restarted component's log keeps what the process before it wrote, so that
    // tests counting lines in it (while another test restarts the controller) see them grow.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(name))
        .unwrap();
    let path = support::service_account_kubeconfig(
        SYSTEM_NAMESPACE,
        &format!("olmv1-{role}"),
        &scratch_dir("kubeconfigs").join(name),
    );
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("a kubeconfig");
    kubeconfig(&mut config);
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    env.command(support::olmv1_bin())
        .env("KUBECONFIG", path)
        .envs(vars.iter().copied())
        .args(args)
        // Its ServiceAccount's imagePullSecrets are merged with the global pull secret.
        .env(
            "OLMV1_SERVICE_ACCOUNT",
            format!("{SYSTEM_NAMESPACE}/olmv1-{role}"),
        )
        .env("POD_NAME", name)
        .env("OLMV1_EXIT_WITH_PARENT", "1")
        .env(
            "RUST_LOG",
            std::env::var("OLMV1_E2E_LOG").unwrap_or_else(|_| "info,olmv1=debug".into()),
        )
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start olmv1 {role} {name}: {e}"))
}

fn log_path(name: &str) -> std::path::PathBuf {
    scratch_dir("logs").join(format!("{name}.log"))
}

fn stop(slot: &Mutex<Option<Child>>) {
    if let Some(mut old) = slot.lock().unwrap().take() {
        old.kill().ok();
        old.wait().ok();
    }
}

/// Kills the controller and starts a new one (as after a crash or a rollout); returns when the
/// old process had exited: what the API server receives after it, the new one sent.
pub fn restart_controller() -> k8s_openapi::jiff::Timestamp {
    let components = COMPONENTS.get().expect("components are running");
    stop(&components.controller);
    let stopped = k8s_openapi::jiff::Timestamp::now();
    *components.controller.lock().unwrap() = Some(spawn_controller(
        "controller",
        &components.controller_operations,
        &components.metrics_tls,
        components.controller_extra,
    ));
    stopped
}

/// Whether the shared controller process is still the one started (it has not crashed or exited).
pub fn controller_running() -> bool {
    let components = COMPONENTS.get().expect("components are running");
    components
        .controller
        .lock()
        .unwrap()
        .as_mut()
        .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
}

/// Shared components stopped, for a test that runs its own replicas or needs one absent; they
/// start again when this is dropped.
pub struct SharedComponentsStopped {
    catalogd: bool,
    controller: bool,
}

/// Stops the shared catalogd and controller. Only for a test holding [`exclusive_cluster`].
pub fn stop_shared_components(share: &ClusterShare) -> SharedComponentsStopped {
    stop_shared(share, true, true)
}

/// Stops the shared controller only (a test runs its own). Only with [`exclusive_cluster`].
pub fn stop_shared_controller(share: &ClusterShare) -> SharedComponentsStopped {
    stop_shared(share, false, true)
}

/// Stops the shared catalogd only (catalogs unreachable). Only with [`exclusive_cluster`].
pub fn stop_shared_catalogd(share: &ClusterShare) -> SharedComponentsStopped {
    stop_shared(share, true, false)
}

fn stop_shared(share: &ClusterShare, catalogd: bool, controller: bool) -> SharedComponentsStopped {
    assert!(
        matches!(share, ClusterShare::Exclusive(_)),
        "stopping the shared components needs the cluster alone"
    );
    let components = COMPONENTS.get().expect("components are running");
    if controller {
        stop(&components.controller);
    }
    if catalogd {
        stop(&components.catalogd);
    }
    SharedComponentsStopped { catalogd, controller }
}

impl Drop for SharedComponentsStopped {
    fn drop(&mut self) {
        let components = COMPONENTS.get().expect("components are running");
        if self.catalogd {
            *components.catalogd.lock().unwrap() = Some(spawn_catalogd(
                "catalogd",
                &components.catalogd_address,
                &components.catalogd_operations,
                &[],
            ));
        }
        if self.controller {
            *components.controller.lock().unwrap() = Some(spawn_controller(
                "controller",
                &components.controller_operations,
                &components.metrics_tls,
                components.controller_extra,
            ));
        }
    }
}

/// Starts a catalogd that reconciles no ClusterCatalog (its selector matches none), serving
/// at a free address, for tests of its servers; killed when dropped.
pub fn start_idle_catalogd(name: &str, operations: &Operations, extra: &[&str]) -> Replica {
    let address = format!("127.0.0.1:{}", support::free_port());
    let cache = scratch_dir(name);
    let mut args = vec![
        "catalogd",
        "--catalogs-server-addr",
        &address,
        "--external-address",
        &address,
        "--cache-dir",
        cache.to_str().unwrap(),
        "--selector",
        "olmv1.test/none=none",
    ];
    args.extend_from_slice(&operations.args());
    args.extend_from_slice(extra);
    let child = spawn("catalogd", name, &args);
    Replica {
        name: name.into(),
        child,
        address,
    }
}

/// client-go's default leader election durations (lease, renew deadline, retry period, in
/// seconds), shorter than the components' own (upstream's 137, 107, 26): a test's failover takes
/// at most 17 s.
pub const SHORT_LEASE: [u64; 3] = [15, 10, 2];

/// One leader-elected replica of a component started by a test; killed when dropped.
pub struct Replica {
    pub name: String,
    pub child: Child,
    /// Where a catalogd replica serves catalogs.
    pub address: String,
}

impl Replica {
    /// Starts replica `name` of `role` (`controller` or `catalogd`) with `--leader-elect` and
    /// client-go's short durations ([`SHORT_LEASE`]), so that failovers fit a test.
    pub fn start(role: &str, name: &str) -> Replica {
        Replica::start_with_lease(role, name, SHORT_LEASE)
    }

    /// Starts replica `name` of `role` with `--leader-elect` and `[lease duration, renew
    /// deadline, retry period]` in seconds.
    pub fn start_with_lease(role: &str, name: &str, [lease, renew, retry]: [u64; 3]) -> Replica {
        let operations = Operations::unread();
        let address = format!("127.0.0.1:{}", support::free_port());
        let tls = &COMPONENTS.get().expect("components are running").metrics_tls;
        let timings = [
            format!("--leader-election-lease-duration-seconds={lease}"),
            format!("--leader-election-renew-deadline-seconds={renew}"),
            format!("--leader-election-retry-period-seconds={retry}"),
        ];
        let args: Vec<&str> = std::iter::once("--leader-elect")
            .chain(timings.iter().map(String::as_str))
            .collect();
        let child = match role {
            "controller" => spawn_controller(name, &operations, tls, &args),
            _ => spawn_catalogd(name, &address, &operations, &args),
        };
        Replica {
            name: name.into(),
            child,
            address,
        }
    }

    /// Starts controller replica `name` (no leader election) as ServiceAccount `olmv1-<role>`,
    /// whose RBAC the test provides, with `extra` arguments.
    pub fn controller_as(role: &str, name: &str, extra: &[&str]) -> Replica {
        let operations = Operations::unread();
        let tls = &COMPONENTS.get().expect("components are running").metrics_tls;
        Replica {
            name: name.into(),
            child: spawn_controller_as(role, name, &operations, tls, extra),
            address: String::new(),
        }
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args([&format!("-{signal}"), &pid])
                .status()
                .unwrap()
                .success(),
            "kill -{signal} {}",
            self.name
        );
    }

    /// The replica's log, for failure messages and checks.
    pub fn log(&self) -> String {
        std::fs::read_to_string(log_path(&self.name)).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// The samples of the `/metrics` of `catalogd` or `controller`, read as the metrics reader. The
/// shared components may be restarting for another test (a kill, a leader hand-over): the scrape
/// waits for them, within a deadline.
pub async fn scrape(role: &str) -> Vec<support::promql::Sample> {
    let text = support::wait_for(
        &format!("{role}'s metrics to be scraped"),
        std::time::Duration::from_secs(60),
        || async { scrape_metrics(role).await.map_err(|e| e.to_string()) },
    )
    .await;
    support::promql::parse_exposition(&text)
}

/// The addresses of the metrics and probe servers of `catalogd` or `controller`.
pub fn operations(role: &str) -> Operations {
    let components = COMPONENTS.get().expect("components are running");
    match role {
        "catalogd" => components.catalogd_operations.clone(),
        _ => components.controller_operations.clone(),
    }
}

/// The CA that signed the controller's metrics certificate.
pub fn metrics_ca() -> Vec<u8> {
    let components = COMPONENTS.get().expect("components are running");
    std::fs::read(&components.metrics_tls.ca_cert).unwrap()
}

/// The ServiceAccount bound to olmv1-metrics-reader, as a Prometheus would be.
pub const METRICS_READER: &str = "olmv1-e2e-metrics-reader";

/// A token of [`METRICS_READER`] (created with its ClusterRoleBinding on first use).
pub fn metrics_reader_token() -> String {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN
        .get_or_init(|| {
            support::kubectl_apply(&format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {METRICS_READER}\n  namespace: {SYSTEM_NAMESPACE}\n\
                 ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {METRICS_READER}\n\
                 roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: olmv1-metrics-reader\n\
                 subjects:\n  - kind: ServiceAccount\n    name: {METRICS_READER}\n    namespace: {SYSTEM_NAMESPACE}\n"
            ))
            .ok();
            service_account_token(SYSTEM_NAMESPACE, METRICS_READER)
        })
        .clone()
}

/// A token (1 h) of ServiceAccount `namespace/name`.
pub fn service_account_token(namespace: &str, name: &str) -> String {
    support::kubectl(&["-n", namespace, "create", "token", name, "--duration=1h"])
        .ok()
        .trim()
        .to_string()
}

/// `GET https://<addr>/metrics` trusting `ca`, with `token` as bearer if any: (status, body).
pub async fn get_metrics(addr: &str, ca: &[u8], token: Option<&str>) -> Result<(u16, String), String> {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca).map_err(|e| e.to_string())?)
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client.get(format!("https://{addr}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("GET https://{addr}/metrics: {e}"))?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.map_err(|e| e.to_string())?))
}

/// The `/metrics` text of `catalogd` (plain HTTP on loopback) or the controller (HTTPS, as the
/// metrics reader).
pub async fn scrape_metrics(role: &str) -> Result<String, String> {
    let addr = operations(role).metrics;
    let (status, body) = match role {
        "catalogd" => {
            let response = reqwest::get(format!("http://{addr}/metrics"))
                .await
                .map_err(|e| e.to_string())?;
            (
                response.status().as_u16(),
                response.text().await.map_err(|e| e.to_string())?,
            )
        }
        _ => get_metrics(&addr, &metrics_ca(), Some(&metrics_reader_token())).await?,
    };
    match status {
        200 => Ok(body),
        _ => Err(format!("GET {addr}/metrics answered {status}: {body}")),
    }
}

/// The API requests of each reconcile of `extension` the controller logged, in order.
pub fn reconcile_requests(extension: &str) -> Vec<u32> {
    let name = format!("name={extension} ");
    log("controller")
        .lines()
        .filter(|line| line.contains("reconcile finished") && line.contains(&name))
        .filter_map(|line| {
            let count = line.split("api_requests=").nth(1)?;
            count.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

/// The whole log of a component (`controller`, `catalogd` or a replica's name), without the
/// terminal colour codes.
pub fn log(role: &str) -> String {
    let text = std::fs::read_to_string(log_path(role)).unwrap_or_default();
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence `ESC [ ... m`.
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// The logs of a component, for failure messages.
pub fn log_tail(role: &str) -> String {
    let text = std::fs::read_to_string(log_path(role)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Applies the controller's RBAC of install manifest VARIANT (`hack/manifest.sh`: the chart with
/// that variant's values) to ServiceAccount `olmv1-<role>` instead of `olmv1-controller`, with
/// the names changed alike: a controller started as that account runs with exactly the variant's
/// rules, and the shared controller's are untouched.
pub fn apply_variant_controller_rbac(variant: &str, role: &str) {
    let account = format!("olmv1-{role}");
    let rendered = support::install_manifest_rbac(variant, &[]);
    let controllers: Vec<serde_json::Value> = rendered
        .iter()
        .map(|object| object.to_string())
        .filter(|text| !text.contains("\"kind\":\"Namespace\"") && text.contains("olmv1-controller"))
        .map(|text| {
            let mut object: serde_json::Value =
                serde_json::from_str(&text.replace("olmv1-controller", &account)).unwrap();
            // An object the shared components hold too (the ClusterRoleBinding
            // `olmv1-metrics-auth` names the controller and catalogd) gets a name of its own:
            // overwriting it would take the shared controller's rights away.
            let name = object["metadata"]["name"].as_str().unwrap().to_string();
            if !name.contains(&account) {
                object["metadata"]["name"] = json!(format!("{name}-{role}"));
            }
            object
        })
        .collect();
    assert!(
        controllers
            .iter()
            .any(|object| object["kind"] == "ClusterRoleBinding"),
        "install manifest {variant} binds the controller to no ClusterRole:\n{rendered:?}"
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": controllers});
    support::kubectl_apply(&list.to_string()).ok();
}

/// A namespace with a ServiceAccount `installer` bound to cluster-admin: what the OLM v1 docs
/// have an admin prepare (broadly, for brevity).
pub async fn namespace_with_admin_installer(client: &Client, prefix: &str) -> String {
    let namespace = support::fresh_namespace(client, prefix).await;
    create_service_account(client, &namespace, "installer").await;
    grant_cluster_admin(client, &namespace).await;
    namespace
}

/// Binds `<namespace>/installer` to cluster-admin (ClusterRoleBinding `<namespace>-installer`).
pub async fn grant_cluster_admin(client: &Client, namespace: &str) {
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("{namespace}-installer")),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "installer".into(),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Creates a ServiceAccount.
pub async fn create_service_account(client: &Client, namespace: &str, name: &str) {
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("cannot create service account {namespace}/{name}: {e}"));
}

/// Creates (or points) a ClusterCatalog at an image, with a priority.
pub async fn apply_catalog(client: &Client, name: &str, image: &str, priority: i32, package: &str) {
    let catalog = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name, "labels": {PACKAGE_LABEL: package}},
        "spec": {"priority": priority, "source": {"type": "Image", "image": {"ref": image}}}
    });
    Api::<ClusterCatalog>::all(client.clone())
        .patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&catalog))
        .await
        .unwrap_or_else(|e| panic!("cannot apply ClusterCatalog {name}: {e}"));
}

/// Labels each test's catalogs with the test's package, and each ClusterExtension selects them:
/// catalogs other tests leave behind (or break on purpose) do not take part in its resolution.
pub const PACKAGE_LABEL: &str = "olmv1.test/e2e-package";

/// Waits until a catalog serves the image it points at.
pub async fn wait_catalog_serving(client: &Client, name: &str) {
    let api = Api::<ClusterCatalog>::all(client.clone());
    support::wait_for(
        &format!("ClusterCatalog {name} Serving"),
        INSTALL_TIMEOUT,
        || async {
            let catalog = api.get(name).await.map_err(|e| e.to_string())?;
            let status = catalog.status.clone().unwrap_or_default();
            let serving = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Serving" && c.status == "True");
            let progressed = status.conditions.iter().any(|c| {
                c.type_ == "Progressing"
                    && c.reason == "Succeeded"
                    && c.observed_generation == catalog.metadata.generation
            });
            if serving && progressed {
                Ok(())
            } else {
                Err(format!("{:?}", status.conditions))
            }
        },
    )
    .await
}

/// Applies a ClusterExtension from JSON (server-side apply, so tests can change fields).
pub async fn apply_extension(client: &Client, extension: serde_json::Value) {
    let name = extension["metadata"]["name"].as_str().unwrap().to_string();
    Api::<ClusterExtension>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&extension),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot apply ClusterExtension {name}: {e}"));
}

/// A ClusterExtension body installing `package` into `namespace` as `installer`.
pub fn extension(
    name: &str,
    namespace: &str,
    package: &str,
    catalog: serde_json::Value,
) -> serde_json::Value {
    let mut source = json!({
        "packageName": package,
        "selector": {"matchLabels": {PACKAGE_LABEL: package}}
    });
    if let serde_json::Value::Object(extra) = catalog {
        source.as_object_mut().unwrap().extend(extra);
    }
    json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": namespace,
            "serviceAccount": {"name": "installer"},
            "source": {"sourceType": "Catalog", "catalog": source}
        }
    })
}

/// A condition of a ClusterExtension, if set for its current generation.
pub fn condition<'a>(ext: &'a ClusterExtension, type_: &str) -> Option<&'a Condition> {
    ext.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

/// Waits until the ClusterExtension satisfies `check`, showing its conditions on timeout.
pub async fn wait_extension<F>(client: &Client, name: &str, what: &str, check: F) -> ClusterExtension
where
    F: Fn(&ClusterExtension) -> bool,
{
    wait_extension_within(client, name, what, INSTALL_TIMEOUT, check).await
}

/// [`wait_extension`] with its own deadline.
pub async fn wait_extension_within<F>(
    client: &Client,
    name: &str,
    what: &str,
    timeout: Duration,
    check: F,
) -> ClusterExtension
where
    F: Fn(&ClusterExtension) -> bool,
{
    let api = Api::<ClusterExtension>::all(client.clone());
    let check = &check;
    let found = tokio::time::timeout(timeout, async {
        loop {
            if let Ok(ext) = api.get(name).await
                && ext.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .all(|c| c.observed_generation == ext.metadata.generation)
                })
                && check(&ext)
            {
                return ext;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    match found {
        Ok(ext) => ext,
        Err(_) => {
            let now = api
                .get(name)
                .await
                .map(|e| format!("{:#?}", e.status))
                .unwrap_or_default();
            panic!(
                "timed out waiting for ClusterExtension {name}: {what}\nstatus: {now}\ncontroller log:\n{}",
                log_tail("controller")
            )
        }
    }
}

/// The version `status.install` names, if any.
pub fn installed_version(ext: &ClusterExtension) -> Option<&str> {
    ext.status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| i.bundle.version.as_str())
}

/// Waits until the ClusterExtension has `version` installed and rolled out.
pub async fn wait_installed(client: &Client, name: &str, version: &str) -> ClusterExtension {
    wait_installed_within(client, name, version, INSTALL_TIMEOUT).await
}

/// [`wait_installed`] with its own deadline.
pub async fn wait_installed_within(
    client: &Client,
    name: &str,
    version: &str,
    timeout: Duration,
) -> ClusterExtension {
    wait_extension_within(
        client,
        name,
        &format!("Installed=True with version {version}"),
        timeout,
        |ext| {
            let installed = condition(ext, "Installed").is_some_and(|c| c.status == "True");
            let progressing = condition(ext, "Progressing").is_some_and(|c| c.reason == "Succeeded");
            installed && progressing && installed_version(ext) == Some(version)
        },
    )
    .await
}

/// Waits until Progressing carries `reason` and a message containing `text`.
pub async fn wait_progressing(client: &Client, name: &str, reason: &str, text: &str) -> ClusterExtension {
    wait_extension(
        client,
        name,
        &format!("Progressing reason {reason} with {text:?}"),
        |ext| condition(ext, "Progressing").is_some_and(|c| c.reason == reason && c.message.contains(text)),
    )
    .await
}

/// One write the API server's audit log recorded.
#[derive(Debug)]
pub struct AuditWrite {
    /// Who made it (`system:serviceaccount:<ns>:<name>` for a ServiceAccount).
    pub user: String,
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub received: k8s_openapi::jiff::Timestamp,
}

/// The API server's audit log, read from a byte offset on.
pub struct AuditLog {
    path: std::path::PathBuf,
}

impl AuditLog {
    pub fn open() -> AuditLog {
        let path = support::env().dir.join("logs/audit.log");
        assert!(
            path.exists(),
            "{} is missing: the control plane must run with hack/local-up.sh's audit log",
            path.display()
        );
        AuditLog { path }
    }

    pub fn end(&self) -> u64 {
        std::fs::metadata(&self.path).unwrap().len()
    }

    /// olmv1's writes since `offset` of a scenario's objects: in `namespace`, or named after one
    /// of `names` (its package or extension).
    pub fn writes_of(&self, offset: u64, namespace: &str, names: &[&str]) -> Vec<AuditWrite> {
        self.writes_since(offset)
            .into_values()
            .flatten()
            .filter(|w| {
                w.namespace.as_deref() == Some(namespace)
                    || w.name
                        .as_deref()
                        .is_some_and(|n| names.iter().any(|name| n.contains(name)))
            })
            .collect()
    }

    /// Writes since `offset` by olmv1 replica (the name in `olmv1-<component>/<v> (<name>)`).
    pub fn writes_since(&self, offset: u64) -> BTreeMap<String, Vec<AuditWrite>> {
        let text = std::fs::read(&self.path).unwrap();
        let mut by_replica: BTreeMap<String, Vec<AuditWrite>> = BTreeMap::new();
        for line in text[offset as usize..].split(|b| *b == b'\n') {
            let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let agent = event["userAgent"].as_str().unwrap_or_default();
            let Some(name) = agent
                .strip_prefix("olmv1-")
                .and_then(|a| a.rsplit_once(" ("))
                .and_then(|(_, name)| name.strip_suffix(')'))
            else {
                continue;
            };
            let object = &event["objectRef"];
            let resource = match object["subresource"].as_str() {
                Some(sub) => format!("{}/{sub}", object["resource"].as_str().unwrap_or_default()),
                None => object["resource"].as_str().unwrap_or_default().to_string(),
            };
            by_replica.entry(name.to_string()).or_default().push(AuditWrite {
                user: event["user"]["username"].as_str().unwrap_or_default().to_string(),
                verb: event["verb"].as_str().unwrap_or_default().to_string(),
                resource,
                namespace: object["namespace"].as_str().map(str::to_string),
                name: object["name"].as_str().map(str::to_string),
                received: event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            });
        }
        by_replica
    }
}

/// The drift check's count (`olmv1_clusterextension_drift_checks_total`) and the extensions it
/// found changed (`olmv1_clusterextension_drifted_total`).
pub async fn drift_counts() -> (u64, u64) {
    let metrics = scrape_metrics("controller").await.unwrap();
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}")) as u64
    };
    (
        value("olmv1_clusterextension_drift_checks_total"),
        value("olmv1_clusterextension_drifted_total"),
    )
}

/// Waits until the drift check has run `checks` more times than `since`.
pub async fn wait_drift_checks(since: u64, checks: u64) {
    support::wait_for(&format!("{checks} drift checks"), INSTALL_TIMEOUT, || async {
        let (now, _) = drift_counts().await;
        if now >= since + checks {
            Ok(())
        } else {
            Err(format!("{} since", now - since))
        }
    })
    .await;
}

/// Runs the `olmv1` command line against the test cluster, its logs off.
pub fn olmv1(args: &[&str]) -> support::CmdOutput {
    support::run(
        support::env()
            .command(support::olmv1_bin())
            .args(args)
            .env("RUST_LOG", "off"),
    )
}
