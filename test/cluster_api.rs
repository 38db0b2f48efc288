//! The API against a real kube-apiserver: the CRDs install and print upstream's columns, the
//! samples apply, the CEL/OpenAPI rules reject what upstream rejects with upstream's messages,
//! defaults are filled in, a ServiceAccount's identity is enforced both through TokenRequest and
//! impersonation, and the local registry round-trips an image pushed by `olmv1 image push`.
//! Also checks the local control plane itself (versions, Deployments become Available,
//! namespaces delete) and the harness's extra registries.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::config::AuthInfo;
use olmv1::apply::identity::ServiceAccountClients;
use olmv1::leader::Leadership;
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use support::{DEFAULT_TIMEOUT, kubectl, wait_for};

// ---------------------------------------------------------------------------------------------
// helpers

fn extensions(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterExtension>(&()))
}

fn catalogs(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterCatalog>(&()))
}

/// A valid ClusterExtension named NAME (the documentation's argocd example).
fn extension_json(name: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": "argocd",
            "serviceAccount": {"name": "argocd-installer"},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": "argocd-operator"}}
        }
    })
}

/// A valid ClusterCatalog named NAME, with image REF.
fn catalog_json(name: &str, image_ref: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image_ref}}}
    })
}

fn dynamic(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("a DynamicObject")
}

/// Creates OBJ; returns the API server's message when it refuses.
async fn create(api: &Api<DynamicObject>, obj: Value) -> Result<DynamicObject, String> {
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) => status.message,
            other => format!("not an API refusal: {other}"),
        })
}

/// Asserts that creating OBJ is refused with a message containing every one of EXPECTED.
async fn assert_create_refused(api: &Api<DynamicObject>, case: &str, obj: Value, expected: &[&str]) {
    match create(api, obj).await {
        Ok(created) => panic!("{case}: the API server accepted {:?}", created.metadata.name),
        Err(message) => {
            for part in expected {
                assert!(
                    message.contains(part),
                    "{case}: expected {part:?} in the refusal, got: {message}"
                );
            }
        }
    }
}

/// Sets the field at POINTER (`/a/b/c`), creating missing objects on the way.
fn set(value: &mut Value, pointer: &str, new: Value) {
    let mut at = value;
    for key in pointer.trim_start_matches('/').split('/') {
        at = at
            .as_object_mut()
            .unwrap_or_else(|| panic!("{pointer}: {key} is not inside an object"))
            .entry(key)
            .or_insert_with(|| json!({}));
    }
    *at = new;
}

/// kubectl's table output as rows of cells (cells are separated by 2+ spaces).
fn table(output: &str) -> Vec<Vec<String>> {
    let split = regex::Regex::new(r"\s{2,}").expect("regex");
    output
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| split.split(l.trim()).map(str::to_string).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// the control plane itself

#[tokio::test]
async fn control_plane_runs_the_pinned_versions() {
    let env = support::env();
    let client = env.client().await;
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.git_version, env.kube_version);
    // The pin is hack/versions.env's KUBE_VERSION (hack/build-tools.sh builds that version).
    let versions =
        std::fs::read_to_string(support::repo_root().join("hack/versions.env")).expect("hack/versions.env");
    let pinned = versions
        .lines()
        .find_map(|l| l.strip_prefix("KUBE_VERSION="))
        .expect("KUBE_VERSION in hack/versions.env");
    assert_eq!(env.kube_version, pinned);
    assert!(env.etcd_version.starts_with("v3.6."), "etcd {}", env.etcd_version);
    let kubectl_version = kubectl(&["version", "--client", "-o", "json"]).ok();
    let kubectl_version: Value = serde_json::from_str(&kubectl_version).expect("kubectl version JSON");
    assert_eq!(
        kubectl_version["clientVersion"]["gitVersion"],
        json!(env.kube_version)
    );
}

