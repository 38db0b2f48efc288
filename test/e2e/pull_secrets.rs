//! Registry credentials from the global pull secret, against hack/local-up.sh's authenticating
//! registry (htpasswd): the catalog and bundle images exist only there. Both components run with
//! `--global-pull-secret` and see the Secret come, rotate and go without a restart.

use std::collections::BTreeMap;

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::ClusterCatalog;
use serde_json::json;

use crate::{
    components::{self, GLOBAL_PULL_SECRET, INSTALL_TIMEOUT, PACKAGE_LABEL, SYSTEM_NAMESPACE},
    fixtures, support, two_versions,
};

/// Creates or replaces the global pull secret with `user:password` for `registry`.
async fn set_global_pull_secret(secrets: &Api<Secret>, registry: &str, user: &str, password: &str) {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let config = json!({"auths": {registry: {"auth": auth}}}).to_string();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(GLOBAL_PULL_SECRET.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(config.into_bytes()),
        )])),
        ..Default::default()
    };
    secrets
        .patch(
            GLOBAL_PULL_SECRET,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("apply the global pull secret");
}

async fn delete_global_pull_secret(secrets: &Api<Secret>) {
    match secrets.delete(GLOBAL_PULL_SECRET, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete the global pull secret: {e}"),
    }
}

/// Waits until the catalog's Progressing message contains every one of `parts`.
async fn wait_catalog_message(client: &kube::Client, name: &str, parts: &[&str]) -> String {
    let api = Api::<ClusterCatalog>::all(client.clone());
    support::wait_for(
        &format!("ClusterCatalog {name} reporting {parts:?}"),
        INSTALL_TIMEOUT,
        || async {
            let catalog = api.get(name).await.map_err(|e| e.to_string())?;
            let status = catalog.status.unwrap_or_default();
            let message = status
                .conditions
                .iter()
                .find(|c| c.type_ == "Progressing")
                .map(|c| c.message.clone())
                .unwrap_or_default();
            if parts.iter().all(|p| message.contains(p)) {
                Ok(message)
            } else {
                Err(message)
            }
        },
    )
    .await
}

#[tokio::test]
async fn the_global_pull_secret_is_watched_and_a_refused_pull_never_uninstalls() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let (registry, user, password) = support::auth_registry();
    let secrets = Api::<Secret>::namespaced(client.clone(), SYSTEM_NAMESPACE);
    delete_global_pull_secret(&secrets).await;

    let package = support::fresh_name("private");
    let catalog = format!("{package}-catalog");
    let repository = format!("e2e/{catalog}");
    let image = fixtures::publish_catalog(&registry, &repository, "v1", &two_versions(&package)).await;
    // A tag polled every unit (one second in the tests): rotations are seen by the poll too.
    let body = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": catalog, "labels": {PACKAGE_LABEL: package}},
        "spec": {"source": {"type": "Image", "image": {"ref": image, "pollIntervalMinutes": 1}}}
    });
    Api::<ClusterCatalog>::all(client.clone())
        .patch(&catalog, &PatchParams::apply("e2e").force(), &Patch::Apply(&body))
        .await
        .expect("apply the ClusterCatalog");

    // No Secret: the catalog reports the 401, naming the registry and the repository.
    let refused = wait_catalog_message(
        &client,
        &catalog,
        &["HTTP 401", &registry, &repository, "none are configured"],
    )
    .await;
    assert!(!refused.contains(&password), "{refused}");

    // The Secret appears: the catalog converges with no restart.
    set_global_pull_secret(&secrets, &registry, &user, &password).await;
    components::wait_catalog_serving(&client, &catalog).await;

    // Rotated to a wrong password: a new extension's bundle pull is refused with the 401, and the
    // catalog keeps serving its last good content.
    set_global_pull_secret(&secrets, &registry, &user, "not-the-password").await;
    let namespace = components::namespace_with_admin_installer(&client, &package).await;
    let extension = format!("{package}-ext");
    let apply =
        |version: &str| components::extension(&extension, &namespace, &package, json!({"version": version}));
    components::apply_extension(&client, apply("1.0.0")).await;
    let bundle_repository = format!("e2e/{package}-bundle");
    let ext = components::wait_extension(&client, &extension, "the bundle pull refused", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| {
            c.message.contains("HTTP 401")
                && c.message.contains(&registry)
                && c.message.contains(&bundle_repository)
        })
    })
    .await;
    let message = &components::condition(&ext, "Progressing").unwrap().message;
    assert!(message.contains("refused the credentials"), "{message}");
    assert!(
        !message.contains("not-the-password") && !message.contains(&password),
        "{message}"
    );
    let catalog_now = wait_catalog_message(&client, &catalog, &["HTTP 401"]).await;
    assert!(!catalog_now.contains("not-the-password"), "{catalog_now}");
    let status = Api::<ClusterCatalog>::all(client.clone())
        .get(&catalog)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Serving" && c.status == "True"),
        "the last good content is still served: {:?}",
        status.conditions
    );

    // The right password again: the extension installs, no restart.
    set_global_pull_secret(&secrets, &registry, &user, &password).await;
    components::wait_installed(&client, &extension, "1.0.0").await;

    // The Secret is deleted, then comes back with a wrong password: the upgrade to 1.1.0 cannot
    // be pulled each time, and 1.0.0 keeps running.
    delete_global_pull_secret(&secrets).await;
    components::apply_extension(&client, apply("1.1.0")).await;
    components::wait_progressing(&client, &extension, "Retrying", "none are configured (HTTP 401)").await;
    set_global_pull_secret(&secrets, &registry, &user, "still-wrong").await;
    let ext = components::wait_progressing(
        &client,
        &extension,
        "Retrying",
        "refused the credentials (HTTP 401",
    )
    .await;
    let installed = components::condition(&ext, "Installed").expect("Installed condition");
    assert_eq!(installed.status, "True", "{installed:?}");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &namespace)
        .get_opt(&fixtures::deployment_name(&package))
        .await
        .unwrap();
    assert!(deployment.is_some(), "the installed operator keeps running");

    // Fixed once more: the upgrade goes through.
    set_global_pull_secret(&secrets, &registry, &user, &password).await;
    components::wait_installed(&client, &extension, "1.1.0").await;
    delete_global_pull_secret(&secrets).await;
}
