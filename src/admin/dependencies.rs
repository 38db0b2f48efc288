//! What bundles require, for `search` and `versions`, and the dependency reasoning of
//! `explain`: the requirements of the bundle the controller (`--dependencies=check`) would
//! install, and the planner's plan for it, with which bundle satisfies each requirement and why
//! (classic's preference), or the planner's explanation of why none does. Pure: the parser and
//! the planner of `dependencies` over catalog indexes.

use serde::Serialize;

use crate::{
    catalog::{BundleIndex, Property},
    dependencies::{
        Choice, Gvk, InstalledExtension, PlanLimits, PlanRequest, PlannedBundle, Requirement, plan,
        requirements_of,
    },
    resolve::{CatalogInput, ResolveRequest, resolve_allowing_dependencies},
};

/// What one bundle requires.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleRequirements {
    /// Its requirements in declaration order (`olm.package.required`, `olm.gvk.required`,
    /// `olm.constraint`).
    pub requires: Vec<Requirement>,
    /// Why they cannot be read (a malformed, oversized or too deep constraint, a CEL rule that
    /// does not compile), when they cannot.
    pub requires_error: Option<String>,
}

impl BundleRequirements {
    /// The requirements of a catalog bundle.
    pub fn of(bundle: &BundleIndex) -> BundleRequirements {
        BundleRequirements::from_properties(&bundle.name, &bundle.properties)
    }

    /// The requirements among the properties of bundle `name`.
    pub fn from_properties(name: &str, properties: &[Property]) -> BundleRequirements {
        match requirements_of(name, properties) {
            Ok(requires) => BundleRequirements {
                requires,
                requires_error: None,
            },
            Err(e) => BundleRequirements {
                requires: Vec::new(),
                requires_error: Some(e.to_string()),
            },
        }
    }

    /// Whether it requires anything (or its requirements are unreadable).
    pub fn is_empty(&self) -> bool {
        self.requires.is_empty() && self.requires_error.is_none()
    }

    /// One table cell: the summaries joined by `, `; `-` for none; `invalid: ...` when
    /// unreadable.
    pub fn cell(&self) -> String {
        let summaries = self.summaries();
        if summaries.is_empty() {
            return "-".to_string();
        }
        summaries.join(", ")
    }

    /// One short line per requirement; `invalid: ...` alone when unreadable.
    pub fn summaries(&self) -> Vec<String> {
        match &self.requires_error {
            Some(e) => vec![format!("invalid: {e}")],
            None => self.requires.iter().map(Requirement::summary).collect(),
        }
    }
}

/// The dependency reasoning for one request.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyExplanation {
    /// The bundle the resolver picks when dependencies are allowed (the controller's default).
    pub bundle: String,
    /// What it requires.
    #[serde(flatten)]
    pub requirements: BundleRequirements,
    /// The plan, dependencies first, the requested package last; `None` when there is none.
    pub plan: Option<Vec<PlannedBundle>>,
    /// Which bundle satisfies each requirement of the plan's bundles, and why that one.
    pub choices: Vec<Choice>,
    /// Why there is no plan: the requirements that conflict or what is missing.
    pub error: Option<String>,
}

/// The bundle the resolver picks for `request` under `check` and what it requires: `None` when
/// it finds no bundle or the bundle it finds requires nothing.
pub fn chosen_requirements(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
) -> Option<(String, BundleRequirements)> {
    let resolution = resolve_allowing_dependencies(request, catalogs).ok()?;
    let bundle = catalogs
        .iter()
        .find(|c| c.name == resolution.catalog)?
        .index
        .package(&request.package)?
        .bundle(&resolution.bundle.name)?;
    let requirements = BundleRequirements::of(bundle);
    (!requirements.is_empty()).then_some((resolution.bundle.name, requirements))
}

/// The dependency reasoning for the bundle of [`chosen_requirements`], planned over `catalogs`
/// with `installed` kept and `served_apis` present (as the controller's check counts them).
pub fn explain_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    installed: &[InstalledExtension],
    served_apis: &[Gvk],
) -> Option<DependencyExplanation> {
    let (bundle, requirements) = chosen_requirements(request, catalogs)?;
    let plan_request = PlanRequest {
        request,
        installed,
        served_apis,
        allow_changes: false,
        limits: PlanLimits::default(),
    };
    let (plan, choices, error) = match plan(&plan_request, catalogs) {
        Ok(p) => (Some(p.plan), p.choices, None),
        Err(e) => (None, Vec::new(), Some(e.to_string())),
    };
    Some(DependencyExplanation {
        bundle,
        requirements,
        plan,
        choices,
        error,
    })
}
