//! A real operator from the shared catalogs, rebuilt from its catalog entries and published to the
//! local registry: installed at one version, then upgraded along the catalog's real edge.

use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::Api;
use serde_json::json;

use crate::{components, fixtures, support};

const CATALOG: &str = "../shared/catalogs/community-operators-v4.16";
const PACKAGE: &str = "trident-operator";

#[tokio::test]
async fn a_real_operator_installs_and_upgrades_along_its_catalog_edge() {
    let _cluster = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let _trident = crate::migrate_real::TRIDENT.lock().await;
    let catalog_dir = support::repo_root().join(CATALOG);
    let bundles = ["trident-operator.v26.2.0", "trident-operator.v26.2.1"];
    let image =
        fixtures::publish_real_package(support::registry(), &catalog_dir, PACKAGE, &bundles[..1], "v1").await;
    let catalog = support::fresh_name("real");
    components::apply_catalog(&client, &catalog, &image, 0, PACKAGE).await;
    components::wait_catalog_serving(&client, &catalog).await;
    let namespace = components::namespace_with_admin_installer(&client, "trident").await;
    let name = support::fresh_name("trident");
    components::apply_extension(
        &client,
        components::extension(&name, &namespace, PACKAGE, json!({"channels": ["stable"]})),
    )
    .await;
    components::wait_installed(&client, &name, "26.2.0").await;

    // The operator's own objects, as its CSV describes them.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(deployments.items.len(), 1, "the CSV has one deployment");
    let deployment = &deployments.items[0];
    assert_eq!(deployment.metadata.name.as_deref(), Some("trident-operator"));
    let annotations = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .clone()
        .unwrap();
    assert_eq!(annotations["olm.targetNamespaces"], "");
    assert_eq!(annotations["olm.operatorNamespace"], namespace);
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get("tridentorchestrators.trident.netapp.io")
        .await
        .unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap()["olm.operatorframework.io/owner-name"],
        name
    );

    // The next bundle, which replaces 26.2.0 in the real catalog, is published: the upgrade follows.
    let image =
        fixtures::publish_real_package(support::registry(), &catalog_dir, PACKAGE, &bundles, "v2").await;
    components::apply_catalog(&client, &catalog, &image, 0, PACKAGE).await;
    components::wait_catalog_serving(&client, &catalog).await;
    components::wait_installed(&client, &name, "26.2.1").await;
    crate::migrate_real::remove_trident(&client, &name, &catalog).await;
}
