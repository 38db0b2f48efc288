//! Why the resolver chose what it chose, or found nothing: each catalog considered or skipped and,
//! for each bundle of the package, the first rule that excluded it. The verdict is the resolver's
//! own answer under the [`DependencyMode`] given ([`super::resolve`] for `refuse`); the
//! per-bundle rules are the same [`PackageFilter`] and [`rank`] it uses, so the explanation
//! cannot drift from the resolution. Status keeps upstream's message; this is extra.

use std::cmp::Ordering;

use serde::Serialize;

use super::{
    BundleRule, CatalogInput, CatalogSkip, DependencyMode, PackageFilter, PreparedRequest, ResolveError,
    ResolveRequest, rank, unsupported_dependency,
};
use crate::{catalog::BundleIndex, meter::Meter};

/// The whole explanation of one request.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The package asked for.
    pub package: String,
    /// Every catalog given, in the order resolution consults them (by name).
    pub catalogs: Vec<CatalogExplanation>,
    /// Every bundle of the package in the consulted catalogs, in catalog then catalog-file order.
    pub bundles: Vec<BundleExplanation>,
    /// The chosen bundle, if resolution succeeded.
    pub chosen: Option<ChosenBundle>,
    /// Resolution's error message (upstream's text, as status shows it), if it failed.
    pub error: Option<String>,
}

/// What resolution did with one catalog.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogExplanation {
    /// The ClusterCatalog's name.
    pub name: String,
    /// Its priority.
    pub priority: i32,
    /// `considered`, `unavailable`, `notSelected` or `noPackage`.
    pub verdict: CatalogVerdict,
    /// The catalog's best bundle after the per-bundle rules, when it has one.
    pub candidate: Option<String>,
}

/// What resolution did with one catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CatalogVerdict {
    /// Consulted, and it has the package.
    Considered,
    /// Skipped: `availabilityMode: Unavailable`.
    Unavailable,
    /// Skipped: the selector does not match its labels.
    NotSelected,
    /// Consulted, but it has no such package.
    NoPackage,
}

/// One bundle and why it was not chosen.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleExplanation {
    /// The catalog holding it.
    pub catalog: String,
    /// The bundle name.
    pub bundle: String,
    /// Its version as status would report it, or `None` when unreadable.
    pub version: Option<String>,
    /// Whether the package's deprecations name it.
    pub deprecated: bool,
    /// The first rule that excluded it; `None` for the chosen bundle.
    pub excluded_by: Option<Exclusion>,
    /// The exclusion in words (empty for the chosen bundle).
    pub detail: String,
}

/// The first rule that excluded a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Exclusion {
    /// In none of the requested channels.
    Channel,
    /// Not a successor of the installed bundle (no replaces, skips or skipRange reaches it).
    NotSuccessor,
    /// Outside the requested version range.
    VersionRange,
    /// Deprecated, while a non-deprecated candidate exists.
    Deprecated,
    /// A candidate with a higher version (or an equal one listed earlier) wins.
    LowerVersion,
    /// Its catalog's best bundle lost to another catalog's (priority or deprecation).
    OtherCatalog,
    /// Its catalog tied with another one of the same priority: resolution fails.
    TiedCatalogs,
    /// It would win, but declares a dependency, which `--dependencies=refuse` (upstream's rule)
    /// refuses.
    UnsupportedDependency,
}

impl From<BundleRule> for Exclusion {
    fn from(rule: BundleRule) -> Exclusion {
        match rule {
            BundleRule::Channel => Exclusion::Channel,
            BundleRule::NotSuccessor => Exclusion::NotSuccessor,
            BundleRule::VersionRange => Exclusion::VersionRange,
        }
    }
}

/// The bundle resolution chose.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChosenBundle {
    /// Bundle name.
    pub bundle: String,
    /// Version as status reports it.
    pub version: String,
    /// The catalog it came from.
    pub catalog: String,
    /// Whether the bundle is deprecated.
    pub deprecated: bool,
}

