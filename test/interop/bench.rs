//! hack/bench-vs-upstream.sh's measurements: the same loads on whichever controller or catalogd
//! runs (given its pid), figures as JSON, and the side-by-side table with ratios.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration, time::Instant};

use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{components, fixtures, support};

/// ClusterExtensions of the load: `bench-001` ... `bench-100`; `bench-000` is the single one.
const LOAD: usize = 100;

/// What `bench-publish` pushed.
#[derive(Debug, Serialize, Deserialize)]
pub struct BenchPlan {
    /// One catalog of 101 one-Deployment packages `bench-000` ... `bench-100`.
    pub load_catalog: String,
    /// The shared catalogs as images: (folder name, reference).
    pub shared: Vec<(String, String)>,
}

/// Pushes the load's packages and the three shared catalogs.
pub async fn publish(registry: &str, shared_root: &Path) -> BenchPlan {
    let mut lines = Vec::new();
    for i in 0..=LOAD {
        lines.extend(publish_load_package(registry, "bench", &format!("bench-{i:03}")).await);
    }
    let load_catalog = fixtures::push_catalog(&format!("{registry}/bench/load:v1"), "bench", &lines).await;
    let mut shared = Vec::new();
    for name in [
        "certified-operators-v4.16",
        "community-operators-v4.16",
        "certified-operators-v4.20",
    ] {
        let reference = push_catalog_dir(registry, &shared_root.join(name), name).await;
        shared.push((name.to_string(), reference));
    }
    BenchPlan { load_catalog, shared }
}

/// Pushes a file-based catalog directory as the catalog image `registry/bench/NAME:v1`.
pub async fn push_catalog_dir(registry: &str, dir: &Path, name: &str) -> String {
    fixtures::push(
        dir,
        &format!("{registry}/bench/{name}:v1"),
        "/configs",
        &[("operators.operatorframework.io.index.configs.v1", "/configs")],
    )
    .await
}

/// Pushes the bundle image of a one-Deployment package (no CRD) under `registry/repository/`;
/// returns the package's catalog objects (JSON lines).
pub async fn publish_load_package(registry: &str, repository: &str, package: &str) -> Vec<String> {
    let bundle = fixtures::Bundle::new("1.0.0").without_config_map();
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_bundle(dir.path(), package, &bundle);
    // One Deployment, its ServiceAccount and permissions: no CRD.
    std::fs::remove_file(dir.path().join("manifests/widgets.crd.yaml")).unwrap();
    let csv_path = dir
        .path()
        .join(format!("manifests/{package}.clusterserviceversion.yaml"));
    let mut csv: Value = serde_json::from_slice(&std::fs::read(&csv_path).unwrap()).unwrap();
    csv["spec"]["customresourcedefinitions"] = json!({});
    std::fs::write(&csv_path, serde_json::to_vec(&csv).unwrap()).unwrap();
    let image = fixtures::push(
        dir.path(),
        &format!("{registry}/{repository}/{package}-bundle:v1.0.0"),
        "/",
        &[(
            "operators.operatorframework.io.bundle.mediatype.v1",
            "registry+v1",
        )],
    )
    .await;
    let name = fixtures::bundle_name(package, "1.0.0");
    vec![
        json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}).to_string(),
        json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]})
            .to_string(),
        json!({"schema": "olm.bundle", "name": name, "package": package, "image": image,
        "properties": [{"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}}]})
        .to_string(),
    ]
}

/// CPU seconds and memory of a process, from /proc.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ProcStat {
    pub cpu_s: f64,
    pub rss_mib: f64,
    pub peak_mib: f64,
}

/// The value in KiB of field `key` (e.g. `VmRSS:`) of a `/proc/PID/status` text; 0 when absent.
fn status_kib(status: &str, key: &str) -> f64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0)
}

pub fn proc_stat(pid: u32) -> ProcStat {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the measured process runs");
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| status_kib(&status, key);
    ProcStat {
        cpu_s: ticks / 100.0,
        rss_mib: kib("VmRSS:") / 1024.0,
        peak_mib: kib("VmHWM:") / 1024.0,
    }
}

/// Samples a process's resident memory until stopped, keeping the sample of the highest
/// `VmRSS`: its (`RssAnon`, `RssFile`) in MiB.
pub struct RssSplitSampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(f64, f64)>,
}

