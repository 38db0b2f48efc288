//! Upstream's `vap-access-control` scenarios: a ValidatingAdmissionPolicy written against the
//! ClusterExtension CRD's field paths lets one group of users install only an approved package,
//! into an approved namespace, from approved catalogs, without SelfCertified upgrades or
//! disabled CRD upgrade safety. The API server enforces it; olmv1's CRD must have the paths.

use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};

use crate::{Scenario, components, support};

/// Upstream's catalog: one bundle, 1.0.0, in channel `stable`, the catalog labelled
/// `team=monitoring`.
async fn scenario(prefix: &str) -> Scenario {
    let s = Scenario::new(prefix, crate::one_version).await;
    Api::<ClusterCatalog>::all(s.client.clone())
        .patch(
            &s.catalog,
            &PatchParams::apply("e2e-vap"),
            &Patch::Apply(json!({
                "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
                "metadata": {"labels": {"team": "monitoring"}}
            })),
        )
        .await
        .unwrap();
    s
}

/// Upstream's ClusterExtension: version 1.0.0 of the package, catalogs selected by
/// `team=monitoring` (and, here, the test's own package label, so that no other test's catalog
/// takes part).
fn upstream_extension(s: &Scenario) -> Value {
    let mut body = components::extension(
        &s.extension,
        &s.namespace,
        &s.package,
        json!({"version": "1.0.0"}),
    );
    body["spec"]["source"]["catalog"]["selector"]["matchLabels"]["team"] = json!("monitoring");
    body
}

/// Lets group `group` edit ClusterExtensions, and binds a Deny policy to its requests with
/// `validation` (upstream's `expression` and `message`/`messageExpression`). Returns a client
/// acting as `user` in `group`, once a dry run of `violating` shows the policy in force.
async fn guard(s: &Scenario, user: &str, group: &str, validation: Value, violating: &Value) -> Client {
    let name = format!("ce-editor-{}", s.extension);
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(s.client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(s.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let policy_name = format!("ce-policy-{}", s.extension);
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": policy_name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["olm.operatorframework.io"], "apiVersions": ["v1"],
                "resources": ["clusterextensions"], "operations": ["CREATE", "UPDATE"]
            }]},
            "matchConditions": [{
                "name": "scoped-group",
                "expression": format!("request.userInfo.groups.exists(g, g == \"{group}\")")
            }],
            "validations": [validation]
        }
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicy>::all(s.client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let policy_binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": policy_name},
        "spec": {"policyName": policy_name, "validationActions": ["Deny"]}
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(s.client.clone())
        .create(&PostParams::default(), &policy_binding)
        .await
        .unwrap();

    let mut config = support::env().config().await;
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = Some(vec![group.into(), "system:authenticated".into()]);
    let client = Client::try_from(config).expect("impersonating client");
    // The API server enforces a new policy once its informers have it: a dry run shows when.
    let extensions = Api::<ClusterExtension>::all(client.clone());
    let violating: ClusterExtension = serde_json::from_value(violating.clone()).unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    support::wait_for(
        &format!("policy {policy_name} to be in force"),
        components::INSTALL_TIMEOUT,
        || async {
            match extensions.create(&dry_run, &violating).await {
                Err(kube::Error::Api(refused)) if refused.code == 422 || refused.code == 403 => Ok(()),
                Err(e) => Err(e.to_string()),
                Ok(_) => Err("a violating dry run is still allowed".to_string()),
            }
        },
    )
    .await;
    client
}

/// Creates `body` as `client`'s user: refused with a message containing `text`, and nothing
/// is created.
async fn assert_denied(s: &Scenario, client: &Client, body: &Value, text: &str) {
    let extension: ClusterExtension = serde_json::from_value(body.clone()).unwrap();
    let refused = Api::<ClusterExtension>::all(client.clone())
        .create(&PostParams::default(), &extension)
        .await
        .expect_err("the policy denies the request");
    assert!(refused.to_string().contains(text), "{refused}");
    assert!(
        Api::<ClusterExtension>::all(s.client.clone())
            .get_opt(&s.extension)
            .await
            .unwrap()
            .is_none(),
        "nothing is created"
    );
}

fn package_policy(s: &Scenario) -> Value {
    json!({
        "expression": format!("object.spec.source.catalog.packageName == \"{}\"", s.package),
        "messageExpression": format!("\"package not allowed; permitted: {}\"", s.package)
    })
}

