//! hack/bench-scale.sh's measurements (issue 14): N ClusterExtensions across several catalogs
//! (time to all Installed, CPU, peak RSS, API requests per reconcile), the idle cost with all of
//! them installed, a controller restart (time to re-verify each one, and what it wrote), and
//! catalogd with large catalogs. Figures as JSON, then a Markdown table.

use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, Seek},
    path::Path,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt, stream};
use kube::{Api, Client, ResourceExt, api::ListParams};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::{self, ProcStat, proc_stat, reset_peak};

/// The controller's own identity (hack/bench-lib.sh `controller_identity`).
const CONTROLLER_USER: &str = "system:serviceaccount:olmv1-system:olmv1-controller";

/// How long any one phase may take on 2 busy cores.
const PHASE_TIMEOUT: Duration = Duration::from_secs(3600);

/// What `scale-publish` pushed: the extensions' names (each its package and namespace) and the
/// catalog images (name, reference) that hold them, packages dealt round-robin.
#[derive(Debug, Serialize, Deserialize)]
pub struct ScalePlan {
    pub extensions: Vec<String>,
    pub catalogs: Vec<(String, String)>,
}

/// Pushes `extensions` one-Deployment packages `scale-0000`... (a bundle image each) into
/// `catalogs` catalog images.
pub async fn publish(registry: &str, extensions: usize, catalogs: usize) -> ScalePlan {
    let names: Vec<String> = (0..extensions).map(|i| format!("scale-{i:04}")).collect();
    let lines: Vec<Vec<String>> = stream::iter(names.iter())
        .map(|name| bench::publish_load_package(registry, "scale", name))
        .buffered(8)
        .collect()
        .await;
    let mut plan = ScalePlan {
        extensions: names,
        catalogs: Vec::new(),
    };
    for c in 0..catalogs {
        let catalog_lines: Vec<String> = lines
            .iter()
            .skip(c)
            .step_by(catalogs)
            .flatten()
            .cloned()
            .collect();
        let name = format!("scale-{c}");
        let image =
            crate::fixtures::push_catalog(&format!("{registry}/scale/{name}:v1"), "scale", &catalog_lines)
                .await;
        plan.catalogs.push((name, image));
    }
    eprintln!(
        "bench: pushed {} bundles in {} catalogs",
        plan.extensions.len(),
        plan.catalogs.len()
    );
    plan
}

/// The controller's `/metrics`, scraped.
struct Scrape(String);

impl Scrape {
    async fn get(url: &str) -> Scrape {
        let text = reqwest::get(url)
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("cannot scrape {url}: {e}"));
        Scrape(text.text().await.unwrap())
    }

    /// The sum of the samples of `metric` (any labels).
    fn value(&self, metric: &str) -> f64 {
        self.samples(metric).map(|(_, v)| v).sum()
    }

    /// `(labels, value)` of each sample of `metric`.
    fn samples<'a>(&'a self, metric: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.0.lines().filter_map(move |line| {
            let rest = line.strip_prefix(metric)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            if !(labels.is_empty() || labels.starts_with('{')) {
                return None;
            }
            Some((labels, value.parse().ok()?))
        })
    }

    /// How many extensions have an installed bundle (each one reconciled since the start).
    fn installed(&self) -> usize {
        self.samples("olmv1_clusterextension_installed_bundle")
            .filter(|(_, v)| *v == 1.0)
            .count()
    }

    /// The reconcile API request histogram: count, sum and cumulative buckets (`le` -> count).
    fn api_requests(&self) -> ApiRequests {
        let name = "olmv1_clusterextension_reconcile_api_requests";
        ApiRequests {
            reconciles: self.value(&format!("{name}_count")),
            requests: self.value(&format!("{name}_sum")),
            buckets: self
                .samples(&format!("{name}_bucket"))
                .map(|(labels, v)| (labels.to_string(), v))
                .collect(),
        }
    }
}

/// The controller's own count of the API requests its reconciles made.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ApiRequests {
    pub reconciles: f64,
    pub requests: f64,
    /// Cumulative: `{le="3.0"}` -> reconciles with at most 3 requests.
    pub buckets: BTreeMap<String, f64>,
}

