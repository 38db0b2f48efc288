//! Owns bundle resolution: catalog selection, successors, deprecation, priority (pure).
//! May import api, version, catalog; never bundle, apply, controller or cmd.
//!
//! Bundle resolution with OLM v1 semantics: catalog filtering, successors, deprecation, priority.
//!
//! [`resolve`] is a pure function of the request (package, version range, channels, catalog
//! selector, upgrade policy, installed bundle) and the catalogs (name, priority, labels,
//! availability, index). It follows upstream's `CatalogResolver.Resolve` step for step and
//! returns upstream's error messages verbatim.

pub mod deprecation;
pub mod explain;
pub mod selector;

use std::{
    cmp::Ordering,
    collections::{BTreeMap, HashMap},
    fmt,
    sync::Arc,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use olmv1_api::v1::{ClusterExtension, UpgradeConstraintPolicy};

pub use deprecation::{ConditionData, deprecation_conditions};
pub use selector::CatalogSelector;

use crate::{
    catalog::{
        BundleIndex, CatalogIndex, Deprecation, PROPERTY_CONSTRAINT, PROPERTY_GVK_REQUIRED,
        PROPERTY_PACKAGE_REQUIRED, PackageIndex, Property,
    },
    go_format::go_quote,
    meter::{Exhausted, Meter, Work},
    version::{VersionRange, VersionRelease},
};

/// The bundle currently installed (from `status.install.bundle` or the revision record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledBundle {
    /// Bundle name, e.g. `etcdoperator.v0.9.2`.
    pub name: String,
    /// Bundle version as reported in status, e.g. `0.9.2` or `1.0.0+2`.
    pub version: String,
    /// Explicit release, when recorded separately from the version.
    pub release: Option<String>,
}

/// What to resolve: the `spec.source.catalog` of a ClusterExtension plus the installed bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveRequest {
    /// `packageName`.
    pub package: String,
    /// `version` (Masterminds range); `None` or empty = any version.
    pub version_range: Option<String>,
    /// `channels`; empty = all channels.
    pub channels: Vec<String>,
    /// `selector` over ClusterCatalog labels; `None` = all catalogs.
    pub selector: Option<LabelSelector>,
    /// `upgradeConstraintPolicy`.
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
    /// The installed bundle, if any.
    pub installed: Option<InstalledBundle>,
}

impl ResolveRequest {
    /// The request a ClusterExtension makes. Errors if it has no `spec.source.catalog`.
    pub fn from_cluster_extension(
        ext: &ClusterExtension,
        installed: Option<InstalledBundle>,
    ) -> Result<ResolveRequest, ResolveError> {
        let catalog = ext
            .spec
            .source
            .catalog
            .as_ref()
            .ok_or(ResolveError::NoCatalogSource)?;
        Ok(ResolveRequest {
            package: catalog.package_name.clone(),
            version_range: catalog.version.clone(),
            channels: catalog.channels.clone(),
            selector: catalog.selector.clone(),
            upgrade_constraint_policy: catalog.upgrade_constraint_policy,
            installed,
        })
    }
}

/// One ClusterCatalog as input to resolution.
#[derive(Debug, Clone)]
pub struct CatalogInput {
    /// ClusterCatalog name.
    pub name: String,
    /// `spec.priority` (higher wins a tie).
    pub priority: i32,
    /// Labels of the ClusterCatalog (including `olm.operatorframework.io/metadata.name`).
    pub labels: BTreeMap<String, String>,
    /// false when `spec.availabilityMode` is `Unavailable` (the catalog is then ignored).
    pub available: bool,
    /// The catalog's index. A catalog whose content cannot be had is the caller's error
    /// (upstream: `error walking catalogs: error getting package ... from catalog ...`).
    pub index: Arc<CatalogIndex>,
}

impl CatalogInput {
    /// An available catalog with priority 0, labelled with its name as catalogd labels it.
    pub fn new(name: &str, index: Arc<CatalogIndex>) -> CatalogInput {
        let labels = BTreeMap::from([(
            olmv1_api::v1::conditions::LABEL_CATALOG_NAME.to_string(),
            name.to_string(),
        )]);
        CatalogInput {
            name: name.to_string(),
            priority: 0,
            labels,
            available: true,
            index,
        }
    }
}

