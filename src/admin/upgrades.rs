//! `olmv1 upgrades`: every version the controller would install now if the admin asked for that
//! exact version, and the shortest path to each later version that is not reachable now.
//!
//! "Reachable" is the resolver's answer: for each candidate version V, [`resolve`] is asked with
//! the extension's channels, selector and policy, the installed bundle, and `version: "=V"`; V is
//! reachable now when that answer is a bundle of version V and V is inside the extension's own
//! range. Candidates are the bundles the resolver's own channel and successor rules admit (any
//! other version is refused by the same rules), so no answer is guessed from the bare graph. A
//! path steps through such answers, each step being what the admin gets by setting `version` to
//! the step's exact version. `--dependencies` decides, as the controller's flag, whether a
//! bundle that declares dependencies is an answer (`check`, with what it requires) or refused
//! (`refuse`, upstream's rule).

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use super::{
    dependencies::BundleRequirements,
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
};
use crate::{
    meter::{Meter, Refused, Work},
    resolve::{
        CatalogInput, DependencyMode, InstalledBundle, PackageFilter, PreparedRequest, ResolveError,
        ResolveRequest,
    },
    version::{VersionRange, VersionRelease},
};

/// A bundle the resolver answered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Bundle name.
    pub bundle: String,
    /// Version as status reports it.
    pub version: String,
    /// The catalog it comes from.
    pub catalog: String,
    /// Whether the bundle is deprecated.
    pub deprecated: bool,
    /// What it requires, one short line each (`--dependencies=check`: it installs once these
    /// are installed); absent when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

/// The installed bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    /// Bundle name.
    pub bundle: String,
    /// Version as status reports it.
    pub version: String,
    /// The first consulted catalog that carries it; none when no catalog does any more
    /// (catalogs prune old bundles, and the resolver still upgrades from one that an upgrade
    /// edge names or a skipRange covers).
    pub catalog: Option<String>,
    /// Whether the bundle is deprecated (false when no catalog carries it).
    pub deprecated: bool,
}

/// The shortest way to a later version that is not reachable now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePath {
    /// The version at the end.
    pub target: Target,
    /// The steps, the target last; each step sets `version` to the step's exact version.
    pub steps: Vec<Target>,
}

/// A later version with no path from the installed bundle.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unreachable {
    /// Bundle name.
    pub bundle: String,
    /// Version as status would report it.
    pub version: String,
    /// The catalog holding it.
    pub catalog: String,
    /// The resolver's message when asked for it directly from the installed bundle.
    pub message: String,
}

/// The whole answer of `olmv1 upgrades`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Upgrades {
    /// The package.
    pub package: String,
    /// The installed bundle.
    pub installed: Installed,
    /// Versions reachable now in one step, highest first.
    pub reachable: Vec<Target>,
    /// Later versions (higher than the installed one) not reachable now, each with its
    /// shortest path, by version.
    pub paths: Vec<UpgradePath>,
    /// Later versions no path reaches, by version.
    pub unreachable: Vec<Unreachable>,
}

/// Why upgrades cannot be listed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpgradesError {
    /// The request is invalid (selector, range) or the installed version unreadable.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// Nothing is installed.
    #[error("no installed bundle: upgrades are listed from an installed bundle")]
    NotInstalled,
    /// The command's meter ran out.
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// The resolver's error, its meter running out made a refusal.
fn refused(e: ResolveError) -> UpgradesError {
    match e {
        ResolveError::Exhausted { package, exhausted } => UpgradesError::Refused(Refused::new(
            format!("listing the upgrades of package {package:?}"),
            exhausted,
        )),
        other => UpgradesError::Resolve(other),
    }
}

