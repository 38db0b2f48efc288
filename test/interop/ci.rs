//! The CI half of `hack/interop.sh`: every scenario of the differences table run by olmv1's
//! controller, as it ships and in upstream's model, compared field by field with upstream's records
//! of the last run with upstream's binaries (`records/upstream.json`). A change in olmv1 that
//! alters an outcome fails here, naming the scenario and the field, until docs/upstream.md lists
//! the difference with its reason (or a new run with upstream's binaries records it).
//!
//! Upstream's binaries are not needed: its outcomes are data. olmv1's catalogd serves the
//! scenarios' catalogs (upstream's catalogd served them for the records: step 2 of
//! `hack/interop.sh`, which compares live with the same table).

#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "../e2e/components.rs"]
mod components;
#[allow(dead_code)]
#[path = "../e2e/fixtures.rs"]
mod fixtures;

#[allow(dead_code)]
mod compare;
#[allow(dead_code)]
mod records;
#[allow(dead_code)]
mod run;
#[allow(dead_code)]
mod scenarios;

use std::time::Instant;

use kube::{Api, api::DeleteParams};
use olmv1_api::v1::ClusterCatalog;

use records::{DOCS_FILE, RECORDS_FILE, Records};
use scenarios::{CATALOG_LABEL, Run};

/// The ServiceAccount (`olmv1-<role>`) of the controller in upstream's model: the RBAC of
/// the controller-identity install manifest, as it installs it.
const UPSTREAM_MODEL_ROLE: &str = "interop-upstream-model";

#[tokio::test]
async fn olmv1_reports_what_upstream_recorded_but_for_the_listed_differences() {
    let started = Instant::now();
    // Upstream keeps no OperatorConditions: neither does olmv1 where classic's CRD is not served.
    components::ensure_running_with(&["--operator-conditions", "off"]);
    // The shared controller is stopped for the second run: only one controller may reconcile
    // the scenarios' ClusterExtensions.
    let share = components::exclusive_cluster().await;
    let client = support::client().await;
    let registry = support::registry();
    let root = support::repo_root();
    let records = Records::read(&root.join(RECORDS_FILE));
    let docs = std::fs::read_to_string(root.join(DOCS_FILE)).unwrap();

    let catalogs = scenarios::publish_scenarios(registry).await;
    for catalog in &catalogs {
        components::apply_catalog(
            &client,
            &catalog.name,
            &catalog.image,
            catalog.priority,
            CATALOG_LABEL.1,
        )
        .await;
    }
    for catalog in &catalogs {
        components::wait_catalog_serving(&client, &catalog.name).await;
    }

    // olmv1 as it ships: the shared controller runs with the defaults.
    assert!(Run::Olmv1.controller_args().is_empty());
    let olmv1 = run::run_scenarios(&client, Run::Olmv1, registry).await;

    // olmv1 in upstream's model: its own controller, with the controller-identity manifest's RBAC.
    let upstream_model = {
        let _stopped = components::stop_shared_controller(&share);
        components::apply_variant_controller_rbac("controller-identity", UPSTREAM_MODEL_ROLE);
        let controller = components::Replica::controller_as(
            UPSTREAM_MODEL_ROLE,
            "interop-upstream-model",
            Run::Olmv1UpstreamModel.controller_args(),
        );
        let outcomes = run::run_scenarios(&client, Run::Olmv1UpstreamModel, registry).await;
        drop(controller);
        outcomes
    };

    let catalog_api = Api::<ClusterCatalog>::all(client.clone());
    for catalog in &catalogs {
        catalog_api
            .delete(&catalog.name, &DeleteParams::default())
            .await
            .ok();
    }

    let mut failures = Vec::new();
    for (run, outcomes) in [(Run::Olmv1, &olmv1), (Run::Olmv1UpstreamModel, &upstream_model)] {
        let table = records::table(run, outcomes, &records, &docs);
        println!("{}", table.render());
        failures.extend(
            table
                .failures()
                .into_iter()
                .map(|line| format!("{}: {line}", run.label())),
        );
    }
    eprintln!(
        "interop: both runs compared with upstream's records in {:.0?}",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} difference(s) from upstream's records ({RECORDS_FILE}, upstream {} of {}) not as {DOCS_FILE} \
         lists them:\n{}",
        failures.len(),
        records.upstream_commit,
        records.recorded,
        failures.join("\n")
    );
}
