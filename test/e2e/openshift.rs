//! What OpenShift's admission enforces, on the local control plane: hack/local-up.sh enables the
//! `OwnerReferencesPermissionEnforcement` plugin, so setting `blockOwnerDeletion` on an owner
//! reference to a ClusterExtension needs `update` on `clusterextensions/finalizers`; the permission
//! preflight reports that rule with every other missing one, before anything is applied.

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ConfigMap,
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::json;

use crate::{Scenario, components, fixtures, support, two_versions};

async fn apply_cluster_role(client: &Client, name: &str, rules: serde_json::Value) {
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules
    }))
    .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&role))
        .await
        .unwrap_or_else(|e| panic!("apply ClusterRole {name}: {e}"));
}

async fn bind_installer(client: &Client, name: &str, namespace: &str) {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": namespace}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&binding))
        .await
        .unwrap_or_else(|e| panic!("apply ClusterRoleBinding {name}: {e}"));
}

/// An admin client impersonating `<namespace>/installer`.
async fn as_installer(namespace: &str) -> Client {
    let mut config = support::env().config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:installer"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    Client::try_from(config).expect("impersonating client")
}

/// A ConfigMap owned by the extension with `blockOwnerDeletion`, as the applier writes objects.
fn owned_config_map(ext: &ClusterExtension) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owner-reference-probe", "ownerReferences": [{
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "name": ext.name_any(), "uid": ext.uid().unwrap(),
            "controller": true, "blockOwnerDeletion": true
        }]}
    }))
    .unwrap()
}

#[tokio::test]
async fn owner_reference_enforcement_needs_update_on_the_extension_finalizers() {
    let s = Scenario::without_installer("ownerref", two_versions).await;
    let (client, namespace) = (s.client.clone(), s.namespace.clone());
    components::create_service_account(&client, &namespace, "installer").await;
    // Everything on every kind the bundle ships (so it holds what the bundle's roles grant), its
    // OperatorCondition included, and nothing of olm.operatorframework.io.
    let role = format!("{namespace}-installer");
    let groups = json!([
        "",
        "apps",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "operators.coreos.com",
        fixtures::crd_group(&s.package)
    ]);
    apply_cluster_role(
        &client,
        &role,
        json!([{"apiGroups": groups, "resources": ["*"], "verbs": ["*"]}]),
    )
    .await;
    bind_installer(&client, &role, &namespace).await;

    s.apply_extension(json!({"version": "1.0.0"})).await;
    let expected = format!(
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[olm.operatorframework.io] Resources:[clusterextensions/finalizers] ResourceNames:[{}] Verbs:[update]",
        s.extension
    );
    let ext = components::wait_extension(
        &client,
        &s.extension,
        "the preflight naming the finalizers rule",
        |ext| {
            components::condition(ext, "Progressing")
                .is_some_and(|c| c.message.contains("clusterextensions/finalizers"))
        },
    )
    .await;
    let message = &components::condition(&ext, "Progressing").unwrap().message;
    assert!(
        message.ends_with(&expected),
        "only the finalizers rule is missing: {message}"
    );
    assert!(s.operator_deployment().await.is_none(), "nothing applied");

    // The admission plugin really runs: the same owner reference written directly is refused.
    let installer = as_installer(&namespace).await;
    let probes = Api::<ConfigMap>::namespaced(installer, &namespace);
    let refused = probes
        .create(&PostParams::default(), &owned_config_map(&ext))
        .await
        .expect_err("blockOwnerDeletion without update on the owner's finalizers");
    assert!(
        refused.to_string().contains("cannot set blockOwnerDeletion"),
        "{refused}"
    );

    // With the rule, named by the extension as upstream documents it, the install succeeds.
    apply_cluster_role(
        &client,
        &role,
        json!([
            {"apiGroups": groups, "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions/finalizers"],
             "verbs": ["update"], "resourceNames": [s.extension]}
        ]),
    )
    .await;
    components::wait_installed(&client, &s.extension, "1.0.0").await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get(&fixtures::deployment_name(&s.package))
        .await
        .expect("the operator Deployment is applied");
    let owner = &deployment.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.block_owner_deletion),
        ("ClusterExtension", Some(true))
    );
}