impl UpgradesError {
    /// Always true: the same inputs give the same answer.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// The exact-version range pinning `v` (build metadata is not part of a Masterminds version).
pub fn exact_range(v: &VersionRelease) -> String {
    let mut plain = v.version.clone();
    plain.build = semver::BuildMetadata::EMPTY;
    format!("={plain}")
}

/// One resolver step from `from`: every bundle the resolver answers when asked for each exact
/// version its channel and successor rules admit, resolved as `dependencies` says. `within`
/// restricts answers to a range. Every walk and resolution is charged to `meter`.
pub fn one_step(
    request: &ResolveRequest,
    from: &InstalledBundle,
    catalogs: &[CatalogInput],
    within: Option<&VersionRange>,
    dependencies: DependencyMode,
    meter: &mut Meter,
) -> Result<Vec<Target>, UpgradesError> {
    let probe = ResolveRequest {
        version_range: None,
        installed: Some(from.clone()),
        ..request.clone()
    };
    let prepared = PreparedRequest::new(&probe)?;
    let mut candidates: BTreeMap<String, VersionRelease> = BTreeMap::new();
    for catalog in catalogs.iter().filter(|c| prepared.catalog_skip(c).is_none()) {
        let Some(package) = catalog.index.package(&request.package) else {
            continue;
        };
        crate::resolve::charge_package(meter, package).map_err(refused)?;
        let filter = PackageFilter::new(package, &probe, &prepared)?;
        for (i, b) in package.bundles.iter().enumerate() {
            if let (None, Ok(v)) = (filter.exclusion(i, b), &b.version) {
                candidates.insert(exact_range(v), v.clone());
            }
        }
    }
    let mut out: Vec<Target> = Vec::new();
    for (range, version) in candidates {
        if within.is_some_and(|r| !r.matches(&version.version)) {
            continue;
        }
        let pinned = ResolveRequest {
            version_range: Some(range),
            ..probe.clone()
        };
        let resolution = match dependencies.resolve_within(&pinned, catalogs, meter) {
            Ok(resolution) => resolution,
            Err(e @ ResolveError::Exhausted { .. }) => return Err(refused(e)),
            Err(_) => continue,
        };
        if resolution.bundle.name == from.name || out.iter().any(|t| t.bundle == resolution.bundle.name) {
            continue;
        }
        out.push(Target {
            deprecated: resolution.bundle_deprecated(),
            requires: BundleRequirements::from_properties(
                &resolution.bundle.name,
                &resolution.bundle.properties,
                meter,
            )?
            .summaries(),
            bundle: resolution.bundle.name,
            version: resolution.bundle.status_version,
            catalog: resolution.catalog,
        });
    }
    sort_targets_descending(&mut out);
    Ok(out)
}

fn sort_targets_descending(targets: &mut [Target]) {
    targets.sort_by(|a, b| {
        match (
            VersionRelease::parse_legacy(&a.version),
            VersionRelease::parse_legacy(&b.version),
        ) {
            (Ok(x), Ok(y)) => y.compare(&x),
            _ => b.version.cmp(&a.version),
        }
        .then_with(|| a.bundle.cmp(&b.bundle))
    });
}

/// Lists the upgrades of `request.installed` (see the module documentation).
pub fn upgrades(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    dependencies: DependencyMode,
    meter: &mut Meter,
) -> Result<Upgrades, UpgradesError> {
    let installed = request.installed.clone().ok_or(UpgradesError::NotInstalled)?;
    let prepared = PreparedRequest::new(request)?;
    let installed_vr = match &installed.release {
        Some(r) => VersionRelease::parse_explicit(&installed.version, r),
        None => VersionRelease::parse_legacy(&installed.version),
    }
    .map_err(|e| {
        ResolveError::UpgradeEdges(format!(
            "failed to get version and release of installed bundle: {e}"
        ))
    })?;

    // Every bundle of the package in the consulted catalogs and requested channels.
    let mut known: Vec<(Target, VersionRelease)> = Vec::new();
    let mut installed_catalog = None;
    for catalog in catalogs.iter().filter(|c| prepared.catalog_skip(c).is_none()) {
        let Some(package) = catalog.index.package(&request.package) else {
            continue;
        };
        // Each bundle's channel membership scans the requested channels' entries.
        let scanned = package.bundles.len() as u64 * package.items().max(1);
        meter
            .charge(
                Work::Visit,
                if request.channels.is_empty() {
                    package.items()
                } else {
                    scanned
                },
            )
            .map_err(|e| Refused::new(format!("listing the upgrades of package {:?}", package.name), e))?;
        for b in &package.bundles {
            if *b.name == *installed.name {
                installed_catalog.get_or_insert_with(|| catalog.name.clone());
            }
            let in_channel = request.channels.is_empty()
                || package
                    .channels
                    .iter()
                    .filter(|c| request.channels.iter().any(|r| *r == *c.name))
                    .any(|c| c.entries.iter().any(|e| e.name == b.name));
            if let (true, Ok(v)) = (in_channel, &b.version) {
                known.push((
                    Target {
                        bundle: b.name.to_string(),
                        version: v.status_version(),
                        catalog: catalog.name.clone(),
                        deprecated: b.deprecated,
                        requires: Vec::new(),
                    },
                    v.clone(),
                ));
            }
        }
    }
    let reachable = one_step(
        request,
        &installed,
        catalogs,
        prepared.range.as_ref(),
        dependencies,
        meter,
    )?;

    // Breadth-first over resolver steps (no range: each step sets its own exact version).
    let mut previous: HashMap<String, Option<String>> = HashMap::from([(installed.name.clone(), None)]);
    let mut nodes: HashMap<String, Target> = HashMap::new();
    let mut queue = VecDeque::from([installed.clone()]);
    while let Some(from) = queue.pop_front() {
        for target in one_step(request, &from, catalogs, None, dependencies, meter)? {
            if previous.contains_key(&target.bundle) {
                continue;
            }
            previous.insert(target.bundle.clone(), Some(from.name.clone()));
            queue.push_back(InstalledBundle {
                name: target.bundle.clone(),
                version: target.version.clone(),
                release: None,
            });
            nodes.insert(target.bundle.clone(), target);
        }
    }

    let mut later: Vec<&(Target, VersionRelease)> = known
        .iter()
        .filter(|(t, v)| v.compare(&installed_vr).is_gt() && !reachable.iter().any(|r| r.bundle == t.bundle))
        .collect();
    later.sort_by(|a, b| a.1.compare(&b.1).then_with(|| a.0.bundle.cmp(&b.0.bundle)));
    later.dedup_by(|a, b| a.0.bundle == b.0.bundle);

    let mut paths = Vec::new();
    let mut unreachable = Vec::new();
    for (target, version) in later {
        if nodes.contains_key(&target.bundle) {
            let mut steps = Vec::new();
            let mut cursor = Some(target.bundle.clone());
            while let Some(name) = cursor {
                if name == installed.name {
                    break;
                }
                steps.push(nodes[&name].clone());
                cursor = previous[&name].clone();
            }
            steps.reverse();
            paths.push(UpgradePath {
                target: nodes[&target.bundle].clone(),
                steps,
            });
        } else {
            let pinned = ResolveRequest {
                version_range: Some(exact_range(version)),
                ..request.clone()
            };
            let message = match dependencies.resolve_within(&pinned, catalogs, meter) {
                Ok(r) => format!(
                    "the resolver answers {} {}",
                    r.bundle.name, r.bundle.status_version
                ),
                Err(e @ ResolveError::Exhausted { .. }) => return Err(refused(e)),
                Err(e) => e.to_string(),
            };
            unreachable.push(Unreachable {
                bundle: target.bundle.clone(),
                version: target.version.clone(),
                catalog: target.catalog.clone(),
                message,
            });
        }
    }
    let installed_deprecated = known
        .iter()
        .find(|(t, _)| t.bundle == installed.name)
        .is_some_and(|(t, _)| t.deprecated);
    Ok(Upgrades {
        package: request.package.clone(),
        installed: Installed {
            bundle: installed.name.clone(),
            version: installed.version.clone(),
            catalog: installed_catalog,
            deprecated: installed_deprecated,
        },
        reachable,
        paths,
        unreachable,
    })
}

/// The text form: the installed bundle, then one table of reachable, stepped and unreachable
/// versions.
pub fn render_text(u: &Upgrades, colour: bool) -> TerminalText {
    let mut out = TerminalText::new();
    out.push_str(&format!(
        "{} installed: {} {} ({})\n",
        value(&u.package),
        value(&u.installed.bundle),
        value(&u.installed.version),
        match &u.installed.catalog {
            Some(c) => format!("catalog {}", value(c)),
            None => "no selected catalog carries it any more".to_string(),
        }
    ));
    let mut t = Table::new(&["VERSION", "BUNDLE", "CATALOG", "HOW"]);
    let deprecated = |d: bool| if d { " (deprecated)" } else { "" };
    // `--dependencies=check`: the version installs once what it requires is installed.
    let requires = |r: &[String]| match r {
        [] => String::new(),
        r => format!(" (requires {})", r.join(", ")),
    };
    for r in &u.reachable {
        t.toned_row(vec![
            (r.version.clone(), Tone::Good),
            (r.bundle.clone(), Tone::Plain),
            (r.catalog.clone(), Tone::Plain),
            (
                format!(
                    "reachable now{}{}",
                    deprecated(r.deprecated),
                    requires(&r.requires)
                ),
                Tone::Good,
            ),
        ]);
    }
    for p in &u.paths {
        let steps: Vec<&str> = p.steps.iter().map(|s| s.version.as_str()).collect();
        t.toned_row(vec![
            (p.target.version.clone(), Tone::Plain),
            (p.target.bundle.clone(), Tone::Plain),
            (p.target.catalog.clone(), Tone::Plain),
            (
                format!(
                    "{} step(s): {}{}{}",
                    steps.len(),
                    steps.join(" -> "),
                    deprecated(p.target.deprecated),
                    requires(&p.target.requires)
                ),
                Tone::Warn,
            ),
        ]);
    }
    for x in &u.unreachable {
        t.toned_row(vec![
            (x.version.clone(), Tone::Plain),
            (x.bundle.clone(), Tone::Plain),
            (x.catalog.clone(), Tone::Plain),
            (format!("unreachable: {}", x.message), Tone::Bad),
        ]);
    }
    if t.is_empty() {
        out.push_str("no other version is reachable and none is later\n");
    } else {
        out.push_table(&t, colour);
    }
    out
}