/// The bundle resolution picked.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedBundle {
    /// Bundle name.
    pub name: String,
    /// Package name.
    pub package: String,
    /// Version and release.
    pub version: VersionRelease,
    /// The version as upstream reports it in `status.install.bundle.version` (`MetadataFor`).
    pub status_version: String,
    /// Bundle image reference.
    pub image: String,
    /// Bundle properties (without manifests and CSV metadata).
    pub properties: Vec<Property>,
}

/// A successful resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The bundle.
    pub bundle: ResolvedBundle,
    /// The catalog it came from.
    pub catalog: String,
    /// The package's deprecation object that applies (upstream: the one of the last catalog
    /// candidate), for the deprecation conditions. `None` if the package has none.
    pub deprecation: Option<Deprecation>,
}

impl Resolution {
    /// Whether the resolved bundle itself is deprecated.
    pub fn bundle_deprecated(&self) -> bool {
        self.deprecation.as_ref().is_some_and(|d| {
            d.entries.iter().any(|e| {
                e.reference.schema == crate::catalog::SCHEMA_BUNDLE && e.reference.name == self.bundle.name
            })
        })
    }
}

/// Why resolution failed. Display gives upstream's message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    /// The ClusterExtension has no `spec.source.catalog`.
    #[error("spec.source.catalog is required")]
    NoCatalogSource,
    /// The catalog selector is not a valid label selector.
    #[error("desired catalog selector is invalid: {0}")]
    InvalidSelector(String),
    /// The version range does not parse.
    #[error("desired version range {range:?} is invalid: {message}")]
    InvalidVersionRange {
        /// The range as written.
        range: String,
        /// Masterminds' error, e.g. `improper constraint: "foobar"`.
        message: String,
    },
    /// The installed bundle's version does not parse, so its upgrade edges cannot be found.
    #[error("error walking catalogs: error finding upgrade edges: {0}")]
    UpgradeEdges(String),
    /// No bundle, or one bundle in several catalogs of the same priority.
    #[error("{0}")]
    NotFound(ResolutionFailure),
    /// The winning bundle's version cannot be read.
    #[error("error getting resolved bundle version for bundle {bundle:?}: {message}")]
    BundleVersion {
        /// The bundle.
        bundle: String,
        /// Why.
        message: String,
    },
    /// The meter of the command resolving ran out (never for the controller, whose resolution is
    /// bounded by the catalog's own limits): olmv1's own message, not upstream's.
    #[error("resolving package {package:?} {exhausted}")]
    Exhausted {
        /// The package.
        package: String,
        /// The budget or deadline that ran out.
        exhausted: Exhausted,
    },
    /// The winning bundle declares a dependency, which OLM v1 does not support.
    #[error(
        "validating bundle {bundle:?}: bundle {bundle:?} has a dependency declared via property {property:?} which is currently not supported"
    )]
    UnsupportedDependency {
        /// The bundle.
        bundle: String,
        /// The property type.
        property: String,
    },
}

impl ResolveError {
    /// Whether retrying cannot help until the ClusterExtension changes (invalid selector or
    /// range). Everything else may resolve once catalogs change.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ResolveError::InvalidSelector(_)
                | ResolveError::InvalidVersionRange { .. }
                | ResolveError::NoCatalogSource
        )
    }
}

/// A range as the error quotes it: whole up to [`crate::go_format::QUOTE_CHARS`] characters (the
/// CRD allows 64, so a ClusterExtension's is always whole), cut with `...` beyond (a command line
/// has no limit).
pub(crate) fn cut_range(range: &str) -> String {
    let max = crate::go_format::QUOTE_CHARS;
    if range.chars().count() <= max {
        return range.to_string();
    }
    let mut cut: String = range.chars().take(max).collect();
    cut.push_str("...");
    cut
}

/// The `no bundles found ...` / `found bundles ... in multiple catalogs ...` error (upstream
/// `resolutionError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolutionFailure {
    /// The package.
    pub package: String,
    /// The version range, or empty.
    pub version_range: String,
    /// The requested channels.
    pub channels: Vec<String>,
    /// The installed version, if something is installed.
    pub installed_version: Option<String>,
    /// Catalogs that tied (sorted), when more than one.
    pub tied_catalogs: Vec<String>,
}

