//! `olmv1 upgrades`: every version the controller would install now if the admin asked for that
//! exact version, and the shortest path to each later version that is not reachable now.
//!
//! "Reachable" is the resolver's answer: for each candidate version V, the resolver is asked with
//! the extension's channels, selector and policy, the installed bundle, and `version: "=V"`; V is
//! reachable now when that answer is a bundle of version V and V is inside the extension's own
//! range. Candidates are the bundles the resolver's own channel and successor rules admit (any
//! other version is refused by the same rules), so no answer is guessed from the bare graph. The
//! answers for every V from one bundle come from one pass over the catalogs
//! ([`ExactVersions`]: what `resolve` answers for each `=V`), so listing is quadratic in the
//! package's bundles at worst (every bundle reached, each step looking at every bundle), and it
//! is charged to the command's meter (visits: 3 per bundle or channel entry a step looks at, 6
//! per candidate answer, 1 per path). A
//! path steps through such answers, each step being what the admin gets by setting `version` to
//! the step's exact version. `--dependencies` decides, as the controller's flag, whether a
//! bundle that declares dependencies is an answer (`check`, with what it requires) or refused
//! (`refuse`, upstream's rule).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
};

use serde::{Serialize, Serializer};

use super::{
    dependencies::BundleRequirements,
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
};
use crate::{
    meter::{Exhausted, Meter, Refused, Work},
    resolve::{
        CatalogInput, DependencyMode, ExactAnswer, ExactVersion, ExactVersions, InstalledBundle,
        PreparedRequest, ResolveError, ResolveRequest,
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
    pub steps: Steps,
}

/// The steps of a path: a node of the breadth-first tree of resolver steps from the installed
/// bundle, holding the step before it. The paths of a chain share their steps: a chain of n
/// versions holds n steps, not n²/2 copies (a 2 MB catalog of one long `replaces` chain made
/// 560 MiB of them).
#[derive(Debug, Clone, Default)]
pub struct Steps(Option<Arc<Step>>);

#[derive(Debug)]
struct Step {
    target: Target,
    before: Steps,
    len: usize,
}

impl Steps {
    /// These steps, then `target`.
    pub fn then(&self, target: Target) -> Steps {
        Steps(Some(Arc::new(Step {
            target,
            before: self.clone(),
            len: self.len() + 1,
        })))
    }

    /// How many steps.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len)
    }

    /// No step.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The steps from the last back to the first, each with the one before it (`None` for the
    /// first: the installed bundle is before it).
    pub fn backwards(&self) -> impl Iterator<Item = (&Target, Option<&Target>)> {
        std::iter::successors(self.0.as_deref(), |s| s.before.0.as_deref())
            .map(|s| (&s.target, s.before.0.as_deref().map(|b| &b.target)))
    }

    /// The steps in order, the first first (a list as long as the path).
    pub fn iter(&self) -> std::vec::IntoIter<&Target> {
        let mut steps: Vec<&Target> = self.backwards().map(|(t, _)| t).collect();
        steps.reverse();
        steps.into_iter()
    }
}

impl FromIterator<Target> for Steps {
    fn from_iter<I: IntoIterator<Item = Target>>(steps: I) -> Steps {
        steps
            .into_iter()
            .fold(Steps::default(), |before, t| before.then(t))
    }
}

impl PartialEq for Steps {
    fn eq(&self, other: &Steps) -> bool {
        self.len() == other.len() && self.backwards().map(|s| s.0).eq(other.backwards().map(|s| s.0))
    }
}

impl Eq for Steps {}

