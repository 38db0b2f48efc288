//! The real catalogs in `../shared/catalogs`: every package loads (index and full model), and for
//! each package the latest bundle of its default channel and, for every bundle of every channel,
//! the bundle an installed copy would upgrade to. Results are compared with the snapshot files in
//! `test/snapshots/catalogs/`; `OLMV1_UPDATE_SNAPSHOTS=1` rewrites them.

use std::{fmt::Write as _, path::PathBuf, sync::Arc, thread};

use olmv1::{
    catalog::{CatalogIndex, DeclarativeConfig, read_dir_metas},
    resolve::{CatalogInput, InstalledBundle, ResolveRequest, resolve},
};
use olmv1_api::v1::UpgradeConstraintPolicy;

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];

fn shared_catalogs() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
    assert!(
        dir.is_dir(),
        "real catalogs missing: {} must hold the shared catalogs (see its README)",
        dir.display()
    );
    dir
}

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

fn compare_or_update(name: &str, actual: &str) -> Result<(), String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/catalogs")
        .join(format!("{name}.txt"));
    if std::env::var("OLMV1_UPDATE_SNAPSHOTS").as_deref() == Ok("1") {
        std::fs::write(&path, actual).map_err(|e| format!("writing {}: {e}", path.display()))?;
        return Ok(());
    }
    let expected = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run with OLMV1_UPDATE_SNAPSHOTS=1 to create it)",
            path.display()
        )
    })?;
    if expected == actual {
        return Ok(());
    }
    let diff: Vec<String> = expected
        .lines()
        .zip(actual.lines())
        .filter(|(a, b)| a != b)
        .take(10)
        .map(|(a, b)| format!("  snapshot: {a}\n  actual:   {b}"))
        .collect();
    Err(format!(
        "{name}: resolution differs from {} ({} vs {} lines; first differences:\n{})",
        path.display(),
        expected.lines().count(),
        actual.lines().count(),
        diff.join("\n")
    ))
}

#[test]
fn real_catalogs_load_and_resolve_as_the_snapshots_say() {
    let root = shared_catalogs();
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
                    if full.packages.len() != index.len() || index.is_empty() {
                        return Err(format!(
                            "{name}: {} olm.package objects but {} indexed packages",
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
                    compare_or_update(name, &snapshot(name, Arc::new(index)))
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