impl fmt::Display for ResolutionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        if let Some(v) = &self.installed_version {
            s.push_str(&format!(
                "error upgrading from currently installed version {}: ",
                go_quote(v)
            ));
        }
        if self.tied_catalogs.len() > 1 {
            s.push_str(&format!("found bundles for package {} ", go_quote(&self.package)));
        } else {
            s.push_str(&format!(
                "no bundles found for package {} ",
                go_quote(&self.package)
            ));
        }
        if !self.version_range.is_empty() {
            s.push_str(&format!("matching version {} ", go_quote(&self.version_range)));
        }
        if !self.channels.is_empty() {
            s.push_str(&format!("in channels [{}] ", self.channels.join(" ")));
        }
        if self.tied_catalogs.len() > 1 {
            s.push_str(&format!(
                "in multiple catalogs with the same priority [{}] ",
                self.tied_catalogs.join(" ")
            ));
        }
        f.write_str(s.trim())
    }
}

/// A request checked once: the selector and range parsed, the installed bundle kept only when
/// upgrades must follow catalog edges. Shared by [`resolve`] and [`explain::explain`].
pub(crate) struct PreparedRequest<'r> {
    pub(crate) selector: CatalogSelector,
    pub(crate) range_text: &'r str,
    pub(crate) range: Option<VersionRange>,
    pub(crate) installed: Option<&'r InstalledBundle>,
}

impl<'r> PreparedRequest<'r> {
    pub(crate) fn new(request: &'r ResolveRequest) -> Result<Self, ResolveError> {
        let selector =
            CatalogSelector::new(request.selector.as_ref()).map_err(ResolveError::InvalidSelector)?;
        let range_text = request.version_range.as_deref().unwrap_or("");
        let range = if range_text.is_empty() {
            None
        } else {
            Some(
                VersionRange::parse(range_text).map_err(|e| ResolveError::InvalidVersionRange {
                    range: cut_range(range_text),
                    message: e.to_string(),
                })?,
            )
        };
        let follow_edges = request.upgrade_constraint_policy != UpgradeConstraintPolicy::SelfCertified;
        let installed = if follow_edges {
            request.installed.as_ref()
        } else {
            None
        };
        Ok(PreparedRequest {
            selector,
            range_text,
            range,
            installed,
        })
    }

    /// Why a catalog is not consulted, or `None` when it is.
    pub(crate) fn catalog_skip(&self, catalog: &CatalogInput) -> Option<CatalogSkip> {
        if !catalog.available {
            Some(CatalogSkip::Unavailable)
        } else if !self.selector.matches(&catalog.labels) {
            Some(CatalogSkip::NotSelected)
        } else {
            None
        }
    }
}

/// Why resolution does not consult a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CatalogSkip {
    /// `spec.availabilityMode: Unavailable`.
    Unavailable,
    /// The extension's catalog selector does not match the catalog's labels.
    NotSelected,
}

/// The per-bundle rules of one catalog's package, in the order they apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BundleRule {
    /// The bundle is in none of the requested channels.
    Channel,
    /// The bundle's version is outside the requested range (or unreadable while a range is set).
    VersionRange,
    /// The bundle is not a successor of the installed bundle in the requested channels.
    NotSuccessor,
}

/// The channel, range and successor filters of one package for one request.
pub(crate) struct PackageFilter<'a> {
    in_channel: Vec<bool>,
    successors: Option<Vec<bool>>,
    range: Option<&'a VersionRange>,
}

impl<'a> PackageFilter<'a> {
    pub(crate) fn new(
        package: &PackageIndex,
        request: &ResolveRequest,
        prepared: &'a PreparedRequest<'_>,
    ) -> Result<Self, ResolveError> {
        let channel_selected =
            |name: &str| request.channels.is_empty() || request.channels.iter().any(|c| c == name);
        let mut in_channel = vec![request.channels.is_empty(); package.bundles.len()];
        if !request.channels.is_empty() {
            for ch in package.channels.iter().filter(|c| channel_selected(&c.name)) {
                for e in &ch.entries {
                    if let Some(i) = e.bundle {
                        in_channel[i] = true;
                    }
                }
            }
        }
        let successors = match prepared.installed {
            None => None,
            Some(installed) => Some(successor_mask(package, installed, &channel_selected)?),
        };
        Ok(PackageFilter {
            in_channel,
            successors,
            range: prepared.range.as_ref(),
        })
    }

