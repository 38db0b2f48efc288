//! The plan against hand-made catalogs: classic's preferences one by one, backtracking, the
//! words of a failure, installed extensions; and a property test that checks every plan with an
//! independent evaluator and every "no plan" by brute force.

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

/// The limits the tests plan with: the default work budget (deterministic: what the tests assert
/// on), and a wall-clock deadline far past what any of them needs on a loaded machine (the
/// default 10 s was hit by a 3,000-API test while the whole suite ran on 2 busy cores).
/// A plan of `request` alone (nothing installed, no API served), within [`test_limits`].
fn plain_request(request: &ResolveRequest) -> PlanRequest<'_> {
    PlanRequest {
        request,
        installed: &[],
        served_apis: &[],
        allow_changes: false,
        limits: test_limits(),
    }
}

pub(super) fn test_limits() -> PlanLimits {
    PlanLimits {
        max_duration: std::time::Duration::from_secs(600),
        ..PlanLimits::default()
    }
}

/// One bundle of a test catalog.
#[derive(Debug, Clone)]
struct B {
    package: &'static str,
    version: String,
    gvks: Vec<String>,
    properties: Vec<Value>,
}

fn b(package: &'static str, version: &str) -> B {
    B {
        package,
        version: version.to_string(),
        gvks: Vec::new(),
        properties: Vec::new(),
    }
}

impl B {
    fn name(&self) -> String {
        format!("{}.v{}", self.package, self.version)
    }
    fn provides(mut self, kind: &str) -> B {
        self.gvks.push(kind.to_string());
        self
    }
    fn needs_package(mut self, package: &str, range: &str) -> B {
        self.properties.push(
            json!({"type": "olm.package.required", "value": {"packageName": package, "versionRange": range}}),
        );
        self
    }
    fn needs_api(mut self, kind: &str) -> B {
        self.properties.push(
            json!({"type": "olm.gvk.required", "value": {"group": "test.io", "version": "v1", "kind": kind}}),
        );
        self
    }
    fn needs(mut self, constraint: Value) -> B {
        self.properties
            .push(json!({"type": "olm.constraint", "value": constraint}));
        self
    }
}

/// A catalog: packages with one channel per (channel name, bundles head last) and the bundles.
fn catalog(
    channels: &[(&str, &str, &[&B])],
    default_channels: &[(&str, &str)],
    bundles: &[B],
) -> Arc<CatalogIndex> {
    let mut objects: Vec<Value> = Vec::new();
    let mut packages: Vec<&str> = bundles.iter().map(|b| b.package).collect();
    packages.sort();
    packages.dedup();
    for p in packages {
        let default = default_channels
            .iter()
            .find(|(pkg, _)| *pkg == p)
            .map_or("stable", |(_, c)| c);
        objects.push(json!({"schema": "olm.package", "name": p, "defaultChannel": default}));
    }
    for (package, name, members) in channels {
        let mut entries = Vec::new();
        let mut previous: Option<String> = None;
        for m in *members {
            let mut e = json!({"name": m.name()});
            if let Some(p) = &previous {
                e["replaces"] = json!(p);
            }
            previous = Some(m.name());
            entries.push(e);
        }
        objects.push(json!({"schema": "olm.channel", "package": package, "name": name, "entries": entries}));
    }
    for bundle in bundles {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": bundle.package, "version": bundle.version}}),
        ];
        for k in &bundle.gvks {
            properties
                .push(json!({"type": "olm.gvk", "value": {"group": "test.io", "version": "v1", "kind": k}}));
        }
        properties.extend(bundle.properties.iter().cloned());
        objects.push(json!({"schema": "olm.bundle", "name": bundle.name(), "package": bundle.package, "image": format!("registry.test/{}", bundle.name()), "properties": properties}));
    }
    let metas: Vec<Meta> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("test"), i as u32 + 1).unwrap()
        })
        .collect();
    Arc::new(CatalogIndex::from_metas(&metas).unwrap())
}

/// A catalog where every package has one channel `stable` holding its bundles in the order given
/// (head last).
fn simple_catalog(bundles: &[B]) -> Arc<CatalogIndex> {
    let mut packages: Vec<&str> = bundles.iter().map(|b| b.package).collect();
    packages.sort();
    packages.dedup();
    let per_package: Vec<(&str, Vec<&B>)> = packages
        .iter()
        .map(|p| (*p, bundles.iter().filter(|b| b.package == *p).collect()))
        .collect();
    let channels: Vec<(&str, &str, &[&B])> = per_package
        .iter()
        .map(|(p, bs)| (*p, "stable", &bs[..]))
        .collect();
    catalog(&channels, &[], bundles)
}