impl RssSplitSampler {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut best, mut split) = (0.0, (0.0, 0.0));
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                    let kib = |key: &str| status_kib(&status, key);
                    let rss = kib("VmRSS:");
                    if rss > best {
                        best = rss;
                        split = (kib("RssAnon:") / 1024.0, kib("RssFile:") / 1024.0);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            split
        });
        RssSplitSampler { stop, thread }
    }

    pub fn finish(self) -> (f64, f64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the sampler does not panic")
    }
}

/// Resets the process's peak RSS (VmHWM) to its current RSS.
pub fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs (needs root)");
}

/// The controller figures of one run.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ControllerFigures {
    pub cold_s: f64,
    pub warm_s: f64,
    pub load_s: f64,
    pub load_cpu_s: f64,
    pub load_peak_mib: f64,
    /// The heap (`RssAnon`) and the binary's pages (`RssFile`) when the RSS sampled during the
    /// load was highest: which of the two a peak is made of.
    #[serde(default)]
    pub load_peak_anon_mib: f64,
    #[serde(default)]
    pub load_peak_file_mib: f64,
    pub idle_s: f64,
    pub idle_cpu_s: f64,
    pub idle_requests: u64,
    pub idle_rss_start_mib: f64,
    pub idle_rss_end_mib: f64,
    /// The idle window's requests by the controller and its installers, from the API server's
    /// audit log (`hack/local-up.sh` with `OLMV1_AUDIT_SERVICE_ACCOUNT_READS=1`), by
    /// `identity verb resource[?selector]`: where each idle request comes from.
    #[serde(default)]
    pub idle_requests_by_kind: BTreeMap<String, u64>,
    /// The load average (1, 5, 15 minutes) when the load started, when it ended, and at the end
    /// of the idle window.
    #[serde(default)]
    pub load_avg: Vec<String>,
}

/// The machine's load average (`/proc/loadavg`'s first three fields).
pub fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The service accounts that are the controllers under measure (olmv1's and upstream's); every
/// other service account's requests are their installers'.
const CONTROLLER_USERS: [&str; 2] = [
    "system:serviceaccount:olmv1-system:olmv1-controller",
    "system:serviceaccount:olmv1-system:operator-controller",
];

/// Requests by service accounts in the audit log from byte `from` on, received at or after
/// `since`, by `identity verb resource[?selector]` (a watch's or list's label and field selectors
/// name which one it is). Each request once (a watch has two entries: started and completed).
pub fn audited_requests(audit_log: &Path, from: u64, since: jiff::Timestamp) -> BTreeMap<String, u64> {
    use std::io::{BufRead, Seek};
    let mut file = std::fs::File::open(audit_log).unwrap();
    file.seek(std::io::SeekFrom::Start(from)).unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut counts = BTreeMap::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(entry) = serde_json::from_str::<Value>(&line.unwrap_or_default()) else {
            continue;
        };
        let user = entry["user"]["username"].as_str().unwrap_or_default();
        let received = entry["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        if !user.starts_with("system:serviceaccount:")
            || received.is_none_or(|t| t < since)
            || !seen.insert(entry["auditID"].as_str().unwrap_or_default().to_string())
        {
            continue;
        }
        let identity = if CONTROLLER_USERS.contains(&user) {
            "controller"
        } else {
            "installer"
        };
        let verb = entry["verb"].as_str().unwrap_or_default();
        let resource = entry["objectRef"]["resource"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| entry["requestURI"].as_str().unwrap_or_default().to_string());
        let subresource = entry["objectRef"]["subresource"]
            .as_str()
            .map(|s| format!("/{s}"))
            .unwrap_or_default();
        let uri = entry["requestURI"].as_str().unwrap_or_default();
        let selectors: Vec<String> = url::Url::parse(&format!("http://x{uri}"))
            .map(|u| {
                u.query_pairs()
                    .filter(|(k, _)| k == "labelSelector" || k == "fieldSelector")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect()
            })
            .unwrap_or_default();
        let selectors = if selectors.is_empty() {
            String::new()
        } else {
            format!("?{}", selectors.join("&"))
        };
        *counts
            .entry(format!("{identity} {verb} {resource}{subresource}{selectors}"))
            .or_default() += 1;
    }
    counts
}