#[tokio::test]
async fn deployments_become_available_and_namespaces_delete() {
    let client = support::client().await;
    let ns = support::fresh_namespace(&client, "deploy").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    // kube-controller-manager makes the ReplicaSet and Pods, kube-scheduler binds them to the kwok
    // node, kwok marks them Running and Ready.
    wait_for("deployment web to become Available", DEFAULT_TIMEOUT, || async {
        let d = deployments.get("web").await.map_err(|e| e.to_string())?;
        let status = d.status.unwrap_or_default();
        let available = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True");
        if available && status.ready_replicas == Some(2) {
            Ok(())
        } else {
            Err(format!("ready replicas {:?}", status.ready_replicas))
        }
    })
    .await;
    // The namespace controller empties and removes the namespace.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_for("the namespace to be deleted", DEFAULT_TIMEOUT, || async {
        match namespaces.get_opt(&ns).await {
            Ok(None) => Ok(()),
            Ok(Some(n)) => Err(format!("phase {:?}", n.status.and_then(|s| s.phase))),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// CRDs

#[tokio::test]
async fn crds_are_installed_and_established() {
    let client = support::client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for expected in olmv1_api::crd::crds() {
        let name = expected.metadata.name.clone().expect("CRD name");
        let crd = crds
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("CRD {name} is not installed: {e}"));
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"),
            "CRD {name} is not Established: {conditions:?}"
        );
        assert_eq!(crd.spec.scope, "Cluster", "{name}");
        assert_eq!(crd.spec.group, "olm.operatorframework.io");
    }
    // Both resources are served: listing works through discovery.
    extensions(&client)
        .list(&ListParams::default())
        .await
        .expect("list clusterextensions");
    catalogs(&client)
        .list(&ListParams::default())
        .await
        .expect("list clustercatalogs");
}

#[tokio::test]
async fn kubectl_prints_upstream_columns_for_clusterextensions() {
    let client = support::client().await;
    let name = support::fresh_name("columns");
    create(&extensions(&client), extension_json(&name))
        .await
        .expect("create");
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "install": {"bundle": {"name": "argocd-operator.v0.6.0", "version": "0.6.0"}},
        "conditions": [
            {"type": "Installed", "status": "True", "reason": "Succeeded", "message": "Installed bundle x successfully",
             "lastTransitionTime": now, "observedGeneration": 1},
            {"type": "Progressing", "status": "False", "reason": "Succeeded", "message": "desired state reached",
             "lastTransitionTime": now, "observedGeneration": 1}
        ]
    }});
    extensions(&client)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");
    let rows = table(&kubectl(&["get", "clusterextensions", &name]).ok());
    assert_eq!(
        rows[0],
        [
            "NAME",
            "INSTALLED BUNDLE",
            "VERSION",
            "INSTALLED",
            "PROGRESSING",
            "AGE"
        ]
    );
    assert_eq!(
        rows[1][..5],
        [name.as_str(), "argocd-operator.v0.6.0", "0.6.0", "True", "False"]
    );
    extensions(&client)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test]
async fn kubectl_prints_upstream_columns_for_clustercatalogs() {
    let client = support::client().await;
    let name = support::fresh_name("columns");
    create(
        &catalogs(&client),
        catalog_json(&name, "quay.io/operatorhubio/catalog:latest"),
    )
    .await
    .expect("create");
    let now = jiff::Timestamp::now().to_string();
    let digest_ref = format!("quay.io/operatorhubio/catalog@sha256:{}", "a".repeat(64));
    let status = json!({"status": {
        "lastUnpacked": now,
        "resolvedSource": {"type": "Image", "image": {"ref": digest_ref}},
        "urls": {"base": format!("https://catalogd.example/catalogs/{name}")},
        "conditions": [
            {"type": "Serving", "status": "True", "reason": "Available", "message": "Serving desired content from resolved source",
             "lastTransitionTime": now, "observedGeneration": 1}
        ]
    }});
    catalogs(&client)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");
    let rows = table(&kubectl(&["get", "clustercatalogs", &name]).ok());
    assert_eq!(rows[0], ["NAME", "LASTUNPACKED", "SERVING", "AGE"]);
    assert_eq!(rows[1][0], name);
    assert_eq!(rows[1][2], "True");
    // LastUnpacked is a date column: kubectl prints it as an age ("0s", "3s", ...).
    assert!(
        rows[1][1].ends_with('s') || rows[1][1].ends_with('m'),
        "LastUnpacked {:?}",
        rows[1][1]
    );
    catalogs(&client)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

// ---------------------------------------------------------------------------------------------
// samples

#[test]
fn samples_apply_unchanged() {
    let samples = support::repo_root().join("config/samples");
    let mut files: Vec<_> = std::fs::read_dir(&samples)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", samples.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let kinds: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read sample"))
        .collect();
    assert!(
        kinds.iter().any(|y| y.contains("kind: ClusterExtension")),
        "no ClusterExtension sample in {files:?}"
    );
    assert!(
        kinds.iter().any(|y| y.contains("kind: ClusterCatalog")),
        "no ClusterCatalog sample in {files:?}"
    );
    for file in &files {
        let path = file.to_str().expect("utf-8 path");
        // Server-side dry run: the full validation (schema, CEL, defaults) without leaving objects
        // with the samples' fixed names in the shared environment.
        let out = kubectl(&["apply", "--dry-run=server", "-f", path]).ok();
        assert!(out.contains("(server dry run)"), "{path}: {out}");
    }
}

