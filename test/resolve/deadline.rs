//! The plan's deadline, as the product promises it: a deadline of D holds within D + 1 s on two
//! busy cores. A real hostile input (the issue's: `not` requirements that any package satisfies,
//! against thousands of packages) is planned with no work budget and a deadline of D while two
//! threads keep both cores busy; the refusal, measured in wall time from the call to its return
//! (the plan's memory freed included), comes within D + 1 s.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use olmv1::{
    catalog::{CatalogIndex, Meta},
    dependencies::{PlanError, PlanLimits, PlanRequest, plan},
    resolve::{CatalogInput, ResolveRequest},
};
use serde_json::{Value, json};

/// The deadline: generous, so that the margin of 1 s is the product's, not the machine's.
const DEADLINE: Duration = Duration::from_secs(3);

/// `requirements` `not` constraints on `app`, and `packages` one-bundle packages.
fn hostile(requirements: usize, packages: usize) -> Arc<CatalogIndex> {
    let mut objects: Vec<Value> = Vec::new();
    let mut bundle = |package: &str, properties: Vec<Value>| {
        let name = format!("{package}.v1.0.0");
        objects.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        objects.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}));
        let mut all =
            vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
        all.extend(properties);
        objects.push(json!({"schema": "olm.bundle", "package": package, "name": name,
            "image": format!("registry.test/{name}"), "properties": all}));
    };
    let needs: Vec<Value> = (0..requirements)
        .map(|r| {
            json!({"type": "olm.constraint", "value": {"not": {"constraints": [
                {"package": {"packageName": format!("missing{r}"), "versionRange": ">=0.0.0"}}]}}})
        })
        .collect();
    bundle("app", needs);
    for p in 0..packages {
        bundle(&format!("p{p}"), Vec::new());
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

#[test]
fn a_plan_deadline_of_d_holds_within_d_plus_one_second_on_two_busy_cores() {
    let catalogs = [CatalogInput::new("hostile", hostile(256, 5_000))];
    let request = ResolveRequest {
        package: "app".into(),
        version_range: None,
        channels: Vec::new(),
        selector: None,
        upgrade_constraint_policy: Default::default(),
        installed: None,
    };
    let plan_request = PlanRequest {
        request: &request,
        installed: &[],
        served_apis: &[],
        allow_changes: false,
        // No work budget: only the deadline stops it.
        limits: PlanLimits {
            max_work: u64::MAX,
            max_duration: DEADLINE,
            ..PlanLimits::default()
        },
    };
    // Two threads keep both cores busy meanwhile.
    let busy = Arc::new(AtomicBool::new(true));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let busy = Arc::clone(&busy);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while busy.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let started = Instant::now();
    let answer = plan(&plan_request, &catalogs);
    let elapsed = started.elapsed();
    busy.store(false, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    match answer {
        Err(PlanError::TimedOut { package, limit }) => {
            assert_eq!(package, "app");
            assert_eq!(limit, DEADLINE);
        }
        other => panic!("expected the deadline to stop the plan, got {other:?}"),
    }
    println!(
        "refused after {:.2} s (deadline {} s)",
        elapsed.as_secs_f64(),
        DEADLINE.as_secs()
    );
    assert!(
        elapsed <= DEADLINE + Duration::from_secs(1),
        "the refusal came {elapsed:?} after the call, past {DEADLINE:?} + 1 s"
    );
}