fn body(i: usize) -> Value {
    extension_body(&format!("bench-{i:03}"))
}

/// A ClusterExtension `name` of package `name` into namespace `name`, as its `installer`.
pub fn extension_body(name: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": name, "serviceAccount": {"name": "installer"},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": name}}
        }
    })
}

async fn installed(api: &Api<ClusterExtension>, name: &str) -> bool {
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .is_some_and(|ext| components::condition(&ext, "Installed").is_some_and(|c| c.status == "True"))
}

/// Applies the ClusterExtensions and waits until all are `Installed=True` (listing them every
/// `poll`, up to `timeout`): seconds from the first apply.
pub async fn time_to_installed(
    client: &Client,
    extensions: &[Value],
    poll: Duration,
    timeout: Duration,
) -> f64 {
    let api = Api::<ClusterExtension>::all(client.clone());
    let start = Instant::now();
    for extension in extensions {
        components::apply_extension(client, extension.clone()).await;
    }
    let mut pending: std::collections::HashSet<String> = extensions
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let deadline = start + timeout;
    while !pending.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} not Installed after {timeout:?}: {:?}",
            pending.len(),
            pending.iter().take(10).collect::<Vec<_>>()
        );
        let list = api.list(&ListParams::default()).await.unwrap();
        for done in list
            .items
            .iter()
            .filter(|e| components::condition(e, "Installed").is_some_and(|c| c.status == "True"))
        {
            pending.remove(&done.name_any());
        }
        if !pending.is_empty() {
            tokio::time::sleep(poll).await;
        }
    }
    start.elapsed().as_secs_f64()
}

/// One extension cold then warm, then the load of 100, then the idle window (its requests broken
/// down from `audit_log` when given).
pub async fn controller(pid: u32, idle: Duration, audit_log: Option<&Path>) -> ControllerFigures {
    let client = Client::try_default().await.unwrap();
    let api = Api::<ClusterExtension>::all(client.clone());
    let one = [body(0)];
    let (poll, timeout) = (Duration::from_millis(100), Duration::from_secs(900));
    let mut figures = ControllerFigures {
        cold_s: time_to_installed(&client, &one, poll, timeout).await,
        ..Default::default()
    };
    api.delete("bench-000", &DeleteParams::default()).await.unwrap();
    support::wait_for(
        "bench-000 deleted and its Deployment gone",
        Duration::from_secs(300),
        || async {
            let gone = api
                .get_opt("bench-000")
                .await
                .map_err(|e| e.to_string())?
                .is_none();
            let deployments =
                Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), "bench-000")
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
            if gone && deployments.items.is_empty() && !installed(&api, "bench-000").await {
                Ok(())
            } else {
                Err("still there".to_string())
            }
        },
    )
    .await;
    figures.warm_s = time_to_installed(&client, &one, poll, timeout).await;
    eprintln!(
        "bench: one extension cold {:.2} s, warm {:.2} s",
        figures.cold_s, figures.warm_s
    );

    reset_peak(pid);
    figures.load_avg.push(load_avg());
    let before = proc_stat(pid);
    let sampler = RssSplitSampler::start(pid);
    let load: Vec<Value> = (1..=LOAD).map(body).collect();
    figures.load_s = time_to_installed(&client, &load, poll, timeout).await;
    let after = proc_stat(pid);
    (figures.load_peak_anon_mib, figures.load_peak_file_mib) = sampler.finish();
    figures.load_avg.push(load_avg());
    figures.load_cpu_s = after.cpu_s - before.cpu_s;
    figures.load_peak_mib = after.peak_mib;
    eprintln!(
        "bench: {LOAD} extensions Installed in {:.1} s, {:.1} CPU s, peak {:.1} MiB (sampled peak: heap {:.1}, binary {:.1})",
        figures.load_s,
        figures.load_cpu_s,
        figures.load_peak_mib,
        figures.load_peak_anon_mib,
        figures.load_peak_file_mib
    );

    // Idle: after a minute for the work that follows Installed, the window itself.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let start = proc_stat(pid);
    let audit_from = audit_log.map(|log| std::fs::metadata(log).map(|m| m.len()).unwrap_or(0));
    let idle_since = jiff::Timestamp::now();
    let requests = support::service_account_requests(&client).await;
    tokio::time::sleep(idle).await;
    let end = proc_stat(pid);
    figures.load_avg.push(load_avg());
    if let (Some(log), Some(from)) = (audit_log, audit_from) {
        // The entries of requests that ended in the window are written by now; the driver's own
        // reads are the cluster admin's, not counted.
        figures.idle_requests_by_kind = audited_requests(log, from, idle_since);
    }
    figures.idle_s = idle.as_secs_f64();
    figures.idle_cpu_s = end.cpu_s - start.cpu_s;
    figures.idle_requests = support::service_account_requests(&client).await - requests;
    figures.idle_rss_start_mib = start.rss_mib;
    figures.idle_rss_end_mib = end.rss_mib;
    eprintln!("bench: idle {figures:?}");
    figures
}

