//! Every bundle with dependencies in `../shared/catalogs`, planned with the three catalogs loaded
//! at once as the sources of one plan (the bundle itself pinned to its catalog and version):
//! the plan or the planner's message, compared with `test/snapshots/dependencies/plans.txt`
//! (rewritten only by `hack/update-snapshots.sh`). No plan may panic, and every message must
//! name what is missing: a package or API that no bundle of the three catalogs satisfies, which
//! the model's evaluator confirms bundle by bundle (independently of the solver).

use std::{
    fmt::Write as _,
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
    sync::Arc,
    thread,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use olmv1::{
    catalog::CatalogIndex,
    dependencies::{BundleFacts, PlanError, PlanLimits, PlanRequest, Requirement, plan, requirements_of},
    resolve::{CatalogInput, ResolveRequest},
};
use olmv1_api::v1::{UpgradeConstraintPolicy, conditions::LABEL_CATALOG_NAME};

use crate::support::{Snapshots, shared_catalogs_root};

/// The limits the tests plan with: the default work budget (deterministic: what the tests assert
/// on), and a wall-clock deadline far past what any of them needs on a loaded machine (the
/// default 10 s was hit by a 3,000-API test while the whole suite ran on 2 busy cores).
fn test_limits() -> PlanLimits {
    PlanLimits {
        max_duration: std::time::Duration::from_secs(600),
        ..PlanLimits::default()
    }
}

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];

/// Fewer bundles with dependencies than this means the catalogs were not all read (69 when
/// written: 29 package and 106 API requirements in all).
const MIN_BUNDLES_WITH_DEPENDENCIES: usize = 60;

/// The three catalogs, indexed in parallel.
fn load() -> Vec<CatalogInput> {
    let root = shared_catalogs_root();
    thread::scope(|s| {
        let handles: Vec<_> = CATALOGS
            .iter()
            .map(|name| {
                let dir = root.join(name);
                s.spawn(move || CatalogIndex::from_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e}")))
            })
            .collect();
        handles
            .into_iter()
            .zip(CATALOGS)
            .map(|(h, name)| CatalogInput::new(name, Arc::new(h.join().expect("indexing thread"))))
            .collect()
    })
}

/// The request that installs exactly `bundle` of `package` from `catalog`: its exact version,
/// the catalog selected by name (dependencies still come from every catalog).
fn request_for(catalog: &str, package: &str, version: &str) -> ResolveRequest {
    let selector: LabelSelector = serde_json::from_value(serde_json::json!({
        "matchLabels": {LABEL_CATALOG_NAME: catalog}
    }))
    .expect("a label selector");
    ResolveRequest {
        package: package.to_string(),
        version_range: Some(format!("={version}")),
        channels: Vec::new(),
        selector: Some(selector),
        upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
        installed: None,
    }
}

/// Whether any bundle of the catalogs satisfies `r` (the model's evaluator, one bundle at a
/// time: what the solver's "nothing provides it" must agree with).
fn satisfiable(r: &Requirement, catalogs: &[CatalogInput]) -> bool {
    catalogs.iter().any(|c| {
        c.index.packages().any(|p| {
            p.bundles
                .iter()
                .any(|b| r.satisfied_by(&BundleFacts::new(&b.name, &p.name, &b.properties)))
        })
    })
}

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test/snapshots/dependencies/plans.txt")
}

#[test]
fn every_real_bundle_with_dependencies_gets_a_plan_or_names_what_is_missing() {
    plan_every_bundle(Snapshots::Compare);
}

/// Rewrites `test/snapshots/dependencies/plans.txt`. Run only by `hack/update-snapshots.sh`
/// (the resolve binary's `write_snapshots`).
#[test]
#[ignore = "writes test/snapshots/dependencies; run by hack/update-snapshots.sh"]
fn write_snapshots() {
    plan_every_bundle(Snapshots::Write);
}

