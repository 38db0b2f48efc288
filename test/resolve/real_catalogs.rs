//! The real catalogs in `../shared/catalogs`: every package loads (index and full model), and for
//! each package the latest bundle of its default channel and, for every bundle of every channel,
//! the bundle an installed copy would upgrade to. Results are compared with the snapshot files in
//! `test/snapshots/catalogs/`; only `hack/update-snapshots.sh` rewrites them (the ignored test
//! `write_snapshots`).

use std::{fmt::Write as _, path::PathBuf, sync::Arc, thread};

use olmv1::{
    catalog::{CatalogIndex, DeclarativeConfig, read_dir_metas},
    resolve::{CatalogInput, InstalledBundle, ResolveRequest, resolve},
};
use olmv1_api::v1::UpgradeConstraintPolicy;

use crate::support::{Snapshots, shared_catalogs_root};

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];

fn request(package: &str, channel: &str, installed: Option<InstalledBundle>) -> ResolveRequest {
    ResolveRequest {
        package: package.to_string(),
        version_range: None,
        channels: vec![channel.to_string()],
        selector: None,
        upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
        installed,
    }
}

fn outcome(result: Result<olmv1::resolve::Resolution, olmv1::resolve::ResolveError>) -> String {
    match result {
        Ok(r) => format!("{} {}", r.bundle.name, r.bundle.status_version),
        Err(e) => format!("error: {e}"),
    }
}

/// The snapshot text of one catalog.
fn snapshot(name: &str, index: Arc<CatalogIndex>) -> String {
    let inputs = [CatalogInput::new(name, index.clone())];
    let mut out = String::new();
    let _ = writeln!(out, "# {name}: {} packages", index.len());
    for pkg in index.packages() {
        let default = pkg.default_channel.as_deref().unwrap_or("");
        let _ = writeln!(
            out,
            "package {} default={default} channels={} bundles={}",
            pkg.name,
            pkg.channels.len(),
            pkg.bundles.len()
        );
        let _ = writeln!(
            out,
            "  latest {default}: {}",
            outcome(resolve(&request(&pkg.name, default, None), &inputs))
        );
        for ch in &pkg.channels {
            let _ = writeln!(out, "  channel {}", ch.name);
            for entry in &ch.entries {
                let Some(bundle) = entry.bundle.map(|i| &pkg.bundles[i]) else {
                    let _ = writeln!(out, "    {} -> (no such bundle)", entry.name);
                    continue;
                };
                let Ok(version) = &bundle.version else {
                    let _ = writeln!(out, "    {} -> (unreadable version)", entry.name);
                    continue;
                };
                let installed = InstalledBundle {
                    name: bundle.name.to_string(),
                    version: version.status_version(),
                    release: None,
                };
                let got = outcome(resolve(&request(&pkg.name, &ch.name, Some(installed)), &inputs));
                let _ = writeln!(out, "    {} -> {got}", entry.name);
            }
        }
    }
    out
}

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/catalogs")
        .join(format!("{name}.txt"))
}

/// Fewer packages than this in one catalog means it was not all read.
const MIN_PACKAGES_PER_CATALOG: usize = 15;

#[test]
fn real_catalogs_load_and_resolve_as_the_snapshots_say() {
    load_and_resolve_every_catalog(Snapshots::Compare);
}

/// Rewrites `test/snapshots/catalogs/`. Run only by `hack/update-snapshots.sh`.
#[test]
#[ignore = "writes test/snapshots/catalogs; run by hack/update-snapshots.sh"]
fn write_snapshots() {
    load_and_resolve_every_catalog(Snapshots::Write);
}

fn load_and_resolve_every_catalog(snapshots: Snapshots) {
    let root = shared_catalogs_root();
    // One thread per catalog: the three load in parallel on the CI's two cores.
    let results: Vec<Result<(), String>> = thread::scope(|s| {
        let handles: Vec<_> = CATALOGS
            .iter()
            .map(|name| {
                let dir = root.join(name);
                s.spawn(move || -> Result<(), String> {
                    let metas = read_dir_metas(&dir).map_err(|e| format!("{name}: {e}"))?;
                    let full = DeclarativeConfig::from_metas(&metas).map_err(|e| format!("{name}: {e}"))?;
                    let index = CatalogIndex::from_metas(&metas).map_err(|e| format!("{name}: {e}"))?;
                    if full.packages.len() != index.len() || index.len() < MIN_PACKAGES_PER_CATALOG {
                        return Err(format!(
                            "{name}: {} olm.package objects and {} indexed packages \
                             (expected as many, and at least {MIN_PACKAGES_PER_CATALOG})",
                            full.packages.len(),
                            index.len()
                        ));
                    }
                    for pkg in index.packages() {
                        if pkg.bundles.is_empty() || pkg.channels.is_empty() {
                            return Err(format!(
                                "{name}: package {} has no bundles or no channels",
                                pkg.name
                            ));
                        }
                    }
                    snapshots
                        .check(&snapshot_path(name), &snapshot(name, Arc::new(index)))
                        .map_err(|e| format!("{name}: resolution: {e}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("snapshot thread panicked".into()))
            })
            .collect()
    });
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
