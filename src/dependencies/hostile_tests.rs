//! Hostile catalogs, generated: many packages, wide and deep constraint trees, `not` and CEL
//! requirements any package may satisfy, long ranges. Whatever they hold, the planner and the
//! controller's check answer within their work budgets (never by the clock), and what they refuse
//! they refuse with a sentence naming the package or bundle.

use std::sync::Arc;

use bytes::Bytes;
use olmv1_api::v1::UpgradeConstraintPolicy;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{
    catalog::{CatalogIndex, Meta},
    resolve::{CatalogInput, ResolveRequest},
};

/// One requirement of a generated bundle.
#[derive(Debug, Clone)]
enum Hostile {
    /// `not` of a package no catalog has: every bundle of every package satisfies it.
    NotNothing,
    /// A CEL rule every bundle satisfies.
    CelAlways,
    /// An `any` of `width` package leaves.
    WideAny(usize),
    /// `depth` nested `all`s around a `gvk`.
    Deep(usize),
    /// A package range of `terms` `||` alternatives.
    LongRange(usize),
    /// A GVK that `providers` of the packages provide.
    SharedApi,
}

fn hostile_strategy() -> impl Strategy<Value = Hostile> {
    prop_oneof![
        Just(Hostile::NotNothing),
        Just(Hostile::CelAlways),
        (1..2_000usize).prop_map(Hostile::WideAny),
        (1..14usize).prop_map(Hostile::Deep),
        (1..400usize).prop_map(Hostile::LongRange),
        Just(Hostile::SharedApi),
    ]
}

fn requirement_json(h: &Hostile, packages: usize) -> Value {
    let gvk = json!({"group": "test.io", "version": "v1", "kind": "Shared"});
    match h {
        Hostile::NotNothing => json!({"type": "olm.constraint", "value": {"not": {"constraints": [
            {"package": {"packageName": "nothing", "versionRange": ">=0.0.0"}}]}}}),
        Hostile::CelAlways => json!({"type": "olm.constraint", "value": {"cel": {"rule":
            "properties.exists(p, p.type == \"olm.package\")"}}}),
        Hostile::WideAny(width) => {
            let leaves: Vec<Value> = (0..*width)
                .map(|i| json!({"package": {"packageName": format!("p{}", i % packages.max(1)), "versionRange": ">=1.0.0"}}))
                .collect();
            json!({"type": "olm.constraint", "value": {"any": {"constraints": leaves}}})
        }
        Hostile::Deep(depth) => {
            let mut c = json!({"gvk": gvk});
            for _ in 0..*depth {
                c = json!({"all": {"constraints": [c]}});
            }
            json!({"type": "olm.constraint", "value": c})
        }
        Hostile::LongRange(terms) => {
            let range: Vec<String> = (0..*terms).map(|i| format!("={i}.0.0")).collect();
            json!({"type": "olm.package.required", "value": {"packageName": "p0", "versionRange": range.join(" || ")}})
        }
        Hostile::SharedApi => json!({"type": "olm.gvk.required", "value": gvk}),
    }
}

/// A catalog of `packages` one-bundle packages `p<i>` (every third providing the shared API),
/// the bundles of the first `declaring` packages each declaring `needs`, and `app` declaring them
/// too.
fn hostile_catalog(packages: usize, declaring: usize, needs: &[Hostile]) -> Arc<CatalogIndex> {
    let mut objects = Vec::new();
    let mut bundle = |package: &str, requirements: &[Hostile], provides: bool| {
        objects.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        let name = format!("{package}.v1.0.0");
        objects.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}));
        let mut properties =
            vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
        if provides {
            properties.push(
                json!({"type": "olm.gvk", "value": {"group": "test.io", "version": "v1", "kind": "Shared"}}),
            );
        }
        properties.extend(requirements.iter().map(|h| requirement_json(h, packages)));
        objects.push(json!({"schema": "olm.bundle", "name": name, "package": package,
            "image": format!("registry.test/{name}"), "properties": properties}));
    };
    bundle("app", needs, false);
    for i in 0..packages {
        let declared = if i < declaring { needs } else { &[] };
        bundle(&format!("p{i}"), declared, i % 3 == 0);
    }
    let metas: Vec<Meta> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("hostile"), i as u32 + 1).unwrap()
        })
        .collect();
    Arc::new(CatalogIndex::from_metas(&metas).unwrap())
}

fn request() -> ResolveRequest {
    ResolveRequest {
        package: "app".to_string(),
        version_range: None,
        channels: Vec::new(),
        selector: None,
        upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
        installed: None,
    }
}

/// A small budget keeps a debug build's cases short; the bound holds for any budget.
const TEST_WORK: u64 = 300_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn plans_and_checks_stay_within_their_budgets(
        packages in 1..600usize,
        declaring in 0..60usize,
        needs in proptest::collection::vec(hostile_strategy(), 1..4),
    ) {
        let index = hostile_catalog(packages, declaring, &needs);
        let catalogs = [CatalogInput::new("hostile", Arc::clone(&index))];
        let req = request();
        let plan_request = PlanRequest {
            request: &req,
            installed: &[],
            served_apis: &[],
            allow_changes: false,
            limits: PlanLimits { max_work: TEST_WORK, ..super::tests::test_limits() },
        };
        match plan(&plan_request, &catalogs) {
            Ok(planned) => prop_assert!(planned.work <= TEST_WORK, "{}", planned.work),
            Err(PlanError::OverBudget { package, limit, .. }) => {
                prop_assert_eq!(package, "app");
                prop_assert_eq!(limit, TEST_WORK);
            }
            Err(PlanError::Unsatisfiable(text)) => prop_assert!(!text.is_empty()),
            Err(PlanError::Resolve(e)) => prop_assert!(e.to_string().contains("app"), "{}", e),
            Err(other) => prop_assert!(false, "unexpected: {other}"),
        }

        // The controller's check of app's bundle against every package installed.
        let app = index.package("app").unwrap().bundle("app.v1.0.0").unwrap();
        let requirements = match requirements_of(&app.name, &app.properties, &mut crate::meter::Meter::unlimited()) {
            Ok(r) => r,
            Err(e) => {
                // Refused: one sentence naming the bundle.
                let text = e.to_string();
                prop_assert!(text.starts_with("bundle \"app.v1.0.0\" has an invalid "), "{}", text);
                prop_assert!(!text.contains('\n'));
                return Ok(());
            }
        };
        let installed: Vec<InstalledExtension> = index
            .packages()
            .filter(|p| &*p.name != "app")
            .map(|p| InstalledExtension {
                extension: p.name.to_string(),
                package: p.name.to_string(),
                bundle: p.bundles[0].name.to_string(),
                version: "1.0.0".to_string(),
                properties: p.bundles[0].properties.to_vec(),
            })
            .collect();
        let mut budget = crate::meter::Meter::new(TEST_WORK);
        match check_dependencies_within(&requirements, &installed, &[], None, &mut budget) {
            Ok(_) => {}
            Err(over) => prop_assert_eq!(over, crate::meter::Exhausted::Work { limit: TEST_WORK }),
        }
        prop_assert!(budget.spent() <= TEST_WORK);
    }
}