    /// The first rule that excludes bundle `i`, or `None` when it stays a candidate.
    #[inline]
    pub(crate) fn exclusion(&self, i: usize, bundle: &BundleIndex) -> Option<BundleRule> {
        if !self.in_channel[i] {
            return Some(BundleRule::Channel);
        }
        if self.successors.as_ref().is_some_and(|s| !s[i]) {
            return Some(BundleRule::NotSuccessor);
        }
        if let Some(range) = self.range {
            match &bundle.version {
                Ok(vr) if range.matches(&vr.version) => {}
                _ => return Some(BundleRule::VersionRange),
            }
        }
        None
    }
}

/// The dependency property that makes OLM v1 refuse a bundle, if it declares one.
pub fn unsupported_dependency(bundle: &BundleIndex) -> Option<&str> {
    dependency_property(&bundle.properties)
}

/// The first dependency property (`olm.package.required`, `olm.gvk.required`,
/// `olm.constraint`) among `properties`, if any.
pub fn dependency_property(properties: &[Property]) -> Option<&str> {
    properties
        .iter()
        .find(|p| {
            matches!(
                &*p.type_,
                PROPERTY_PACKAGE_REQUIRED | PROPERTY_GVK_REQUIRED | PROPERTY_CONSTRAINT
            )
        })
        .map(|p| &*p.type_)
}

/// How a bundle that declares dependencies (`olm.package.required`, `olm.gvk.required`,
/// `olm.constraint`) is treated: the controller's `--dependencies`, and the same flag of the
/// admin commands that give its verdict (search, explain, upgrades, status).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DependencyMode {
    /// Upstream's behaviour: such a bundle is refused by resolution.
    Refuse,
    /// Such a bundle installs once every dependency is satisfied by a bundle another
    /// ClusterExtension installed (or, for an API, one the cluster serves); an upgrade that
    /// would break an installed dependent is refused.
    #[default]
    Check,
}

impl DependencyMode {
    /// Resolves `request` as this mode does: [`resolve`] refuses a bundle with dependencies,
    /// [`resolve_allowing_dependencies`] picks it (its requirements are checked afterwards).
    pub fn resolve(
        self,
        request: &ResolveRequest,
        catalogs: &[CatalogInput],
    ) -> Result<Resolution, ResolveError> {
        self.resolve_within(request, catalogs, &mut Meter::unlimited())
    }

    /// [`DependencyMode::resolve`], its work charged to `meter`.
    pub fn resolve_within(
        self,
        request: &ResolveRequest,
        catalogs: &[CatalogInput],
        meter: &mut Meter,
    ) -> Result<Resolution, ResolveError> {
        match self {
            DependencyMode::Refuse => resolve_within(request, catalogs, meter),
            DependencyMode::Check => resolve_allowing_dependencies_within(request, catalogs, meter),
        }
    }
}

/// Resolves the bundle to install, as upstream OLM v1 does: a bundle that declares a dependency
/// is refused. Catalogs are consulted in name order (the order the API server lists them).
pub fn resolve(request: &ResolveRequest, catalogs: &[CatalogInput]) -> Result<Resolution, ResolveError> {
    resolve_within(request, catalogs, &mut Meter::unlimited())
}

/// [`resolve`], each package walked charged to `meter` first (the admin commands' meter).
pub fn resolve_within(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    meter: &mut Meter,
) -> Result<Resolution, ResolveError> {
    let resolution = resolve_allowing_dependencies_within(request, catalogs, meter)?;
    if let Some(property) = dependency_property(&resolution.bundle.properties) {
        return Err(ResolveError::UnsupportedDependency {
            bundle: resolution.bundle.name,
            property: property.to_string(),
        });
    }
    Ok(resolution)
}

