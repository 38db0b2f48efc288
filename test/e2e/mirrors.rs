//! Registry mirrors (containers-registries.conf(5), upstream's `@mirrored-registry` scenario):
//! catalog and bundle images exist only at a mirror, under a name that resolves nowhere; a
//! blocked registry is refused; a digest-only mirror serves digests and never tags. Both
//! components read the registries.conf `components.rs` writes (`--registries-conf`).

use kube::Api;
use olmv1_api::v1::ClusterCatalog;
use serde_json::json;

use crate::{
    components::{self, BLOCKED_REGISTRY, DIGEST_ONLY_REGISTRY, INSTALL_TIMEOUT, MIRRORED_REGISTRY},
    fixtures, support, two_versions,
};

/// The catalog's Progressing condition once its message contains every one of `parts`.
async fn wait_catalog_progressing(
    client: &kube::Client,
    name: &str,
    parts: &[&str],
) -> (String, String, String) {
    let api = Api::<ClusterCatalog>::all(client.clone());
    support::wait_for(
        &format!("ClusterCatalog {name} Progressing with {parts:?}"),
        INSTALL_TIMEOUT,
        || async {
            let catalog = api.get(name).await.map_err(|e| e.to_string())?;
            let conditions = catalog.status.unwrap_or_default().conditions;
            match conditions.iter().find(|c| c.type_ == "Progressing") {
                Some(c) if parts.iter().all(|p| c.message.contains(p)) => {
                    Ok((c.status.clone(), c.reason.clone(), c.message.clone()))
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

async fn resolved_ref(client: &kube::Client, name: &str) -> String {
    Api::<ClusterCatalog>::all(client.clone())
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.resolved_source)
        .map(|r| r.image.reference)
        .expect("a resolved source")
}

#[tokio::test]
async fn catalog_and_bundle_images_at_a_mirror_only_install_under_their_own_name() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let package = support::fresh_name("mirrored");
    let catalog = format!("{package}-catalog");
    let mirror = components::mirror_location();

    // Everything is pushed under the mirror; the catalog names its bundles under a registry
    // that resolves nowhere, and the ClusterCatalog names the catalog there too.
    let image = fixtures::publish_catalog_named(
        &mirror,
        MIRRORED_REGISTRY,
        &format!("e2e/{catalog}"),
        "v1",
        &two_versions(&package),
    )
    .await;
    assert!(image.starts_with(&format!("{MIRRORED_REGISTRY}/")), "{image}");
    components::apply_catalog(&client, &catalog, &image, 0, &package).await;
    components::wait_catalog_serving(&client, &catalog).await;
    let resolved = resolved_ref(&client, &catalog).await;
    assert!(
        resolved.starts_with(&format!("{MIRRORED_REGISTRY}/e2e/{catalog}@sha256:")),
        "the resolved source keeps the catalog's own name: {resolved}"
    );

    let namespace = components::namespace_with_admin_installer(&client, &package).await;
    let extension = format!("{package}-ext");
    components::apply_extension(
        &client,
        components::extension(&extension, &namespace, &package, json!({"version": "1.0.0"})),
    )
    .await;
    components::wait_installed(&client, &extension, "1.0.0").await;
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &namespace)
        .get_opt(&fixtures::deployment_name(&package))
        .await
        .unwrap();
    assert!(deployment.is_some(), "the operator runs");
}

#[tokio::test]
async fn a_blocked_registry_is_refused_naming_the_file() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let package = support::fresh_name("blocked");
    let catalog = format!("{package}-catalog");
    let image = format!("{BLOCKED_REGISTRY}/e2e/{catalog}:v1");
    components::apply_catalog(&client, &catalog, &image, 0, &package).await;
    let (status, reason, message) = wait_catalog_progressing(
        &client,
        &catalog,
        &[&format!("registry {BLOCKED_REGISTRY} is blocked in ")],
    )
    .await;
    assert_eq!(
        message,
        format!(
            "source catalog content: image {image}: registry {BLOCKED_REGISTRY} is blocked in {}",
            components::registries_conf_path()
        )
    );
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Blocked"),
        "{message}"
    );
}

#[tokio::test]
async fn a_digest_only_mirror_serves_digests_and_never_tags() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let package = support::fresh_name("digestonly");
    let catalog = format!("{package}-catalog");
    let mirror = components::mirror_location();
    let by_tag = fixtures::publish_catalog_named(
        &mirror,
        DIGEST_ONLY_REGISTRY,
        &format!("e2e/{catalog}"),
        "v1",
        &two_versions(&package),
    )
    .await;

    // By tag: only the primary is tried, and it does not exist.
    components::apply_catalog(&client, &catalog, &by_tag, 0, &package).await;
    let (_, _, message) = wait_catalog_progressing(&client, &catalog, &[DIGEST_ONLY_REGISTRY]).await;
    assert!(
        !message.contains(&mirror),
        "a tag never goes to a digest-only mirror: {message}"
    );

    // By digest: the mirror serves it, and the bundles (digests too) install through it.
    let client_config = olmv1::image::RegistryClient::new(olmv1::image::RegistryConfig::default()).unwrap();
    let at_mirror = olmv1::image::ImageReference::parse(&format!("{mirror}/e2e/{catalog}:v1")).unwrap();
    let digest = olmv1::image::resolve_digest(&client_config, &at_mirror)
        .await
        .expect("the catalog's digest at the mirror");
    let by_digest = format!("{DIGEST_ONLY_REGISTRY}/e2e/{catalog}@{digest}");
    components::apply_catalog(&client, &catalog, &by_digest, 0, &package).await;
    components::wait_catalog_serving(&client, &catalog).await;
    assert_eq!(resolved_ref(&client, &catalog).await, by_digest);

    let namespace = components::namespace_with_admin_installer(&client, &package).await;
    let extension = format!("{package}-ext");
    components::apply_extension(
        &client,
        components::extension(&extension, &namespace, &package, json!({"version": "1.1.0"})),
    )
    .await;
    components::wait_installed(&client, &extension, "1.1.0").await;
}
