//! `cargo bench --bench controller`: the ClusterExtension controller on the local control plane.
//!
//! Measures, with a real kube-apiserver, registry and `olmv1 catalogd`:
//! - time from applying a ClusterExtension to `Installed=True`, with the bundle image not yet
//!   pulled (cold) and already in the controller's cache (cached);
//! - N ClusterExtensions (default 100, `OLMV1_BENCH_EXTENSIONS`) applied at once: total time to
//!   all `Installed=True`, and API requests the controller made per reconcile (the API server's
//!   priority-and-fairness counters for service accounts: the controller's own and the
//!   extensions' accounts it acts as; catalogd and the test run as cluster admins);
//! - the controller's resident memory idle and its peak under that load.
//!
//! Prints a Markdown table.

#[path = "../test/support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "../test/e2e/fixtures.rs"]
mod fixtures;

use std::{
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use fixtures::{Bundle, Channel, Package};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::json;

const SYSTEM_NAMESPACE: &str = "olmv1-system";

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let env = support::env();
    let client = support::client().await;
    let extensions: usize = std::env::var("OLMV1_BENCH_EXTENSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);

    // The components' namespace, identities and RBAC, as the install manifest has them.
    let rbac = support::install_manifest_rbac("default", &[]);
    support::kubectl_apply(&json!({"apiVersion": "v1", "kind": "List", "items": rbac}).to_string()).ok();
    // One catalog with a package per extension, each with its own CRD group.
    let packages: Vec<String> = (0..=extensions).map(|i| format!("bench{i}")).collect();
    let run_id = support::fresh_name("b");
    let mut catalog_lines = Vec::new();
    let started = Instant::now();
    for package in &packages {
        let name = format!("{package}-{run_id}");
        let pkg = Package {
            name: name.clone(),
            default_channel: "stable".into(),
            channels: vec![Channel::new("stable", &["1.0.0"])],
            bundles: vec![Bundle::new("1.0.0")],
            deprecations: vec![],
        };
        catalog_lines.push(pkg);
    }
    let catalog_image = publish_multi(&catalog_lines).await;
    eprintln!(
        "published {} bundles and their catalog in {:?}",
        packages.len(),
        started.elapsed()
    );

    let port = support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let scratch = fixtures::scratch_dir("bench");
    let catalogd = spawn(
        env,
        None,
        &[
            "catalogd",
            "--catalogs-server-addr",
            &addr,
            "--external-address",
            &addr,
            "--cache-dir",
            scratch.join("catalogd").to_str().unwrap(),
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
        ],
    );
    let controller_kubeconfig = support::service_account_kubeconfig(
        SYSTEM_NAMESPACE,
        "olmv1-controller",
        &scratch.join("controller.kubeconfig"),
    );
    let controller = spawn(
        env,
        Some(&controller_kubeconfig),
        &[
            "controller",
            "--system-namespace",
            SYSTEM_NAMESPACE,
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", support::free_port()),
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--cache-dir",
            scratch.join("controller").to_str().unwrap(),
            "--concurrency",
            "8",
        ],
    );
    let catalog_name = format!("bench-{run_id}");
    let catalog = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": catalog_name},
        "spec": {"source": {"type": "Image", "image": {"ref": catalog_image}}}
    });
    Api::<olmv1_api::v1::ClusterCatalog>::all(client.clone())
        .patch(
            &catalog_name,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&catalog),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_rss = rss_kib(controller.id(), "VmRSS");

    // One extension alone: cold (image not pulled), then cached (delete, install again).
    let first = &catalog_lines[0].name;
    let namespace = installer_namespace(&client, first).await;
    let cold = install_and_wait(&client, &[(first.clone(), namespace.clone())]).await;
    Api::<ClusterExtension>::all(client.clone())
        .delete(first, &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&client, first).await;
    let cached = install_and_wait(&client, &[(first.clone(), namespace)]).await;

    // N at once.
    let mut batch = Vec::new();
    for pkg in &catalog_lines[1..] {
        batch.push((pkg.name.clone(), installer_namespace(&client, &pkg.name).await));
    }
    let requests_before = support::service_account_requests(&client).await;
    let reconciles_before = reconciles(&controller_metrics_addr(&controller)).await;
    let load = install_and_wait(&client, &batch).await;
    // Let the last status writes and requeues settle before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = support::service_account_requests(&client).await - requests_before;
    let reconcile_count = reconciles(&controller_metrics_addr(&controller)).await - reconciles_before;
    let peak_rss = rss_kib(controller.id(), "VmHWM");

    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| apply -> Installed=True, one extension, image not cached | {:.2} s |",
        cold.as_secs_f64()
    );
    println!(
        "| apply -> Installed=True, one extension, image cached | {:.2} s |",
        cached.as_secs_f64()
    );
    println!(
        "| {} extensions applied at once -> all Installed=True | {:.1} s |",
        batch.len(),
        load.as_secs_f64()
    );
    println!(
        "| API requests by service accounts per reconcile (load) | {:.1} ({requests} requests / {reconcile_count} reconciles) |",
        requests as f64 / reconcile_count.max(1) as f64
    );
    println!("| controller RSS idle | {:.1} MiB |", idle_rss as f64 / 1024.0);
    println!(
        "| controller peak RSS (after the load) | {:.1} MiB |",
        peak_rss as f64 / 1024.0
    );
    for mut child in [catalogd, controller] {
        child.kill().ok();
        child.wait().ok();
    }
}

