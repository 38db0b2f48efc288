//! olmv1's test aggregated API server (test/operator `--mode aggregated-api`, package
//! `gadget-operator`, docs/test-operator.md) installed from a catalog onto the real node
//! (`OLMV1_NODE=kwok+real`) with `olmv1 install`'s computed installer and cert-manager really
//! running: the APIService is created once its server runs, `kubectl get` of its resource is
//! answered by its pod through the API server's aggregation layer (the user authenticated by the
//! front proxy, access reviewed by the API server), an unavailable APIService is reported on the
//! ClusterExtension, an upgrade adds an API version and the next drops one (deleted before the
//! Deployment changes), and the uninstall deletes the APIServices before the Deployment; `kubectl
//! api-resources` succeeds throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use olmv1_api::v1::ClusterExtension;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::{components, node, support, webhook_operator};

const PACKAGE: &str = "gadget-operator";
const GROUP: &str = "gadgets.test.olmv1.dev";
const DEPLOYMENT: &str = "gadget-operator-server";
const SERVICE: &str = "gadget-operator-server-service";
const POD_LABEL: &str = "app.kubernetes.io/name=gadget-operator";
/// Pulling the image and starting the server on the real node, on 2 busy cores.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// How often discovery is checked while the extension changes.
const DISCOVERY_EVERY: Duration = Duration::from_millis(300);

/// The APIServices `v1alpha1`/`v1.gadgets.test.olmv1.dev` are cluster-wide: installs of the
/// gadget operator (here and in the migrate test) take turns.
static GADGETS: Mutex<()> = Mutex::const_new(());

/// A test's turn at the gadgets' cluster-wide names. Taken with the names free (what an earlier
/// test left is removed first) and, when the test fails half-way, left with them free, so that
/// one failure does not fail the next test with objects it cannot manage.
pub(crate) struct GadgetsTurn {
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl GadgetsTurn {
    /// Waits for the turn, then clears the names. Take it once the components run (a
    /// ClusterExtension's uninstall needs its controller) and after the cluster share (it is
    /// dropped first).
    pub(crate) async fn take() -> GadgetsTurn {
        let turn = GADGETS.lock().await;
        clear_gadgets();
        GadgetsTurn { _turn: turn }
    }
}

impl Drop for GadgetsTurn {
    fn drop(&mut self) {
        if std::thread::panicking() {
            clear_gadgets();
        }
    }
}

/// Removes every install of the gadget operator's cluster-wide part: the ClusterExtensions of the
/// package (uninstalled by their controller, the APIServices first), then the APIServices and
/// bindings no extension owns (a classic footprint's). Best effort: each step is logged.
fn clear_gadgets() {
    let extensions = support::kubectl(&[
        "get",
        "clusterextensions",
        "-o",
        &format!(
            "jsonpath={{range .items[?(@.spec.source.catalog.packageName==\"{PACKAGE}\")]}}{{.metadata.name}}{{\"\\n\"}}{{end}}"
        ),
    ]);
    for name in extensions.stdout.lines().filter(|l| !l.is_empty()) {
        let out = support::kubectl(&[
            "delete",
            "clusterextension",
            name,
            "--ignore-not-found",
            "--timeout=180s",
        ]);
        eprintln!(
            "gadgets cleared: ClusterExtension {name}: {}{}",
            out.stdout, out.stderr
        );
    }
    // The names are olmv1's and classic's alike.
    let api_services = [api_service_name("v1alpha1"), api_service_name("v1")];
    let delegator = format!("{SERVICE}-system:auth-delegator");
    let reader = format!("{SERVICE}-auth-reader");
    for mut args in [
        vec!["delete", "apiservice", &api_services[0], &api_services[1]],
        vec!["delete", "clusterrolebinding", &delegator],
        vec!["delete", "rolebinding", "-n", "kube-system", &reader],
    ] {
        args.push("--ignore-not-found");
        let out = support::kubectl(&args);
        if !out.stdout.trim().is_empty() || !out.success {
            eprintln!("gadgets cleared: {}{}", out.stdout, out.stderr);
        }
    }
}

fn api_service_name(version: &str) -> String {
    format!("{version}.{GROUP}")
}

/// `kubectl api-resources` run over and over until stopped: the failures seen, with what kubectl
/// said. An APIService that is not Available makes it fail (it cannot list that group's
/// resources), as it fails every client's discovery.
/// Stopped when dropped too: a failed test's runtime would otherwise wait for it forever.
pub(crate) struct DiscoveryWatch {
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<(usize, Vec<String>)>>,
}

impl DiscoveryWatch {
    pub(crate) fn start() -> DiscoveryWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::task::spawn_blocking({
            let stop = stop.clone();
            move || {
                let started = Instant::now();
                let (mut checks, mut failures) = (0, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    let out = support::kubectl(&["api-resources", "-o", "name"]);
                    checks += 1;
                    if out.code != Some(0) {
                        failures.push(format!(
                            "after {:.1}s: {}",
                            started.elapsed().as_secs_f64(),
                            out.stderr.trim()
                        ));
                    }
                    std::thread::sleep(DISCOVERY_EVERY);
                }
                (checks, failures)
            }
        });
        DiscoveryWatch {
            stop,
            task: Some(task),
        }
    }

