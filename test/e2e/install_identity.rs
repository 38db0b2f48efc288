//! Extensions without `spec.serviceAccount` (upstream v1.11's YAML): blocked with guidance by
//! default, installed with the controller's own identity under `--install-identity controller`
//! (the controller-identity install manifest's RBAC), which says so when the field is set anyway.

use k8s_openapi::api::{core::v1::Secret, events::v1::Event};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use crate::{Scenario, components, support, two_versions};

/// A ClusterExtension in the shape of upstream v1.11's sample (config/samples there): namespace,
/// package and version; no serviceAccount.
fn upstream_sample(name: &str, namespace: &str, package: &str, version: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": namespace,
            "source": {"sourceType": "Catalog", "catalog": {"packageName": package, "version": version}}
        }
    })
}

/// The Progressing message of an extension named `name` that sets no serviceAccount.
fn blocked_message(name: &str) -> String {
    format!(
        "ClusterExtension \"{name}\" is not installed because it sets no spec.serviceAccount: apply \
         the installer that \"olmv1 rbac {name}\" prints and set spec.serviceAccount.name to it \
         (\"olmv1 install\" does both), or run the controller with --install-identity controller \
         to install with its own identity as upstream does"
    )
}

async fn revision_record_exists(client: &Client, extension: &str) -> bool {
    Api::<Secret>::namespaced(client.clone(), components::SYSTEM_NAMESPACE)
        .get_opt(&format!("{extension}-revision"))
        .await
        .unwrap()
        .is_some()
}