// ---------------------------------------------------------------------------------------------
// rejections with upstream's messages

const PACKAGE_NAME_MESSAGE: &str = "packageName must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters";

#[tokio::test]
async fn clusterextension_invalid_specs_are_refused_with_upstream_messages() {
    let client = support::client().await;
    let api = extensions(&client);

    // The base object is valid: each refusal below comes from the one field changed.
    let base_name = support::fresh_name("valid");
    create(&api, extension_json(&base_name))
        .await
        .expect("the valid base is accepted");
    api.delete(&base_name, &DeleteParams::default())
        .await
        .expect("delete");
    // upstream's bounds of progressDeadlineMinutes are accepted.
    for minutes in [10, 720] {
        let name = support::fresh_name("deadline");
        let mut obj = extension_json(&name);
        set(&mut obj, "/spec/progressDeadlineMinutes", json!(minutes));
        create(&api, obj)
            .await
            .unwrap_or_else(|e| panic!("progressDeadlineMinutes {minutes} is accepted: {e}"));
        api.delete(&name, &DeleteParams::default()).await.expect("delete");
    }

    let version = "/spec/source/catalog/version";
    let cases: Vec<(&str, &str, Value, Vec<&str>)> = vec![
        (
            "word version",
            version,
            json!("foobar"),
            vec!["spec.source.catalog.version", "invalid version expression"],
        ),
        (
            "hyphen range",
            version,
            json!("1.0.0 - 2.0.0"),
            vec!["spec.source.catalog.version", "invalid version expression"],
        ),
        (
            "capital letters in packageName",
            "/spec/source/catalog/packageName",
            json!("ArgoCD-Operator"),
            vec!["spec.source.catalog.packageName", PACKAGE_NAME_MESSAGE],
        ),
        (
            "channel not a DNS-1123 subdomain",
            "/spec/source/catalog/channels",
            json!(["stable", "Fast_Track"]),
            vec![
                "spec.source.catalog.channels[1]",
                "channels entries must be valid DNS1123 subdomains",
            ],
        ),
        (
            "257 channels",
            "/spec/source/catalog/channels",
            json!((0..257).map(|i| format!("channel-{i}")).collect::<Vec<_>>()),
            vec![
                "spec.source.catalog.channels",
                "Too many: 257: must have at most 256 items",
            ],
        ),
        (
            "Catalog source without catalog",
            "/spec/source",
            json!({"sourceType": "Catalog"}),
            vec![
                "spec.source",
                "catalog is required when sourceType is Catalog, and forbidden otherwise",
            ],
        ),
        (
            "unknown upgradeConstraintPolicy",
            "/spec/source/catalog/upgradeConstraintPolicy",
            json!("Sometimes"),
            vec![
                "spec.source.catalog.upgradeConstraintPolicy",
                r#"Unsupported value: "Sometimes": supported values: "CatalogProvided", "SelfCertified""#,
            ],
        ),
        (
            "progressDeadlineMinutes under upstream's minimum",
            "/spec/progressDeadlineMinutes",
            json!(9),
            vec![
                "spec.progressDeadlineMinutes",
                "should be greater than or equal to 10",
            ],
        ),
        (
            "progressDeadlineMinutes over upstream's maximum",
            "/spec/progressDeadlineMinutes",
            json!(721),
            vec![
                "spec.progressDeadlineMinutes",
                "should be less than or equal to 720",
            ],
        ),
    ];
    for (case, pointer, value, expected) in cases {
        let mut obj = extension_json(&support::fresh_name("invalid"));
        set(&mut obj, pointer, value);
        assert_create_refused(&api, case, obj, &expected).await;
    }
}

