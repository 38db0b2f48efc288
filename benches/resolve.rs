//! Resolution latency on the real catalogs in `../shared/catalogs`: for every package, resolve the
//! latest bundle (nothing installed) and the upgrade from the oldest entry of its default channel
//! (installed), each many times; prints p50/p99/max per catalog as a Markdown table.
//!
//! `cargo bench --bench resolve` (release).

use std::{path::PathBuf, sync::Arc, time::Instant};

use olmv1::{
    catalog::CatalogIndex,
    resolve::{CatalogInput, InstalledBundle, ResolveRequest, resolve},
};
use olmv1_api::v1::UpgradeConstraintPolicy;

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];
const REPS: usize = 200;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
    assert!(root.is_dir(), "real catalogs missing at {}", root.display());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## Resolution latency ({cores} cores, {REPS} runs per package, microseconds)\n");
    println!("| catalogs | packages | nothing installed p50 | p99 | max | installed p50 | p99 | max |");
    println!("|---|---|---|---|---|---|---|---|");
    let indexes: Vec<(String, Arc<CatalogIndex>)> = CATALOGS
        .iter()
        .map(|n| {
            (
                n.to_string(),
                Arc::new(CatalogIndex::from_dir(&root.join(n)).expect("catalog indexes")),
            )
        })
        .collect();
    let mut sets: Vec<(String, Vec<CatalogInput>)> = indexes
        .iter()
        .map(|(n, i)| (n.clone(), vec![CatalogInput::new(n, i.clone())]))
        .collect();
    sets.push((
        "all three together".to_string(),
        indexes
            .iter()
            .map(|(n, i)| CatalogInput::new(n, i.clone()))
            .collect(),
    ));
    for (label, inputs) in &sets {
        let mut fresh = Vec::new();
        let mut upgrade = Vec::new();
        let mut packages = 0;
        for input in inputs {
            for pkg in input.index.packages() {
                packages += 1;
                let mut request = ResolveRequest {
                    package: pkg.name.to_string(),
                    version_range: None,
                    channels: Vec::new(),
                    selector: None,
                    upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
                    installed: None,
                };
                for _ in 0..REPS {
                    let t = Instant::now();
                    let r = resolve(&request, inputs);
                    fresh.push(t.elapsed().as_secs_f64() * 1e6);
                    std::hint::black_box(r.is_ok());
                }
                let default = pkg.default_channel.as_deref().and_then(|c| pkg.channel(c));
                let oldest = default.and_then(|c| c.entries.iter().filter_map(|e| e.bundle).find(|_| true));
                if let Some(b) = oldest.map(|i| &pkg.bundles[i])
                    && let Ok(v) = &b.version
                {
                    request.installed = Some(InstalledBundle {
                        name: b.name.to_string(),
                        version: v.status_version(),
                        release: None,
                    });
                    for _ in 0..REPS {
                        let t = Instant::now();
                        let r = resolve(&request, inputs);
                        upgrade.push(t.elapsed().as_secs_f64() * 1e6);
                        std::hint::black_box(r.is_ok());
                    }
                }
            }
        }
        fresh.sort_by(f64::total_cmp);
        upgrade.sort_by(f64::total_cmp);
        println!(
            "| {label} | {packages} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            percentile(&fresh, 0.5),
            percentile(&fresh, 0.99),
            fresh.last().copied().unwrap_or(0.0),
            percentile(&upgrade, 0.5),
            percentile(&upgrade, 0.99),
            upgrade.last().copied().unwrap_or(0.0),
        );
    }
}