/// Deletes the extension and waits until it is gone (its finalizer ran).
async fn delete_and_wait_gone(client: &Client, name: &str) {
    let api = Api::<ClusterExtension>::all(client.clone());
    api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_for(
        &format!("ClusterExtension {name} to be deleted"),
        components::INSTALL_TIMEOUT,
        || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(ext)) => Err(format!("still there: {:?}", ext.metadata.finalizers)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn upstream_yaml_without_service_account_is_accepted_and_blocked_with_guidance() {
    let s = Scenario::without_installer("no-sa", two_versions).await;
    components::apply_extension(
        &s.client,
        upstream_sample(&s.extension, &s.namespace, &s.package, "1.0.0"),
    )
    .await;
    let ext =
        components::wait_progressing(&s.client, &s.extension, "Blocked", "sets no spec.serviceAccount").await;
    let progressing = components::condition(&ext, "Progressing").unwrap();
    assert_eq!(progressing.status, "False");
    assert_eq!(progressing.message, blocked_message(&s.extension));
    let installed = components::condition(&ext, "Installed").unwrap();
    assert_eq!(
        (installed.status.as_str(), installed.message.as_str()),
        ("False", "No bundle installed")
    );
    // Nothing applied, nothing recorded.
    assert!(s.operator_deployment().await.is_none());
    assert!(!revision_record_exists(&s.client, &s.extension).await);
    // Deleting it does not wait on an installer it never had.
    delete_and_wait_gone(&s.client, &s.extension).await;
}

#[tokio::test]
async fn clearing_the_service_account_of_an_installed_extension_blocks_it_and_uninstalls_nothing() {
    let s = Scenario::new("cleared-sa", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let deployment = s.operator_deployment().await.expect("the operator runs");

    // Cleared (allowed by the CRD): the same apply without the field.
    let mut body = components::extension(
        &s.extension,
        &s.namespace,
        &s.package,
        json!({"version": "1.0.0"}),
    );
    body["spec"].as_object_mut().unwrap().remove("serviceAccount");
    components::apply_extension(&s.client, body).await;
    let ext =
        components::wait_progressing(&s.client, &s.extension, "Blocked", "sets no spec.serviceAccount").await;
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().message,
        blocked_message(&s.extension)
    );
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
    let still = s.operator_deployment().await.expect("the operator still runs");
    assert_eq!(still.metadata.uid, deployment.metadata.uid);
    assert!(revision_record_exists(&s.client, &s.extension).await);

    // Deleting it does not hang: the garbage collector removes what it installed.
    delete_and_wait_gone(&s.client, &s.extension).await;
    support::wait_for(
        "the operator Deployment to be garbage collected",
        components::INSTALL_TIMEOUT,
        || async {
            match s.operator_deployment().await {
                None => Ok(()),
                Some(_) => Err("still there"),
            }
        },
    )
    .await;
}

/// The ServiceAccount the controller of this test runs as (`olmv1-<role>`).
const CONTROLLER_IDENTITY_ROLE: &str = "controller-identity";

#[tokio::test]
async fn controller_identity_installs_upstream_yaml_with_the_variants_rbac() {
    let s = Scenario::without_installer_exclusive("ctl-identity", two_versions).await;
    // The shared controller (default mode) would block the extension: this test's controller
    // runs alone, with the controller-identity manifest's RBAC and nothing else.
    let _stopped = components::stop_shared_controller(&s.cluster);
    components::apply_variant_controller_rbac("controller-identity", CONTROLLER_IDENTITY_ROLE);
    let controller = components::Replica::controller_as(
        CONTROLLER_IDENTITY_ROLE,
        "controller-identity",
        &["--install-identity", "controller"],
    );
    let audit = components::AuditLog::open();
    let before = audit.end();

    // The upstream sample shape, with the selector every e2e extension carries so that catalogs
    // other tests break on purpose take no part.
    let mut body = upstream_sample(&s.extension, &s.namespace, &s.package, "1.0.0");
    body["spec"]["source"]["catalog"]["selector"] =
        json!({"matchLabels": {components::PACKAGE_LABEL: s.package}});
    components::apply_extension(&s.client, body.clone()).await;
    let ext = components::wait_extension(&s.client, &s.extension, "Installed=True with 1.0.0", |ext| {
        components::condition(ext, "Installed").is_some_and(|c| c.status == "True")
            && components::installed_version(ext) == Some("1.0.0")
    })
    .await;
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().reason,
        "Succeeded"
    );
    assert!(s.operator_deployment().await.is_some(), "{}", controller.log());

    // Every write into the install namespace was made with the controller's own identity.
    let identity = format!(
        "system:serviceaccount:{}:olmv1-{CONTROLLER_IDENTITY_ROLE}",
        components::SYSTEM_NAMESPACE
    );
    let writes: Vec<_> = audit
        .writes_since(before)
        .into_values()
        .flatten()
        .filter(|w| w.namespace.as_deref() == Some(s.namespace.as_str()))
        .collect();
    assert!(
        writes
            .iter()
            .any(|w| w.resource == "deployments" && w.verb == "patch"),
        "the operator Deployment was applied: {writes:?}"
    );
    let others: Vec<_> = writes.iter().filter(|w| w.user != identity).collect();
    assert!(others.is_empty(), "writes by another identity: {others:?}");

    // spec.serviceAccount set anyway (to an account that does not even exist): ignored, and a
    // Warning Event says so.
    body["spec"]["serviceAccount"] = json!({"name": "never-created"});
    components::apply_extension(&s.client, body).await;
    let ext = components::wait_extension(&s.client, &s.extension, "the new generation reconciled", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| c.reason == "Succeeded")
    })
    .await;
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    let events = Api::<Event>::namespaced(s.client.clone(), "default");
    let warning = support::wait_for(
        "the ServiceAccountIgnored Event",
        components::INSTALL_TIMEOUT,
        || async {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("ServiceAccountIgnored")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(s.extension.as_str())
                })
                .ok_or_else(|| "no event yet".to_string())
        },
    )
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("\"never-created\" is ignored") && note.contains("--install-identity controller"),
        "{note}"
    );

    // Uninstall with the controller's identity too.
    let before = audit.end();
    delete_and_wait_gone(&s.client, &s.extension).await;
    let deletes: Vec<_> = audit
        .writes_since(before)
        .into_values()
        .flatten()
        .filter(|w| w.namespace.as_deref() == Some(s.namespace.as_str()) && w.verb == "delete")
        .collect();
    assert!(
        !deletes.is_empty() && deletes.iter().all(|w| w.user == identity),
        "{deletes:?}"
    );
    drop(controller);
}