#[tokio::test]
async fn clusterextension_namespace_and_package_are_immutable() {
    let client = support::client().await;
    let api = extensions(&client);
    let name = support::fresh_name("immutable");
    create(&api, extension_json(&name)).await.expect("create");

    for (field, patch, expected) in [
        (
            "spec.namespace",
            json!({"spec": {"namespace": "elsewhere"}}),
            "namespace is immutable",
        ),
        (
            "spec.source.catalog.packageName",
            json!({"spec": {"source": {"catalog": {"packageName": "other-operator"}}}}),
            "packageName is immutable",
        ),
    ] {
        let err = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect_err(&format!("changing {field} must be refused"));
        let message = match err {
            kube::Error::Api(status) => status.message,
            other => panic!("{field}: not an API refusal: {other}"),
        };
        assert!(
            message.contains(field) && message.contains(expected),
            "{field}: {message}"
        );
    }
    // Fields that are not immutable still change.
    let version = json!({"spec": {"source": {"catalog": {"version": ">=0.6.0"}}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&version))
        .await
        .expect("version changes");
    api.delete(&name, &DeleteParams::default()).await.expect("delete");
}

/// The message of an API refusal of a patch.
async fn patch_refusal(api: &Api<DynamicObject>, name: &str, patch: Value) -> String {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => panic!("{name}: the API server accepted {patch}"),
        Err(kube::Error::Api(status)) => status.message,
        Err(other) => panic!("{name}: not an API refusal: {other}"),
    }
}

#[tokio::test]
async fn clusterextension_service_account_is_optional_and_its_name_immutable_once_set() {
    let client = support::client().await;
    let api = extensions(&client);

    // Upstream v1.11's YAML (its sample's shape): no serviceAccount at all.
    let without = support::fresh_name("no-sa");
    let mut obj = extension_json(&without);
    obj["spec"].as_object_mut().unwrap().remove("serviceAccount");
    let created = create(&api, obj.clone())
        .await
        .expect("a ClusterExtension without serviceAccount is accepted");
    assert!(created.data["spec"].get("serviceAccount").is_none());
    // A name may be given later: there was none to keep.
    let added = api
        .patch(
            &without,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"serviceAccount": {"name": "later-installer"}}})),
        )
        .await
        .expect("a service account may be named later");
    assert_eq!(added.data["spec"]["serviceAccount"]["name"], "later-installer");
    api.delete(&without, &DeleteParams::default())
        .await
        .expect("delete");

    // minProperties: 1 -- serviceAccount, when present, names an account.
    let mut empty = obj.clone();
    empty["metadata"]["name"] = json!(support::fresh_name("empty-sa"));
    empty["spec"]["serviceAccount"] = json!({});
    assert_create_refused(
        &api,
        "empty serviceAccount",
        empty,
        &["spec.serviceAccount", "should have at least 1 properties"],
    )
    .await;
    let mut blank = obj.clone();
    blank["metadata"]["name"] = json!(support::fresh_name("blank-sa"));
    blank["spec"]["serviceAccount"] = json!({"name": ""});
    assert_create_refused(
        &api,
        "empty serviceAccount name",
        blank,
        &["spec.serviceAccount.name", "should be at least 1 chars long"],
    )
    .await;

    // Set: the name cannot change, nor be removed alone (that leaves an empty serviceAccount)...
    let name = support::fresh_name("sa-set");
    create(&api, extension_json(&name)).await.expect("create");
    let message = patch_refusal(
        &api,
        &name,
        json!({"spec": {"serviceAccount": {"name": "other-installer"}}}),
    )
    .await;
    assert!(
        message.contains("spec.serviceAccount.name")
            && message.contains("name is immutable once set but may be cleared"),
        "{message}"
    );
    let message = patch_refusal(&api, &name, json!({"spec": {"serviceAccount": {"name": null}}})).await;
    assert!(
        message.contains("spec.serviceAccount") && message.contains("should have at least 1 properties"),
        "{message}"
    );
    // ... but serviceAccount may be cleared.
    let cleared = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"serviceAccount": null}})),
        )
        .await
        .expect("serviceAccount may be cleared");
    assert!(
        cleared.data["spec"].get("serviceAccount").is_none(),
        "{:?}",
        cleared.data["spec"]
    );
    api.delete(&name, &DeleteParams::default()).await.expect("delete");
}

