//! `olmv1 versions` and `olmv1 upgrades` for every package of `../shared/catalogs`, compared
//! with `test/snapshots/cli/<catalog>.txt`. The files are rewritten only by the explicit command
//! `hack/update-snapshots.sh` (it runs the ignored test `write_snapshots`); the comparing
//! test never writes.

use std::{fmt::Write as _, path::PathBuf, sync::Arc};

use olmv1::{
    admin::{upgrades, versions},
    catalog::CatalogIndex,
    resolve::{CatalogInput, DependencyMode, InstalledBundle, ResolveRequest},
};
use olmv1_api::v1::UpgradeConstraintPolicy;

use crate::support::{Snapshots, shared_catalogs_root};

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];

/// Fewer packages than this across the three catalogs means the catalogs were not all read.
const MIN_PACKAGES: usize = 120;

fn snapshot_path(catalog: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/cli")
        .join(format!("{catalog}.txt"))
}

/// The snapshot of one catalog: per package, `versions` and, from every bundle of the default
/// channel, `upgrades` in that channel (both in their text forms, no colour). Returns the text
/// and the number of packages.
pub fn snapshot(catalog: &str) -> (String, usize) {
    let index =
        Arc::new(CatalogIndex::from_dir(&shared_catalogs_root().join(catalog)).expect("catalog indexes"));
    let inputs = [CatalogInput::new(catalog, index.clone())];
    let mut out = String::new();
    let _ = writeln!(out, "# {catalog}: {} packages", index.len());
    for package in index.packages() {
        let _ = writeln!(out, "\n## package {}\n", package.name);
        // Every real package is listed and shown within one command's meter.
        let mut meter = olmv1::admin::command_meter();
        let listed = versions::versions(catalog, package, &mut meter).expect("within the meter");
        out.push_str(&versions::render_text(&[listed], false, &mut meter).expect("within the meter"));
        let Some(default) = package
            .default_channel
            .as_deref()
            .and_then(|c| package.channel(c))
        else {
            let _ = writeln!(out, "(no default channel)");
            continue;
        };
        for entry in &default.entries {
            let Some(Ok(version)) = entry.bundle.map(|i| &package.bundles[i].version) else {
                let _ = writeln!(
                    out,
                    "\nupgrades from {}: (no such bundle or unreadable version)",
                    entry.name
                );
                continue;
            };
            let request = ResolveRequest {
                package: package.name.to_string(),
                version_range: None,
                channels: vec![default.name.to_string()],
                selector: None,
                upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
                installed: Some(InstalledBundle {
                    name: entry.name.to_string(),
                    version: version.status_version(),
                    release: None,
                }),
            };
            let _ = writeln!(out, "\nupgrades from {} in {}:", entry.name, default.name);
            let mut meter = olmv1::admin::command_meter();
            match upgrades::upgrades(&request, &inputs, DependencyMode::default(), &mut meter) {
                Ok(u) => {
                    out.push_str(&upgrades::render_text(&u, false, &mut meter).expect("within the meter"))
                }
                Err(e) => {
                    let _ = writeln!(out, "error: {e}");
                }
            }
        }
    }
    (out, index.len())
}

#[test]
fn versions_and_upgrades_of_every_real_package_match_the_snapshots() {
    check_every_catalog(Snapshots::Compare);
}

/// Rewrites the snapshot files. Run only by `hack/update-snapshots.sh`.
#[test]
#[ignore = "writes test/snapshots/cli; run by hack/update-snapshots.sh"]
fn write_snapshots() {
    check_every_catalog(Snapshots::Write);
}

fn check_every_catalog(snapshots: Snapshots) {
    let mut total = 0;
    let mut failures = Vec::new();
    for catalog in CATALOGS {
        let (actual, packages) = snapshot(catalog);
        total += packages;
        if let Err(e) = snapshots.check(&snapshot_path(catalog), &actual) {
            failures.push(format!("{catalog}: {e}"));
        }
    }
    assert!(
        total >= MIN_PACKAGES,
        "only {total} packages across the catalogs (expected at least {MIN_PACKAGES})"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