    /// Stops watching; fails the test when any check failed.
    pub(crate) async fn assert_healthy(mut self, during: &str) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let task = self.task.take().expect("watching");
        let (checks, failures) = task.await.unwrap();
        assert!(
            failures.is_empty(),
            "discovery failed {} of {checks} times during {during}:\n{}",
            failures.len(),
            failures.join("\n")
        );
        checks
    }
}

impl Drop for DiscoveryWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn olmv1_ok(args: &[&str]) -> String {
    components::olmv1(args).ok()
}

/// The gadgets of `version` as kubectl reads them (JSON).
fn gadgets(version: &str, extra: &[&str]) -> support::CmdOutput {
    let resource = format!("gadgets.{version}.{GROUP}");
    let mut args = vec!["get", resource.as_str(), "-o", "json"];
    args.extend_from_slice(extra);
    support::kubectl(&args)
}

async fn ready_pod(client: &Client, namespace: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    support::wait_for("the server's one pod Ready", RUN_TIMEOUT, || async {
        let ready: Vec<Pod> = pods
            .list(&ListParams::default().labels(POD_LABEL))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && ready_since(p).is_some())
            .collect();
        match ready.as_slice() {
            [pod] => Ok(pod.clone()),
            other => Err(format!("{} Ready pods", other.len())),
        }
    })
    .await
}