/// Removes the load's ClusterExtensions and waits until they are gone (with the controller
/// that installed them still running).
pub async fn clean_controller_load() {
    let client = Client::try_default().await.unwrap();
    let api = Api::<ClusterExtension>::all(client.clone());
    for i in 0..=LOAD {
        api.delete(&format!("bench-{i:03}"), &DeleteParams::default())
            .await
            .ok();
    }
    support::wait_for(
        "the load's ClusterExtensions to go",
        Duration::from_secs(600),
        || async {
            let left = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if left.items.is_empty() {
                Ok(())
            } else {
                Err(format!("{} left", left.items.len()))
            }
        },
    )
    .await;
}

/// Namespaces and installers for the load (created once, for both controllers).
pub async fn prepare_namespaces() {
    prepare_namespaces_named((0..=LOAD).map(|i| format!("bench-{i:03}"))).await;
}

/// A namespace per name, each with its installer.
pub async fn prepare_namespaces_named(names: impl Iterator<Item = String>) {
    let client = Client::try_default().await.unwrap();
    for name in names {
        crate::namespace_with_installer(&client, &name).await;
    }
}

/// The catalogd figures of one run.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CatalogdFigures {
    pub certified_serving_s: f64,
    pub certified_peak_mib: f64,
    pub certified_serving_rss_mib: f64,
    pub all_mib_per_s: f64,
    pub metas_per_s: f64,
    pub three_serving_s: f64,
    pub three_peak_mib: f64,
    pub three_serving_rss_mib: f64,
    /// The load average at the start and at the end.
    #[serde(default)]
    pub load_avg: Vec<String>,
}

pub async fn serve_catalogs(client: &Client, catalogs: &[(String, String)]) -> f64 {
    let start = Instant::now();
    for (name, image) in catalogs {
        components::apply_catalog(client, &format!("bench-{name}"), image, 0, "bench").await;
    }
    for (name, _) in catalogs {
        components::wait_catalog_serving(client, &format!("bench-{name}")).await;
    }
    start.elapsed().as_secs_f64()
}

async fn delete_catalogs(client: &Client, catalogs: &[(String, String)]) {
    let api = Api::<ClusterCatalog>::all(client.clone());
    for (name, _) in catalogs {
        api.delete(&format!("bench-{name}"), &DeleteParams::default())
            .await
            .ok();
    }
    for (name, _) in catalogs {
        crate::wait_gone(&api, &format!("bench-{name}")).await;
    }
}

/// The certified catalog alone (time to Serving, memory, throughput), then all three at once.
pub async fn catalogd(pid: u32, plan: &BenchPlan, ca: Option<&Path>) -> CatalogdFigures {
    let client = Client::try_default().await.unwrap();
    let certified = &plan.shared[..1];
    let mut figures = CatalogdFigures {
        load_avg: vec![load_avg()],
        ..Default::default()
    };
    reset_peak(pid);
    figures.certified_serving_s = serve_catalogs(&client, certified).await;
    figures.certified_peak_mib = proc_stat(pid).peak_mib;
    tokio::time::sleep(Duration::from_secs(5)).await;
    figures.certified_serving_rss_mib = proc_stat(pid).rss_mib;
    let base = Api::<ClusterCatalog>::all(client.clone())
        .get(&format!("bench-{}", certified[0].0))
        .await
        .unwrap()
        .status
        .unwrap()
        .urls
        .unwrap()
        .base;
    let http = http_client(ca);
    figures.all_mib_per_s = all_throughput(&http, &base).await;
    figures.metas_per_s = metas_rate(
        &http,
        &base,
        &support::shared_catalogs_root().join(&certified[0].0),
    )
    .await;
    eprintln!("bench: catalogd certified {figures:?}");
    delete_catalogs(&client, certified).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    reset_peak(pid);
    figures.three_serving_s = serve_catalogs(&client, &plan.shared).await;
    figures.three_peak_mib = proc_stat(pid).peak_mib;
    tokio::time::sleep(Duration::from_secs(5)).await;
    figures.three_serving_rss_mib = proc_stat(pid).rss_mib;
    delete_catalogs(&client, &plan.shared).await;
    figures.load_avg.push(load_avg());
    eprintln!("bench: catalogd three {figures:?}");
    figures
}

