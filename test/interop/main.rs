//! The driver of `hack/interop.sh` (run it through that script): publishes the fixtures, drives
//! a controller through the real operator's install and upgrade and through the scenarios of the
//! differences table, records what each controller reported, writes upstream's records
//! (`records/upstream.json`) and compares olmv1's runs with them. The scenarios, their run and the
//! comparison are the CI test's too (`ci.rs`, without upstream's binaries).
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
mod records;
mod run;
mod scale;
mod scenarios;

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client, api::DeleteParams};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::json;

use records::Records;
use run::{STEP_TIMEOUT, delete_namespaces, namespace_with_installer, wait_gone};
use scenarios::{CATALOG_LABEL, Outcome, Plan, Run};

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
        /// Which run this is: it decides the YAML (installer ServiceAccounts or upstream
        /// v1.11's) and what each step waits for.
        #[arg(long, value_enum)]
        run: Run,
    },
    /// Prints the `olmv1 controller` flags of a run (space-separated).
    ControllerArgs {
        #[arg(value_enum)]
        run: Run,
    },
    /// Writes upstream's records: the outcomes of the `upstream` run, with the commit and today.
    Record {
        /// The outcomes written by `scenarios --run upstream`.
        upstream: PathBuf,
        /// The operator-controller commit upstream's binaries were built from.
        #[arg(long)]
        upstream_commit: String,
        /// Where the records go (default: the repository's test/interop/records/upstream.json).
        #[arg(long)]
        out: Option<PathBuf>,
    },
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
        /// The API server's audit log: the idle window's requests broken down by kind.
        #[arg(long)]
        audit_log: Option<PathBuf>,
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
    /// Prints the Markdown table of results files, one per sample ({"olmv1": {...}, "upstream":
    /// {...}}): medians, spreads, ratios.
    BenchTable { results: Vec<PathBuf> },
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
    /// Compares an olmv1 run's outcomes with upstream's records (the CI test's table); fails on
    /// a difference docs/upstream.md does not list for that run.
    Compare {
        /// The outcomes written by `scenarios --run RUN`.
        olmv1: PathBuf,
        #[arg(long, value_enum)]
        run: Run,
        /// Upstream's records (default: the repository's test/interop/records/upstream.json).
        #[arg(long)]
        records: Option<PathBuf>,
        /// The page whose tables list the differences on purpose (default: the repository's
        /// docs/upstream.md).
        #[arg(long)]
        docs: Option<PathBuf>,
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
                        CATALOG_LABEL.1,
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
        Command::Scenarios { out, run } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let outcomes = run::run_scenarios(&client().await, run, &registry).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&outcomes).unwrap()).unwrap();
        }
        Command::ControllerArgs { run } => println!("{}", run.controller_args().join(" ")),
        Command::Record {
            upstream,
            upstream_commit,
            out,
        } => {
            let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
            let out = out.unwrap_or_else(|| support::repo_root().join(records::RECORDS_FILE));
            Records::new(upstream_commit, today, read_json(&upstream)).write(&out);
            eprintln!("interop: upstream's records written to {}", out.display());
        }
        Command::BenchPublish { out } => {
            let registry = std::env::var("OLMV1_REGISTRY").expect("OLMV1_REGISTRY names the local registry");
            let plan = bench::publish(&registry, &support::shared_catalogs_root()).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
        }
        Command::BenchNamespaces => bench::prepare_namespaces().await,
        Command::BenchController {
            pid,
            idle_seconds,
            audit_log,
            out,
        } => {
            let figures =
                bench::controller(pid, Duration::from_secs(idle_seconds), audit_log.as_deref()).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::BenchClean => bench::clean_controller_load().await,
        Command::BenchCatalogd { plan, pid, ca, out } => {
            let plan: bench::BenchPlan = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
            let figures = bench::catalogd(pid, &plan, ca.as_deref()).await;
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
        }
        Command::BenchTable { results } => {
            let samples: Vec<BTreeMap<String, serde_json::Value>> = results
                .iter()
                .map(|path| serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
                .collect();
            print!("{}", bench::table(&samples));
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
            run,
            records,
            docs,
        } => {
            let outcomes: BTreeMap<String, Outcome> = read_json(&olmv1);
            let records = records.unwrap_or_else(|| support::repo_root().join(records::RECORDS_FILE));
            let docs = docs.unwrap_or_else(|| support::repo_root().join(records::DOCS_FILE));
            let page = std::fs::read_to_string(&docs).unwrap();
            let table = records::table(run, &outcomes, &Records::read(&records), &page);
            print!("{}", table.render());
            let failures = table.failures();
            for line in &failures {
                eprintln!("interop: {}: {line}", run.label());
            }
            if !failures.is_empty() {
                eprintln!(
                    "interop: {} difference(s) between olmv1 and upstream's records are not as {} lists them",
                    failures.len(),
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