/// Publishes every package's bundle and one catalog image holding all packages.
async fn publish_multi(packages: &[Package]) -> String {
    let registry = support::registry();
    let work = tempfile::tempdir().unwrap();
    for package in packages {
        // publish_catalog writes and pushes one package; reuse its bundle publishing and
        // gather the catalogs' files into one image.
        let single =
            fixtures::publish_catalog(registry, &format!("bench/{}", package.name), "v1", package).await;
        let pulled = olmv1::image::pull_to_dir(
            &single,
            &olmv1::image::PullOptions::new(work.path().join("pulls")),
        )
        .await
        .unwrap();
        let from = pulled.dir.join("configs").join(&package.name);
        let to = work.path().join("configs").join(&package.name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(from.join("catalog.json"), to.join("catalog.json")).unwrap();
    }
    let options = olmv1::image::PushOptions {
        registry: Default::default(),
        labels: [(
            "operators.operatorframework.io.index.configs.v1".to_string(),
            "/configs".to_string(),
        )]
        .into(),
        prefix: "/configs".into(),
        ..Default::default()
    };
    olmv1::image::push_dir(
        &work.path().join("configs"),
        &format!("{registry}/bench/catalog:latest"),
        &options,
    )
    .await
    .unwrap()
    .digest_ref
}

async fn installer_namespace(client: &Client, package: &str) -> String {
    let namespace = support::fresh_namespace(client, "bench").await;
    support::kubectl(&["-n", &namespace, "create", "serviceaccount", "installer"]).ok();
    support::kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{namespace}-{package}"),
        "--clusterrole=cluster-admin",
        &format!("--serviceaccount={namespace}:installer"),
    ])
    .ok();
    namespace
}

async fn install_and_wait(client: &Client, extensions: &[(String, String)]) -> Duration {
    let api = Api::<ClusterExtension>::all(client.clone());
    let start = Instant::now();
    for (package, namespace) in extensions {
        let body = json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": package},
            "spec": {"namespace": namespace, "serviceAccount": {"name": "installer"},
                     "source": {"sourceType": "Catalog", "catalog": {"packageName": package}}}
        });
        api.patch(
            package,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap();
    }
    let names: std::collections::BTreeSet<&str> = extensions.iter().map(|(p, _)| p.as_str()).collect();
    loop {
        let list = api.list(&Default::default()).await.unwrap();
        let installed = list
            .items
            .iter()
            .filter(|e| names.contains(e.metadata.name.as_deref().unwrap_or_default()))
            .filter(|e| {
                e.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Installed" && c.status == "True")
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Progressing" && c.reason == "Succeeded")
                })
            })
            .count();
        if installed == names.len() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "only {installed} of {} installed",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_deleted(client: &Client, name: &str) {
    let api = Api::<ClusterExtension>::all(client.clone());
    while api.get_opt(name).await.unwrap().is_some() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn controller_metrics_addr(controller: &Child) -> String {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", controller.id())).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let at = args.iter().position(|a| a == "--metrics-bind-address").unwrap();
    args[at + 1].clone()
}

async fn reconciles(addr: &str) -> u64 {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with("olmv1_clusterextension_reconcile_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_default()
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_default()
}

fn spawn(env: &support::TestEnv, kubeconfig: Option<&std::path::Path>, args: &[&str]) -> Child {
    let mut command = env.command(support::olmv1_bin());
    if let Some(path) = kubeconfig {
        command.env("KUBECONFIG", path);
    }
    command
        .args(args)
        .env("OLMV1_EXIT_WITH_PARENT", "1")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}