/// [`resolve`] without the refusal of dependencies: the bundle upstream would pick, whatever it
/// requires (the controller's `--dependencies=check` checks them afterwards).
pub fn resolve_allowing_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
) -> Result<Resolution, ResolveError> {
    resolve_allowing_dependencies_within(request, catalogs, &mut Meter::unlimited())
}

/// [`resolve_allowing_dependencies`], each package walked charged to `meter` first.
pub fn resolve_allowing_dependencies_within(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    meter: &mut Meter,
) -> Result<Resolution, ResolveError> {
    let prepared = PreparedRequest::new(request)?;
    let range_text = prepared.range_text;

    let mut selected: Vec<&CatalogInput> = catalogs
        .iter()
        .filter(|c| prepared.catalog_skip(c).is_none())
        .collect();
    selected.sort_by(|a, b| a.name.cmp(&b.name));

    let mut found: Vec<Candidate> = Vec::new();
    for catalog in selected {
        let Some(package) = catalog.index.package(&request.package) else {
            continue;
        };
        charge_package(meter, package)?;
        let Some(bundle) = best_bundle(package, request, &prepared)? else {
            continue;
        };
        push_candidate(
            &mut found,
            Candidate {
                bundle,
                package,
                catalog,
            },
        );
    }
    let (winner, last) = choose(found).map_err(|tied| {
        ResolveError::NotFound(ResolutionFailure {
            package: request.package.clone(),
            version_range: range_text.to_string(),
            channels: request.channels.clone(),
            installed_version: request.installed.as_ref().map(|i| i.version.clone()),
            tied_catalogs: tied,
        })
    })?;
    // The deprecation returned is that of the last candidate appended, as upstream.
    let deprecation = last.deprecation().cloned();
    let version = winner
        .bundle
        .version
        .clone()
        .map_err(|message| ResolveError::BundleVersion {
            bundle: winner.bundle.name.to_string(),
            message: message.to_string(),
        })?;
    Ok(Resolution {
        bundle: ResolvedBundle {
            name: winner.bundle.name.to_string(),
            package: winner.package.name.to_string(),
            status_version: version.status_version(),
            version,
            image: winner.bundle.image.to_string(),
            properties: winner.bundle.properties.clone(),
        },
        catalog: winner.catalog.name.clone(),
        deprecation,
    })
}

/// Adds one catalog's best bundle to the candidates, catalogs taken by name (upstream's walk): a
/// deprecated bundle is skipped after a non-deprecated one, and a non-deprecated one drops the
/// deprecated ones before it.
fn push_candidate<'a>(found: &mut Vec<Candidate<'a>>, candidate: Candidate<'a>) {
    if let Some(prior) = found.last() {
        match (candidate.bundle.deprecated, prior.bundle.deprecated) {
            (true, false) => return,
            (false, true) => found.clear(),
            _ => {}
        }
    }
    found.push(candidate);
}

/// The candidate of the highest priority, with the package of the last candidate appended (whose
/// deprecation upstream reports); or the names of the tied catalogs, sorted (none when there was
/// no candidate).
fn choose<'a>(mut found: Vec<Candidate<'a>>) -> Result<(Candidate<'a>, &'a PackageIndex), Vec<String>> {
    let last = found.last().map(|c| c.package);
    if found.len() > 1 {
        found.sort_by_key(|c| std::cmp::Reverse(c.catalog.priority));
        if found[0].catalog.priority != found[1].catalog.priority {
            found.truncate(1);
        }
    }
    match (found.as_slice(), last) {
        ([winner], Some(last)) => Ok((*winner, last)),
        _ => {
            let mut tied: Vec<String> = found.iter().map(|c| c.catalog.name.clone()).collect();
            tied.sort();
            Err(tied)
        }
    }
}

/// A version as a Masterminds `=V` range compares it ([`ExactVersion::range`]): numbers and
/// prerelease, build metadata dropped. Two bundle versions match the same `=V` exactly when their
/// `ExactVersion`s are equal (`=V` names no wildcard, so it matches the versions equal to V, and
/// prereleases only when V is one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExactVersion(semver::Version);

impl ExactVersion {
    /// The exact version of a bundle's version.
    pub fn of(version: &VersionRelease) -> ExactVersion {
        let mut plain = version.version.clone();
        plain.build = semver::BuildMetadata::EMPTY;
        ExactVersion(plain)
    }

