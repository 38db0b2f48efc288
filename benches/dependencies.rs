//! Dependency planning time on the real catalogs in `../shared/catalogs`: every bundle with
//! dependencies, planned with the three catalogs loaded at once as the sources of one plan (the
//! bundle pinned to its catalog and version, as `test/resolve/dependencies.rs` plans it). Loading
//! and indexing the catalogs is timed separately and excluded from the planning figures. Prints
//! a Markdown table.
//!
//! Then the planner on generated hostile catalogs, up to and past its work budget
//! ([`PLAN_WORK_UNITS`]): time, peak RSS and the work units spent.
//!
//! `cargo bench --bench dependencies` (release).

use std::{path::PathBuf, sync::Arc, time::Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use olmv1::{
    catalog::CatalogIndex,
    dependencies::{PLAN_WORK_UNITS, PlanError, PlanLimits, PlanRequest, has_dependencies, plan},
    resolve::{CatalogInput, ResolveRequest},
};
use olmv1_api::v1::{UpgradeConstraintPolicy, conditions::LABEL_CATALOG_NAME};

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];
/// Runs per bundle; each bundle's figure is the median of its runs.
const REPS: usize = 21;

fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
    assert!(root.is_dir(), "real catalogs missing at {}", root.display());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let t = Instant::now();
    let catalogs: Vec<CatalogInput> = CATALOGS
        .iter()
        .map(|n| {
            CatalogInput::new(
                n,
                Arc::new(CatalogIndex::from_dir(&root.join(n)).expect("catalog indexes")),
            )
        })
        .collect();
    let load = t.elapsed().as_secs_f64();

    // (catalog, package, version) of every bundle with dependencies.
    let mut targets = Vec::new();
    for c in &catalogs {
        for p in c.index.packages() {
            for b in p.bundles.iter().filter(|b| has_dependencies(&b.properties)) {
                if let Ok(v) = &b.version {
                    targets.push((c.name.clone(), p.name.to_string(), v.status_version()));
                }
            }
        }
    }

    let mut per_plan = Vec::new();
    let (mut planned, mut refused) = (0, 0);
    for (catalog, package, version) in &targets {
        let selector: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {LABEL_CATALOG_NAME: catalog}}))
                .expect("a label selector");
        let request = ResolveRequest {
            package: package.clone(),
            version_range: Some(format!("={version}")),
            channels: Vec::new(),
            selector: Some(selector),
            upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
            installed: None,
        };
        let plan_request = PlanRequest {
            request: &request,
            installed: &[],
            served_apis: &[],
            allow_changes: false,
            limits: PlanLimits::default(),
        };
        let mut runs = Vec::with_capacity(REPS);
        let mut ok = false;
        for _ in 0..REPS {
            let t = Instant::now();
            let outcome = plan(&plan_request, &catalogs);
            runs.push(t.elapsed().as_secs_f64() * 1e3);
            ok = std::hint::black_box(outcome).is_ok();
        }
        if ok {
            planned += 1;
        } else {
            refused += 1;
        }
        runs.sort_by(f64::total_cmp);
        per_plan.push(median(&runs));
    }
    let total: f64 = per_plan.iter().sum();
    per_plan.sort_by(f64::total_cmp);

    println!(
        "## Dependency planning, the three catalogs at once ({cores} cores, {REPS} runs per bundle, median of each)\n"
    );
    println!(
        "| bundles with dependencies | plans | no plan | catalog load + index (excluded) | all plans, total | per plan median | per plan max |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {planned} | {refused} | {:.2} s | {:.1} ms | {:.2} ms | {:.2} ms |",
        targets.len(),
        load,
        total,
        median(&per_plan),
        per_plan.last().copied().unwrap_or(0.0),
    );
    hostile();
}

/// A JSONL catalog of `packages` one-bundle packages `p<i>`, the first `declaring` of them each
/// declaring `not` a package of its own that does not exist (a requirement every bundle
/// satisfies, distinct per package), and `app` declaring one such requirement.
fn hostile_catalog(packages: usize, declaring: usize) -> CatalogIndex {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut bundle = |package: &str, not: Option<&str>| {
        let name = format!("{package}.v1.0.0");
        let mut properties =
            format!(r#"[{{"type":"olm.package","value":{{"packageName":"{package}","version":"1.0.0"}}}}"#);
        if let Some(missing) = not {
            let _ = write!(
                properties,
                r#",{{"type":"olm.constraint","value":{{"not":{{"constraints":[{{"package":{{"packageName":"{missing}","versionRange":">=0.0.0"}}}}]}}}}}}"#
            );
        }
        properties.push(']');
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.package","name":"{package}","defaultChannel":"stable"}}"#
        );
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.channel","package":"{package}","name":"stable","entries":[{{"name":"{name}"}}]}}"#
        );
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.bundle","name":"{name}","package":"{package}","image":"registry.test/{name}","properties":{properties}}}"#
        );
    };
    bundle("app", Some("nothing"));
    for i in 0..packages {
        let missing = format!("missing-{i}");
        bundle(&format!("p{i}"), (i < declaring).then_some(missing.as_str()));
    }
    CatalogIndex::from_jsonl(out.into(), "hostile", 1 << 20).expect("the generated catalog indexes")
}

/// Peak RSS of this process since the last reset, in MiB (Linux).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn reset_peak_rss() {
    // Writing 5 resets VmHWM to the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn hostile() {
    println!("\n## The planner on hostile catalogs (budget {PLAN_WORK_UNITS} work units, 10 s)\n");
    println!("| catalog | outcome | work units | time | peak RSS during the plan |");
    println!("|---|---|---|---|---|");
    for (packages, declaring) in [
        (10_000, 0),
        (20_000, 0),
        (500, 500),
        (3_000, 3_000),
        (7_000, 7_000),
    ] {
        let index = Arc::new(hostile_catalog(packages, declaring));
        let catalogs = [CatalogInput::new("hostile", index)];
        let request = ResolveRequest {
            package: "app".to_string(),
            version_range: None,
            channels: Vec::new(),
            selector: None,
            upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
            installed: None,
        };
        let plan_request = PlanRequest {
            request: &request,
            installed: &[],
            served_apis: &[],
            allow_changes: false,
            limits: PlanLimits::default(),
        };
        reset_peak_rss();
        let before = peak_rss_mib();
        let t = Instant::now();
        let outcome = plan(&plan_request, &catalogs);
        let elapsed = t.elapsed().as_secs_f64();
        let peak = peak_rss_mib() - before;
        let (what, work) = match &outcome {
            Ok(p) => (format!("plan of {} bundles", p.plan.len()), p.work.to_string()),
            Err(PlanError::OverBudget { limit, .. }) => ("over budget".to_string(), format!("> {limit}")),
            Err(e) => (format!("{e}"), "-".to_string()),
        };
        println!(
            "| {packages} one-bundle packages, {declaring} declaring a distinct `not` | {what} | {work} | {elapsed:.2} s | +{peak:.0} MiB |"
        );
    }
}