#[tokio::test]
async fn clusterextension_status_release_is_checked_with_upstream_message() {
    let client = support::client().await;
    let api = extensions(&client);
    let name = support::fresh_name("release");
    create(&api, extension_json(&name)).await.expect("create");
    let bundle = |release: &str| {
        json!({"status": {"install": {"bundle": {
            "name": "argocd-operator.v0.6.0", "version": "0.6.0+2", "release": release
        }}}})
    };
    for accepted in ["2", "rc.1-x"] {
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&bundle(accepted)))
            .await
            .unwrap_or_else(|e| panic!("release {accepted:?} must be accepted: {e}"));
    }
    let err = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&bundle("01")))
        .await
        .expect_err("a numeric identifier with a leading zero must be refused");
    let message = match err {
        kube::Error::Api(status) => status.message,
        other => panic!("not an API refusal: {other}"),
    };
    // Upstream's text, word for word (api/v1 BundleMetadata.Release).
    let upstream = "release must be empty or consist of dot-separated identifiers (numeric without leading zeros, or alphanumeric)";
    assert!(
        message.contains("status.install.bundle.release") && message.contains(upstream),
        "{message}"
    );
    api.delete(&name, &DeleteParams::default()).await.expect("delete");
}
#[tokio::test]
async fn clustercatalog_poll_interval_is_refused_on_a_digest_ref() {
    let client = support::client().await;
    let api = catalogs(&client);
    let digest_ref = format!(
        "quay.io/operatorhubio/catalog@sha256:{}",
        "0123456789abcdef".repeat(4)
    );
    let mut obj = catalog_json(&support::fresh_name("digest"), &digest_ref);
    obj["spec"]["source"]["image"]["pollIntervalMinutes"] = json!(10);
    assert_create_refused(
        &api,
        "pollIntervalMinutes on a digest ref",
        obj,
        &[
            "spec.source.image",
            "cannot specify pollIntervalMinutes while using digest-based image",
        ],
    )
    .await;

    // The same digest ref without polling, and a tag ref with polling, are accepted.
    let pinned = support::fresh_name("digest");
    create(&api, catalog_json(&pinned, &digest_ref))
        .await
        .expect("digest ref without polling");
    let polled = support::fresh_name("tag");
    let mut obj = catalog_json(&polled, "quay.io/operatorhubio/catalog:latest");
    obj["spec"]["source"]["image"]["pollIntervalMinutes"] = json!(10);
    create(&api, obj).await.expect("tag ref with polling");
    for name in [pinned, polled] {
        api.delete(&name, &DeleteParams::default()).await.expect("delete");
    }
}

// ---------------------------------------------------------------------------------------------
// defaults

