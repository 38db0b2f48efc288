//! The alerts of charts/olmv1/files/olmv1-alerts.yaml, evaluated (with `support::promql`) against
//! what the running components' `/metrics` report: each fires for the objects in the state it
//! watches and for no other. Prometheus's `for:` is its own; these check the expressions and the
//! metrics they read.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::{
    Scenario, components,
    fixtures::{Bundle, Package},
    support::{self, promql},
    two_versions,
};

/// `(alert, expr)` of every rule of `groups`.
fn rules(groups: &Value) -> Vec<(String, String)> {
    groups
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .map(|r| {
            (
                r["alert"].as_str().expect("an alert").to_string(),
                r["expr"].as_str().expect("an expr").to_string(),
            )
        })
        .collect()
}

fn read_yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(support::repo_root().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn alerts() -> BTreeMap<String, String> {
    rules(&read_yaml("charts/olmv1/files/olmv1-alerts.yaml")["groups"])
        .into_iter()
        .collect()
}

/// The `name` label of each series `alert` fires for over `samples`.
pub fn firing_for(alert: &str, samples: &[promql::Sample]) -> Vec<String> {
    let expr = &alerts()[alert];
    let mut names: Vec<String> = promql::evaluate(expr, samples)
        .into_iter()
        .map(|labels| labels.get("name").cloned().unwrap_or_default())
        .collect();
    names.sort();
    names
}

/// The rules file is the one source of the alerts: the chart's PrometheusRule carries its groups
/// (test/chart.rs).
#[test]
fn the_rules_file_holds_every_alert() {
    let names: Vec<String> = alerts().into_keys().collect();
    assert_eq!(
        names,
        [
            "OLMv1CatalogdNotLeading",
            "OLMv1ClusterCatalogNotServing",
            "OLMv1ClusterExtensionNotInstalled",
            "OLMv1ClusterExtensionNotProgressing",
            "OLMv1ControllerNotLeading",
        ]
    );
}

#[test]
fn the_evaluator_handles_the_forms_the_alerts_use() {
    let samples = promql::parse_exposition(
        "# TYPE x gauge\nx{name=\"a\",status=\"True\"} 1\nx{name=\"b\",status=\"False\"} 1\nl{component=\"c\"} 0\n# EOF\n",
    );
    let names = |expr: &str| {
        promql::evaluate(expr, &samples)
            .into_iter()
            .map(|l| l.get("name").cloned().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(r#"x{status!="True"} == 1"#), ["b"]);
    assert_eq!(names(r#"x{status="True",name="a"} == 1"#), ["a"]);
    assert_eq!(names(r#"sum(l{component="c"}) < 1"#), [""]);
    assert!(names(r#"sum(l{component="d"}) < 1"#).is_empty());
    assert_eq!(
        names(r#"sum(l{component="d"}) < 1 or absent(l{component="d"})"#),
        [""]
    );
    assert!(names(r#"absent(x{name="a"})"#).is_empty());
}

/// A package whose only bundle's pods have no Node to run on (pool `package`, which no test
/// creates): with a deadline, its first install ends `Progressing=False/ProgressDeadlineExceeded`.
fn never_ready(package: &str) -> Package {
    crate::only(package, Bundle::new("1.0.0").on_node_pool(package))
}

#[tokio::test]
async fn each_alert_fires_for_what_it_watches_and_no_other() {
    let (healthy, missing_account, stuck) = tokio::join!(
        Scenario::new("alert-ok", two_versions),
        Scenario::without_installer("alert-nosa", two_versions),
        Scenario::new("alert-stuck", never_ready),
    );
    healthy.apply_extension(json!({})).await;
    missing_account.apply_extension(json!({})).await;
    let mut body = components::extension(&stuck.extension, &stuck.namespace, &stuck.package, json!({}));
    body["spec"]["progressDeadlineMinutes"] = json!(10);
    components::apply_extension(&stuck.client, body).await;
    // Catalogs: one whose image does not exist, one the admin made Unavailable.
    let client = support::client().await;
    let missing_image = support::fresh_name("alert-noimage");
    let missing_ref = format!("{}/e2e/{missing_image}:v1", support::registry());
    components::apply_catalog(&client, &missing_image, &missing_ref, 0, &missing_image).await;
    let unavailable = support::fresh_name("alert-off");
    components::apply_catalog(&client, &unavailable, &missing_ref, 0, &unavailable).await;
    kube::Api::<olmv1_api::v1::ClusterCatalog>::all(client.clone())
        .patch(
            &unavailable,
            &kube::api::PatchParams::apply("e2e-alerts"),
            &kube::api::Patch::Apply(json!({
                "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
                "spec": {"availabilityMode": "Unavailable"}
            })),
        )
        .await
        .unwrap();

    components::wait_installed(&healthy.client, &healthy.extension, "1.1.0").await;
    components::wait_progressing(
        &missing_account.client,
        &missing_account.extension,
        "Retrying",
        "not found",
    )
    .await;
    let deadline = std::time::Duration::from_secs(10 * components::PROGRESS_DEADLINE_UNIT_SECONDS);
    components::wait_extension_within(
        &stuck.client,
        &stuck.extension,
        "Progressing=False/ProgressDeadlineExceeded",
        deadline + components::INSTALL_TIMEOUT,
        |ext| {
            components::condition(ext, "Progressing").is_some_and(|c| c.reason == "ProgressDeadlineExceeded")
        },
    )
    .await;

    // The extension alerts, over the controller's metrics once they show all three.
    let ours = |names: Vec<String>| {
        names
            .into_iter()
            .filter(|n| [&healthy.extension, &missing_account.extension, &stuck.extension].contains(&n))
            .collect::<Vec<_>>()
    };
    let samples = support::wait_for(
        "the controller's metrics to show the three extensions' conditions",
        components::INSTALL_TIMEOUT,
        || async {
            let samples = components::scrape("controller").await;
            let shown = samples
                .iter()
                .filter(|s| s.name == "olmv1_clusterextension_condition" && s.labels["status"] != "Unknown")
                .filter(|s| {
                    [&healthy.extension, &missing_account.extension, &stuck.extension]
                        .contains(&&s.labels["name"])
                })
                .count();
            if shown == 6 {
                Ok(samples)
            } else {
                Err(format!("{shown} of 6 series"))
            }
        },
    )
    .await;
    let mut not_installed = vec![missing_account.extension.clone(), stuck.extension.clone()];
    not_installed.sort();
    assert_eq!(
        ours(firing_for("OLMv1ClusterExtensionNotInstalled", &samples)),
        not_installed
    );
    assert_eq!(
        ours(firing_for("OLMv1ClusterExtensionNotProgressing", &samples)),
        std::slice::from_ref(&stuck.extension)
    );
    assert!(firing_for("OLMv1ControllerNotLeading", &samples).is_empty());
    // Without the controller's leader series (no replica scraped), it fires.
    let without_leader: Vec<_> = samples
        .iter()
        .filter(|s| s.name != "olmv1_leader")
        .cloned()
        .collect();
    assert_eq!(firing_for("OLMv1ControllerNotLeading", &without_leader), [""]);

    // The catalog alert, over catalogd's: the broken catalog, not the one switched off, nor the
    // serving ones.
    let samples = support::wait_for(
        "catalogd's metrics to show both catalogs",
        components::INSTALL_TIMEOUT,
        || async {
            let samples = components::scrape("catalogd").await;
            let shown = samples
                .iter()
                .filter(|s| {
                    s.name == "olmv1_clustercatalog_condition"
                        && s.labels["type"] == "Serving"
                        && (s.labels["name"] == missing_image
                            || (s.labels["name"] == unavailable
                                && s.labels["reason"] == "UserSpecifiedUnavailable"))
                })
                .count();
            if shown == 2 {
                Ok(samples)
            } else {
                Err(format!("{shown} of 2 series"))
            }
        },
    )
    .await;
    let firing = firing_for("OLMv1ClusterCatalogNotServing", &samples);
    assert!(firing.contains(&missing_image), "{firing:?}");
    for serving in [
        &healthy.catalog,
        &missing_account.catalog,
        &stuck.catalog,
        &unavailable,
    ] {
        assert!(!firing.contains(serving), "{serving} in {firing:?}");
    }
    assert!(firing_for("OLMv1CatalogdNotLeading", &samples).is_empty());

    // Deleted objects leave the metrics (and so every alert).
    kube::Api::<olmv1_api::v1::ClusterCatalog>::all(client.clone())
        .delete(&missing_image, &Default::default())
        .await
        .unwrap();
    support::wait_for(
        "the deleted catalog to leave catalogd's metrics",
        components::INSTALL_TIMEOUT,
        || async {
            let samples = components::scrape("catalogd").await;
            if samples
                .iter()
                .any(|s| s.labels.get("name") == Some(&missing_image))
            {
                Err("still there".to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;

    // The rest goes too: no pod waits for a Node, no account is looked for, after this test.
    let extensions = kube::Api::<olmv1_api::v1::ClusterExtension>::all(client.clone());
    for extension in [&stuck.extension, &missing_account.extension] {
        extensions.delete(extension, &Default::default()).await.unwrap();
    }
    kube::Api::<olmv1_api::v1::ClusterCatalog>::all(client.clone())
        .delete(&unavailable, &Default::default())
        .await
        .unwrap();
}
