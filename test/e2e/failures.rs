//! Bad input and broken surroundings: a clear condition, nothing lost, convergence after the fix.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ConfigMap,
    rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
};
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use olmv1_api::v1::ClusterCatalog;
use serde_json::json;

use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, Package},
    support, two_versions,
};

async fn record_catalog(s: &Scenario) -> String {
    s.record().await["catalog"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn equal_priority_catalogs_are_refused_and_a_higher_priority_wins() {
    let s = Scenario::new("priority", two_versions).await;
    // A second catalog offering the same versions of the same package.
    let other = format!("{}-other", s.catalog);
    let mut package = two_versions(&s.package);
    package.bundles.iter_mut().for_each(|b| b.with_config_map = false);
    let image = fixtures::publish_catalog(support::registry(), &format!("e2e/{other}"), "v1", &package).await;
    components::apply_catalog(&s.client, &other, &image, 0, &s.package).await;
    components::wait_catalog_serving(&s.client, &other).await;

    s.apply_extension(json!({})).await;
    let mut names = [s.catalog.clone(), other.clone()];
    names.sort();
    let expected = format!(
        "found bundles for package \"{}\" in multiple catalogs with the same priority [{} {}]",
        s.package, names[0], names[1]
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().message,
        expected
    );
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "False");

    components::apply_catalog(&s.client, &other, &image, 1, &s.package).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert_eq!(
        record_catalog(&s).await,
        other,
        "the higher-priority catalog wins"
    );
}

#[tokio::test]
async fn a_missing_service_account_is_reported_and_the_install_converges_once_it_exists() {
    let s = Scenario::without_installer("nosa", two_versions).await;
    s.apply_extension(json!({})).await;

    let expected = format!(
        "operation cannot proceed due to the following validation error(s): service account \"installer\" not found in namespace \"{}\"",
        s.namespace
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(
        components::condition(&ext, "Installed").unwrap().message,
        "No bundle installed"
    );

    // The admin creates the account and grants it: the controller converges by itself.
    components::create_service_account(&s.client, &s.namespace, "installer").await;
    components::grant_cluster_admin(&s.client, &s.namespace).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn a_service_account_lacking_permissions_gets_every_missing_rule_and_nothing_is_applied() {
    let s = Scenario::without_installer("narrow", two_versions).await;
    let (client, namespace, package) = (s.client.clone(), s.namespace.clone(), s.package.clone());
    components::create_service_account(&client, &namespace, "installer").await;
    // Only ConfigMaps in its own namespace.
    let role = Role {
        metadata: ObjectMeta {
            name: Some("configmaps".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["*".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("configmaps".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "configmaps".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "installer".into(),
            namespace: Some(namespace.clone()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    s.apply_extension(json!({})).await;
    let ext = components::wait_extension(&client, &s.extension, "a permission preflight failure", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| c.message.contains("deployments"))
    })
    .await;
    let message = &components::condition(&ext, "Progressing").unwrap().message;
    // Upstream v1.10's text: its header, then one line per rule in its layout.
    assert!(
        message.contains(
            "pre-authorization failed: service account requires the following permissions to manage cluster extension:\n  Namespace:"
        ),
        "upstream's header: {message}"
    );
    let crd_rule = format!(
        "\n  Namespace:\"\" APIGroups:[apiextensions.k8s.io] Resources:[customresourcedefinitions] ResourceNames:[{}] Verbs:[create,get,patch]",
        fixtures::crd_name(&package)
    );
    assert!(message.contains(&crd_rule), "the CRD's rule: {message}");
    for missing in [
        "Resources:[deployments]",
        "Resources:[serviceaccounts]",
        "Resources:[clusterroles]",
    ] {
        assert!(
            message.contains(missing),
            "the message lists {missing}: {message}"
        );
    }
    assert!(
        !message.contains(&format!(
            "Resources:[configmaps] ResourceNames:[{package}-settings]"
        )),
        "the bundle's ConfigMap is allowed: {message}"
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    assert!(
        deployments
            .get_opt(&fixtures::deployment_name(&package))
            .await
            .unwrap()
            .is_none(),
        "nothing applied"
    );
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    assert!(
        config_maps
            .get_opt(&format!("{package}-settings"))
            .await
            .unwrap()
            .is_none(),
        "nothing applied"
    );

    components::grant_cluster_admin(&client, &namespace).await;
    components::wait_installed(&client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn an_object_owned_by_someone_else_is_refused_and_left_untouched() {
    let s = Scenario::new("foreign", two_versions).await;
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let theirs = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-settings", s.package)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "owner".to_string(),
            "someone else".to_string(),
        )])),
        ..Default::default()
    };
    config_maps.create(&PostParams::default(), &theirs).await.unwrap();

    s.apply_extension(json!({})).await;
    let expected = format!(
        "ConfigMap '{}-settings' in namespace '{}'",
        s.package, s.namespace
    );
    // Retried, as upstream: nothing watches the other owner's object, which may go any time.
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert!(
        components::condition(&ext, "Progressing")
            .unwrap()
            .message
            .contains("cannot be managed by olmv1")
    );
    let now = config_maps.get(&format!("{}-settings", s.package)).await.unwrap();
    assert_eq!(now.data.unwrap()["owner"], "someone else");
    assert!(
        now.metadata.labels.unwrap_or_default().is_empty(),
        "no owner label was added"
    );
    assert!(s.operator_deployment().await.is_none(), "nothing applied");
}

#[tokio::test]
async fn the_installed_extension_keeps_running_when_its_catalog_goes_away() {
    let s = Scenario::new("nocatalog", two_versions).await;
    // Only this catalog: when it goes, no catalog matches and the installed bundle is kept.
    s.apply_extension(
        json!({"selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": s.catalog}}}),
    )
    .await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    Api::<ClusterCatalog>::all(s.client.clone())
        .delete(&s.catalog, &DeleteParams::default())
        .await
        .unwrap();
    // With no catalog, deprecation is unknown; the installed bundle stays (upstream's fallback).
    // While the catalog is still being deleted it is listed but unreadable: a reconcile then
    // reports Retrying (upstream's "catalogs matching the selector exist"), so wait for the end.
    let ext = components::wait_extension(
        &s.client,
        &s.extension,
        "deprecation status unknown, Progressing Succeeded",
        |ext| {
            components::condition(ext, "Deprecated").is_some_and(|c| c.status == "Unknown")
                && components::condition(ext, "Progressing").is_some_and(|c| c.reason == "Succeeded")
        },
    )
    .await;
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(
        components::condition(&ext, "Deprecated").unwrap().message,
        "deprecation status unknown: catalog data unavailable"
    );
    assert!(s.operator_deployment().await.is_some());
}

#[tokio::test]
async fn the_installed_extension_keeps_running_when_its_bundle_leaves_the_catalog() {
    let s = Scenario::new("gone", crate::one_version).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    let replaced = Package {
        name: s.package.clone(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["2.0.0"])],
        bundles: vec![Bundle::new("2.0.0")],
        deprecations: vec![],
    };
    s.republish("v2", &replaced).await;
    let expected = format!(
        "error upgrading from currently installed version \"1.0.0\": no bundles found for package \"{}\"",
        s.package
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(ext.status.unwrap().install.unwrap().bundle.version, "1.0.0");
    assert!(s.operator_deployment().await.is_some());
}

#[tokio::test]
async fn an_unreachable_registry_during_an_upgrade_keeps_the_installed_version_and_converges() {
    // The images live in a registry of this test's own, which it stops and starts again.
    let mut registry = support::start_registry(&support::RegistryOptions::default());
    let s = Scenario::in_registry("regdown", two_versions, &registry.host_port).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    registry.stop();
    s.apply_extension(json!({"version": "1.1.0"})).await;
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &registry.host_port).await;
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().status,
        "True",
        "a registry that is down is retried"
    );
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(ext.status.unwrap().install.unwrap().bundle.version, "1.0.0");
    assert!(
        s.operator_deployment().await.is_some(),
        "the installed version keeps running"
    );

    registry.restart();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn the_installed_extension_is_kept_while_catalogd_is_down() {
    let s = Scenario::new_exclusive("catalogddown", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // catalogd stops; a restarted controller has no catalog content cached, and an upgrade is
    // asked for: resolution cannot read the catalog.
    let stopped = components::stop_shared_catalogd(&s.cluster);
    components::restart_controller();
    s.apply_extension(json!({"version": "1.1.0"})).await;
    let expected = format!(
        "error walking catalogs: error getting package {:?} from catalog {:?}",
        s.package, s.catalog
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(ext.status.unwrap().install.unwrap().bundle.version, "1.0.0");
    assert!(s.operator_deployment().await.is_some(), "nothing is uninstalled");
    assert_eq!(record_version(&s).await, "1.0.0");

    drop(stopped);
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

async fn record_version(s: &Scenario) -> String {
    s.record().await["bundleVersion"].as_str().unwrap().to_string()
}