#[tokio::test]
async fn defaults_are_filled_in_as_upstream() {
    let client = support::client().await;
    let name = support::fresh_name("defaults");
    let ce = create(&extensions(&client), extension_json(&name))
        .await
        .expect("create extension");
    let ce = serde_json::to_value(&ce).expect("json");
    assert_eq!(
        ce["spec"]["source"]["catalog"]["upgradeConstraintPolicy"],
        json!("CatalogProvided"),
        "{ce}"
    );
    extensions(&client)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");

    let cc = create(
        &catalogs(&client),
        catalog_json(&name, "quay.io/operatorhubio/catalog:latest"),
    )
    .await
    .expect("create catalog");
    let cc = serde_json::to_value(&cc).expect("json");
    assert_eq!(cc["spec"]["priority"], json!(0), "{cc}");
    assert_eq!(cc["spec"]["availabilityMode"], json!("Available"), "{cc}");
    catalogs(&client)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

// ---------------------------------------------------------------------------------------------
// service account identity

/// A namespace with a ServiceAccount that may only get/list ConfigMaps there.
async fn narrow_service_account(client: &kube::Client) -> (String, String) {
    let ns = support::fresh_namespace(client, "identity").await;
    let sa = "installer".to_string();
    let pp = PostParams::default();
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &ServiceAccount {
                metadata: meta(&sa),
                ..Default::default()
            },
        )
        .await
        .expect("create service account");
    let role = Role {
        metadata: meta("read-configmaps"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(client.clone(), &ns)
        .create(&pp, &role)
        .await
        .expect("create role");
    let binding = RoleBinding {
        metadata: meta("read-configmaps"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "read-configmaps".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.clone(),
            namespace: Some(ns.clone()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .create(&pp, &binding)
        .await
        .expect("create binding");
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &ConfigMap {
                metadata: meta("settings"),
                ..Default::default()
            },
        )
        .await
        .expect("create configmap");
    (ns, sa)
}

/// What CLIENT (acting as NS/SA) may and may not do, checked against the Role of
/// `narrow_service_account`.
async fn assert_narrow_permissions(how: &str, client: kube::Client, ns: &str, sa: &str) {
    // The API server sees the service account's identity.
    let review = SelfSubjectReview {
        metadata: Default::default(),
        status: None,
    };
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let me = reviews
        .create(&PostParams::default(), &review)
        .await
        .expect("SelfSubjectReview");
    let user = me.status.and_then(|s| s.user_info).unwrap_or_default();
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{ns}:{sa}").as_str()),
        "{how}"
    );
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&format!("system:serviceaccounts:{ns}")),
        "{how}"
    );

    // Allowed by the Role.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let listed = configmaps.list(&ListParams::default()).await;
    assert!(
        listed.is_ok(),
        "{how}: list configmaps in {ns} must be allowed: {listed:?}"
    );
    configmaps
        .get("settings")
        .await
        .unwrap_or_else(|e| panic!("{how}: get configmap: {e}"));

    // Not allowed: another verb, another resource, another namespace.
    let forbidden = |result: Result<(), kube::Error>, what: &str| match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{how}: {what} must be forbidden, got {other:?}"),
    };
    let new_cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("new".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    forbidden(
        configmaps.create(&PostParams::default(), &new_cm).await.map(drop),
        "create configmap",
    );
    forbidden(
        configmaps
            .delete("settings", &DeleteParams::default())
            .await
            .map(drop),
        "delete configmap",
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    forbidden(
        secrets.list(&ListParams::default()).await.map(drop),
        "list secrets",
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    forbidden(
        elsewhere.list(&ListParams::default()).await.map(drop),
        "list configmaps in default",
    );
    let ces = extensions(&client);
    forbidden(
        ces.list(&ListParams::default()).await.map(drop),
        "list clusterextensions",
    );
}

#[tokio::test]
async fn service_account_token_from_token_request_is_limited_to_its_role() {
    let env = support::env();
    let admin = env.client().await;
    let (ns, sa) = narrow_service_account(&admin).await;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            audiences: vec![],
            ..Default::default()
        },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
        .create_token_request(&sa, &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .expect("token status")
        .token;
    assert!(!token.is_empty());
    // The admin config with its client certificate replaced by the bearer token.
    let mut config = env.config().await;
    config.auth_info = serde_json::from_value::<AuthInfo>(json!({ "token": token })).expect("auth info");
    let as_sa = kube::Client::try_from(config).expect("client with token");
    assert_narrow_permissions("token", as_sa, &ns, &sa).await;
}

#[tokio::test]
async fn impersonated_service_account_is_limited_to_its_role() {
    let env = support::env();
    let admin = env.client().await;
    let (ns, sa) = narrow_service_account(&admin).await;
    let mut config = env.config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{sa}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".into(),
    ]);
    let as_sa = kube::Client::try_from(config).expect("impersonating client");
    assert_narrow_permissions("impersonation", as_sa, &ns, &sa).await;
}

#[tokio::test]
async fn service_account_clients_share_connections_but_never_the_controllers_identity() {
    let env = support::env();
    let admin = env.client().await;
    // The controller's config authenticates with a client certificate (the admin's here): none
    // of it may reach the service accounts' requests or their shared connections.
    let config = env.config().await;
    assert!(
        config.auth_info.client_certificate_data.is_some() || config.auth_info.client_certificate.is_some(),
        "the test's admin authenticates with a client certificate"
    );
    let clients = ServiceAccountClients::new(admin.clone(), config, Leadership::unelected())
        .expect("service account clients");
    let (first_ns, first_sa) = narrow_service_account(&admin).await;
    let (second_ns, second_sa) = narrow_service_account(&admin).await;
    // Interleaved, so that requests of both go over the same pooled connections.
    for _round in 0..2 {
        for (ns, sa) in [(&first_ns, &first_sa), (&second_ns, &second_sa)] {
            let client = clients
                .client_for(ns, sa)
                .await
                .expect("client for the service account");
            assert_narrow_permissions("ServiceAccountClients", client, ns, sa).await;
        }
    }
    // Each one's role, not the other's.
    let first = clients.client_for(&first_ns, &first_sa).await.unwrap();
    let other: Api<ConfigMap> = Api::namespaced(first, &second_ns);
    match other.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("the first account may not list the second's ConfigMaps: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// registry

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Pushes a directory with `olmv1 image push` to the shared registry and reads the image back by
/// tag and by digest with plain distribution API calls.
#[tokio::test]
async fn registry_serves_an_image_pushed_by_olmv1_by_tag_and_by_digest() {
    let env = support::env();
    let src = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(src.path().join("configs/demo")).expect("mkdir");
    let catalog = "{\"schema\":\"olm.package\",\"name\":\"demo\"}\n";
    std::fs::write(src.path().join("configs/demo/catalog.json"), catalog).expect("write");
    let repo = format!("olmv1-test/{}", support::fresh_name("push"));
    let image = format!("{}/{repo}:v1", env.registry);
    support::run(
        env.command(support::olmv1_bin())
            .args(["image", "push"])
            .arg(src.path())
            .arg(&image)
            .args([
                "--label",
                "operators.operatorframework.io.index.configs.v1=/configs",
            ]),
    )
    .ok();

    let http = reqwest::Client::new();
    let base = env.registry_url();
    let by_tag = http
        .get(format!("{base}/v2/{repo}/manifests/v1"))
        .header("Accept", OCI_MANIFEST)
        .send()
        .await
        .expect("GET manifest by tag");
    assert_eq!(by_tag.status(), 200);
    let digest = by_tag
        .headers()
        .get("Docker-Content-Digest")
        .and_then(|v| v.to_str().ok())
        .expect("Docker-Content-Digest")
        .to_string();
    let manifest_bytes = by_tag.bytes().await.expect("manifest body");
    assert_eq!(
        digest,
        format!("sha256:{}", hex::encode(Sha256::digest(&manifest_bytes)))
    );

    let by_digest = http
        .get(format!("{base}/v2/{repo}/manifests/{digest}"))
        .header("Accept", OCI_MANIFEST)
        .send()
        .await
        .expect("GET manifest by digest");
    assert_eq!(by_digest.status(), 200);
    assert_eq!(by_digest.bytes().await.expect("body"), manifest_bytes);

    // The one layer holds the directory's file, the config carries the label.
    let manifest: Value = serde_json::from_slice(&manifest_bytes).expect("manifest JSON");
    let blob = |digest: &str| {
        let url = format!("{base}/v2/{repo}/blobs/{digest}");
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.expect("GET blob");
            assert_eq!(response.status(), 200);
            response.bytes().await.expect("blob body")
        }
    };
    let config_digest = manifest["config"]["digest"].as_str().expect("config digest");
    let config: Value = serde_json::from_slice(&blob(config_digest).await).expect("config JSON");
    assert_eq!(
        config["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"],
        json!("/configs"),
        "{config}"
    );
    let layers = manifest["layers"].as_array().expect("layers");
    let mut found = None;
    for layer in layers {
        let bytes = blob(layer["digest"].as_str().expect("layer digest")).await;
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        for entry in archive.entries().expect("tar entries") {
            let mut entry = entry.expect("tar entry");
            let path = entry
                .path()
                .expect("path")
                .to_string_lossy()
                .trim_start_matches("./")
                .to_string();
            if path == "configs/demo/catalog.json" {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut entry, &mut text).expect("read entry");
                found = Some(text);
            }
        }
    }
    assert_eq!(
        found.as_deref(),
        Some(catalog),
        "the layer must hold configs/demo/catalog.json"
    );
}

/// The harness's extra registries (for the image tests): HTTPS with a test CA and Basic auth.
#[tokio::test]
async fn extra_registry_serves_tls_and_basic_auth() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tls = support::TestTls::generate(dir.path());
    let htpasswd = support::htpasswd_file(dir.path(), "tester", "s3cret");
    let registry = support::start_registry(&support::RegistryOptions {
        htpasswd: Some(htpasswd),
        tls: Some(tls.serving.clone()),
        token: None,
        host: None,
    });
    assert!(registry.url.starts_with("https://127.0.0.1:"), "{}", registry.url);
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&tls.ca_cert).expect("ca")).expect("CA PEM");
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    let anonymous = http
        .get(format!("{}/v2/", registry.url))
        .send()
        .await
        .expect("GET /v2/");
    assert_eq!(anonymous.status(), 401, "{}", registry.log());
    let challenge = anonymous
        .headers()
        .get("WWW-Authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(challenge.starts_with("Basic"), "{challenge}");
    let wrong = http
        .get(format!("{}/v2/", registry.url))
        .basic_auth("tester", Some("nope"))
        .send()
        .await;
    assert_eq!(wrong.expect("GET /v2/").status(), 401);
    let ok = http
        .get(format!("{}/v2/", registry.url))
        .basic_auth("tester", Some("s3cret"))
        .send()
        .await;
    assert_eq!(ok.expect("GET /v2/").status(), 200, "{}", registry.log());

    // Untrusted without the test CA.
    let plain = reqwest::Client::new()
        .get(format!("{}/v2/", registry.url))
        .send()
        .await;
    assert!(
        plain.is_err(),
        "a client without the test CA must refuse the certificate"
    );

    // Dropping the handle stops the process.
    let addr = registry.host_port.clone();
    drop(registry);
    wait_for("the extra registry to stop", Duration::from_secs(10), || async {
        match std::net::TcpStream::connect(&addr) {
            Ok(_) => Err("still listening"),
            Err(_) => Ok(()),
        }
    })
    .await;
}

