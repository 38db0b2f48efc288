//! Dependency planning time on the real catalogs in `../shared/catalogs`: every bundle with
//! dependencies, planned with the three catalogs loaded at once as the sources of one plan (the
//! bundle pinned to its catalog and version, as `test/resolve/dependencies.rs` plans it). Loading
//! and indexing the catalogs is timed separately and excluded from the planning figures. Prints
//! a Markdown table.
//!
//! `cargo bench --bench dependencies` (release).

use std::{path::PathBuf, sync::Arc, time::Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use olmv1::{
    catalog::CatalogIndex,
    dependencies::{PlanLimits, PlanRequest, has_dependencies, plan},
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
}