    /// The range pinning it: `=1.2.3`, `=1.2.3-rc.1`.
    pub fn range(&self) -> String {
        format!("={}", self.0)
    }

    /// The version, without build metadata.
    pub fn version(&self) -> &semver::Version {
        &self.0
    }
}

/// What the resolver answers for every exact version at once: [`ExactVersions::answer`] for V is
/// what [`resolve_allowing_dependencies`] answers when the request's range is `=V` (and what
/// [`resolve`] answers under [`DependencyMode::Refuse`]), from one pass over the catalogs instead of
/// one per version. `olmv1 upgrades` asks this for every version the successor rules admit, from
/// every bundle it reaches.
pub struct ExactVersions<'a> {
    request: ResolveRequest,
    /// The selected catalogs by name, each with its package and the best bundle of each exact
    /// version it admits.
    catalogs: Vec<(&'a CatalogInput, &'a PackageIndex, HashMap<ExactVersion, usize>)>,
    /// How many bundles were looked at.
    examined: u64,
}

/// A bundle the resolver answers with.
#[derive(Debug, Clone, Copy)]
pub struct ExactAnswer<'a> {
    /// The bundle.
    pub bundle: &'a BundleIndex,
    /// Its catalog.
    pub catalog: &'a CatalogInput,
    /// Whether it is deprecated, as [`Resolution::bundle_deprecated`] says.
    pub deprecated: bool,
}

impl<'a> ExactVersions<'a> {
    /// The answers for `request` (its own version range is not used) over `catalogs`.
    pub fn new(
        request: &ResolveRequest,
        catalogs: &'a [CatalogInput],
    ) -> Result<ExactVersions<'a>, ResolveError> {
        let request = ResolveRequest {
            version_range: None,
            ..request.clone()
        };
        let prepared = PreparedRequest::new(&request)?;
        let mut selected: Vec<&CatalogInput> = catalogs
            .iter()
            .filter(|c| prepared.catalog_skip(c).is_none())
            .collect();
        selected.sort_by(|a, b| a.name.cmp(&b.name));
        let mut answers = Vec::with_capacity(selected.len());
        let mut examined = 0u64;
        for catalog in selected {
            let Some(package) = catalog.index.package(&request.package) else {
                continue;
            };
            let filter = PackageFilter::new(package, &request, &prepared)?;
            let entries: usize = package.channels.iter().map(|c| c.entries.len()).sum();
            examined += (package.bundles.len() + entries) as u64;
            let mut best: HashMap<ExactVersion, usize> = HashMap::new();
            for (i, bundle) in package.bundles.iter().enumerate() {
                let (None, Ok(version)) = (filter.exclusion(i, bundle), &bundle.version) else {
                    continue;
                };
                // As `best_bundle`: on a tie the earlier bundle stays.
                best.entry(ExactVersion::of(version))
                    .and_modify(|at| {
                        if rank(bundle, &package.bundles[*at]) == Ordering::Less {
                            *at = i;
                        }
                    })
                    .or_insert(i);
            }
            answers.push((catalog, package, best));
        }
        drop(prepared);
        Ok(ExactVersions {
            request,
            catalogs: answers,
            examined,
        })
    }

    /// Every exact version some selected catalog admits, each with one bundle version of it.
    pub fn versions(&self) -> impl Iterator<Item = (&ExactVersion, &'a VersionRelease)> + '_ {
        self.catalogs.iter().flat_map(|(_, package, best)| {
            best.iter()
                .filter_map(|(exact, &i)| Some((exact, package.bundles[i].version.as_ref().ok()?)))
        })
    }

    /// The package asked for.
    pub fn package(&self) -> &str {
        &self.request.package
    }

    /// How many bundles and channel entries were looked at (the work of [`ExactVersions::new`]).
    pub fn examined(&self) -> u64 {
        self.examined
    }

    /// The resolver's answer when asked for `version` exactly, resolved as `dependencies` says.
    /// `version.range()` must be a valid range (every bundle version gives one shorter than
    /// `version::MAX_RANGE_BYTES`): the caller checks it once per version.
    pub fn answer(
        &self,
        version: &ExactVersion,
        dependencies: DependencyMode,
    ) -> Result<ExactAnswer<'a>, ResolveError> {
        let mut found: Vec<Candidate<'a>> = Vec::new();
        for (catalog, package, best) in &self.catalogs {
            if let Some(&i) = best.get(version) {
                push_candidate(
                    &mut found,
                    Candidate {
                        bundle: &package.bundles[i],
                        package,
                        catalog,
                    },
                );
            }
        }
        let (winner, last) = choose(found).map_err(|tied| {
            ResolveError::NotFound(ResolutionFailure {
                package: self.request.package.clone(),
                version_range: version.range(),
                channels: self.request.channels.clone(),
                installed_version: self.request.installed.as_ref().map(|i| i.version.clone()),
                tied_catalogs: tied,
            })
        })?;
        if dependencies == DependencyMode::Refuse
            && let Some(property) = dependency_property(&winner.bundle.properties)
        {
            return Err(ResolveError::UnsupportedDependency {
                bundle: winner.bundle.name.to_string(),
                property: property.to_string(),
            });
        }
        Ok(ExactAnswer {
            bundle: winner.bundle,
            catalog: winner.catalog,
            deprecated: last
                .deprecation_message(crate::catalog::SCHEMA_BUNDLE, &winner.bundle.name)
                .is_some(),
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The bundle.
    pub bundle: &'a BundleIndex,
    /// Its package in that catalog.
    pub package: &'a PackageIndex,
    /// The catalog.
    pub catalog: &'a CatalogInput,
}

/// Every bundle the request allows (the same catalog selection, channel, range and successor
/// rules as [`resolve`]), best first in [`resolve`]'s order of preference: non-deprecated first,
/// then higher catalog priority, then higher version+release, then catalog name. When [`resolve`]
/// succeeds (or refuses its winner only for declaring dependencies), the first candidate is its
/// winner; the others are what a dependency solver may fall back to.
pub fn candidates<'a>(
    request: &ResolveRequest,
    catalogs: &'a [CatalogInput],
) -> Result<Vec<Candidate<'a>>, ResolveError> {
    candidates_within(request, catalogs, &mut Meter::unlimited())
}