#[test]
fn harness_parses_env_files_and_makes_fresh_names() {
    let vars = support::parse_env_file(
        "# comment\nexport A='/tmp/x y'\nexport B='it'\\''s'\nexport PATH='/bin':\"$PATH\"\n",
    );
    assert_eq!(vars.get("A").map(String::as_str), Some("/tmp/x y"));
    assert_eq!(vars.get("B").map(String::as_str), Some("it's"));
    assert!(!vars.contains_key("PATH"));
    let a = support::fresh_name("ns");
    assert_ne!(a, support::fresh_name("ns"));
    assert!(support::fresh_name(&"x".repeat(100)).len() <= 63);
    assert!(
        a.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{a}"
    );
}

/// hack/phases.sh, which hack/test.sh and .ci/run print at their end: one row per phase in start
/// order with its wall time and result, phases of child processes in the same table, a phase
/// found cached again (a tool each test binary asks for) listed once while work done is always
/// listed, phases of one name that overlap (two test binaries asking for a tool at once) each
/// ended, a phase begun and never ended (a killed build) shown as unfinished, and nothing
/// recorded without a log.
#[test]
fn phase_table_lists_each_phase_with_its_result() {
    let script = r#"
        set -euo pipefail
        unset OLMV1_PHASE_LOG
        source "$1/hack/phases.sh"
        phase_begin "before any log"
        phases_init
        echo "owner $phases_owner"
        phase "first step" true
        phase "failing step" false || echo "failing step returned $?"
        bash -c 'source "$1/hack/phases.sh"; phases_init; echo "child owner $phases_owner"
                 phase_begin "child step"; phase_end "child step" cached "from a child"' _ "$1"
        phase_begin "child step"; phase_end "child step" cached "asked again"
        phase_begin "rebuilt step"; phase_end "rebuilt step" cached
        phase_begin "rebuilt step"; phase_end "rebuilt step" built
        phase_begin "asked twice at once"; phase_begin "asked twice at once"
        phase_end "asked twice at once" cached; phase_end "asked twice at once" cached
        phase_begin "never ended"
        phases_print
        rm -f "$OLMV1_PHASE_LOG"
    "#;
    let out = support::run(
        std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg("bash")
            .arg(support::repo_root()),
    )
    .ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..3],
        ["owner 1", "failing step returned 1", "child owner 0"],
        "{out}"
    );
    assert!(
        lines[3].starts_with("phase ") && lines[3].ends_with("start    wall  result"),
        "{out}"
    );
    let rows: Vec<(String, String)> = lines[4..]
        .iter()
        .map(|line| {
            // NAME START WALL RESULT [(NOTE)]: the name is padded to a fixed width.
            let (name, rest) = line.split_at(52);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            assert!(!fields.is_empty(), "row {line:?} in {out}");
            (
                name.trim().to_string(),
                fields.get(2..).unwrap_or_default().join(" "),
            )
        })
        .collect();
    let expected = [
        ("first step", "ok"),
        ("failing step", "FAILED (exit 1)"),
        ("child step", "cached (from a child)"),
        ("rebuilt step", "cached"),
        ("rebuilt step", "built"),
        ("asked twice at once", "cached"),
        ("never ended", "unfinished"),
        ("total", ""),
    ];
    let rows: Vec<(&str, &str)> = rows.iter().map(|(n, r)| (n.as_str(), r.as_str())).collect();
    assert_eq!(rows, expected, "{out}");
}
