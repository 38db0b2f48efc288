//! Twins of upstream's end-to-end scenarios (its `test/e2e/features/*.feature`): the same
//! behaviour, and upstream's texts where its scenario checks them. docs/upstream.md maps each
//! scenario to its twin.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Node,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use olmv1_api::v1::{ClusterCatalog, conditions::LABEL_OWNER_NAME};
use serde_json::{Value, json};

use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, Package},
    support, two_versions,
};

/// A package of one bundle, 1.0.0, whose CSV supports only `modes`.
fn supporting_only(package: &str, modes: &[&'static str]) -> Package {
    crate::only(package, Bundle::new("1.0.0").supporting_only(modes))
}

/// Applies the scenario's extension with `spec.config.inline` set to `inline` (none when null).
async fn apply_with_config(s: &Scenario, inline: Value) {
    let mut body = components::extension(&s.extension, &s.namespace, &s.package, json!({}));
    if !inline.is_null() {
        body["spec"]["config"] = json!({"configType": "Inline", "inline": inline});
    }
    components::apply_extension(&s.client, body).await;
}

/// Waits for upstream's `Progressing=False/InvalidConfiguration` with a message containing
/// `text`, and checks that nothing is installed.
async fn wait_invalid_configuration(s: &Scenario, text: &str) {
    let ext = components::wait_extension(
        &s.client,
        &s.extension,
        &format!("Progressing=False/InvalidConfiguration with {text:?}"),
        |ext| {
            components::condition(ext, "Progressing").is_some_and(|c| {
                c.status == "False" && c.reason == "InvalidConfiguration" && c.message.contains(text)
            })
        },
    )
    .await;
    let installed = components::condition(&ext, "Installed").unwrap();
    assert_eq!(installed.status, "False", "{installed:?}");
    assert_eq!(components::installed_version(&ext), None);
    assert!(s.operator_deployment().await.is_none(), "nothing applied");
}

/// The namespaces the installed operator watches (`olm.targetNamespaces` of its pod template).
async fn target_namespaces(s: &Scenario) -> String {
    let deployment = s
        .operator_deployment()
        .await
        .expect("the operator Deployment exists");
    deployment
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap()["olm.targetNamespaces"]
        .clone()
}

const MISSING_WATCH_NAMESPACE: &str = "invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing";

#[tokio::test]
async fn watch_namespace_is_required_for_a_single_namespace_bundle_and_installs_once_set() {
    let s = Scenario::new("single-ns", |p| supporting_only(p, &["SingleNamespace"])).await;
    let target = support::fresh_namespace(&s.client, "single-ns-target").await;
    apply_with_config(&s, Value::Null).await;
    wait_invalid_configuration(&s, MISSING_WATCH_NAMESPACE).await;

    apply_with_config(&s, json!({"watchNamespace": target})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(target_namespaces(&s).await, target);
}

#[tokio::test]
async fn watch_namespace_of_an_own_namespace_bundle_must_be_the_install_namespace() {
    let s = Scenario::new("own-ns", |p| supporting_only(p, &["OwnNamespace"])).await;
    apply_with_config(&s, Value::Null).await;
    wait_invalid_configuration(&s, MISSING_WATCH_NAMESPACE).await;

    apply_with_config(&s, json!({"watchNamespace": "some-ns"})).await;
    wait_invalid_configuration(
        &s,
        &format!("invalid value \"some-ns\": must be \"{}\"", s.namespace),
    )
    .await;

    apply_with_config(&s, json!({"watchNamespace": s.namespace})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(target_namespaces(&s).await, s.namespace);
}

#[tokio::test]
async fn watch_namespace_with_an_invalid_dns1123_name_is_refused_and_a_valid_one_installs() {
    let s = Scenario::new("dns-ns", |p| supporting_only(p, &["SingleNamespace"])).await;
    apply_with_config(&s, json!({"watchNamespace": "invalid-namespace-"})).await;
    wait_invalid_configuration(
        &s,
        "invalid ClusterExtension configuration: invalid configuration: field \"watchNamespace\" must match pattern",
    )
    .await;

    let target = support::fresh_namespace(&s.client, "dns-ns-target").await;
    apply_with_config(&s, json!({"watchNamespace": target})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(target_namespaces(&s).await, target);
}

#[tokio::test]
async fn watch_namespace_is_refused_for_a_bundle_without_single_or_own_namespace() {
    let s = Scenario::new("all-ns", |p| supporting_only(p, &["AllNamespaces"])).await;
    apply_with_config(&s, json!({"watchNamespace": s.namespace})).await;
    wait_invalid_configuration(
        &s,
        "invalid ClusterExtension configuration: invalid configuration: unknown field \"watchNamespace\"",
    )
    .await;

    // Without the field the bundle installs, watching every namespace.
    apply_with_config(&s, Value::Null).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(target_namespaces(&s).await, "");
}

#[tokio::test]
async fn deployment_config_node_selector_is_applied_to_the_operator_deployment() {
    let s = Scenario::new("nodesel", two_versions).await;
    apply_with_config(
        &s,
        json!({"deploymentConfig": {"nodeSelector": {"kubernetes.io/os": "linux"}}}),
    )
    .await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let deployment = s
        .operator_deployment()
        .await
        .expect("the operator Deployment exists");
    let pod_spec = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod_spec.node_selector,
        Some(BTreeMap::from([(
            "kubernetes.io/os".to_string(),
            "linux".to_string()
        )]))
    );
}

#[tokio::test]
async fn a_pinned_non_successor_version_is_refused_with_upstreams_message() {
    let s = Scenario::new("pin-nonsucc", |p| Package {
        name: p.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0", "1.2.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", p),
            // 1.2.0 replaces 1.1.0 only: not a successor of 1.0.0.
            Bundle::new("1.2.0").replaces("1.1.0", p),
        ],
        deprecations: vec![],
    })
    .await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    s.apply_extension(json!({"version": "1.2.0"})).await;
    let expected = format!(
        "error upgrading from currently installed version \"1.0.0\": no bundles found for package \"{}\" matching version \"1.2.0\"",
        s.package
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    let progressing = components::condition(&ext, "Progressing").unwrap();
    assert_eq!(progressing.status, "True");
    assert_eq!(progressing.message, expected);
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
    let deployment = s
        .operator_deployment()
        .await
        .expect("the installed version keeps running");
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert!(image.ends_with(":v1.0.0"), "{image}");
}

#[tokio::test]
async fn a_successor_re_pushed_under_the_same_catalog_image_ref_is_installed() {
    let s = Scenario::new("repush", crate::one_version).await;
    // catalogd polls the tag (a poll minute is a second for the test components).
    Api::<ClusterCatalog>::all(s.client.clone())
        .patch(
            &s.catalog,
            &PatchParams::apply("e2e-poll"),
            &Patch::Apply(json!({
                "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
                "spec": {"source": {"type": "Image", "image": {"pollIntervalMinutes": 1}}}
            })),
        )
        .await
        .unwrap();
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let before = Api::<ClusterCatalog>::all(s.client.clone())
        .get(&s.catalog)
        .await
        .unwrap()
        .spec
        .source;

    // The same tag (`:v1`), new content: nothing in the cluster changes but the image.
    fixtures::publish_catalog(
        support::registry(),
        &format!("e2e/{}", s.catalog),
        "v1",
        &two_versions(&s.package),
    )
    .await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let after = Api::<ClusterCatalog>::all(s.client.clone())
        .get(&s.catalog)
        .await
        .unwrap()
        .spec
        .source;
    assert_eq!(
        serde_json::to_value(&before).unwrap(),
        serde_json::to_value(&after).unwrap(),
        "the catalog still points at the same ref"
    );
}

#[tokio::test]
async fn an_extension_installs_once_its_namespace_appears() {
    let s = Scenario::new("late-ns", two_versions).await;
    // An install namespace that does not exist yet. olmv1 installs as the ServiceAccount named
    // in the spec, which lives there: its absence is what is reported.
    let namespace = support::fresh_name("late-ns-target");
    let body = components::extension(&s.extension, &namespace, &s.package, json!({}));
    components::apply_extension(&s.client, body).await;
    let expected = format!("service account \"installer\" not found in namespace \"{namespace}\"");
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(components::condition(&ext, "Progressing").unwrap().status, "True");
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "False");

    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(s.client.clone());
    let created = k8s_openapi::api::core::v1::Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &created).await.unwrap();
    components::create_service_account(&s.client, &namespace, "installer").await;
    components::grant_cluster_admin(&s.client, &namespace).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert!(
        Api::<Deployment>::namespaced(s.client.clone(), &namespace)
            .get_opt(&fixtures::deployment_name(&s.package))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn an_extension_installs_once_a_conflicting_deployment_is_removed() {
    let s = Scenario::new("conflict", two_versions).await;
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let name = fixtures::deployment_name(&s.package);
    let theirs: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "someone-else"}},
            "template": {
                "metadata": {"labels": {"app": "someone-else"}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/someone-else:v1"}]}
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &theirs).await.unwrap();

    s.apply_extension(json!({})).await;
    let expected = format!(
        "Deployment '{name}' in namespace '{}' already exist and cannot be managed by olmv1",
        s.namespace
    );
    // Upstream's Progressing=True/Retrying, Installed=False: retried until the object goes.
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(components::condition(&ext, "Progressing").unwrap().status, "True");
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "False");
    let kept = deployments.get(&name).await.unwrap();
    assert_eq!(
        kept.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("registry.invalid/someone-else:v1"),
        "the other owner's Deployment is left alone"
    );

    deployments.delete(&name, &DeleteParams::default()).await.unwrap();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let ours = deployments.get(&name).await.unwrap();
    assert_eq!(
        ours.metadata.labels.unwrap_or_default().get(LABEL_OWNER_NAME),
        Some(&s.extension)
    );
}

#[tokio::test]
async fn a_spec_change_is_accepted_while_the_catalog_is_deleted() {
    let s = Scenario::new("nocat-spec", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    let catalogs = Api::<ClusterCatalog>::all(s.client.clone());
    catalogs
        .delete(&s.catalog, &DeleteParams::default())
        .await
        .unwrap();
    support::wait_for("the catalog to be gone", components::INSTALL_TIMEOUT, || async {
        match catalogs.get_opt(&s.catalog).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    // Upstream's change: a preflight setting. The new generation is reconciled and reported.
    let mut body = components::extension(&s.extension, &s.namespace, &s.package, json!({}));
    body["spec"]["install"] = json!({"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}});
    components::apply_extension(&s.client, body).await;
    // Waits on the conditions of the new generation.
    let ext = components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert_eq!(components::condition(&ext, "Progressing").unwrap().status, "True");
    assert!(s.operator_deployment().await.is_some());
}

/// Bumps the extension's generation (a preflight setting that changes nothing here), so that
/// the controller reconciles it; waits until it has reported that generation installed.
async fn trigger_reconcile(s: &Scenario, version: &str) {
    let mut body = components::extension(&s.extension, &s.namespace, &s.package, json!({}));
    body["spec"]["install"] = json!({"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}});
    components::apply_extension(&s.client, body).await;
    components::wait_installed(&s.client, &s.extension, version).await;
}

#[tokio::test]
async fn user_added_labels_and_annotations_survive_a_reconcile() {
    let s = Scenario::new("usermeta", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let name = fixtures::deployment_name(&s.package);
    deployments
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "annotations": {"example.com/custom-annotation": "my-value"},
                "labels": {"example.com/custom-label": "my-value"}
            }})),
        )
        .await
        .unwrap();

    trigger_reconcile(&s, "1.1.0").await;
    s.scale_operator_and_wait_restored(2).await;
    let meta = deployments.get(&name).await.unwrap().metadata;
    let annotations = meta.annotations.unwrap_or_default();
    let labels = meta.labels.unwrap_or_default();
    assert_eq!(
        annotations
            .get("example.com/custom-annotation")
            .map(String::as_str),
        Some("my-value")
    );
    assert_eq!(
        labels.get("example.com/custom-label").map(String::as_str),
        Some("my-value")
    );
    assert_eq!(
        labels.get(LABEL_OWNER_NAME),
        Some(&s.extension),
        "olmv1's own labels stay too"
    );
}

#[tokio::test]
async fn a_rollout_restart_survives_a_reconcile() {
    let s = Scenario::new("restarted", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let name = fixtures::deployment_name(&s.package);
    let deployment = format!("deployment/{name}");
    support::kubectl(&["rollout", "restart", &deployment, "-n", &s.namespace]).ok();
    let restarted_at = || async {
        Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
            .get(&name)
            .await
            .unwrap()
            .spec
            .unwrap()
            .template
            .metadata
            .unwrap_or_default()
            .annotations
            .unwrap_or_default()
            .get("kubectl.kubernetes.io/restartedAt")
            .cloned()
    };
    let stamp = restarted_at().await.expect("kubectl set restartedAt");
    let rollout_complete = || {
        support::kubectl(&[
            "rollout",
            "status",
            &deployment,
            "-n",
            &s.namespace,
            "--timeout=120s",
        ])
        .ok();
    };
    rollout_complete();
    let replica_sets = Api::<ReplicaSet>::namespaced(s.client.clone(), &s.namespace)
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap();
    assert_eq!(
        replica_sets.items.len(),
        2,
        "the restart made a second ReplicaSet"
    );

    trigger_reconcile(&s, "1.1.0").await;
    s.scale_operator_and_wait_restored(2).await;
    assert_eq!(restarted_at().await, Some(stamp), "the restart annotation stays");
    rollout_complete();
}

/// The taint that evicts the operator's pod from its Node and keeps it off (its pods tolerate
/// only their pool's `NoSchedule` taint).
const UNREADY_TAINT: &str = "olmv1.test/unready";

async fn set_unready_taint(nodes: &Api<Node>, node: &str, pool: &str, on: bool) {
    let mut taints = vec![json!({"key": fixtures::NODE_POOL_KEY, "value": pool, "effect": "NoSchedule"})];
    if on {
        taints.push(json!({"key": UNREADY_TAINT, "value": "true", "effect": "NoExecute"}));
    }
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": taints}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn readiness_lost_after_install_is_reported_and_its_return_too() {
    let s = Scenario::new("unready", |p| {
        crate::only(p, Bundle::new("1.0.0").on_node_pool(p))
    })
    .await;
    let nodes = Api::<Node>::all(s.client.clone());
    let node = format!("{}-node", s.package);
    nodes
        .create(
            &PostParams::default(),
            &crate::deadline::pool_node(&node, &s.package),
        )
        .await
        .unwrap();
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // The Node evicts the operator's pod and takes no other: the Deployment is no longer
    // Available. olmv1 has no Available condition (upstream's is Boxcutter's): it reports the
    // wait as Progressing=True/RollingOut, and the bundle stays installed.
    set_unready_taint(&nodes, &node, &s.package, true).await;
    let name = fixtures::deployment_name(&s.package);
    let ext = components::wait_progressing(&s.client, &s.extension, "RollingOut", &name).await;
    assert_eq!(components::condition(&ext, "Progressing").unwrap().status, "True");
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));

    set_unready_taint(&nodes, &node, &s.package, false).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // Uninstalled before its Node goes, so that no pod is left without one.
    s.uninstall().await;
    nodes.delete(&node, &DeleteParams::default()).await.unwrap();
}