impl Serialize for Steps {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl Drop for Step {
    // One step at a time: dropping a long chain by recursion would overflow the stack.
    fn drop(&mut self) {
        let mut next = self.before.0.take();
        while let Some(step) = next {
            next = match Arc::try_unwrap(step) {
                Ok(mut s) => s.before.0.take(),
                Err(_) => None,
            };
        }
    }
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

/// Charges `units` of visiting to `meter` for listing `package`'s upgrades.
fn charge(meter: &mut Meter, package: &str, units: u64) -> Result<(), UpgradesError> {
    meter.charge(Work::Visit, units).map_err(|e| {
        UpgradesError::Refused(Refused::new(
            format!("listing the upgrades of package {package:?}"),
            e,
        ))
    })
}

impl UpgradesError {
    /// Always true: the same inputs give the same answer.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// The exact-version range pinning `v` (build metadata is not part of a Masterminds version).
pub fn exact_range(v: &VersionRelease) -> String {
    ExactVersion::of(v).range()
}

/// Each exact version's `=V` range, as text and whether it parses (a version longer than a range
/// may be does not): made once per version, whatever the number of steps that ask for it.
#[derive(Default)]
struct PinnedRanges(HashMap<ExactVersion, (String, Result<(), ResolveError>)>);

impl PinnedRanges {
    /// Makes `version`'s range once (the key cloned only then: this runs for every candidate
    /// of every step).
    fn ensure(&mut self, version: &ExactVersion) {
        if self.0.contains_key(version) {
            return;
        }
        let range = version.range();
        let parsed = VersionRange::parse(&range)
            .map(drop)
            .map_err(|e| ResolveError::InvalidVersionRange {
                range: crate::resolve::cut_range(&range),
                message: e.to_string(),
            });
        self.0.insert(version.clone(), (range, parsed));
    }

    fn check(&mut self, version: &ExactVersion) -> Result<(), ResolveError> {
        self.ensure(version);
        self.0[version].1.clone()
    }
}

/// Visits charged per candidate of a step: its range looked up, its place among the step's
/// candidates sorted, the resolver's answer for it (a lookup per catalog, the choice, its
/// deprecation) and the answers' set: about 150 ns in release, six hash lookups and string
/// comparisons, where a visit is calibrated at about 6 ns (a package of 5,819 bundles that each
/// skip every earlier one took 6.9 CPU s within the command's budget at one visit each).
const VISITS_PER_CANDIDATE: u64 = 6;

/// Visits charged per bundle or channel entry [`ExactVersions::new`] looks at: its exclusion
/// rules, its exact version made and kept by a hash (about 60 ns).
const VISITS_PER_EXAMINED: u64 = 3;

/// One resolver step from `from`: every bundle the resolver answers when asked for each exact
/// version its channel and successor rules admit, resolved as `dependencies` says, highest
/// version first. `within` restricts answers to a range.
fn one_step<'a>(
    answers: &ExactVersions<'a>,
    from: &str,
    within: Option<&VersionRange>,
    dependencies: DependencyMode,
    ranges: &mut PinnedRanges,
    meter: &mut Meter,
) -> Result<Vec<ExactAnswer<'a>>, UpgradesError> {
    // In the order of their ranges' text, as the pinned requests were once made: when two
    // catalogs answer with bundles of one name, the first answer is the one kept.
    for (exact, _) in answers.versions() {
        ranges.ensure(exact);
    }
    let ranges = &*ranges;
    let mut candidates: Vec<(&str, bool, &ExactVersion, &VersionRelease)> = answers
        .versions()
        .map(|(exact, version)| {
            let (range, parsed) = &ranges.0[exact];
            (range.as_str(), parsed.is_ok(), exact, version)
        })
        .collect();
    candidates.sort_unstable_by(|a, b| a.0.cmp(b.0));
    candidates.dedup_by(|a, b| a.0 == b.0);
    let mut out: Vec<ExactAnswer<'a>> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (_, parsed, exact, version) in candidates {
        charge(meter, answers.package(), VISITS_PER_CANDIDATE)?;
        if within.is_some_and(|r| !r.matches(&version.version)) || !parsed {
            continue;
        }
        let Ok(answer) = answers.answer(exact, dependencies) else {
            continue;
        };
        if *answer.bundle.name == *from || !seen.insert(&answer.bundle.name) {
            continue;
        }
        out.push(answer);
    }
    // As `sort_targets_descending` orders the targets made of them.
    out.sort_by(|a, b| match (&a.bundle.version, &b.bundle.version) {
        (Ok(x), Ok(y)) => y.compare(x).then_with(|| a.bundle.name.cmp(&b.bundle.name)),
        _ => a.bundle.name.cmp(&b.bundle.name),
    });
    Ok(out)
}