/// [`candidates`], each package walked charged to `meter` first.
pub fn candidates_within<'a>(
    request: &ResolveRequest,
    catalogs: &'a [CatalogInput],
    meter: &mut Meter,
) -> Result<Vec<Candidate<'a>>, ResolveError> {
    let prepared = PreparedRequest::new(request)?;
    let mut out = Vec::new();
    for catalog in catalogs.iter().filter(|c| prepared.catalog_skip(c).is_none()) {
        let Some(package) = catalog.index.package(&request.package) else {
            continue;
        };
        // The walk, and the sort below (n log n of what it keeps: charged as the walk again).
        charge_package(meter, package)?;
        charge_package(meter, package)?;
        let filter = PackageFilter::new(package, request, &prepared)?;
        for (i, bundle) in package.bundles.iter().enumerate() {
            if filter.exclusion(i, bundle).is_none() {
                out.push(Candidate {
                    bundle,
                    package,
                    catalog,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        a.bundle
            .deprecated
            .cmp(&b.bundle.deprecated)
            .then_with(|| b.catalog.priority.cmp(&a.catalog.priority))
            .then_with(|| rank(a.bundle, b.bundle))
            .then_with(|| a.catalog.name.cmp(&b.catalog.name))
    });
    Ok(out)
}

/// The successors of the installed bundle in one package (upstream `SuccessorsOf`), in catalog
/// order: bundles of a channel entry whose replaces, skips or skipRange covers the installed
/// bundle, plus any bundle with the installed version+release. Only the requested channels'
/// edges count (all channels when none is requested).
pub fn successors<'a>(
    package: &'a PackageIndex,
    installed: &InstalledBundle,
    channels: &[String],
) -> Result<Vec<&'a BundleIndex>, ResolveError> {
    let channel_selected = |name: &str| channels.is_empty() || channels.iter().any(|c| c == name);
    let mask = successor_mask(package, installed, &channel_selected)?;
    Ok(package
        .bundles
        .iter()
        .zip(mask)
        .filter(|(_, m)| *m)
        .map(|(b, _)| b)
        .collect())
}