fn plan_every_bundle(snapshots: Snapshots) {
    let catalogs = load();
    // Every requirement of every bundle: what a message's "missing" item is checked against.
    let mut every_requirement: Vec<Requirement> = Vec::new();
    let mut out = String::new();
    let mut failures = Vec::new();
    let mut bundles = 0;
    for catalog in &catalogs {
        for package in catalog.index.packages() {
            for bundle in &package.bundles {
                let requirements = match requirements_of(
                    &bundle.name,
                    &bundle.properties,
                    &mut olmv1::meter::Meter::unlimited(),
                ) {
                    Ok(r) if r.is_empty() => continue,
                    Ok(r) => r,
                    Err(e) => {
                        failures.push(format!(
                            "{}/{}: unreadable requirements: {e}",
                            catalog.name, bundle.name
                        ));
                        continue;
                    }
                };
                every_requirement.extend(requirements.iter().cloned());
                bundles += 1;
                let Ok(version) = &bundle.version else {
                    let _ = writeln!(out, "{} {}: unreadable version", catalog.name, bundle.name);
                    continue;
                };
                let request = request_for(&catalog.name, &package.name, &version.status_version());
                let plan_request = PlanRequest {
                    request: &request,
                    installed: &[],
                    served_apis: &[],
                    allow_changes: false,
                    limits: test_limits(),
                };
                let _ = writeln!(out, "{} {}", catalog.name, bundle.name);
                let outcome = catch_unwind(AssertUnwindSafe(|| plan(&plan_request, &catalogs)));
                match outcome {
                    Err(_) => {
                        failures.push(format!("{}/{}: the planner panicked", catalog.name, bundle.name))
                    }
                    Ok(Ok(p)) => {
                        for step in &p.plan {
                            let _ = write!(out, "  {} {} {}", step.bundle, step.version, step.catalog);
                            if !step.required_by.is_empty() {
                                let _ = write!(out, " (required by {})", step.required_by.join(", "));
                            }
                            out.push('\n');
                        }
                    }
                    Ok(Err(e)) => {
                        for line in e.to_string().lines() {
                            let _ = writeln!(out, "  | {line}");
                        }
                        if let Err(why) =
                            names_what_is_missing(&e, &every_requirement, &requirements, &catalogs)
                        {
                            failures.push(format!("{}/{}: {why}:\n{e}", catalog.name, bundle.name));
                        }
                    }
                }
            }
        }
    }
    let _ = writeln!(out, "# {bundles} bundles with dependencies");
    assert!(
        bundles >= MIN_BUNDLES_WITH_DEPENDENCIES,
        "only {bundles} bundles with dependencies (expected at least {MIN_BUNDLES_WITH_DEPENDENCIES})"
    );
    if let Err(e) = snapshots.check(&snapshot_path(), &out) {
        failures.push(e);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Ok when `e` is the solver's explanation and names at least one requirement (of the bundle
/// or of a dependency) as missing, and each requirement it names so is satisfied by no bundle of
/// the catalogs.
fn names_what_is_missing(
    e: &PlanError,
    every_requirement: &[Requirement],
    own: &[Requirement],
    catalogs: &[CatalogInput],
) -> Result<(), String> {
    let PlanError::Unsatisfiable(text) = e else {
        return Err("not the solver's explanation".to_string());
    };
    let named: Vec<&Requirement> = own
        .iter()
        .chain(every_requirement)
        .filter(|r| {
            // The planner's words for a requirement nothing satisfies (see plan.rs).
            text.contains(&format!(
                "{} (no catalog has a bundle of it in that range)",
                r.constraint
            )) || text.contains(&format!(
                "{} (no bundle in the catalogs provides it)",
                r.constraint
            )) || text.contains(&format!(
                "{} (no bundle in the catalogs satisfies it)",
                r.constraint
            ))
        })
        .collect();
    if named.is_empty() {
        return Err("the message names no missing package or API".to_string());
    }
    if let Some(r) = named.iter().find(|r| satisfiable(r, catalogs)) {
        return Err(format!(
            "it calls {} missing, but a bundle satisfies it",
            r.constraint
        ));
    }
    Ok(())
}