fn request(package: &str) -> ResolveRequest {
    ResolveRequest {
        package: package.to_string(),
        version_range: None,
        channels: Vec::new(),
        selector: None,
        upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
        installed: None,
    }
}

fn plan_of(
    package: &str,
    catalogs: &[CatalogInput],
    installed: &[InstalledExtension],
) -> Result<Plan, PlanError> {
    let req = request(package);
    let plan_request = PlanRequest {
        request: &req,
        installed,
        served_apis: &[],
        allow_changes: false,
        limits: test_limits(),
    };
    plan(&plan_request, catalogs)
}

fn picked(plan: &Plan) -> Vec<String> {
    plan.plan
        .iter()
        .map(|p| format!("{}@{}", p.bundle, p.catalog))
        .collect()
}

#[test]
fn dependencies_come_first_with_who_requires_them() {
    let bundles = [
        b("app", "1.0.0")
            .needs_package("db", ">=1.0.0")
            .needs_api("Cache"),
        b("db", "1.0.0"),
        b("db", "1.2.0"),
        b("cache", "0.1.0")
            .provides("Cache")
            .needs_package("db", "<2.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let plan = plan_of("app", &catalogs, &[]).unwrap();
    assert_eq!(picked(&plan), ["db.v1.2.0@c", "cache.v0.1.0@c", "app.v1.0.0@c"]);
    assert_eq!(plan.plan[0].required_by, ["app.v1.0.0", "cache.v0.1.0"]);
    assert!(plan.plan[2].required_by.is_empty());
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json["plan"][1],
        json!({"package": "cache", "bundle": "cache.v0.1.0", "version": "0.1.0", "catalog": "c", "requiredBy": ["app.v1.0.0"]})
    );
}

#[test]
fn preference_catalog_priority() {
    let bundles = [b("app", "1.0.0").needs_package("db", ">=1.0.0"), b("db", "1.0.0")];
    let low = CatalogInput::new("a-low", simple_catalog(&bundles));
    let mut high = CatalogInput::new("b-high", simple_catalog(&[b("db", "1.0.0")]));
    high.priority = 10;
    // `app` is only in a-low, yet db comes from the higher-priority catalog.
    let app_only = CatalogInput::new("a-low", simple_catalog(&bundles));
    let plan = plan_of("app", &[app_only, high], &[]).unwrap();
    assert_eq!(picked(&plan), ["db.v1.0.0@b-high", "app.v1.0.0@a-low"]);
    let _ = low;
}

#[test]
fn preference_same_catalog_as_the_dependent() {
    let with_app = [b("app", "1.0.0").needs_package("db", ">=1.0.0"), b("db", "1.0.0")];
    let catalogs = [
        CatalogInput::new("a-other", simple_catalog(&[b("db", "1.0.0")])),
        CatalogInput::new("b-home", simple_catalog(&with_app)),
    ];
    let plan = plan_of("app", &catalogs, &[]).unwrap();
    assert_eq!(picked(&plan), ["db.v1.0.0@b-home", "app.v1.0.0@b-home"]);
}

#[test]
fn preference_default_channel_then_channels_by_name() {
    let app = b("app", "1.0.0").needs_package("db", ">=1.0.0");
    let (d1, d2, d3) = (b("db", "1.0.0"), b("db", "2.0.0"), b("db", "3.0.0"));
    let bundles = [app.clone(), d1.clone(), d2.clone(), d3.clone()];
    // Default channel `beta` holds 1.0.0 only: it wins over the higher versions elsewhere.
    let cat = catalog(
        &[
            ("app", "stable", &[&app]),
            ("db", "beta", &[&d1]),
            ("db", "alpha", &[&d2]),
            ("db", "zeta", &[&d3]),
        ],
        &[("db", "beta")],
        &bundles,
    );
    let plan = plan_of("app", &[CatalogInput::new("c", cat)], &[]).unwrap();
    assert_eq!(picked(&plan)[0], "db.v1.0.0@c");
    // When nothing in the default channel satisfies, the other channels by name: alpha before zeta.
    let app2 = b("app", "1.0.0").needs_package("db", ">=2.0.0");
    let bundles = [app2.clone(), d1.clone(), d2.clone(), d3.clone()];
    let cat = catalog(
        &[
            ("app", "stable", &[&app2]),
            ("db", "beta", &[&d1]),
            ("db", "alpha", &[&d2]),
            ("db", "zeta", &[&d3]),
        ],
        &[("db", "beta")],
        &bundles,
    );
    let plan = plan_of("app", &[CatalogInput::new("c", cat)], &[]).unwrap();
    assert_eq!(picked(&plan)[0], "db.v2.0.0@c");
}

#[test]
fn preference_closer_to_the_head() {
    let app = b("app", "1.0.0").needs_package("db", ">=1.0.0");
    // The head (last entry, replacing the others) is 1.1.0, although 1.5.0 is a higher version
    // further down the graph.
    let (old, mid, head) = (b("db", "1.5.0"), b("db", "1.0.0"), b("db", "1.1.0"));
    let bundles = [app.clone(), old.clone(), mid.clone(), head.clone()];
    let cat = catalog(
        &[("app", "stable", &[&app]), ("db", "stable", &[&old, &mid, &head])],
        &[],
        &bundles,
    );
    let plan = plan_of("app", &[CatalogInput::new("c", cat)], &[]).unwrap();
    assert_eq!(picked(&plan)[0], "db.v1.1.0@c");
}

#[test]
fn backtracking_past_a_conflicting_head() {
    // db's head 2.0.0 conflicts with cache's requirement; db 1.5.0 does not.
    let bundles = [
        b("app", "1.0.0")
            .needs_package("db", ">=1.0.0")
            .needs_package("cache", ">=0.1.0"),
        b("db", "1.0.0"),
        b("db", "1.5.0"),
        b("db", "2.0.0"),
        b("cache", "0.1.0").needs_package("db", "<2.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let plan = plan_of("app", &catalogs, &[]).unwrap();
    let mut got = picked(&plan);
    got.sort();
    assert_eq!(got, ["app.v1.0.0@c", "cache.v0.1.0@c", "db.v1.5.0@c"]);
}

#[test]
fn no_plan_names_the_chain_and_failure_messages() {
    let bundles = [
        b("app", "1.0.0")
            .needs_package("db", ">=1.0.0")
            .needs(json!({"failureMessage": "app needs a cache of kind Redis", "gvk": {"group": "test.io", "version": "v1", "kind": "Redis"}})),
        b("db", "1.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let err = plan_of("app", &catalogs, &[]).unwrap_err().to_string();
    assert_eq!(
        err,
        "no set of bundles satisfies every requirement:\n\
         app cannot be installed because there are no viable options:\n\
         └─ app.v1.0.0 (catalog c) would require\n   \
         └─ API Redis (test.io/v1) (no bundle in the catalogs provides it) [app needs a cache of kind Redis], \
         for which no candidates were found."
    );
    let bundles = [b("app", "1.0.0").needs_package("db", ">=2.0.0"), b("db", "1.0.0")];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let err = plan_of("app", &catalogs, &[]).unwrap_err().to_string();
    assert!(
        err.contains("package db >=2.0.0 (no catalog has a bundle of it in that range)"),
        "{err}"
    );
    // A conflict between two requirements names both sides.
    let bundles = [
        b("app", "1.0.0")
            .needs_package("db", ">=2.0.0")
            .needs_package("cache", ">=0.1.0"),
        b("db", "1.0.0"),
        b("db", "2.0.0"),
        b("cache", "0.1.0").needs_package("db", "<2.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let err = plan_of("app", &catalogs, &[]).unwrap_err().to_string();
    assert!(
        err.contains("cache.v0.1.0 (catalog c)") && err.contains("db <2.0.0") && err.contains("db >=2.0.0"),
        "{err}"
    );
}

#[test]
fn installed_extensions_are_kept_and_count_as_present() {
    let bundles = [
        b("app", "1.0.0").needs_package("db", ">=1.0.0"),
        b("db", "1.0.0"),
        b("db", "2.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let db1 = InstalledExtension {
        extension: "my-db".into(),
        package: "db".into(),
        bundle: "db.v1.0.0".into(),
        version: "1.0.0".into(),
        properties: vec![crate::catalog::Property::new(
            "olm.package",
            json!({"packageName": "db", "version": "1.0.0"}).into(),
        )],
    };
    let kept = plan_of("app", &catalogs, std::slice::from_ref(&db1)).unwrap();
    assert_eq!(picked(&kept), ["app.v1.0.0@c"]);
    assert_eq!(kept.installed[0].extension, "my-db");
    assert_eq!(kept.installed[0].required_by, ["app.v1.0.0"]);
    // An installed db too old for the request is not changed unless the admin allows it.
    let bundles = [
        b("app", "1.0.0").needs_package("db", ">=2.0.0"),
        b("db", "1.0.0"),
        b("db", "2.0.0"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let err = plan_of("app", &catalogs, std::slice::from_ref(&db1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("package db >=2.0.0 (not satisfied by db.v1.0.0 installed as my-db, which is kept"),
        "{err}"
    );
    let req = request("app");
    let allowed = PlanRequest {
        request: &req,
        installed: std::slice::from_ref(&db1),
        served_apis: &[],
        allow_changes: true,
        limits: test_limits(),
    };
    let changed = plan(&allowed, &catalogs).unwrap();
    assert_eq!(picked(&changed), ["db.v2.0.0@c", "app.v1.0.0@c"]);
    assert_eq!(changed.plan[0].replaces.as_deref(), Some("db.v1.0.0"));
}

/// Classic's rule: one provider per API. The preferred provider of Widget (alpha, first by
/// name) would make two providers with beta, which the app needs anyway and which provides
/// Widget too: the plan takes beta for both.
#[test]
fn a_plan_has_one_provider_per_api() {
    let bundles = [
        b("app", "1.0.0")
            .needs_api("Widget")
            .needs_package("beta", ">=1.0.0"),
        b("alpha", "1.0.0").provides("Widget"),
        b("beta", "1.0.0").provides("Widget"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let plan = plan_of("app", &catalogs, &[]).unwrap();
    assert_eq!(picked(&plan), ["beta.v1.0.0@c", "app.v1.0.0@c"]);
    // Needing both packages cannot be planned, and the message names the API.
    let bundles = [
        b("app", "1.0.0")
            .needs_package("alpha", ">=1.0.0")
            .needs_package("beta", ">=1.0.0"),
        b("alpha", "1.0.0").provides("Widget"),
        b("beta", "1.0.0").provides("Widget"),
    ];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let err = plan_of("app", &catalogs, &[]).unwrap_err().to_string();
    assert!(
        err.contains("one provider of test.io/v1/Widget") || err.contains("Widget"),
        "{err}"
    );
}

#[test]
fn served_apis_satisfy_api_requirements_and_the_resolver_decides_the_request() {
    let bundles = [b("app", "1.0.0").needs_api("Route"), b("app", "0.9.0")];
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let route = Gvk {
        group: "test.io".into(),
        version: "v1".into(),
        kind: "Route".into(),
    };
    let req = request("app");
    let served = PlanRequest {
        request: &req,
        installed: &[],
        served_apis: std::slice::from_ref(&route),
        allow_changes: false,
        limits: test_limits(),
    };
    assert_eq!(picked(&plan(&served, &catalogs).unwrap()), ["app.v1.0.0@c"]);
    // Without the served API the head cannot be installed: the plan falls back to 0.9.0.
    assert_eq!(picked(&plan_of("app", &catalogs, &[]).unwrap()), ["app.v0.9.0@c"]);
    // The resolver's own errors stay the resolver's.
    let err = plan_of("nope", &catalogs, &[]).unwrap_err();
    assert_eq!(err.to_string(), r#"no bundles found for package "nope""#);
    let mut ranged = request("app");
    ranged.version_range = Some("foobar".into());
    let bad = plain_request(&ranged);
    let err = plan(&bad, &catalogs).unwrap_err();
    assert!(err.is_terminal());
}

#[test]
fn the_problem_is_bounded() {
    let bundles: Vec<B> = (0..30)
        .map(|i| b("db", &format!("1.0.{i}")))
        .chain([b("app", "1.0.0").needs_package("db", ">=1.0.0")])
        .collect();
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let req = request("app");
    let small = PlanRequest {
        request: &req,
        installed: &[],
        served_apis: &[],
        allow_changes: false,
        limits: PlanLimits {
            max_candidates: 10,
            ..test_limits()
        },
    };
    assert_eq!(
        plan(&small, &catalogs).unwrap_err(),
        PlanError::TooLarge { limit: 10 }
    );
}

/// Two packages provide the API a bundle requires, each in its own catalog: the one in the
/// catalog of higher priority is planned, whatever the packages are called (classic's
/// preference 1), and the choice says so.
#[test]
fn catalog_priority_decides_between_packages_providing_a_required_api() {
    for (low_package, high_package) in [("green-a", "green-b"), ("green-b", "green-a")] {
        let red = b("red", "1.0.0").needs_api("Green");
        let mut low = CatalogInput::new(
            "low",
            simple_catalog(&[red.clone(), b(low_package, "1.0.0").provides("Green")]),
        );
        low.priority = -5;
        let mut high = CatalogInput::new(
            "high",
            simple_catalog(&[b(high_package, "1.0.0").provides("Green")]),
        );
        high.priority = 10;
        let plan = plan_of("red", &[low, high], &[]).unwrap();
        assert_eq!(
            picked(&plan),
            [
                format!("{high_package}.v1.0.0@high"),
                "red.v1.0.0@low".to_string()
            ],
            "{high_package} is in the catalog of higher priority"
        );
        let choice = &plan.choices[0];
        assert_eq!(choice.satisfied_by, format!("{high_package}.v1.0.0"));
        assert!(
            choice
                .why
                .starts_with("first choice of 2: catalog high (priority 10)"),
            "{}",
            choice.why
        );
    }
    // Equal priorities: the dependent's own catalog first, then the name.
    let red = b("red", "1.0.0").needs_api("Green");
    let home = CatalogInput::new(
        "home",
        simple_catalog(&[red, b("green-z", "1.0.0").provides("Green")]),
    );
    let other = CatalogInput::new(
        "other",
        simple_catalog(&[b("green-a", "1.0.0").provides("Green")]),
    );
    let plan = plan_of("red", &[other, home], &[]).unwrap();
    assert_eq!(picked(&plan), ["green-z.v1.0.0@home", "red.v1.0.0@home"]);
}

/// The lowest priority a ClusterCatalog may have orders without overflow.
#[test]
fn the_extreme_priorities_order_without_overflow() {
    let app = b("app", "1.0.0").needs_package("db", ">=1.0.0");
    let mut lowest = CatalogInput::new("lowest", simple_catalog(&[app, b("db", "1.0.0")]));
    lowest.priority = i32::MIN;
    let mut highest = CatalogInput::new("highest", simple_catalog(&[b("db", "1.0.1")]));
    highest.priority = i32::MAX;
    let plan = plan_of("app", &[lowest, highest], &[]).unwrap();
    assert_eq!(picked(&plan), ["db.v1.0.1@highest", "app.v1.0.0@lowest"]);
}

/// A requirement any package may satisfy (`not`) is evaluated once per candidate and its text
/// kept once, however many packages it expands against and however many bundles declare it; a
/// plan past its budget stops with the package named, having spent no more than the budget.
#[test]
fn planning_work_is_bounded_by_the_budget_and_shared_between_equal_requirements() {
    let long_failure = "x".repeat(1_000);
    let not = json!({"failureMessage": long_failure, "not": {"constraints": [{"package": {"packageName": "nothing", "versionRange": ">=0.0.0"}}]}});
    let mut bundles: Vec<B> = (0..2_000)
        .map(|i| b(Box::leak(format!("p{i:04}").into_boxed_str()), "1.0.0"))
        .collect();
    // Every one-bundle package also declares the same requirement: one expansion serves all.
    for bundle in bundles.iter_mut().take(200) {
        bundle
            .properties
            .push(json!({"type": "olm.constraint", "value": not.clone()}));
    }
    bundles.push(b("app", "1.0.0").needs(not.clone()));
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let req = request("app");
    let within = plain_request(&req);
    let mut meter = test_limits().meter();
    let planned = plan_within(&within, &catalogs, &mut meter).unwrap();
    assert_eq!(planned.plan.last().unwrap().bundle, "app.v1.0.0");
    assert_eq!(planned.work, meter.spent());
    // Read: 201 requirement texts; evaluated once against 2,001 packages of one candidate each.
    let text = serde_json::to_string(&not).unwrap();
    let property = crate::catalog::Property::new(
        "olm.constraint",
        crate::catalog::PropertyValue::from_json(&text).unwrap(),
    );
    let r = requirements_of("app.v1.0.0", &[property], &mut crate::meter::Meter::unlimited())
        .unwrap()
        .remove(0);
    use crate::meter::Work;
    assert_eq!(meter.spent_on(Work::Evaluate), 2_001 * r.cost());
    // Its key and summary made per declaring bundle, the text of its sets once.
    let key = format!("{r}\0{:?}", r.failure_message);
    let display = super::plan::version_set_display(&r);
    assert_eq!(
        meter.spent_on(Work::Render),
        201 * (key.len() + r.summary().len()) as u64 + display.len() as u64
    );
    // Each package considered, loaded (its bundle and entry) and its set kept, plus the
    // requested package's resolution (three walks of its two items) and the list of packages.
    assert_eq!(
        meter.spent_on(Work::Visit),
        Work::Visit.weight() * (3 * 2 + 2_001 + 2_001 + 2_000 * 2 + 2_001 * super::plan::UNITS_PER_SET)
    );

    let tight = PlanRequest {
        limits: PlanLimits {
            max_work: 100_000,
            ..test_limits()
        },
        ..within
    };
    let error = plan(&tight, &catalogs).unwrap_err();
    assert!(
        matches!(error, PlanError::OverBudget { limit: 100_000, .. }),
        "{error}"
    );
    assert!(
        error.to_string().starts_with(
            "no plan for package \"app\" within the budget of 100000 work units: the requirements of "
        ),
        "{error}"
    );
    assert!(error.is_terminal());
}

/// The meter reads the clock every `CLOCK_EVERY_UNITS` units, whatever is charged: a plan past
/// its deadline stops inside one package's candidates, not after them (the deadline was read once
/// per 256 packages). Deterministic: the deadline has passed before the plan starts, so the plan
/// stops at the first reading of the clock, and what it charged says where that was.
#[test]
fn a_passed_deadline_stops_the_plan_inside_one_packages_candidates() {
    use crate::meter::{CLOCK_EVERY_UNITS, Meter, Work};
    let padding = json!({"type": "test.padding", "value": "x".repeat(2_000)});
    let mut bundles: Vec<B> = (0..200)
        .map(|i| {
            let mut dep = b("dep", &format!("1.0.{i}"));
            dep.properties.push(padding.clone());
            dep
        })
        .collect();
    // A CEL rule names no package: every package's candidates are evaluated.
    bundles.push(
        b("app", "1.0.0").needs(json!({"cel": {"rule": "properties.exists(p, p.type == 'test.missing')"}})),
    );
    let catalogs = [CatalogInput::new("c", simple_catalog(&bundles))];
    let req = request("app");
    let within = plain_request(&req);
    // Without a deadline: what evaluating all of dep's candidates costs.
    let mut unlimited = Meter::unlimited();
    plan_within(&within, &catalogs, &mut unlimited).unwrap_err();
    let all = unlimited.spent();
    assert!(all > 3 * CLOCK_EVERY_UNITS, "{all}");

    let mut meter = Meter::unlimited().with_deadline(std::time::Duration::ZERO);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let error = plan_within(&within, &catalogs, &mut meter).unwrap_err();
    assert!(
        matches!(error, PlanError::TimedOut { ref package, .. } if package == "app"),
        "{error}"
    );
    // It had started evaluating dep's candidates, and stopped within one clock interval.
    assert!(meter.spent_on(Work::Evaluate) > 0, "{meter}");
    assert!(meter.spent() < CLOCK_EVERY_UNITS + 20_000, "{meter}");
    assert!(meter.spent() < all / 2, "{meter}");
}

/// A plan small enough that its preparation never reads the clock is stopped by the solver's own
/// reading of the deadline, and the meter records that it ran out of time (what a command's meter
/// absorbs from it).
#[test]
fn a_solver_stopped_at_the_deadline_records_it_on_the_meter() {
    let catalogs = [CatalogInput::new(
        "c",
        simple_catalog(&[
            b("app", "1.0.0").needs_package("dep", ">=1.0.0"),
            b("dep", "1.0.0"),
        ]),
    )];
    let req = request("app");
    let within = plain_request(&req);
    let mut meter = crate::meter::Meter::unlimited().with_deadline(std::time::Duration::ZERO);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let error = plan_within(&within, &catalogs, &mut meter).unwrap_err();
    assert!(matches!(error, PlanError::TimedOut { .. }), "{error}");
    assert!(meter.spent() < crate::meter::CLOCK_EVERY_UNITS, "{meter}");
    assert_eq!(
        meter.exhausted(),
        Some(crate::meter::Exhausted::Time {
            limit: std::time::Duration::ZERO
        })
    );
}

/// The explanation of a conflict is several lines: a failure message carrying a newline or a
/// bidi override is shown escaped inside its line, never as a line of its own.
#[test]
fn no_plan_explanations_escape_the_catalog_text_they_quote() {
    let app = b("app", "1.0.0").needs(json!({
        "failureMessage": "needs gizmos\nplan: everything is fine\u{202e}",
        "gvk": {"group": "test.io", "version": "v1", "kind": "Gizmo"}
    }));
    let catalogs = [CatalogInput::new("c", simple_catalog(&[app]))];
    let text = plan_of("app", &catalogs, &[]).unwrap_err().to_string();
    assert!(
        text.contains("needs gizmos\\x0aplan: everything is fine\\u202e"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("plan:")), "{text}");
    assert!(!text.contains('\u{202e}'), "{text}");
}

/// A bundle providing many APIs that another package provides too gets one marker per API, each
/// charged to the budget and holding none of the bundle's APIs (a copy per API grew as their
/// square: 3,000 shared APIs took 1.5 GB).
#[test]
fn markers_of_shared_apis_are_charged_and_small() {
    let kinds: Vec<String> = (0..3_000).map(|i| format!("K{i}")).collect();
    let mut a = b("a", "1.0.0");
    let mut other = b("other", "1.0.0");
    for k in &kinds {
        a = a.provides(k);
        other = other.provides(k);
    }
    let app = b("app", "1.0.0").needs_package("a", ">=1.0.0");
    let catalogs = [CatalogInput::new("c", simple_catalog(&[app, a, other]))];
    let planned = plan_of("app", &catalogs, &[]).unwrap();
    assert_eq!(picked(&planned), ["a.v1.0.0@c", "app.v1.0.0@c"]);
    assert!(planned.work >= 3_000, "{}", planned.work);
}

// --- The property test: an independent model of the generated catalogs. ---

const PACKAGES: [&str; 4] = ["p0", "p1", "p2", "p3"];
const KINDS: [&str; 3] = ["K0", "K1", "K2"];

#[derive(Debug, Clone)]
enum Need {
    AtLeast(usize, u64),
    Below(usize, u64),
    Api(usize),
    /// `all{package p >=0.0.0, not{gvk k}}`
    PackageWithout(usize, usize),
    /// `any{gvk k, package p >= v}`
    ApiOrPackage(usize, usize, u64),
}

#[derive(Debug, Clone)]
struct GenBundle {
    package: usize,
    major: u64,
    kinds: Vec<usize>,
    needs: Vec<Need>,
}

fn holds(need: &Need, b: &GenBundle) -> bool {
    match *need {
        Need::AtLeast(p, v) => b.package == p && b.major >= v,
        Need::Below(p, v) => b.package == p && b.major < v,
        Need::Api(k) => b.kinds.contains(&k),
        Need::PackageWithout(p, k) => b.package == p && !b.kinds.contains(&k),
        Need::ApiOrPackage(k, p, v) => b.kinds.contains(&k) || (b.package == p && b.major >= v),
    }
}

fn need_strategy() -> impl Strategy<Value = Need> {
    prop_oneof![
        (0..4usize, 1..4u64).prop_map(|(p, v)| Need::AtLeast(p, v)),
        (0..4usize, 2..4u64).prop_map(|(p, v)| Need::Below(p, v)),
        (0..3usize).prop_map(Need::Api),
        (0..4usize, 0..3usize).prop_map(|(p, k)| Need::PackageWithout(p, k)),
        (0..3usize, 0..4usize, 1..4u64).prop_map(|(k, p, v)| Need::ApiOrPackage(k, p, v)),
    ]
}

fn catalog_strategy() -> impl Strategy<Value = Vec<GenBundle>> {
    // Each package: a set of majors 1..=3, each bundle with some APIs and up to two needs.
    proptest::collection::vec(
        proptest::collection::vec(
            (
                any::<bool>(),
                proptest::collection::vec(0..3usize, 0..2),
                proptest::collection::vec(need_strategy(), 0..3),
            ),
            3,
        ),
        4,
    )
    .prop_map(|packages| {
        let mut out = Vec::new();
        for (p, majors) in packages.into_iter().enumerate() {
            for (m, (present, mut kinds, needs)) in majors.into_iter().enumerate() {
                kinds.sort();
                kinds.dedup();
                if present || m == 0 {
                    out.push(GenBundle {
                        package: p,
                        major: m as u64 + 1,
                        kinds,
                        needs: needs
                            .into_iter()
                            .filter(|n| !matches!(n, Need::AtLeast(q, _) | Need::Below(q, _) if *q == p))
                            .collect(),
                    });
                }
            }
        }
        out
    })
}

fn constraint_json(need: &Need) -> (String, Value) {
    let pkg = |p: usize, range: String| json!({"packageName": PACKAGES[p], "versionRange": range});
    let gvk = |k: usize| json!({"group": "test.io", "version": "v1", "kind": KINDS[k]});
    match *need {
        Need::AtLeast(p, v) => ("olm.package.required".into(), pkg(p, format!(">={v}.0.0"))),
        Need::Below(p, v) => ("olm.package.required".into(), pkg(p, format!("<{v}.0.0"))),
        Need::Api(k) => ("olm.gvk.required".into(), gvk(k)),
        Need::PackageWithout(p, k) => (
            "olm.constraint".into(),
            json!({"all": {"constraints": [{"package": pkg(p, ">=0.0.0".into())}, {"not": {"constraints": [{"gvk": gvk(k)}]}}]}}),
        ),
        Need::ApiOrPackage(k, p, v) => (
            "olm.constraint".into(),
            json!({"any": {"constraints": [{"gvk": gvk(k)}, {"package": pkg(p, format!(">={v}.0.0"))}]}}),
        ),
    }
}

fn to_catalog(bundles: &[GenBundle]) -> Arc<CatalogIndex> {
    let bs: Vec<B> = bundles
        .iter()
        .map(|g| {
            let mut x = b(PACKAGES[g.package], &format!("{}.0.0", g.major));
            for k in &g.kinds {
                x = x.provides(KINDS[*k]);
            }
            for n in &g.needs {
                let (t, v) = constraint_json(n);
                x.properties.push(json!({"type": t, "value": v}));
            }
            x
        })
        .collect();
    simple_catalog(&bs)
}

/// Whether a selection (at most one bundle per package, the root's package present) satisfies
/// every need of every selected bundle, with at most one bundle providing each API.
fn valid(selection: &[&GenBundle]) -> bool {
    let one_provider_per_api =
        (0..KINDS.len()).all(|k| selection.iter().filter(|b| b.kinds.contains(&k)).count() <= 1);
    one_provider_per_api
        && selection.iter().all(|b| {
            b.needs
                .iter()
                .all(|n| selection.iter().any(|other| holds(n, other)))
        })
}

fn brute_force(bundles: &[GenBundle], root: usize) -> bool {
    let per_package: Vec<Vec<&GenBundle>> = (0..4)
        .map(|p| bundles.iter().filter(|b| b.package == p).collect())
        .collect();
    // choice[p] = 0 for none, i+1 for the i-th bundle.
    let mut choice = [0usize; 4];
    loop {
        if choice[root] > 0 {
            let selection: Vec<&GenBundle> = (0..4)
                .filter(|&p| choice[p] > 0)
                .map(|p| per_package[p][choice[p] - 1])
                .collect();
            if valid(&selection) {
                return true;
            }
        }
        let mut p = 0;
        loop {
            if p == 4 {
                return false;
            }
            choice[p] += 1;
            if choice[p] <= per_package[p].len() {
                break;
            }
            choice[p] = 0;
            p += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn plans_satisfy_every_requirement_and_none_means_none(bundles in catalog_strategy(), root in 0..4usize) {
        let catalogs = [CatalogInput::new("c", to_catalog(&bundles))];
        match plan_of(PACKAGES[root], &catalogs, &[]) {
            Ok(plan) => {
                let selection: Vec<&GenBundle> = plan
                    .plan
                    .iter()
                    .map(|p| {
                        bundles
                            .iter()
                            .find(|g| PACKAGES[g.package] == p.package && format!("{}.0.0", g.major) == p.version)
                            .expect("a planned bundle is in the catalog")
                    })
                    .collect();
                let mut packages: Vec<usize> = selection.iter().map(|b| b.package).collect();
                packages.sort();
                let before = packages.len();
                packages.dedup();
                prop_assert_eq!(before, packages.len(), "one bundle per package");
                prop_assert!(selection.iter().any(|b| b.package == root));
                prop_assert!(valid(&selection), "plan {:?} leaves a requirement unsatisfied", plan.plan);
            }
            Err(PlanError::Unsatisfiable(why)) => {
                prop_assert!(!brute_force(&bundles, root), "the solver found no plan but one exists: {}", why);
            }
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}

/// The one requirement declared by a property of `type_` with `value`.
fn requirement(type_: &str, value: Value) -> Requirement {
    let property = crate::catalog::Property::new(type_, value.into());
    let mut all = requirements_of("b.v1", &[property], &mut crate::meter::Meter::unlimited())
        .expect("a valid requirement");
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn requirements_summarise_in_a_short_form_and_serialize_in_the_constraint_shape() {
    let gvk = requirement(
        "olm.gvk.required",
        json!({"group": "", "version": "v1", "kind": "Pod"}),
    );
    assert_eq!(gvk.summary(), "gvk v1 Pod", "the core group has no prefix");
    let cel = json!({"cel": {"rule": "properties.exists(p, p.type == \"certified\")"}});
    let not = requirement(
        "olm.constraint",
        json!({"all": {"constraints": [
            {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}},
            {"not": {"constraints": [cel.clone()]}}
        ]}}),
    );
    assert_eq!(
        not.summary(),
        "all(pkg blue >=1.0.0, not(cel properties.exists(p, p.type == \"certified\")))"
    );
    // A failure message summarises a compound or CEL constraint, never a package or an API.
    let with_message = requirement(
        "olm.constraint",
        json!({"failureMessage": "  certified only  ", "cel": cel["cel"].clone()}),
    );
    assert_eq!(with_message.summary(), "certified only");
    let package_with_message = requirement(
        "olm.constraint",
        json!({"failureMessage": "blue please", "package": {"packageName": "blue", "versionRange": "<2.0.0"}}),
    );
    assert_eq!(package_with_message.summary(), "pkg blue <2.0.0");
    assert_eq!(
        serde_json::to_value(&not).unwrap(),
        json!({
            "property": "olm.constraint",
            "summary": not.summary(),
            "failureMessage": null,
            "constraint": {"all": {"constraints": [
                {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}},
                {"not": {"constraints": [cel]}}
            ]}}
        })
    );
    // A wide constraint stops at the limit.
    let wide: Vec<Value> = (0..100)
        .map(|i| json!({"package": {"packageName": format!("package-{i}"), "versionRange": ">=1.0.0"}}))
        .collect();
    let wide = requirement("olm.constraint", json!({"any": {"constraints": wide}}));
    let summary = wide.summary();
    assert_eq!(summary.chars().count(), MAX_SHORT_CHARS);
    assert!(
        summary.starts_with("any(pkg package-0 >=1.0.0, ") && summary.ends_with("..."),
        "{summary}"
    );
}