/// When the pod became Ready, if it is.
fn ready_since(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

fn available(api_service: &APIService) -> bool {
    api_service
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
}

/// The gadgets of `version`, read through the aggregation layer once `pod` answers; each says
/// which pod served it, for which bundle and for whom. After a rollout the old pod answers for a
/// few more seconds: it serves for its shutdown delay after turning not ready, and the API
/// server's kept-alive connection reaches it until it exits.
async fn served_gadgets(version: &str, pod: &Pod) -> Value {
    let pod = pod.metadata.name.as_deref().unwrap();
    support::wait_for(
        &format!("gadgets of {version} served by {pod}"),
        RUN_TIMEOUT,
        || async {
            let out = gadgets(version, &[]);
            if out.code != Some(0) {
                return Err(out.stderr);
            }
            let list = serde_json::from_str::<Value>(&out.stdout).map_err(|e| e.to_string())?;
            let by = &list["items"][0]["status"]["servedBy"];
            if by == pod {
                Ok(list)
            } else {
                Err(format!("served by {by}"))
            }
        },
    )
    .await
}

fn assert_served_by(list: &Value, pod: &Pod, bundle: &str) {
    let items = list["items"].as_array().expect("a list");
    let names: Vec<&str> = items
        .iter()
        .filter_map(|g| g["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["first", "second"], "{list}");
    for gadget in items {
        assert_eq!(
            gadget["status"]["servedBy"],
            pod.metadata.name.as_deref().unwrap(),
            "{gadget}"
        );
        assert_eq!(gadget["status"]["bundleVersion"], bundle, "{gadget}");
        // The admin's client certificate (CN olmv1-admin), as the front proxy passed it on.
        assert_eq!(gadget["status"]["requestedBy"], "olmv1-admin", "{gadget}");
    }
}

/// The first audit write of `verb` on `resource` named `name` since `offset`, as `user`.
fn first_write(
    audit: &components::AuditLog,
    offset: u64,
    user: &str,
    verb: &str,
    resource: &str,
    name: &str,
) -> Option<k8s_openapi::jiff::Timestamp> {
    audit
        .writes_since(offset)
        .into_values()
        .flatten()
        .filter(|w| {
            w.user == user && w.verb == verb && w.resource == resource && w.name.as_deref() == Some(name)
        })
        .map(|w| w.received)
        .min()
}

/// The writes `user` made since `offset`, one per line in the order received: what a failed
/// ordering assertion shows.
fn writes_of(audit: &components::AuditLog, offset: u64, user: &str) -> String {
    let mut writes: Vec<_> = audit
        .writes_since(offset)
        .into_values()
        .flatten()
        .filter(|w| w.user == user)
        .collect();
    writes.sort_by_key(|w| w.received);
    writes
        .iter()
        .map(|w| {
            format!(
                "{} {} {} {}",
                w.received,
                w.verb,
                w.resource,
                w.name.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_aggregated_api_server_is_served_through_the_api_server_from_install_to_uninstall() {
    let Some(_node) = node::real_node() else {
        return;
    };
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let _turn = GadgetsTurn::take().await;
    let client = support::client().await;
    let started = Instant::now();
    let catalog_image = webhook_operator::published().await.to_string();
    let catalog = support::fresh_name("gadgets");
    components::apply_catalog(&client, &catalog, &catalog_image, 0, PACKAGE).await;
    components::wait_catalog_serving(&client, &catalog).await;
    let namespace = support::fresh_namespace(&client, "gadgets").await;
    let name = support::fresh_name("gadgets");
    let label = format!("{}={PACKAGE}", components::PACKAGE_LABEL);
    let installer = format!("{name}-installer");
    let user = format!("system:serviceaccount:{namespace}:{installer}");
    let audit = components::AuditLog::open();
    let api_services = Api::<APIService>::all(client.clone());
    let published_at = started.elapsed();

    // Install with the installer olmv1 computes: exactly the APIService, the two bindings (bind
    // on the roles they name) and the rest of the bundle.
    let dry = olmv1_ok(&[
        "install",
        PACKAGE,
        "--name",
        &name,
        "-n",
        &namespace,
        "--catalog-label",
        &label,
        "--version",
        "0.1.0",
        "--dry-run",
    ]);
    for granted in [
        "  resourceNames:\n  - v1alpha1.gadgets.test.olmv1.dev\n  resources:\n  - apiservices\n",
        "  resourceNames:\n  - system:auth-delegator\n  resources:\n  - clusterroles\n  verbs:\n  - bind\n",
        "  resourceNames:\n  - gadget-operator-server-service-auth-reader\n  resources:\n  - rolebindings\n",
        "  resourceNames:\n  - extension-apiserver-authentication-reader\n  resources:\n  - roles\n  verbs:\n  - bind\n",
        "  namespace: kube-system\nrules:\n",
    ] {
        assert!(dry.contains(granted), "the installer grants {granted}:\n{dry}");
    }
    let discovery = DiscoveryWatch::start();
    let t0 = Instant::now();
    olmv1_ok(&[
        "install",
        PACKAGE,
        "--name",
        &name,
        "-n",
        &namespace,
        "--catalog-label",
        &label,
        "--version",
        "0.1.0",
        "--yes",
    ]);
    components::wait_installed_within(&client, &name, "0.1.0", RUN_TIMEOUT).await;
    let install_took = t0.elapsed();
    let pod = ready_pod(&client, &namespace).await;
    let alpha = api_services.get(&api_service_name("v1alpha1")).await.unwrap();
    assert!(
        available(&alpha),
        "Installed only once the APIService is Available: {:?}",
        alpha.status
    );
    assert!(
        alpha.metadata.creation_timestamp.as_ref().unwrap().0.as_second()
            >= ready_since(&pod).unwrap().as_second(),
        "the APIService is created once its server runs"
    );
    let spec = alpha.spec.as_ref().unwrap();
    let service = spec.service.as_ref().unwrap();
    assert_eq!(
        (
            service.namespace.as_deref(),
            service.name.as_deref(),
            service.port
        ),
        (Some(namespace.as_str()), Some(SERVICE), Some(5443))
    );
    assert!(
        spec.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty()),
        "cert-manager injected the CA"
    );
    assert_eq!(
        alpha.metadata.labels.as_ref().unwrap()["olm.operatorframework.io/owner-name"],
        name
    );
    let delegator = Api::<ClusterRoleBinding>::all(client.clone())
        .get(&format!("{SERVICE}-system:auth-delegator"))
        .await
        .unwrap();
    let reader = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .get(&format!("{SERVICE}-auth-reader"))
        .await
        .unwrap();
    for subjects in [delegator.subjects.unwrap(), reader.subjects.unwrap()] {
        assert_eq!(subjects.len(), 1);
        assert_eq!(
            (subjects[0].name.as_str(), subjects[0].namespace.as_deref()),
            (PACKAGE, Some(namespace.as_str()))
        );
    }
    let created_as_installer = first_write(
        &audit,
        0,
        &user,
        "create",
        "apiservices",
        &api_service_name("v1alpha1"),
    )
    .or_else(|| {
        first_write(
            &audit,
            0,
            &user,
            "patch",
            "apiservices",
            &api_service_name("v1alpha1"),
        )
    });
    assert!(
        created_as_installer.is_some(),
        "the APIService is written as {user}"
    );

    // Answered by its pod, through the aggregation layer, for the user the front proxy named;
    // kubectl's table comes from the server too.
    let list = served_gadgets("v1alpha1", &pod).await;
    assert_served_by(&list, &pod, "0.1.0");
    let table = support::kubectl(&["get", &format!("gadgets.v1alpha1.{GROUP}")]).ok();
    assert!(
        table.contains("SERVED BY") && table.contains(pod.metadata.name.as_deref().unwrap()),
        "{table}"
    );
    let first = gadgets("v1alpha1", &[]).ok();
    assert!(first.contains("\"name\": \"first\""), "{first}");
    // Authorization is the API server's: an account nothing allows is refused by the server.
    let refused = gadgets(
        "v1alpha1",
        &[&format!("--as=system:serviceaccount:{namespace}:nobody")],
    );
    assert_ne!(refused.code, Some(0));
    assert!(
        refused
            .stderr
            .contains("cannot list resource \"gadgets\" in API group \"gadgets.test.olmv1.dev\""),
        "{}",
        refused.stderr
    );
    let installed_checks = discovery.assert_healthy("the install").await;

    // Upgrade to 0.2.0, which adds v1: the new APIService only once the new pod runs.
    let discovery = DiscoveryWatch::start();
    let t0 = Instant::now();
    olmv1_ok(&["upgrade", &name, "--version", "0.2.0", "--yes"]);
    components::wait_installed_within(&client, &name, "0.2.0", RUN_TIMEOUT).await;
    let upgrade_took = t0.elapsed();
    let installed_at = audit.end();
    let logged_at = components::log("controller").len();
    let pod = ready_pod(&client, &namespace).await;
    let v1 = api_services.get(&api_service_name("v1")).await.unwrap();
    assert!(available(&v1));
    assert!(
        v1.metadata.creation_timestamp.as_ref().unwrap().0.as_second()
            >= ready_since(&pod).unwrap().as_second(),
        "v1's APIService is created once 0.2.0's server runs"
    );
    assert_served_by(&served_gadgets("v1", &pod).await, &pod, "0.2.0");
    assert_served_by(&served_gadgets("v1alpha1", &pod).await, &pod, "0.2.0");
    let upgraded_checks = discovery.assert_healthy("the upgrade to 0.2.0").await;
    // Installed is the end of it: the APIServices went Available after their apply (a status
    // write, which moves their resourceVersion), and two drift checks begun since find nothing
    // changed (one that did would apply the installed version again, as late as the start of
    // the next upgrade).
    let (checks, _) = components::drift_counts().await;
    components::wait_drift_checks(checks, 2).await;
    let drift = format!("extension={name} ");
    let found: Vec<String> = components::log("controller")[logged_at..]
        .lines()
        .filter(|line| line.contains("drift check: changed") && line.contains(&drift))
        .map(str::to_string)
        .collect();
    assert!(
        found.is_empty(),
        "the drift check found 0.2.0 changed once Installed: {found:?}; the installer's writes since:\n{}",
        writes_of(&audit, installed_at, &user)
    );

    // Upgrade to 0.3.0, which drops v1alpha1: its APIService is deleted before the Deployment
    // changes (0.3.0's server no longer serves it).
    let discovery = DiscoveryWatch::start();
    let offset = audit.end();
    olmv1_ok(&["upgrade", &name, "--version", "0.3.0", "--yes"]);
    components::wait_installed_within(&client, &name, "0.3.0", RUN_TIMEOUT).await;
    assert!(
        api_services
            .get_opt(&api_service_name("v1alpha1"))
            .await
            .unwrap()
            .is_none()
    );
    let pod = ready_pod(&client, &namespace).await;
    assert_served_by(&served_gadgets("v1", &pod).await, &pod, "0.3.0");
    let withdrawn = first_write(
        &audit,
        offset,
        &user,
        "delete",
        "apiservices",
        &api_service_name("v1alpha1"),
    )
    .expect("v1alpha1's APIService deleted as the installer");
    let rolled = first_write(&audit, offset, &user, "patch", "deployments", DEPLOYMENT)
        .expect("the Deployment applied as the installer");
    assert!(
        withdrawn < rolled,
        "the APIService ({withdrawn}) goes before the Deployment changes ({rolled}); the installer's writes since the upgrade:\n{}",
        writes_of(&audit, offset, &user)
    );
    let dropped_checks = discovery.assert_healthy("the upgrade to 0.3.0").await;

    // Its server's Service gone: the unavailable APIService is reported on the extension, then
    // the Service is put back and the extension is Succeeded again.
    let ext_api = Api::<ClusterExtension>::all(client.clone());
    let mut reported = None;
    let watch = tokio::spawn({
        let ext_api = ext_api.clone();
        let name = name.clone();
        async move {
            use futures::StreamExt;
            use kube::runtime::WatchStreamExt;
            let config = kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}"));
            let mut events = std::pin::pin!(kube::runtime::watcher(ext_api, config).applied_objects());
            while let Some(event) = events.next().await {
                let Ok(ext) = event else { continue };
                if let Some(c) = components::condition(&ext, "Progressing")
                    && c.message.contains("is not Available")
                {
                    return Some(c.clone());
                }
            }
            None
        }
    });
    Api::<Service>::namespaced(client.clone(), &namespace)
        .delete(SERVICE, &DeleteParams::default())
        .await
        .unwrap();
    if let Ok(found) = tokio::time::timeout(RUN_TIMEOUT, watch).await {
        reported = found.unwrap();
    }
    let reported = reported.expect("Progressing reports the unavailable APIService");
    assert_eq!(
        (reported.status.as_str(), reported.reason.as_str()),
        ("True", "RollingOut")
    );
    assert!(
        reported.message.starts_with(&format!(
            "APIService '{}' is not Available (",
            api_service_name("v1")
        )),
        "{}",
        reported.message
    );
    components::wait_installed_within(&client, &name, "0.3.0", RUN_TIMEOUT).await;
    assert!(available(
        &api_services.get(&api_service_name("v1")).await.unwrap()
    ));

    // Uninstall: the APIService goes before the Deployment; discovery stays whole.
    let discovery = DiscoveryWatch::start();
    let offset = audit.end();
    let out = olmv1_ok(&["uninstall", &name]);
    assert!(out.contains("installer removed"), "{out}");
    support::wait_for("the server and its APIService gone", RUN_TIMEOUT, || async {
        let left = api_services
            .get_opt(&api_service_name("v1"))
            .await
            .map_err(|e| e.to_string())?;
        let pods = Api::<Pod>::namespaced(client.clone(), &namespace)
            .list(&ListParams::default().labels(POD_LABEL))
            .await
            .map_err(|e| e.to_string())?;
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
            .get_opt(&format!("{SERVICE}-auth-reader"))
            .await
            .map_err(|e| e.to_string())?;
        match (left, pods.items.len(), bindings) {
            (None, 0, None) => Ok(()),
            (a, p, b) => Err(format!(
                "APIService {}, {p} pods, auth-reader {}",
                a.is_some(),
                b.is_some()
            )),
        }
    })
    .await;
    let removed = first_write(
        &audit,
        offset,
        &user,
        "delete",
        "apiservices",
        &api_service_name("v1"),
    )
    .expect("the APIService deleted as the installer");
    let stopped = first_write(&audit, offset, &user, "delete", "deployments", DEPLOYMENT)
        .expect("the Deployment deleted as the installer");
    assert!(
        removed < stopped,
        "the APIService ({removed}) goes before the Deployment ({stopped})"
    );
    let uninstall_checks = discovery.assert_healthy("the uninstall").await;
    eprintln!(
        "figures: catalog published {published_at:?}; install {install_took:?}, upgrade {upgrade_took:?}; \
         discovery checked {installed_checks}+{upgraded_checks}+{dropped_checks}+{uninstall_checks} times, no failure; \
         the test {:?}",
        started.elapsed()
    );
}