/// Charges a walk over `package` (its bundles, entries and edges: [`PackageIndex::items`]).
pub(crate) fn charge_package(meter: &mut Meter, package: &PackageIndex) -> Result<(), ResolveError> {
    meter
        .charge(Work::Visit, package.items())
        .map_err(|exhausted| ResolveError::Exhausted {
            package: package.name.to_string(),
            exhausted,
        })
}

/// The best bundle of one catalog's package: channel, range and successor filters, then
/// non-deprecated first, then highest version+release (unreadable versions last).
fn best_bundle<'a>(
    package: &'a PackageIndex,
    request: &ResolveRequest,
    prepared: &PreparedRequest<'_>,
) -> Result<Option<&'a BundleIndex>, ResolveError> {
    let filter = PackageFilter::new(package, request, prepared)?;
    let mut best: Option<&BundleIndex> = None;
    for (i, b) in package.bundles.iter().enumerate() {
        if filter.exclusion(i, b).is_some() {
            continue;
        }
        // Stable sort semantics: on a tie the earlier bundle stays first.
        if best.is_none_or(|cur| rank(b, cur) == Ordering::Less) {
            best = Some(b);
        }
    }
    Ok(best)
}

/// Order of preference: non-deprecated first, then version+release descending, unreadable last.
pub(crate) fn rank(a: &BundleIndex, b: &BundleIndex) -> Ordering {
    a.deprecated
        .cmp(&b.deprecated)
        .then_with(|| match (&a.version, &b.version) {
            (Ok(x), Ok(y)) => y.compare(x),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => Ordering::Equal,
        })
}

/// Bundles that are successors of the installed one (upstream `SuccessorsOf`): a channel entry
/// whose replaces, skips or skipRange covers the installed bundle (one hop), or the installed
/// version+release itself.
fn successor_mask(
    package: &PackageIndex,
    installed: &InstalledBundle,
    channel_selected: &dyn Fn(&str) -> bool,
) -> Result<Vec<bool>, ResolveError> {
    let installed_vr = match &installed.release {
        None => VersionRelease::parse_legacy(&installed.version).map_err(|e| {
            ResolveError::UpgradeEdges(format!(
                "failed to get version and release of installed bundle: {e}"
            ))
        })?,
        Some(release) => VersionRelease::parse_explicit(&installed.version, release).map_err(|e| {
            ResolveError::UpgradeEdges(format!(
                "failed to parse installed bundle version and release: {e}"
            ))
        })?,
    };
    // skipRanges see the installed version as written, build metadata included (blang Parse).
    let installed_version = crate::version::parse_strict(&installed.version).map_err(|e| {
        ResolveError::UpgradeEdges(format!(
            "getting successorsPredicate: error parsing installed bundle version: {e}"
        ))
    })?;
    let mut mask: Vec<bool> = package
        .bundles
        .iter()
        .map(|b| {
            b.version
                .as_ref()
                .is_ok_and(|vr| vr.compare(&installed_vr).is_eq())
        })
        .collect();
    for ch in package.channels.iter().filter(|c| channel_selected(&c.name)) {
        for e in &ch.entries {
            let Some(i) = e.bundle else { continue };
            if mask[i] {
                continue;
            }
            let covers = e.replaces.as_deref() == Some(installed.name.as_str())
                || e.skips.iter().any(|s| **s == *installed.name)
                || e.skip_range_parsed
                    .as_ref()
                    .is_some_and(|r| r.contains(&installed_version));
            if covers {
                mask[i] = true;
            }
        }
    }
    Ok(mask)
}

#[cfg(test)]
mod cut_range_tests {
    use super::cut_range;

    #[test]
    fn a_long_range_is_quoted_cut() {
        assert_eq!(cut_range(">=1.0.0"), ">=1.0.0");
        let long = "=1.0.0 || ".repeat(100_000);
        let cut = cut_range(&long);
        assert_eq!(cut.chars().count(), crate::go_format::QUOTE_CHARS + 3);
        assert!(cut.ends_with("..."));
    }
}
