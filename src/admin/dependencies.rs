//! What bundles require, for `search` and `versions`, and the dependency reasoning of
//! `explain`: the requirements of the bundle the controller (`--dependencies=check`) would
//! install, and the planner's plan for it, with which bundle satisfies each requirement and why
//! (classic's preference), or the planner's explanation of why none does. Pure: the parser and
//! the planner of `dependencies` over catalog indexes.

use serde::Serialize;

use crate::{
    catalog::{BundleIndex, Property},
    dependencies::{
        Choice, DependencyError, Gvk, InstalledExtension, PlanLimits, PlanRequest, PlannedBundle,
        Requirement, plan_within, requirements_of,
    },
    meter::{Meter, Refused, Work},
    resolve::{CatalogInput, ResolveError, ResolveRequest, resolve_allowing_dependencies_within},
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
    /// The requirements of a catalog bundle, read within `meter`.
    pub fn of(bundle: &BundleIndex, meter: &mut Meter) -> Result<BundleRequirements, Refused> {
        BundleRequirements::from_properties(&bundle.name, &bundle.properties, meter)
    }

    /// The requirements among the properties of bundle `name`, read within `meter` (reading and
    /// compiling them, and the texts of their summaries, are charged). Unreadable requirements
    /// are [`BundleRequirements::requires_error`]; only the meter running out is an error.
    pub fn from_properties(
        name: &str,
        properties: &[Property],
        meter: &mut Meter,
    ) -> Result<BundleRequirements, Refused> {
        let read = match requirements_of(name, properties, meter) {
            Ok(requires) => BundleRequirements {
                requires,
                requires_error: None,
            },
            Err(DependencyError::Exhausted {
                bundle,
                property,
                exhausted,
            }) => {
                return Err(Refused::new(
                    format!("bundle {bundle:?}: reading its {property} dependency"),
                    exhausted,
                ));
            }
            Err(e) => BundleRequirements {
                requires: Vec::new(),
                requires_error: Some(e.to_string()),
            },
        };
        // What showing them renders.
        meter
            .charge(Work::Render, read.shown_bytes())
            .map_err(|e| Refused::new(format!("bundle {name:?}: showing its requirements"), e))?;
        Ok(read)
    }

    /// The bytes of their short forms and of the error: what showing them renders, and a
    /// measure of what a copy of them holds.
    pub fn shown_bytes(&self) -> u64 {
        let shown: usize = self.requires.iter().map(|r| r.summary().len()).sum::<usize>()
            + self.requires_error.as_ref().map_or(0, String::len);
        shown as u64
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
/// it finds no bundle or the bundle it finds requires nothing. Within `meter`.
pub fn chosen_requirements(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    meter: &mut Meter,
) -> Result<Option<(String, BundleRequirements)>, Refused> {
    let resolution = match resolve_allowing_dependencies_within(request, catalogs, meter) {
        Ok(r) => r,
        Err(ResolveError::Exhausted { package, exhausted }) => {
            return Err(Refused::new(format!("resolving package {package:?}"), exhausted));
        }
        Err(_) => return Ok(None),
    };
    let Some(bundle) = catalogs
        .iter()
        .find(|c| c.name == resolution.catalog)
        .and_then(|c| c.index.package(&request.package))
        .and_then(|p| p.bundle(&resolution.bundle.name))
    else {
        return Ok(None);
    };
    let requirements = BundleRequirements::of(bundle, meter)?;
    Ok((!requirements.is_empty()).then_some((resolution.bundle.name, requirements)))
}

/// The dependency reasoning for the bundle of [`chosen_requirements`], planned over `catalogs`
/// with `installed` kept and `served_apis` present (as the controller's check counts them),
/// within `meter`: the plan has its own limits ([`PlanLimits::default`]) out of what `meter` has
/// left, and its reasons for finding none (its budget included) are the explanation's.
pub fn explain_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    installed: &[InstalledExtension],
    served_apis: &[Gvk],
    meter: &mut Meter,
) -> Result<Option<DependencyExplanation>, Refused> {
    let Some((bundle, requirements)) = chosen_requirements(request, catalogs, meter)? else {
        return Ok(None);
    };
    let plan_request = PlanRequest {
        request,
        installed,
        served_apis,
        allow_changes: false,
        limits: PlanLimits::default(),
    };
    // The plan's own budget, out of what the command has left; what it spends is the command's.
    let mut plan_meter = meter.part(plan_request.limits.max_work, plan_request.limits.max_duration);
    let planned = plan_within(&plan_request, catalogs, &mut plan_meter);
    meter.absorb(&plan_meter);
    let (plan, choices, error) = match planned {
        Ok(p) => (Some(p.plan), p.choices, None),
        Err(e) => (None, Vec::new(), Some(e.to_string())),
    };
    Ok(Some(DependencyExplanation {
        bundle,
        requirements,
        plan,
        choices,
        error,
    }))
}