fn http_client(ca: Option<&Path>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().no_gzip();
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).unwrap();
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
    }
    builder.build().unwrap()
}

/// 4 clients fetch `/api/v1/all` (identity encoding) for 10 s: MiB/s of body.
async fn all_throughput(http: &reqwest::Client, base: &str) -> f64 {
    let url = Arc::new(format!("{base}/api/v1/all"));
    let start = Instant::now();
    let window = Duration::from_secs(10);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                let mut bytes = 0usize;
                while start.elapsed() < window {
                    let response = http
                        .get(url.as_str())
                        .send()
                        .await
                        .unwrap()
                        .error_for_status()
                        .unwrap();
                    bytes += response.bytes().await.unwrap().len();
                }
                bytes
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / (1024.0 * 1024.0) / start.elapsed().as_secs_f64()
}

/// 4 clients ask `/api/v1/metas?package=P` over the catalog's packages for 10 s: requests/s.
async fn metas_rate(http: &reqwest::Client, base: &str, catalog_dir: &Path) -> f64 {
    let mut packages: Vec<String> = std::fs::read_dir(catalog_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    packages.sort();
    let packages = Arc::new(packages);
    let base = Arc::new(base.to_string());
    let start = Instant::now();
    let window = Duration::from_secs(10);
    let tasks: Vec<_> = (0..4)
        .map(|c| {
            let (http, packages, base) = (http.clone(), packages.clone(), base.clone());
            tokio::spawn(async move {
                let mut n = 0usize;
                while start.elapsed() < window {
                    let package = &packages[(n * 4 + c) % packages.len()];
                    let response = http
                        .get(format!("{base}/api/v1/metas?package={package}"))
                        .send()
                        .await
                        .unwrap()
                        .error_for_status()
                        .unwrap_or_else(|e| panic!("metas of {package}: {e}"));
                    response.bytes().await.unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// The median of `values` (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The table of the samples of both sides (each `{"olmv1": {...}, "upstream": {...}}`): per
/// figure the median and the spread (least - most) of each side and the ratio of the medians;
/// then the idle requests by kind (medians) and the load average of each sample.
pub fn table(samples: &[BTreeMap<String, Value>]) -> String {
    let values = |side: &str, section: &str, key: &str| -> Vec<f64> {
        samples
            .iter()
            .map(|results| results[side][section][key].as_f64().unwrap_or(f64::NAN))
            .collect()
    };
    let rows: [(&str, &str, &str, &str); 19] = [
        (
            "controller",
            "cold_s",
            "one extension, apply -> Installed=True, cold image",
            "s",
        ),
        (
            "controller",
            "warm_s",
            "one extension, apply -> Installed=True, warm image",
            "s",
        ),
        (
            "controller",
            "load_s",
            "100 extensions at once -> all Installed=True",
            "s",
        ),
        ("controller", "load_cpu_s", "CPU seconds for those 100", "s"),
        ("controller", "load_peak_mib", "peak RSS during those 100", "MiB"),
        (
            "controller",
            "load_peak_anon_mib",
            "of which heap (`RssAnon`, sampled every 20 ms)",
            "MiB",
        ),
        (
            "controller",
            "load_peak_file_mib",
            "of which binary pages (`RssFile`, sampled)",
            "MiB",
        ),
        (
            "controller",
            "idle_cpu_s",
            "idle with 100 installed: CPU seconds",
            "s",
        ),
        (
            "controller",
            "idle_requests",
            "idle with 100 installed: API requests",
            "",
        ),
        (
            "controller",
            "idle_rss_start_mib",
            "idle: RSS at the start",
            "MiB",
        ),
        ("controller", "idle_rss_end_mib", "idle: RSS at the end", "MiB"),
        (
            "catalogd",
            "certified_serving_s",
            "certified-operators-v4.16: apply -> Serving",
            "s",
        ),
        (
            "catalogd",
            "certified_peak_mib",
            "certified-operators-v4.16: peak RSS",
            "MiB",
        ),
        (
            "catalogd",
            "certified_serving_rss_mib",
            "certified-operators-v4.16: RSS while serving",
            "MiB",
        ),
        (
            "catalogd",
            "all_mib_per_s",
            "`/api/v1/all` throughput, 4 clients (identity)",
            "MiB/s",
        ),
        (
            "catalogd",
            "metas_per_s",
            "`/api/v1/metas?package=`, 4 clients",
            "req/s",
        ),
        (
            "catalogd",
            "three_peak_mib",
            "all three shared catalogs at once: peak RSS",
            "MiB",
        ),
        (
            "catalogd",
            "three_serving_s",
            "all three shared catalogs at once: apply -> all Serving",
            "s",
        ),
        (
            "catalogd",
            "three_serving_rss_mib",
            "all three: RSS while serving",
            "MiB",
        ),
    ];
    let spread = |v: &[f64]| {
        let least = v.iter().copied().fold(f64::INFINITY, f64::min);
        let most = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (least, most)
    };
    let mut out = format!(
        "{} sample(s); each cell: median (least - most)\n\n| measure | olmv1 | upstream | olmv1 : upstream (medians) |\n|---|---|---|---|\n",
        samples.len()
    );
    for (section, key, label, unit) in rows {
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        let (a, b) = (values("olmv1", section, key), values("upstream", section, key));
        if a.iter().chain(&b).all(|v| v.is_nan()) {
            // A part not run (OLMV1_BENCH_PARTS).
            continue;
        }
        let cell = |v: &[f64]| {
            if v.iter().all(|v| v.is_nan()) {
                // A side not run (OLMV1_BENCH_SIDES).
                return "-".to_string();
            }
            let (least, most) = spread(v);
            format!("{:.2}{unit} ({least:.2} - {most:.2})", median(v))
        };
        out.push_str(&format!(
            "| {label} | {} | {} | 1 : {:.2} |\n",
            cell(&a),
            cell(&b),
            median(&b) / median(&a)
        ));
    }
    let idle = median(&values("olmv1", "controller", "idle_s"));
    out.push_str(&format!(
        "\nIdle window: {idle:.0} s, starting 60 s after the last Installed=True.\n"
    ));
    // Idle requests by kind: the median of each kind over the samples (0 where a sample had none).
    let mut kinds = std::collections::BTreeSet::new();
    for results in samples {
        for side in ["olmv1", "upstream"] {
            if let Some(by_kind) = results[side]["controller"]["idle_requests_by_kind"].as_object() {
                kinds.extend(by_kind.keys().cloned());
            }
        }
    }
    if !kinds.is_empty() {
        out.push_str(
            "\n| idle requests (audit log), median over the samples | olmv1 | upstream |\n|---|---|---|\n",
        );
        let count = |side: &str, kind: &str| {
            median(
                &samples
                    .iter()
                    .map(|r| {
                        r[side]["controller"]["idle_requests_by_kind"][kind]
                            .as_f64()
                            .unwrap_or(0.0)
                    })
                    .collect::<Vec<_>>(),
            )
        };
        for kind in &kinds {
            out.push_str(&format!(
                "| `{kind}` | {} | {} |\n",
                count("olmv1", kind),
                count("upstream", kind)
            ));
        }
    }
    out.push_str("\nLoad average (1 5 15 min) per sample: controller at the load's start / its end / the idle window's end; catalogd at its start / end:\n\n");
    for (i, results) in samples.iter().enumerate() {
        for side in ["olmv1", "upstream"] {
            let joined = |section: &str| {
                results[side][section]["load_avg"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" / "))
                    .unwrap_or_default()
            };
            out.push_str(&format!(
                "- sample {}, {side}: controller {}; catalogd {}\n",
                i + 1,
                joined("controller"),
                joined("catalogd")
            ));
        }
    }
    out
}