fn target(answer: &ExactAnswer<'_>, meter: &mut Meter) -> Result<Target, UpgradesError> {
    let bundle = answer.bundle;
    Ok(Target {
        bundle: bundle.name.to_string(),
        version: bundle
            .version
            .as_ref()
            .map(VersionRelease::status_version)
            .unwrap_or_default(),
        catalog: answer.catalog.name.clone(),
        deprecated: answer.deprecated,
        requires: BundleRequirements::from_properties(&bundle.name, &bundle.properties, meter)?.summaries(),
    })
}

/// The resolver's answers from `from`, charged to `meter`.
fn answers_from<'a>(
    request: &ResolveRequest,
    from: &InstalledBundle,
    catalogs: &'a [CatalogInput],
    meter: &mut Meter,
) -> Result<ExactVersions<'a>, UpgradesError> {
    let probe = ResolveRequest {
        installed: Some(from.clone()),
        ..request.clone()
    };
    let answers = ExactVersions::new(&probe, catalogs).map_err(refused)?;
    charge(meter, &request.package, answers.examined() * VISITS_PER_EXAMINED)?;
    Ok(answers)
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
        let in_channels: HashSet<&str> = package
            .channels
            .iter()
            .filter(|c| request.channels.iter().any(|r| *r == *c.name))
            .flat_map(|c| c.entries.iter().map(|e| &*e.name))
            .collect();
        charge(
            meter,
            &request.package,
            (package.bundles.len() + in_channels.len()) as u64,
        )?;
        for b in &package.bundles {
            if *b.name == *installed.name {
                installed_catalog.get_or_insert_with(|| catalog.name.clone());
            }
            let in_channel = request.channels.is_empty() || in_channels.contains(&*b.name);
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
    let mut ranges = PinnedRanges::default();
    let from_installed = answers_from(request, &installed, catalogs, meter)?;
    let reachable: Vec<Target> = one_step(
        &from_installed,
        &installed.name,
        prepared.range.as_ref(),
        dependencies,
        &mut ranges,
        meter,
    )?
    .iter()
    .map(|answer| target(answer, meter))
    .collect::<Result<_, _>>()?;

    // Breadth-first over resolver steps (no range: each step sets its own exact version).
    // Each bundle reached, with the steps to it.
    let mut nodes: HashMap<String, Steps> = HashMap::from([(installed.name.clone(), Steps::default())]);
    let mut queue = VecDeque::from([installed.clone()]);
    while let Some(from) = queue.pop_front() {
        let answers = if from == installed {
            None
        } else {
            Some(answers_from(request, &from, catalogs, meter)?)
        };
        let answers = answers.as_ref().unwrap_or(&from_installed);
        let before = nodes[&from.name].clone();
        for answer in one_step(answers, &from.name, None, dependencies, &mut ranges, meter)? {
            if nodes.contains_key(&*answer.bundle.name) {
                continue;
            }
            let target = target(&answer, meter)?;
            queue.push_back(InstalledBundle {
                name: target.bundle.clone(),
                version: target.version.clone(),
                release: None,
            });
            nodes.insert(target.bundle.clone(), before.then(target));
        }
    }

    let reachable_names: HashSet<&str> = reachable.iter().map(|r| r.bundle.as_str()).collect();
    let mut later: Vec<&(Target, VersionRelease)> = known
        .iter()
        .filter(|(t, v)| v.compare(&installed_vr).is_gt() && !reachable_names.contains(t.bundle.as_str()))
        .collect();
    later.sort_by(|a, b| a.1.compare(&b.1).then_with(|| a.0.bundle.cmp(&b.0.bundle)));
    later.dedup_by(|a, b| a.0.bundle == b.0.bundle);

    let mut paths = Vec::new();
    let mut unreachable = Vec::new();
    for (target, version) in later {
        if let Some((last, _)) = nodes.get(&target.bundle).and_then(|s| s.backwards().next()) {
            charge(meter, &request.package, 1)?;
            paths.push(UpgradePath {
                target: last.clone(),
                steps: nodes[&target.bundle].clone(),
            });
        } else {
            charge(meter, &request.package, 1)?;
            // What the resolver says when asked for the version directly from the installed one.
            let exact = ExactVersion::of(version);
            let message = match ranges
                .check(&exact)
                .and_then(|()| from_installed.answer(&exact, dependencies))
            {
                Ok(answer) => format!(
                    "the resolver answers {} {}",
                    answer.bundle.name,
                    answer
                        .bundle
                        .version
                        .as_ref()
                        .map(VersionRelease::status_version)
                        .unwrap_or_default()
                ),
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

/// The most steps a path's row names: the first and last halves, the count of the rest between
/// them (a chain of n versions has paths of every length up to n: their rows in full were n²/2
/// versions of text before any was cut). The longest path of the shared catalogs is 79 steps.
pub const SHOWN_STEPS: usize = 256;

/// A path's versions joined by arrows, at most [`SHOWN_STEPS`] of them.
fn shown_steps(steps: &Steps) -> String {
    let versions: Vec<&str> = steps.iter().map(|s| s.version.as_str()).collect();
    if versions.len() <= SHOWN_STEPS {
        return versions.join(" -> ");
    }
    let half = SHOWN_STEPS / 2;
    let between = format!("... ({} more)", versions.len() - 2 * half);
    let mut shown = versions[..half].to_vec();
    shown.push(&between);
    shown.extend_from_slice(&versions[versions.len() - half..]);
    shown.join(" -> ")
}

/// The text form: the installed bundle, then one table of reachable, stepped and unreachable
/// versions; charged to the command's `meter` as it is made.
pub fn render_text(u: &Upgrades, colour: bool, meter: &mut Meter) -> Result<TerminalText, Exhausted> {
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
        // Its steps are walked whole to show the first ones.
        meter.charge(Work::Render, p.steps.len() as u64)?;
        t.toned_row(vec![
            (p.target.version.clone(), Tone::Plain),
            (p.target.bundle.clone(), Tone::Plain),
            (p.target.catalog.clone(), Tone::Plain),
            (
                format!(
                    "{} step(s): {}{}{}",
                    p.steps.len(),
                    shown_steps(&p.steps),
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
        out.push_table(&t, colour, meter)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use olmv1_api::v1::UpgradeConstraintPolicy;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::catalog::{CatalogIndex, Meta};

    /// The algorithm before it was made quadratic (one pinned resolve per successor of every
    /// bundle reached): what the answer must stay equal to.
    mod reference {
        use std::collections::{BTreeMap, HashMap, VecDeque};

        use super::super::{BundleRequirements, Installed, Target, Unreachable, UpgradePath, Upgrades};
        use crate::{
            resolve::{
                CatalogInput, DependencyMode, InstalledBundle, PackageFilter, PreparedRequest, ResolveError,
                ResolveRequest,
            },
            version::{VersionRange, VersionRelease},
        };

        /// One resolver step from `from`: every bundle the resolver answers when asked for each exact
        /// version its channel and successor rules admit, resolved as `dependencies` says. `within`
        /// restricts answers to a range.
        fn one_step(
            request: &ResolveRequest,
            from: &InstalledBundle,
            catalogs: &[CatalogInput],
            within: Option<&VersionRange>,
            dependencies: DependencyMode,
        ) -> Result<Vec<Target>, ResolveError> {
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
                let filter = PackageFilter::new(package, &probe, &prepared)?;
                for (i, b) in package.bundles.iter().enumerate() {
                    if let (None, Ok(v)) = (filter.exclusion(i, b), &b.version) {
                        candidates.insert(super::super::exact_range(v), v.clone());
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
                let Ok(resolution) = dependencies.resolve(&pinned, catalogs) else {
                    continue;
                };
                if resolution.bundle.name == from.name
                    || out.iter().any(|t| t.bundle == resolution.bundle.name)
                {
                    continue;
                }
                out.push(Target {
                    deprecated: resolution.bundle_deprecated(),
                    requires: BundleRequirements::from_properties(
                        &resolution.bundle.name,
                        &resolution.bundle.properties,
                        &mut crate::meter::Meter::unlimited(),
                    )
                    .unwrap()
                    .summaries(),
                    bundle: resolution.bundle.name,
                    version: resolution.bundle.status_version,
                    catalog: resolution.catalog,
                });
            }
            sort_targets_descending(&mut out);
            Ok(out)
        }

        /// Lists the upgrades of `request.installed` (see the module documentation).
        pub(super) fn upgrades(
            request: &ResolveRequest,
            catalogs: &[CatalogInput],
            dependencies: DependencyMode,
        ) -> Result<Upgrades, super::super::UpgradesError> {
            let installed = request
                .installed
                .clone()
                .ok_or(super::super::UpgradesError::NotInstalled)?;
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
            )?;

            // Breadth-first over resolver steps (no range: each step sets its own exact version).
            let mut previous: HashMap<String, Option<String>> =
                HashMap::from([(installed.name.clone(), None)]);
            let mut nodes: HashMap<String, Target> = HashMap::new();
            let mut queue = VecDeque::from([installed.clone()]);
            while let Some(from) = queue.pop_front() {
                for target in one_step(request, &from, catalogs, None, dependencies)? {
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
                .filter(|(t, v)| {
                    v.compare(&installed_vr).is_gt() && !reachable.iter().any(|r| r.bundle == t.bundle)
                })
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
                        steps: steps.into_iter().collect(),
                    });
                } else {
                    let pinned = ResolveRequest {
                        version_range: Some(super::super::exact_range(version)),
                        ..request.clone()
                    };
                    let message = match dependencies.resolve(&pinned, catalogs) {
                        Ok(r) => format!(
                            "the resolver answers {} {}",
                            r.bundle.name, r.bundle.status_version
                        ),
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
    }

    const VERSIONS: [&str; 9] = [
        "1.0.0",
        "1.0.1",
        "1.0.1+b2",
        "1.1.0-rc.1",
        "1.1.0",
        "1.1.0+1",
        "2.0.0-alpha",
        "2.0.0",
        "0.9.0",
    ];
    const SKIP_RANGES: [&str; 5] = [
        "<1.1.0",
        ">=1.0.0 <2.0.0",
        "<=1.0.1",
        ">=0.9.0 <1.1.0-rc.1",
        "<3.0.0",
    ];

    #[derive(Debug, Clone)]
    struct Entry {
        bundle: usize,
        replaces: Option<usize>,
        skips: Vec<usize>,
        skip_range: Option<usize>,
    }

    #[derive(Debug, Clone)]
    struct Catalog {
        priority: i32,
        versions: Vec<usize>,
        dependency: Vec<bool>,
        stable: Vec<Entry>,
        fast: Vec<Entry>,
        deprecated: Vec<usize>,
    }

    fn entry(bundles: usize) -> impl Strategy<Value = Entry> {
        (
            0..bundles,
            proptest::option::of(0..bundles + 1),
            proptest::collection::vec(0..bundles + 1, 0..3),
            proptest::option::of(0..SKIP_RANGES.len()),
        )
            .prop_map(|(bundle, replaces, skips, skip_range)| Entry {
                bundle,
                replaces,
                skips,
                skip_range,
            })
    }

    fn catalog() -> impl Strategy<Value = Catalog> {
        (2..8usize).prop_flat_map(|n| {
            (
                0..2i32,
                proptest::collection::vec(0..VERSIONS.len(), n),
                proptest::collection::vec(proptest::bool::weighted(0.2), n),
                proptest::collection::vec(entry(n), 0..n + 2),
                proptest::collection::vec(entry(n), 0..n),
                proptest::collection::vec(0..n, 0..2),
            )
                .prop_map(
                    |(priority, versions, dependency, stable, fast, deprecated)| Catalog {
                        priority,
                        versions,
                        dependency,
                        stable,
                        fast,
                        deprecated,
                    },
                )
        })
    }

    fn channel(name: &str, entries: &[Entry]) -> Value {
        let mut seen = std::collections::BTreeSet::new();
        let entries: Vec<Value> = entries
            .iter()
            .filter(|e| seen.insert(e.bundle))
            .map(|e| {
                let mut v = json!({"name": format!("p.v{}", e.bundle)});
                if let Some(r) = e.replaces {
                    v["replaces"] = json!(format!("p.v{r}"));
                }
                if !e.skips.is_empty() {
                    v["skips"] = json!(e.skips.iter().map(|s| format!("p.v{s}")).collect::<Vec<_>>());
                }
                if let Some(r) = e.skip_range {
                    v["skipRange"] = json!(SKIP_RANGES[r]);
                }
                v
            })
            .collect();
        json!({"schema": "olm.channel", "package": "p", "name": name, "entries": entries})
    }

    fn index(c: &Catalog) -> Arc<CatalogIndex> {
        let mut objects = vec![json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"})];
        objects.push(channel("stable", &c.stable));
        if !c.fast.is_empty() {
            objects.push(channel("fast", &c.fast));
        }
        for (i, v) in c.versions.iter().enumerate() {
            let mut properties =
                vec![json!({"type": "olm.package", "value": {"packageName": "p", "version": VERSIONS[*v]}})];
            if c.dependency[i] {
                properties.push(json!({"type": "olm.package.required", "value": {"packageName": "q", "versionRange": ">=1.0.0"}}));
            }
            objects.push(json!({"schema": "olm.bundle", "package": "p", "name": format!("p.v{i}"), "image": "example.com/p", "properties": properties}));
        }
        if !c.deprecated.is_empty() {
            let entries: Vec<Value> = c
                .deprecated
                .iter()
                .map(|i| json!({"reference": {"schema": "olm.bundle", "name": format!("p.v{i}")}, "message": "old"}))
                .collect();
            objects.push(json!({"schema": "olm.deprecations", "package": "p", "entries": entries}));
        }
        let metas: Vec<Meta> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("t.json"), i as u32 + 1).unwrap()
            })
            .collect();
        Arc::new(CatalogIndex::from_metas(&metas).unwrap())
    }

    fn as_json(answer: Result<Upgrades, UpgradesError>) -> Value {
        match answer {
            Ok(u) => serde_json::to_value(u).unwrap(),
            Err(e) => json!({"error": e.to_string()}),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// One resolve per bundle reached answers exactly what one pinned resolve per successor
        /// answered: random catalogs (versions with prereleases and build metadata, several
        /// catalogs and priorities, replaces, skips, skipRanges, deprecations, dependencies),
        /// every request shape.
        #[test]
        fn the_answer_is_the_pinned_resolvers(
            catalogs in proptest::collection::vec(catalog(), 1..3),
            installed in 0..8usize,
            installed_version in 0..VERSIONS.len(),
            channel in 0..3usize,
            range in proptest::option::of(0..3usize),
            self_certified: bool,
            refuse: bool,
        ) {
            let inputs: Vec<CatalogInput> = catalogs
                .iter()
                .enumerate()
                .map(|(i, c)| CatalogInput { priority: c.priority, ..CatalogInput::new(&format!("c{i}"), index(c)) })
                .collect();
            let request = ResolveRequest {
                package: "p".to_string(),
                version_range: range.map(|r| [">=1.0.1", "<2.0.0", "1.x"][r].to_string()),
                channels: match channel {
                    0 => vec![],
                    1 => vec!["stable".to_string()],
                    _ => vec!["fast".to_string(), "stable".to_string()],
                },
                selector: None,
                upgrade_constraint_policy: if self_certified {
                    UpgradeConstraintPolicy::SelfCertified
                } else {
                    UpgradeConstraintPolicy::CatalogProvided
                },
                installed: Some(InstalledBundle {
                    name: format!("p.v{installed}"),
                    version: VERSIONS[installed_version].to_string(),
                    release: None,
                }),
            };
            let mode = if refuse { DependencyMode::Refuse } else { DependencyMode::Check };
            prop_assert_eq!(
                as_json(upgrades(&request, &inputs, mode, &mut Meter::unlimited())),
                as_json(reference::upgrades(&request, &inputs, mode))
            );
        }
    }

    /// Every package of the shared catalogs, from every bundle of its default channel (as
    /// `test/cli/snapshots.rs` asks): the same answer as the pinned resolver's.
    #[test]
    fn every_answer_of_the_shared_catalogs_is_the_pinned_resolvers() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
        let mut compared = 0;
        for catalog in [
            "community-operators-v4.16",
            "certified-operators-v4.16",
            "certified-operators-v4.20",
        ] {
            let index = CatalogIndex::from_dir(&root.join(catalog))
                .unwrap_or_else(|e| panic!("the shared catalog {catalog} (at {}): {e}", root.display()));
            let inputs = [CatalogInput::new(catalog, Arc::new(index))];
            for package in inputs[0].index.packages() {
                let Some(default) = package
                    .default_channel
                    .as_deref()
                    .and_then(|c| package.channel(c))
                else {
                    continue;
                };
                for entry in &default.entries {
                    let Some(Ok(version)) = entry.bundle.map(|i| &package.bundles[i].version) else {
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
                    assert_eq!(
                        as_json(upgrades(
                            &request,
                            &inputs,
                            DependencyMode::Check,
                            &mut Meter::unlimited(),
                        )),
                        as_json(reference::upgrades(&request, &inputs, DependencyMode::Check)),
                        "{catalog}: {} from {}",
                        package.name,
                        entry.name
                    );
                    compared += 1;
                }
            }
        }
        // 869 bundles of default channels in the shared catalogs.
        assert!(compared >= 850, "only {compared} answers compared");
    }

    /// A package of 800 bundles where every bundle's skipRange covers all earlier ones (each
    /// bundle reaches every later one: the O(N^3) case of the issue) is answered within the
    /// budget, the work charged quadratic; the same with a small budget is refused in a sentence.
    /// Package `p` of `n` bundles `1.0.i`, each replacing the one before, and with `skip_all` a
    /// skipRange over every earlier one.
    fn chain(n: usize, skip_all: bool) -> [CatalogInput; 1] {
        let entries: Vec<Value> = (0..n)
            .map(|i| match i {
                0 => json!({"name": "p.v0"}),
                _ if skip_all => {
                    json!({"name": format!("p.v{i}"), "replaces": format!("p.v{}", i - 1), "skipRange": format!("<1.0.{i}")})
                }
                _ => json!({"name": format!("p.v{i}"), "replaces": format!("p.v{}", i - 1)}),
            })
            .collect();
        let mut objects = vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": entries}),
        ];
        for i in 0..n {
            objects.push(json!({"schema": "olm.bundle", "package": "p", "name": format!("p.v{i}"), "image": "i",
                "properties": [{"type": "olm.package", "value": {"packageName": "p", "version": format!("1.0.{i}")}}]}));
        }
        let metas: Vec<Meta> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("t.json"), i as u32 + 1).unwrap()
            })
            .collect();
        [CatalogInput::new(
            "c",
            Arc::new(CatalogIndex::from_metas(&metas).unwrap()),
        )]
    }

    /// The upgrades of package `p` from its first bundle.
    fn from_first() -> ResolveRequest {
        ResolveRequest {
            package: "p".to_string(),
            version_range: None,
            channels: vec![],
            selector: None,
            upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
            installed: Some(InstalledBundle {
                name: "p.v0".to_string(),
                version: "1.0.0".to_string(),
                release: None,
            }),
        }
    }

    #[test]
    fn the_paths_of_a_long_chain_share_their_steps_and_its_rows_name_at_most_256() {
        let n = 300;
        let inputs = chain(n, false);
        let mut meter = Meter::new(crate::admin::COMMAND_WORK_UNITS);
        let answer = upgrades(&from_first(), &inputs, DependencyMode::Check, &mut meter).unwrap();
        assert_eq!(answer.reachable.len(), 1);
        assert_eq!(answer.paths.len(), n - 2);
        for (k, p) in answer.paths.iter().enumerate() {
            let versions: Vec<String> = p.steps.iter().map(|s| s.version.clone()).collect();
            let expected: Vec<String> = (1..=k + 2).map(|i| format!("1.0.{i}")).collect();
            assert_eq!(versions, expected);
            assert_eq!(p.target.version, format!("1.0.{}", k + 2));
        }
        // Each path is the one before it and one step more: its steps, not a copy of them (a
        // chain of n held n²/2 copies).
        for pair in answer.paths.windows(2) {
            let before_last = pair[1].steps.backwards().nth(1).unwrap().0;
            let last = pair[0].steps.backwards().next().unwrap().0;
            assert!(std::ptr::eq(before_last, last));
        }
        let json = serde_json::to_value(&answer.paths[0]).unwrap();
        assert_eq!(json["steps"][1]["version"], "1.0.2");
        let text = render_text(&answer, false, &mut Meter::unlimited()).unwrap();
        let row = text
            .lines()
            .find(|l| l.contains("280 step(s):"))
            .expect("the path to 1.0.280");
        assert!(
            row.contains("280 step(s): 1.0.1 -> 1.0.2 -> ")
                && row.contains(" -> 1.0.128 -> ... (24 more) -> 1.0.153 -> ")
                && row.trim_end().ends_with(" -> 1.0.280"),
            "{row}"
        );
        let row = text
            .lines()
            .find(|l| l.contains("256 step(s):"))
            .expect("the path to 1.0.256");
        assert!(
            !row.contains("more)") && row.trim_end().ends_with(" -> 1.0.255 -> 1.0.256"),
            "{row}"
        );
    }

    #[test]
    fn a_path_of_many_steps_is_dropped_one_step_at_a_time() {
        // Dropped by recursion, 300,000 steps overflow a test thread's stack.
        let steps: Steps = (0..300_000)
            .map(|i| Target {
                bundle: format!("p.v{i}"),
                version: String::new(),
                catalog: String::new(),
                deprecated: false,
                requires: Vec::new(),
            })
            .collect();
        assert_eq!(steps.len(), 300_000);
        let shared = steps.clone();
        drop(steps);
        assert_eq!(shared.backwards().next().unwrap().0.bundle, "p.v299999");
        drop(shared);
    }

    #[test]
    fn a_graph_over_the_output_room_is_refused_before_its_edges_are_made() {
        use crate::admin::{graph::upgrade_graph, output::Room};
        // Each skipRange covers every earlier bundle: 800 bundles make 319,600 dotted edges.
        let inputs = chain(800, true);
        let request = from_first();
        let mut meter = Meter::new(crate::admin::COMMAND_WORK_UNITS);
        let answer = upgrades(&request, &inputs, DependencyMode::Check, &mut meter).unwrap();
        let room = Room {
            limit: 1 << 20,
            left: (1 << 20) - 256,
        };
        let refused = upgrade_graph(&request, &inputs, &answer, room, &mut meter).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the upgrade graph of package \"p\" is over the output limit of 1048576 bytes (--max-output-bytes); nothing was printed"
        );
        // A graph within the room is drawn whole.
        let inputs = chain(20, true);
        let answer = upgrades(&request, &inputs, DependencyMode::Check, &mut meter).unwrap();
        let dot = upgrade_graph(&request, &inputs, &answer, room, &mut meter)
            .unwrap()
            .unwrap();
        assert!(dot.ends_with("}\n"));
        assert_eq!(dot.matches("[style=dotted]").count(), 19 * 20 / 2);
    }

    #[test]
    fn eight_hundred_bundles_reaching_each_other_are_answered_within_the_budget() {
        let n = 800;
        let inputs = chain(n, true);
        let request = from_first();
        // Work decides, never the clock (a debug build on a busy machine is slow).
        let mut meter = Meter::new(crate::admin::COMMAND_WORK_UNITS);
        let answer = upgrades(&request, &inputs, DependencyMode::Check, &mut meter).unwrap();
        assert_eq!(answer.reachable.len(), n - 1);
        assert!(answer.paths.is_empty() && answer.unreachable.is_empty());
        // Quadratic at worst: every bundle reached, each step looking at every bundle.
        let visited = meter.spent_on(Work::Visit) / Work::Visit.weight();
        // 2n items looked at (3 visits each) and n candidates (6 each) per step.
        assert!(visited < 16 * (n * n) as u64, "{visited} visits");
        let refused =
            upgrades(&request, &inputs, DependencyMode::Check, &mut Meter::new(100_000)).unwrap_err();
        assert!(
            matches!(refused, UpgradesError::Refused(_))
                && refused
                    .to_string()
                    .ends_with(" needs more than the budget of 100000 work units"),
            "{refused}"
        );
    }
}