/// Explains `dependencies.resolve(request, catalogs)`. Errors only when the request itself is
/// invalid (bad selector or range) or the installed version cannot be read: resolution then looks
/// at no bundle at all; or when `meter`, charged for every package walked, runs out.
pub fn explain(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    dependencies: DependencyMode,
    meter: &mut Meter,
) -> Result<Explanation, ResolveError> {
    let prepared = PreparedRequest::new(request)?;
    let outcome = dependencies.resolve_within(request, catalogs, meter);
    if let Err(
        e @ (ResolveError::InvalidSelector(_)
        | ResolveError::InvalidVersionRange { .. }
        | ResolveError::UpgradeEdges(_)
        | ResolveError::Exhausted { .. }),
    ) = &outcome
    {
        return Err(e.clone());
    }
    let (chosen, error) = match &outcome {
        Ok(r) => (
            Some(ChosenBundle {
                bundle: r.bundle.name.clone(),
                version: r.bundle.status_version.clone(),
                catalog: r.catalog.clone(),
                deprecated: r.bundle_deprecated(),
            }),
            None,
        ),
        Err(e) => (None, Some(e.to_string())),
    };
    let tied: Vec<String> = match &outcome {
        Err(ResolveError::NotFound(f)) => f.tied_catalogs.clone(),
        _ => Vec::new(),
    };
    let dependency_loser = match &outcome {
        Err(ResolveError::UnsupportedDependency { bundle, .. }) => Some(bundle.clone()),
        _ => None,
    };

    let mut ordered: Vec<&CatalogInput> = catalogs.iter().collect();
    ordered.sort_by(|a, b| a.name.cmp(&b.name));
    // Per catalog: its explanation and, for considered ones, its best bundle.
    let mut out_catalogs = Vec::new();
    let mut per_catalog: Vec<CatalogRules> = Vec::new();
    for catalog in ordered {
        let skip = prepared.catalog_skip(catalog);
        let package = match skip {
            None => catalog.index.package(&request.package),
            Some(_) => None,
        };
        let verdict = match (skip, package) {
            (Some(CatalogSkip::Unavailable), _) => CatalogVerdict::Unavailable,
            (Some(CatalogSkip::NotSelected), _) => CatalogVerdict::NotSelected,
            (None, None) => CatalogVerdict::NoPackage,
            (None, Some(_)) => CatalogVerdict::Considered,
        };
        let mut best: Option<&BundleIndex> = None;
        let mut rules = Vec::new();
        if let Some(package) = package {
            super::charge_package(meter, package)?;
            let filter = PackageFilter::new(package, request, &prepared)?;
            for (i, b) in package.bundles.iter().enumerate() {
                let rule = filter.exclusion(i, b).map(Exclusion::from);
                if rule.is_none() && best.is_none_or(|cur| rank(b, cur) == Ordering::Less) {
                    best = Some(b);
                }
                rules.push((b, rule));
            }
        }
        out_catalogs.push(CatalogExplanation {
            name: catalog.name.clone(),
            priority: catalog.priority,
            verdict,
            candidate: best.map(|b| b.name.to_string()),
        });
        per_catalog.push((catalog, rules, best));
    }

    let winner_catalog = chosen.as_ref().map(|c| c.catalog.as_str());
    let winner_priority =
        winner_catalog.and_then(|w| catalogs.iter().find(|c| c.name == w).map(|c| c.priority));
    let mut bundles = Vec::new();
    for (catalog, rules, best) in &per_catalog {
        for (b, rule) in rules {
            let mut excluded_by = *rule;
            let mut detail = String::new();
            if let Some(rule) = excluded_by {
                detail = rule_detail(rule, request);
            } else {
                let best = best.expect("a surviving bundle means a best one");
                let is_best = std::ptr::eq(*b, best);
                if !is_best {
                    excluded_by = Some(if b.deprecated && !best.deprecated {
                        Exclusion::Deprecated
                    } else {
                        Exclusion::LowerVersion
                    });
                    detail = format!("{} is preferred", best.name);
                } else if tied.len() > 1 && tied.contains(&catalog.name) {
                    excluded_by = Some(Exclusion::TiedCatalogs);
                    detail = format!("catalogs with the same priority: {}", tied.join(", "));
                } else if dependency_loser.as_deref() == Some(&*b.name) {
                    excluded_by = Some(Exclusion::UnsupportedDependency);
                    detail = format!(
                        "declares {} (dependencies are not supported)",
                        unsupported_dependency(b).unwrap_or_default()
                    );
                } else if let Some(w) = winner_catalog.filter(|w| *w != catalog.name) {
                    excluded_by = Some(Exclusion::OtherCatalog);
                    detail = if b.deprecated {
                        format!("deprecated here; catalog {w} wins")
                    } else if winner_priority.is_some_and(|p| p > catalog.priority) {
                        format!("catalog {w} has a higher priority")
                    } else {
                        format!("catalog {w} wins")
                    };
                }
            }
            bundles.push(BundleExplanation {
                catalog: catalog.name.clone(),
                bundle: b.name.to_string(),
                version: b.version.as_ref().ok().map(|v| v.status_version()),
                deprecated: b.deprecated,
                excluded_by,
                detail,
            });
        }
    }
    Ok(Explanation {
        package: request.package.clone(),
        catalogs: out_catalogs,
        bundles,
        chosen,
        error,
    })
}

/// One catalog's bundles with their filter verdicts, and its best bundle.
type CatalogRules<'a> = (
    &'a CatalogInput,
    Vec<(&'a BundleIndex, Option<Exclusion>)>,
    Option<&'a BundleIndex>,
);

fn rule_detail(rule: Exclusion, request: &ResolveRequest) -> String {
    match rule {
        Exclusion::Channel => format!("not in channels [{}]", request.channels.join(" ")),
        Exclusion::VersionRange => format!(
            "version outside {:?}",
            request.version_range.as_deref().unwrap_or_default()
        ),
        Exclusion::NotSuccessor => match &request.installed {
            Some(i) => format!("not an upgrade edge from {}", i.name),
            None => String::new(),
        },
        _ => String::new(),
    }
}