impl ApiRequests {
    fn since(&self, before: &ApiRequests) -> ApiRequests {
        ApiRequests {
            reconciles: self.reconciles - before.reconciles,
            requests: self.requests - before.requests,
            buckets: self
                .buckets
                .iter()
                .map(|(k, v)| (k.clone(), v - before.buckets.get(k).copied().unwrap_or(0.0)))
                .collect(),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct InstallFigures {
    pub extensions: usize,
    pub catalogs: usize,
    pub installed_s: f64,
    pub cpu_s: f64,
    pub peak_mib: f64,
    pub rss_after_mib: f64,
    /// The controller's count (its metrics), over the whole load.
    pub api: ApiRequests,
    /// The API server's count of service-account requests (the controller and the installers).
    pub apiserver_requests: u64,
    pub load: String,
}

/// Applies every extension at once and waits until all are Installed=True.
pub async fn install(pid: u32, metrics: &str, plan: &ScalePlan) -> InstallFigures {
    let client = Client::try_default().await.unwrap();
    let catalogs: Vec<(String, String)> = plan.catalogs.clone();
    let serving = bench::serve_catalogs(&client, &catalogs).await;
    eprintln!("bench: {} catalogs Serving in {serving:.1} s", catalogs.len());
    let bodies: Vec<Value> = plan.extensions.iter().map(|n| bench::extension_body(n)).collect();
    reset_peak(pid);
    let (before, api_before) = (proc_stat(pid), Scrape::get(metrics).await.api_requests());
    let server_before = crate::support::service_account_requests(&client).await;
    let installed_s = bench::time_to_installed(&client, &bodies, Duration::from_secs(2), PHASE_TIMEOUT).await;
    let after = proc_stat(pid);
    let figures = InstallFigures {
        extensions: bodies.len(),
        catalogs: catalogs.len(),
        installed_s,
        cpu_s: after.cpu_s - before.cpu_s,
        peak_mib: after.peak_mib,
        rss_after_mib: after.rss_mib,
        api: Scrape::get(metrics).await.api_requests().since(&api_before),
        apiserver_requests: crate::support::service_account_requests(&client).await - server_before,
        load: load_average(),
    };
    eprintln!("bench: install {figures:?}");
    figures
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct IdleFigures {
    pub settle_s: f64,
    pub seconds: f64,
    pub cpu_s: f64,
    pub cpu_percent_of_core: f64,
    /// `(seconds into the window, RSS MiB)` every sample.
    pub rss: Vec<(f64, f64)>,
    pub rss_first_mib: f64,
    pub rss_last_mib: f64,
    pub rss_max_mib: f64,
    /// Least-squares slope of RSS over the window.
    pub rss_slope_mib_per_hour: f64,
    pub api: ApiRequests,
    pub apiserver_requests: u64,
    pub load_start: String,
    pub load_end: String,
}

/// After `settle`, a window of `seconds` with nothing changing: CPU, RSS every `every`, requests.
pub async fn idle(
    pid: u32,
    metrics: &str,
    settle: Duration,
    seconds: Duration,
    every: Duration,
) -> IdleFigures {
    let client = Client::try_default().await.unwrap();
    tokio::time::sleep(settle).await;
    let load_start = load_average();
    let (first, api_before) = (proc_stat(pid), Scrape::get(metrics).await.api_requests());
    let server_before = crate::support::service_account_requests(&client).await;
    let start = Instant::now();
    let mut rss = vec![(0.0, first.rss_mib)];
    let mut last = first;
    while start.elapsed() < seconds {
        tokio::time::sleep(every.min(seconds.saturating_sub(start.elapsed()))).await;
        last = proc_stat(pid);
        rss.push((start.elapsed().as_secs_f64(), last.rss_mib));
        eprintln!(
            "bench: idle {:.0} s, RSS {:.1} MiB, CPU {:.2} s",
            start.elapsed().as_secs_f64(),
            last.rss_mib,
            last.cpu_s - first.cpu_s
        );
    }
    let window = start.elapsed().as_secs_f64();
    let cpu_s = last.cpu_s - first.cpu_s;
    let figures = IdleFigures {
        settle_s: settle.as_secs_f64(),
        seconds: window,
        cpu_s,
        cpu_percent_of_core: 100.0 * cpu_s / window,
        rss_first_mib: first.rss_mib,
        rss_last_mib: last.rss_mib,
        rss_max_mib: rss.iter().map(|(_, r)| *r).fold(0.0, f64::max),
        rss_slope_mib_per_hour: slope(&rss) * 3600.0,
        rss,
        api: Scrape::get(metrics).await.api_requests().since(&api_before),
        apiserver_requests: crate::support::service_account_requests(&client).await - server_before,
        load_start,
        load_end: load_average(),
    };
    eprintln!(
        "bench: idle {:.0} s: CPU {:.2} s ({:.3} % of a core), RSS {:.1} -> {:.1} MiB",
        figures.seconds,
        figures.cpu_s,
        figures.cpu_percent_of_core,
        figures.rss_first_mib,
        figures.rss_last_mib
    );
    figures
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let cov: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    if var == 0.0 { 0.0 } else { cov / var }
}

/// The resourceVersion of every ClusterExtension and every object labelled as applied for one
/// (bundle content and the revision records), by `Kind namespace/name`.
pub async fn snapshot() -> BTreeMap<String, String> {
    let client = Client::try_default().await.unwrap();
    let mut versions: BTreeMap<String, String> = crate::run::labelled_objects(&client)
        .await
        .expect("the objects to snapshot")
        .into_iter()
        .map(|(id, meta)| (id, meta.resource_version.unwrap_or_default()))
        .collect();
    for ext in Api::<ClusterExtension>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        versions.insert(
            format!("ClusterExtension {}", ext.name_any()),
            ext.resource_version().unwrap_or_default(),
        );
    }
    versions
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RestartFigures {
    pub extensions: usize,
    /// From the new process's start until every extension has been reconciled to its installed
    /// bundle (`olmv1_clusterextension_installed_bundle` has a series for each).
    pub reverified_s: f64,
    pub cpu_s: f64,
    pub peak_mib: f64,
    pub settle_s: f64,
    pub api: ApiRequests,
    pub apiserver_requests: u64,
    /// Writes in the audit log by the controller and the identities it acts as, leases and
    /// events left out: `identity verb resource[/subresource]` -> count.
    pub writes: BTreeMap<String, u64>,
    /// Objects whose resourceVersion changed (or that came or went) across the restart.
    pub changed_objects: Vec<String>,
    pub objects: usize,
    pub load: String,
}

/// The controller restarted: which process, since when, and where its writes are recorded.
pub struct Restarted<'a> {
    pub pid: u32,
    pub metrics: &'a str,
    /// When the new process started (Unix seconds).
    pub started: f64,
    pub audit_log: &'a Path,
    /// The audit log's size before the restart: the new controller's entries follow.
    pub audit_from: u64,
}

/// Waits until the restarted controller has re-verified `expected` extensions, then `settle`
/// more; compares with `before` (snapshotted while the previous controller ran).
pub async fn restart(
    run: Restarted<'_>,
    before: &BTreeMap<String, String>,
    expected: usize,
    settle: Duration,
) -> RestartFigures {
    let Restarted {
        pid,
        metrics,
        started,
        audit_log,
        audit_from,
    } = run;
    let client = Client::try_default().await.unwrap();
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let server_before = crate::support::service_account_requests(&client).await;
    loop {
        // The metrics server comes up with the process: until then, keep asking.
        if let Ok(Ok(response)) = reqwest::get(metrics).await.map(|r| r.error_for_status())
            && Scrape(response.text().await.unwrap_or_default()).installed() >= expected
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every extension re-verified in time"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let reverified_s = unix_now() - started;
    let stat: ProcStat = proc_stat(pid);
    eprintln!("bench: restart: {expected} re-verified after {reverified_s:.1} s; settling {settle:?}");
    tokio::time::sleep(settle).await;
    let after = snapshot().await;
    let mut changed_objects: Vec<String> = before
        .iter()
        .filter(|(id, version)| after.get(*id) != Some(version))
        .map(|(id, _)| id.clone())
        .chain(after.keys().filter(|id| !before.contains_key(*id)).cloned())
        .collect();
    changed_objects.sort();
    let figures = RestartFigures {
        extensions: expected,
        reverified_s,
        cpu_s: stat.cpu_s,
        peak_mib: stat.peak_mib,
        settle_s: settle.as_secs_f64(),
        api: Scrape::get(metrics).await.api_requests(),
        apiserver_requests: crate::support::service_account_requests(&client).await - server_before,
        writes: audited_writes(audit_log, audit_from),
        changed_objects,
        objects: after.len(),
        load: load_average(),
    };
    eprintln!("bench: restart {figures:?}");
    figures
}

/// Writes in the audit log from byte `from` on by service accounts (the controller, and the
/// installers it acts as; the control plane and catalogd act as the cluster admin), leases and
/// events left out, counted by `identity verb resource[/subresource]`.
fn audited_writes(audit_log: &Path, from: u64) -> BTreeMap<String, u64> {
    let mut file = std::fs::File::open(audit_log).unwrap();
    file.seek(std::io::SeekFrom::Start(from)).unwrap();
    let mut counts = BTreeMap::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(entry) = serde_json::from_str::<Value>(&line.unwrap()) else {
            continue;
        };
        let user = entry["impersonatedUser"]["username"]
            .as_str()
            .or(entry["user"]["username"].as_str())
            .unwrap_or_default();
        let resource = entry["objectRef"]["resource"].as_str().unwrap_or_default();
        if !user.starts_with("system:serviceaccount:") || matches!(resource, "leases" | "events") {
            continue;
        }
        let identity = if user == CONTROLLER_USER {
            "controller"
        } else {
            "installer"
        };
        let subresource = entry["objectRef"]["subresource"]
            .as_str()
            .map(|s| format!("/{s}"))
            .unwrap_or_default();
        let verb = entry["verb"].as_str().unwrap_or_default();
        *counts
            .entry(format!("{identity} {verb} {resource}{subresource}"))
            .or_default() += 1;
    }
    counts
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CatalogdFigures {
    /// Catalog name -> seconds from applying all of them until it was Serving.
    pub serving_s: BTreeMap<String, f64>,
    pub all_serving_s: f64,
    pub peak_mib: f64,
    pub serving_rss_mib: f64,
    pub rss_before_mib: f64,
    pub load: String,
}

/// Applies every catalog at once: time until each is Serving, peak RSS, RSS while serving.
pub async fn catalogd(pid: u32, catalogs: &[(String, String)]) -> CatalogdFigures {
    let client = Client::try_default().await.unwrap();
    reset_peak(pid);
    let rss_before_mib = proc_stat(pid).rss_mib;
    let start = Instant::now();
    for (name, image) in catalogs {
        crate::components::apply_catalog(&client, name, image, 0, "bench").await;
    }
    let api = Api::<ClusterCatalog>::all(client.clone());
    let mut serving_s = BTreeMap::new();
    while serving_s.len() < catalogs.len() {
        assert!(
            start.elapsed() < PHASE_TIMEOUT,
            "catalogs not Serving in time: {serving_s:?}"
        );
        for catalog in api.list(&ListParams::default()).await.unwrap() {
            let is_serving = catalog.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Serving" && c.status == "True")
            });
            if is_serving {
                serving_s
                    .entry(catalog.name_any())
                    .or_insert_with(|| start.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let all_serving_s = start.elapsed().as_secs_f64();
    let peak_mib = proc_stat(pid).peak_mib;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let figures = CatalogdFigures {
        serving_s,
        all_serving_s,
        peak_mib,
        serving_rss_mib: proc_stat(pid).rss_mib,
        rss_before_mib,
        load: load_average(),
    };
    eprintln!("bench: catalogd {figures:?}");
    figures
}

/// Pushes catalog directories as images `registry/bench/NAME:v1`: (name, reference).
pub async fn publish_catalogs(registry: &str, dirs: &[std::path::PathBuf]) -> Vec<(String, String)> {
    stream::iter(dirs)
        .then(|dir| async move {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let reference = bench::push_catalog_dir(registry, dir, &name).await;
            Ok::<_, ()>((name, reference))
        })
        .try_collect()
        .await
        .unwrap()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Markdown report of whichever result files exist in `dir`.
pub fn report(dir: &Path) -> String {
    let read = |f: &str| -> Option<Value> { serde_json::from_slice(&std::fs::read(dir.join(f)).ok()?).ok() };
    let mut out = String::new();
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    if let Some(i) = read("install.json") {
        let api = &i["api"];
        out.push_str(&format!(
            "| {n} ClusterExtensions, {c} catalogs, applied at once -> all Installed=True | {:.1} s |\n\
             | controller CPU seconds for the load | {:.1} s |\n\
             | controller peak RSS during the load | {:.1} MiB |\n\
             | reconciles during the load; API requests per reconcile (controller's count, mean) | {:.0}; {:.2} |\n\
             | API server requests by service accounts during the load (controller + installers) | {} |\n\
             | load average at the end | {} |\n",
            f(&i, "installed_s"),
            f(&i, "cpu_s"),
            f(&i, "peak_mib"),
            f(api, "reconciles"),
            f(api, "requests") / f(api, "reconciles"),
            i["apiserver_requests"],
            i["load"].as_str().unwrap_or_default(),
            n = i["extensions"],
            c = i["catalogs"],
        ));
        out.push_str(&format!(
            "| API requests per reconcile, histogram (cumulative) | {} |\n",
            histogram(api)
        ));
    }
    if let Some(d) = read("idle.json") {
        out.push_str(&format!(
            "| idle window (after {:.0} s settling) | {:.0} s |\n\
             | idle CPU | {:.2} s = {:.3} % of a core |\n\
             | idle RSS first / last / max | {:.1} / {:.1} / {:.1} MiB |\n\
             | idle RSS slope (least squares, {} samples) | {:+.2} MiB/hour |\n\
             | idle reconciles; API requests (controller's count); API server requests | {:.0}; {:.0}; {} |\n\
             | load average at the start / end of the window | {} / {} |\n",
            f(&d, "settle_s"),
            f(&d, "seconds"),
            f(&d, "cpu_s"),
            f(&d, "cpu_percent_of_core"),
            f(&d, "rss_first_mib"),
            f(&d, "rss_last_mib"),
            f(&d, "rss_max_mib"),
            d["rss"].as_array().map_or(0, Vec::len),
            f(&d, "rss_slope_mib_per_hour"),
            f(&d["api"], "reconciles"),
            f(&d["api"], "requests"),
            d["apiserver_requests"],
            d["load_start"].as_str().unwrap_or_default(),
            d["load_end"].as_str().unwrap_or_default(),
        ));
    }
    if let Some(r) = read("restart.json") {
        let writes = r["writes"].as_object().cloned().unwrap_or_default();
        let writes_text = if writes.is_empty() {
            "none".to_string()
        } else {
            writes
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let changed = r["changed_objects"].as_array().cloned().unwrap_or_default();
        let changed_text = if changed.is_empty() {
            "none".to_string()
        } else {
            let kinds: BTreeMap<String, usize> = changed.iter().fold(BTreeMap::new(), |mut m, id| {
                let kind = id
                    .as_str()
                    .unwrap_or_default()
                    .split(' ')
                    .next()
                    .unwrap_or_default();
                *m.entry(kind.to_string()).or_default() += 1;
                m
            });
            format!("{} ({kinds:?})", changed.len())
        };
        let api = &r["api"];
        out.push_str(&format!(
            "| restart: new process -> all {n} re-verified | {:.1} s |\n\
             | restart: CPU seconds until then; peak RSS | {:.1} s; {:.1} MiB |\n\
             | restart: reconciles; API requests per reconcile (mean) | {:.0}; {:.2} |\n\
             | restart: writes in the audit log (controller and installers; leases, events left out), {:.0} s after | {writes_text} |\n\
             | restart: objects whose resourceVersion changed, of {} | {changed_text} |\n\
             | load average | {} |\n",
            f(&r, "reverified_s"),
            f(&r, "cpu_s"),
            f(&r, "peak_mib"),
            f(api, "reconciles"),
            f(api, "requests") / f(api, "reconciles"),
            f(&r, "settle_s"),
            r["objects"],
            r["load"].as_str().unwrap_or_default(),
            n = r["extensions"],
        ));
        out.push_str(&format!(
            "| restart: API requests per reconcile, histogram (cumulative) | {} |\n",
            histogram(api)
        ));
    }
    if let Some(c) = read("catalogd.json") {
        let each = c["serving_s"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {:.1} s", v.as_f64().unwrap_or(f64::NAN)))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "| catalogd: all catalogs applied at once -> all Serving | {:.1} s ({each}) |\n\
             | catalogd: peak RSS; RSS while serving (before: {:.1} MiB) | {:.1} MiB; {:.1} MiB |\n\
             | load average | {} |\n",
            f(&c, "all_serving_s"),
            f(&c, "rss_before_mib"),
            f(&c, "peak_mib"),
            f(&c, "serving_rss_mib"),
            c["load"].as_str().unwrap_or_default(),
        ));
    }
    format!("| measure | value |\n|---|---|\n{out}")
}

fn histogram(api: &Value) -> String {
    let buckets: HashMap<String, f64> = serde_json::from_value(api["buckets"].clone()).unwrap_or_default();
    let mut rows: Vec<(f64, f64)> = buckets
        .iter()
        .filter_map(|(labels, v)| {
            let le = labels.split("le=\"").nth(1)?.split('"').next()?;
            Some((le.parse::<f64>().unwrap_or(f64::INFINITY), *v))
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.iter()
        .map(|(le, v)| format!("<={le}: {v:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}