fn wrong_package(s: &Scenario) -> Value {
    let mut body = upstream_extension(s);
    body["spec"]["source"]["catalog"]["packageName"] = json!("grafana");
    body["spec"]["source"]["catalog"]["version"] = json!("10.0.0");
    body
}

#[tokio::test]
async fn vap_allows_the_approved_package_namespace_and_catalog_selector() {
    let s = scenario("vap-allowed").await;
    let alice = guard(
        &s,
        "alice",
        &format!("{}-allowed", s.package),
        package_policy(&s),
        &wrong_package(&s),
    )
    .await;
    let extension: ClusterExtension = serde_json::from_value(upstream_extension(&s)).unwrap();
    Api::<ClusterExtension>::all(alice)
        .create(&PostParams::default(), &extension)
        .await
        .expect("the policy allows the approved package");
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
}

#[tokio::test]
async fn vap_denies_a_package_not_approved() {
    let s = scenario("vap-package").await;
    let body = wrong_package(&s);
    let bob = guard(
        &s,
        "bob",
        &format!("{}-package", s.package),
        package_policy(&s),
        &body,
    )
    .await;
    assert_denied(&s, &bob, &body, "package not allowed").await;
}

#[tokio::test]
async fn vap_denies_a_namespace_not_approved() {
    let s = scenario("vap-namespace").await;
    let mut body = upstream_extension(&s);
    body["spec"]["namespace"] = json!("default");
    let policy = json!({
        "expression": "object.spec.namespace.startsWith(\"ns-\")",
        "messageExpression": "\"namespace must match the test namespace convention (ns-*)\""
    });
    let carol = guard(&s, "carol", &format!("{}-namespace", s.package), policy, &body).await;
    assert_denied(
        &s,
        &carol,
        &body,
        "namespace must match the test namespace convention",
    )
    .await;
}

#[tokio::test]
async fn vap_denies_a_missing_catalog_selector() {
    let s = scenario("vap-selector").await;
    let mut body = upstream_extension(&s);
    body["spec"]["source"]["catalog"]
        .as_object_mut()
        .unwrap()
        .remove("selector");
    let policy = json!({
        "expression": "has(object.spec.source.catalog) && has(object.spec.source.catalog.selector) && has(object.spec.source.catalog.selector.matchLabels) && \"team\" in object.spec.source.catalog.selector.matchLabels && object.spec.source.catalog.selector.matchLabels[\"team\"] == \"monitoring\"",
        "messageExpression": "\"catalog selector must include team=monitoring\""
    });
    let dave = guard(&s, "dave", &format!("{}-selector", s.package), policy, &body).await;
    assert_denied(&s, &dave, &body, "catalog selector must include team=monitoring").await;
}

#[tokio::test]
async fn vap_denies_the_self_certified_upgrade_constraint_policy() {
    let s = scenario("vap-upgrade").await;
    let mut body = upstream_extension(&s);
    body["spec"]["source"]["catalog"]["upgradeConstraintPolicy"] = json!("SelfCertified");
    let policy = json!({
        "expression": "!has(object.spec.source.catalog.upgradeConstraintPolicy) || object.spec.source.catalog.upgradeConstraintPolicy != \"SelfCertified\"",
        "message": "upgradeConstraintPolicy SelfCertified is not allowed"
    });
    let eve = guard(&s, "eve", &format!("{}-upgrade", s.package), policy, &body).await;
    assert_denied(&s, &eve, &body, "SelfCertified is not allowed").await;
}

#[tokio::test]
async fn vap_denies_disabling_crd_upgrade_safety() {
    let s = scenario("vap-crd").await;
    let mut body = upstream_extension(&s);
    body["spec"]["install"] = json!({"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}});
    let policy = json!({
        "expression": "!has(object.spec.install) || !has(object.spec.install.preflight) || !has(object.spec.install.preflight.crdUpgradeSafety) || object.spec.install.preflight.crdUpgradeSafety.enforcement != \"None\"",
        "message": "CRD upgrade safety checks may not be disabled"
    });
    let frank = guard(&s, "frank", &format!("{}-crd", s.package), policy, &body).await;
    assert_denied(&s, &frank, &body, "CRD upgrade safety checks may not be disabled").await;
}
