//! The driver of `hack/interop.sh` (run it through that script): publishes the fixtures, drives
//! a controller through the real operator's install and upgrade and through the scenarios of the
//! differences table, records what each controller reported, and compares the records.
//!
//! It talks to the cluster of `KUBECONFIG` and the registry of `OLMV1_REGISTRY`; the script
//! starts and stops the components between its steps (one controller at a time).

#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "../e2e/components.rs"]
mod components;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;

mod bench;
mod compare;
mod scale;
mod scenarios;

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams},
    discovery::{Discovery, verbs},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};

use scenarios::{CONDITION_TYPES, Expect, Outcome, Plan, Scenario, Step};

/// How long one step may take on 2 busy cores: resolution, pull, apply and rollout.
const STEP_TIMEOUT: Duration = Duration::from_secs(240);

/// The label both controllers put on every object they apply.
const OWNER_KIND: &str = "olm.operatorframework.io/owner-kind";
const OWNER_NAME: &str = "olm.operatorframework.io/owner-name";

#[derive(Parser)]
#[command(about = "hack/interop.sh's driver")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Pushes the scenario catalogs and the real operator's catalogs; writes the plan (JSON).
    Publish { out: PathBuf },
    /// Creates the plan's ClusterCatalogs and waits until they are Serving (or deletes them).
    Catalogs {
        plan: PathBuf,
        #[arg(long)]
        delete: bool,
    },
    /// Installs the real operator and upgrades it along its catalog edge, then removes it.
    Real {
        plan: PathBuf,
        /// Names the run in its namespace and output (e.g. `olmv1` or `upstream`).
        #[arg(long)]
        label: String,
    },
    /// Runs every scenario with the running controller; writes the outcomes (JSON); cleans up.
    Scenarios {
        out: PathBuf,
        /// Upstream v1.11's YAML: no spec.serviceAccount and no installer accounts (for
        /// upstream, and olmv1 with --install-identity controller).
        #[arg(long)]
        without_service_account: bool,
    },
    /// Compares two outcome files; fails on a difference docs/upstream.md does not list.
    /// Pushes the benchmark's load catalog and the three shared catalogs; writes its plan.
    BenchPublish { out: PathBuf },
    /// Creates the benchmark's namespaces and installers.
    BenchNamespaces,
    /// Measures the running controller (pid): one extension cold and warm, 100 at once, idle.
    BenchController {
        #[arg(long)]
        pid: u32,
        #[arg(long, default_value_t = 600)]
        idle_seconds: u64,
        out: PathBuf,
    },
    /// Deletes the benchmark's ClusterExtensions (the controller that installed them runs).
    BenchClean,
    /// Measures the running catalogd (pid) on the shared catalogs.
    BenchCatalogd {
        plan: PathBuf,
        #[arg(long)]
        pid: u32,
        /// CA of catalogd's serving certificate, if it serves HTTPS.
        #[arg(long)]
        ca: Option<PathBuf>,
        out: PathBuf,
    },
    /// Prints the Markdown table of a results file ({"olmv1": {...}, "upstream": {...}}).
    BenchTable { results: PathBuf },
    /// hack/bench-scale.sh: pushes N one-Deployment packages into C catalogs; writes the plan.
    ScalePublish {
        #[arg(long, default_value_t = 1000)]
        extensions: usize,
        #[arg(long, default_value_t = 5)]
        catalogs: usize,
        out: PathBuf,
    },
    /// Creates a namespace and installer per extension of the plan.
    ScaleNamespaces { plan: PathBuf },
    /// Serves the plan's catalogs, applies every extension at once, waits for all Installed.
    ScaleInstall {
        plan: PathBuf,
        #[arg(long)]
        pid: u32,
        /// The controller's metrics URL (`http://HOST:PORT/metrics`).
        #[arg(long)]
        metrics: String,
        out: PathBuf,
    },
    /// The idle window: CPU, RSS every `--every` seconds, requests.
    ScaleIdle {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        metrics: String,
        #[arg(long, default_value_t = 1800)]
        seconds: u64,
        #[arg(long, default_value_t = 60)]
        settle: u64,
        #[arg(long, default_value_t = 30)]
        every: u64,
        out: PathBuf,
    },
    /// Writes the resourceVersion of every extension and every object applied for one.
    ScaleSnapshot { out: PathBuf },
    /// After a restart: time until every extension is re-verified, and what was written.
    ScaleRestart {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        metrics: String,
        /// When the new process started (Unix seconds).
        #[arg(long)]
        started: f64,
        #[arg(long)]
        audit_log: PathBuf,
        /// The audit log's size before the restart (bytes).
        #[arg(long)]
        audit_from: u64,
        /// `scale-snapshot`'s file from before the restart.
        #[arg(long)]
        before: PathBuf,
        #[arg(long)]
        expected: usize,
        #[arg(long, default_value_t = 60)]
        settle: u64,
        out: PathBuf,
    },
    /// Pushes catalog directories as catalog images; writes [(name, reference)].
    ScalePublishCatalogs { out: PathBuf, dirs: Vec<PathBuf> },
    /// Applies the catalogs at once to the running catalogd (pid): Serving, peak and serving RSS.
    ScaleCatalogd {
        catalogs: PathBuf,
        #[arg(long)]
        pid: u32,
        out: PathBuf,
    },
    /// Prints the Markdown table of the result files in a directory.
    ScaleReport { dir: PathBuf },
    Compare {
        olmv1: PathBuf,
        upstream: PathBuf,
        /// The page whose table lists the differences on purpose.
        #[arg(long)]
        docs: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    olmv1::tls_profile::install_default_provider();
    match Cli::parse().command {
        Command::Publish { out } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let real = support::repo_root().join("../shared/catalogs/community-operators-v4.16");
            let plan = scenarios::publish(&registry, &real).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
            eprintln!(
                "interop: published {} catalogs and the real operator",
                plan.catalogs.len()
            );
        }
        Command::Catalogs { plan, delete } => {
            let plan = read_plan(&plan);
            let client = client().await;
            if delete {
                let api = Api::<ClusterCatalog>::all(client);
                for catalog in &plan.catalogs {
                    api.delete(&catalog.name, &DeleteParams::default()).await.ok();
                }
            } else {
                for catalog in &plan.catalogs {
                    components::apply_catalog(
                        &client,
                        &catalog.name,
                        &catalog.image,
                        catalog.priority,
                        "interop",
                    )
                    .await;
                }
                for catalog in &plan.catalogs {
                    components::wait_catalog_serving(&client, &catalog.name).await;
                }
                eprintln!("interop: {} ClusterCatalogs Serving", plan.catalogs.len());
            }
        }
        Command::Real { plan, label } => real_operator(&read_plan(&plan), &label).await,
        Command::Scenarios {
            out,
            without_service_account,
        } => run_scenarios(&out, Installer::from_flag(without_service_account)).await,
        Command::BenchPublish { out } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let plan = bench::publish(&registry, &support::shared_catalogs_root()).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
        }
        Command::BenchNamespaces => bench::prepare_namespaces().await,
        Command::BenchController {
            pid,
            idle_seconds,
            out,
        } => {
            let figures = bench::controller(pid, Duration::from_secs(idle_seconds)).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::BenchClean => bench::clean_controller_load().await,
        Command::BenchCatalogd { plan, pid, ca, out } => {
            let plan: bench::BenchPlan = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
            let figures = bench::catalogd(pid, &plan, ca.as_deref()).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::BenchTable { results } => {
            let results = serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
            print!("{}", bench::table(&results));
        }
        Command::ScalePublish {
            extensions,
            catalogs,
            out,
        } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let figures = scale::publish(&registry, extensions, catalogs).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleNamespaces { plan } => {
            let plan: scale::ScalePlan = read_json(&plan);
            bench::prepare_namespaces_named(plan.extensions.into_iter()).await;
        }
        Command::ScaleInstall {
            plan,
            pid,
            metrics,
            out,
        } => {
            let figures = scale::install(pid, &metrics, &read_json(&plan)).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleIdle {
            pid,
            metrics,
            seconds,
            settle,
            every,
            out,
        } => {
            let secs = Duration::from_secs;
            let figures = scale::idle(pid, &metrics, secs(settle), secs(seconds), secs(every)).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleSnapshot { out } => {
            let figures = scale::snapshot().await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleRestart {
            pid,
            metrics,
            started,
            audit_log,
            audit_from,
            before,
            expected,
            settle,
            out,
        } => {
            let run = scale::Restarted {
                pid,
                metrics: &metrics,
                started,
                audit_log: &audit_log,
                audit_from,
            };
            let figures =
                scale::restart(run, &read_json(&before), expected, Duration::from_secs(settle)).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScalePublishCatalogs { out, dirs } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let figures = scale::publish_catalogs(&registry, &dirs).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleCatalogd { catalogs, pid, out } => {
            let catalogs: Vec<(String, String)> = read_json(&catalogs);
            let figures = scale::catalogd(pid, &catalogs).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::ScaleReport { dir } => print!("{}", scale::report(&dir)),
        Command::Compare {
            olmv1,
            upstream,
            docs,
        } => {
            let read = |p: &PathBuf| -> BTreeMap<String, Outcome> {
                serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
            };
            let listed = compare::listed_differences(&std::fs::read_to_string(&docs).unwrap());
            let table = compare::compare(&scenarios::all(), &read(&olmv1), &read(&upstream), &listed);
            print!("{}", table.render());
            if table.unlisted > 0 {
                eprintln!(
                    "interop: {} difference(s) between olmv1 and upstream are not listed in {}",
                    table.unlisted,
                    docs.display()
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn read_json<T: serde::de::DeserializeOwned>(path: &PathBuf) -> T {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_plan(path: &PathBuf) -> Plan {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

async fn client() -> Client {
    Client::try_default()
        .await
        .expect("KUBECONFIG names the local control plane")
}

/// Whether the scenarios name an installer ServiceAccount.
#[derive(Clone, Copy, PartialEq)]
enum Installer {
    /// `installer`, with cluster-admin, in each namespace (olmv1 applies as it; upstream ignores it).
    ServiceAccount,
    /// None: upstream v1.11's YAML, for controllers that install with their own identity.
    None,
}

impl Installer {
    fn from_flag(without_service_account: bool) -> Self {
        if without_service_account {
            Self::None
        } else {
            Self::ServiceAccount
        }
    }
}

/// A namespace holding ServiceAccount `installer` with cluster-admin (olmv1 applies as it;
/// upstream ignores it).
async fn namespace_with_installer(client: &Client, name: &str) {
    create_namespace(client, name).await;
    components::create_service_account(client, name, "installer").await;
    components::grant_cluster_admin(client, name).await;
}

async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
}

/// Deletes namespaces and the installers' bindings, and waits until the namespaces are gone.
async fn delete_namespaces(client: &Client, names: &[String]) {
    let api = Api::<Namespace>::all(client.clone());
    let bindings = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone());
    for name in names {
        api.delete(name, &DeleteParams::default()).await.ok();
        bindings
            .delete(&format!("{name}-installer"), &DeleteParams::default())
            .await
            .ok();
    }
    for name in names {
        support::wait_for(&format!("namespace {name} to go"), STEP_TIMEOUT, || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
}

/// Direction test: the real operator from the shared catalog, installed, then upgraded along the
/// catalog's `replaces` edge, with whichever catalogd and controller are running.
async fn real_operator(plan: &Plan, label: &str) {
    let client = client().await;
    let catalog = "interop-real";
    let namespace = format!("real-{label}");
    let name = format!("trident-{label}");
    components::apply_catalog(&client, catalog, &plan.real_v1, 0, "trident-operator").await;
    components::wait_catalog_serving(&client, catalog).await;
    let served = Api::<ClusterCatalog>::all(client.clone())
        .get(catalog)
        .await
        .unwrap();
    let base = served
        .status
        .and_then(|s| s.urls)
        .map(|u| u.base)
        .unwrap_or_default();
    println!("real/{label}: ClusterCatalog {catalog} Serving at {base}");
    namespace_with_installer(&client, &namespace).await;
    let body = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": namespace, "serviceAccount": {"name": "installer"},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": "trident-operator", "channels": ["stable"]}}
        }
    });
    components::apply_extension(&client, body).await;
    wait_installed(&client, &name, "26.2.0").await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get("trident-operator")
        .await
        .unwrap_or_else(|e| panic!("the operator's Deployment is not there: {e}"));
    println!(
        "real/{label}: {name} Installed=True at 26.2.0; Deployment {namespace}/{} present",
        deployment.metadata.name.unwrap()
    );
    components::apply_catalog(&client, catalog, &plan.real_v2, 0, "trident-operator").await;
    components::wait_catalog_serving(&client, catalog).await;
    let ext = wait_installed(&client, &name, "26.2.1").await;
    println!(
        "real/{label}: {name} upgraded along the catalog's edge: Installed=True at {} (replaces trident-operator.v26.2.0)",
        ext.status.unwrap().install.unwrap().bundle.name,
    );
    let extensions = Api::<ClusterExtension>::all(client.clone());
    extensions.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_gone(&extensions, &name).await;
    Api::<ClusterCatalog>::all(client.clone())
        .delete(catalog, &DeleteParams::default())
        .await
        .ok();
    delete_namespaces(&client, &[namespace]).await;
}

async fn wait_installed(client: &Client, name: &str, version: &str) -> ClusterExtension {
    let api = Api::<ClusterExtension>::all(client.clone());
    support::wait_for(
        &format!("ClusterExtension {name} Installed=True at {version}"),
        STEP_TIMEOUT,
        || async {
            let ext = api.get(name).await.map_err(|e| e.to_string())?;
            let installed = components::condition(&ext, "Installed").is_some_and(|c| c.status == "True");
            let at = ext
                .status
                .as_ref()
                .and_then(|s| s.install.as_ref())
                .is_some_and(|i| i.bundle.version == version);
            if installed && at {
                Ok(ext)
            } else {
                Err(format!("{:?}", ext.status))
            }
        },
    )
    .await
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::wait_for(&format!("{name} to be deleted"), STEP_TIMEOUT, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

fn extension_api(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<ClusterExtension>(&());
    Api::all_with(client.clone(), &resource)
}

/// Runs all scenarios at once, records their outcomes, then removes what they installed.
async fn run_scenarios(out: &std::path::Path, installer: Installer) {
    let client = client().await;
    let all = scenarios::all();
    let namespaces: Vec<String> = all.iter().map(Scenario::namespace).collect();
    for namespace in &namespaces {
        match installer {
            Installer::ServiceAccount => namespace_with_installer(&client, namespace).await,
            Installer::None => create_namespace(&client, namespace).await,
        }
    }
    let settled = futures::future::join_all(all.iter().map(|s| run_scenario(&client, s, installer))).await;
    let objects = support::wait_for("the applied objects", STEP_TIMEOUT, || applied_objects(&client)).await;
    let mut outcomes = BTreeMap::new();
    for (scenario, mut outcome) in all.iter().zip(settled) {
        outcome.objects = objects.get(scenario.name).cloned().unwrap_or_default();
        outcomes.insert(scenario.name.to_string(), outcome);
    }
    std::fs::write(out, serde_json::to_vec_pretty(&outcomes).unwrap()).unwrap();
    eprintln!("interop: {} scenarios recorded; cleaning up", outcomes.len());
    let api = extension_api(&client);
    for scenario in &all {
        api.delete(scenario.name, &DeleteParams::default()).await.ok();
    }
    for scenario in &all {
        wait_gone(&api, scenario.name).await;
    }
    support::wait_for("the applied objects to go", STEP_TIMEOUT, || async {
        let left = applied_objects(&client).await?;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    delete_namespaces(&client, &namespaces).await;
}

/// Applies each step, waits for its expectation, then waits until the status stops changing.
async fn run_scenario(client: &Client, scenario: &Scenario, installer: Installer) -> Outcome {
    let api = extension_api(client);
    for step in &scenario.steps {
        components::apply_extension(client, extension_body(scenario, step, installer)).await;
        support::wait_for_every(
            &format!("scenario {}: {:?}", scenario.name, step.expect),
            STEP_TIMEOUT,
            Duration::from_millis(500),
            || async {
                let ext = api.get(scenario.name).await.map_err(|e| e.to_string())?;
                let status = &ext.data["status"];
                if step_reached(&ext, &step.expect) {
                    Ok(())
                } else {
                    Err(status.to_string())
                }
            },
        )
        .await;
    }
    // Settled: two snapshots 3 s apart are equal.
    let mut last = snapshot(&api.get(scenario.name).await.unwrap());
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = snapshot(&api.get(scenario.name).await.unwrap());
        if now == last {
            break;
        }
        last = now;
    }
    eprintln!("interop: scenario {} settled", scenario.name);
    last
}

fn extension_body(scenario: &Scenario, step: &Step, installer: Installer) -> Value {
    let mut catalog = json!({"packageName": scenario.package});
    if let Value::Object(fields) = &step.catalog {
        catalog.as_object_mut().unwrap().extend(fields.clone());
    }
    let mut body = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": scenario.name},
        "spec": {
            "namespace": scenario.namespace(),
            "serviceAccount": {"name": "installer"},
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    });
    if let Some(config) = &step.config {
        body["spec"]["config"] = config.clone();
    }
    if installer == Installer::None {
        body["spec"].as_object_mut().unwrap().remove("serviceAccount");
    }
    body
}

fn condition<'a>(ext: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    ext.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether the controller has reported on the current generation as `expect` says.
fn step_reached(ext: &DynamicObject, expect: &Expect) -> bool {
    let generation = ext.metadata.generation.unwrap_or_default();
    let Some(progressing) = condition(ext, "Progressing") else {
        return false;
    };
    if progressing["observedGeneration"].as_i64() != Some(generation) {
        return false;
    }
    match expect {
        Expect::Installed(version) => {
            condition(ext, "Installed").is_some_and(|c| c["status"] == "True")
                && ext.data["status"]["install"]["bundle"]["version"] == *version
                && progressing["reason"] == "Succeeded"
        }
        Expect::Refused => progressing["reason"] != "Succeeded" && progressing["reason"] != "RollingOut",
    }
}

fn snapshot(ext: &DynamicObject) -> Outcome {
    let conditions = CONDITION_TYPES
        .iter()
        .map(|t| {
            let value = condition(ext, t).map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                [text("status"), text("reason"), text("message")]
            });
            (t.to_string(), value)
        })
        .collect();
    Outcome {
        conditions,
        install: ext.data["status"]["install"].clone(),
        objects: vec![],
    }
}

/// Every object labelled as applied for a ClusterExtension, by its owner's name, as sorted
/// `Kind namespace/name` (cluster-scoped: `Kind name`). The controllers' own records in the system
/// namespace (olmv1's revision Secret; upstream's Helm release Secrets carry no owner label) are
/// bookkeeping, not bundle content, and are left out.
/// Fails while discovery does (a CRD being deleted can make a group 404 for a moment).
async fn applied_objects(client: &Client) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, meta) in labelled_objects(client).await? {
        if meta.namespace.as_deref() == Some(components::SYSTEM_NAMESPACE) {
            continue;
        }
        let owner = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER_NAME))
            .cloned()
            .unwrap_or_default();
        by_owner.entry(owner).or_default().push(id);
    }
    for ids in by_owner.values_mut() {
        ids.sort();
        ids.dedup();
    }
    Ok(by_owner)
}

/// Every object, of any listable kind but events, labelled as applied for a ClusterExtension:
/// `Kind namespace/name` (cluster-scoped: `Kind name`) and its metadata.
async fn labelled_objects(client: &Client) -> Result<Vec<(String, kube::api::ObjectMeta)>, String> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| format!("API discovery: {e}"))?;
    let params = ListParams::default().labels(&format!("{OWNER_KIND}=ClusterExtension"));
    let mut objects = Vec::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || resource.kind == "Event" {
                continue;
            }
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            let Ok(list) = api.list_metadata(&params).await else {
                continue;
            };
            for object in list.items {
                let meta = object.metadata;
                let name = meta.name.clone().unwrap_or_default();
                let id = match &meta.namespace {
                    Some(ns) => format!("{} {ns}/{name}", resource.kind),
                    None => format!("{} {name}", resource.kind),
                };
                objects.push((id, meta));
            }
        }
    }
    Ok(objects)
}
