//! The apply preflights against the local control plane: the permission preflight asks the real
//! RBAC authorizer (SubjectAccessReview) about a service account with a narrow Role, and the CRD
//! upgrade safety preflight reads the installed CRD from the API server.

#[path = "support/mod.rs"]
mod support;

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use olmv1::apply::lookups::ClusterLookups;
use olmv1::apply::preflight::{
    AccessPolicy, PreflightError, ServiceAccountRef, check_crd_upgrades, check_permissions,
};
use olmv1::apply::revision::ObjectRef;
use serde_json::{Value, json};
use support::{DEFAULT_TIMEOUT, fresh_name, fresh_namespace, wait_for};

const MANAGER: &str = "olmv1-preflight-test";

async fn apply_admin<K>(api: &Api<K>, obj: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let name = obj["metadata"]["name"].as_str().expect("name").to_string();
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

/// A client that authenticates as the admin but acts as the service account (impersonation), to
/// show that what the preflight passes really applies.
async fn client_as(sa: &ServiceAccountRef) -> Client {
    let mut config = support::env().config().await;
    config.auth_info.impersonate = Some(sa.user_name());
    config.auth_info.impersonate_groups = Some(sa.groups());
    Client::try_from(config).expect("impersonating client")
}

fn bundle(ns: &str, cluster_role: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"a": "b"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": ns}}),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "op", "namespace": ns},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "op"}},
                "template": {
                    "metadata": {"labels": {"app": "op"}},
                    "spec": {"containers": [{"name": "op", "image": "example.invalid/op:1"}]}
                }
            }
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "op-role", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "op-role", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op-role"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": ns}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": cluster_role},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
        }),
    ]
}

#[tokio::test]
async fn permission_preflight_lists_exactly_the_missing_rules_and_passes_when_granted() {
    let client = support::client().await;
    let ns = fresh_namespace(&client, "preflight").await;
    let sa = ServiceAccountRef::new(&ns, "installer");
    let cluster_role = fresh_name("preflight-op");
    let objects = bundle(&ns, &cluster_role);
    let previous = vec![
        ObjectRef {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some(ns.clone()),
            name: "op".into(),
        },
        ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(ns.clone()),
            name: "old".into(),
        },
    ];

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    apply_admin(
        &sas,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"}}),
    )
    .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    apply_admin(
        &configmaps,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}),
    )
    .await;

    // A narrow Role: enough for the ServiceAccount, the Role and its binding (it holds the Role's
    // one rule, so it needs neither escalate nor bind), get/patch on ConfigMaps; nothing else.
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
    let narrow = |extra: Vec<Value>| {
        let mut rules = vec![
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}),
            json!({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create", "patch"]}),
            json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["get", "create", "patch"]}),
        ];
        rules.extend(extra);
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "installer"}, "rules": rules})
    };
    apply_admin(&roles, narrow(vec![])).await;
    apply_admin(
        &bindings,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "installer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]
        }),
    )
    .await;

    let policy = AccessPolicy::default();
    let everything_missing = format!(
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[] Resources:[pods] Verbs:[list]
  Namespace:\"\" APIGroups:[rbac.authorization.k8s.io] Resources:[clusterroles] ResourceNames:[{cluster_role}] Verbs:[create,get,patch]
  Namespace:\"{ns}\" APIGroups:[] Resources:[configmaps] ResourceNames:[cfg] Verbs:[create]
  Namespace:\"{ns}\" APIGroups:[] Resources:[configmaps] ResourceNames:[old] Verbs:[delete]
  Namespace:\"{ns}\" APIGroups:[apps] Resources:[deployments] ResourceNames:[op] Verbs:[create,get,patch]
or, instead of holding every rule of the role it names: escalate rbac.authorization.k8s.io/clusterroles \"{cluster_role}\""
    );
    // Nothing cached between calls: the grants change as the test goes.
    let preflight = async || {
        let uncached = ClusterLookups::new();
        check_permissions(&client, &uncached, &sa, &objects, &previous, &policy, &[]).await
    };
    // RBAC reads bindings from an informer: poll until the narrow Role is in effect.
    wait_for(
        "the preflight to list exactly the missing permissions",
        DEFAULT_TIMEOUT,
        || async {
            match preflight().await {
                Err(PreflightError::MissingPermissions(m)) if m.to_string() == everything_missing => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Grant the namespaced part and write access to the ClusterRole, but neither escalate nor
    // the rule the ClusterRole grants: only the escalation is left.
    apply_admin(
        &roles,
        narrow(vec![
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]}),
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create", "patch"]}),
        ]),
    )
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let installer_cluster = |rules: Vec<Value>| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": format!("{cluster_role}-installer")}, "rules": rules});
    let write_cluster_role = json!({
        "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
        "resourceNames": [cluster_role], "verbs": ["get", "create", "patch"]
    });
    apply_admin(
        &cluster_roles,
        installer_cluster(vec![write_cluster_role.clone()]),
    )
    .await;
    apply_admin(
        &cluster_bindings,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{cluster_role}-installer")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{cluster_role}-installer")},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]
        }),
    )
    .await;
    let only_escalation = format!(
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[] Resources:[pods] Verbs:[list]
or, instead of holding every rule of the role it names: escalate rbac.authorization.k8s.io/clusterroles \"{cluster_role}\""
    );
    wait_for(
        "the preflight to list only the escalation",
        DEFAULT_TIMEOUT,
        || async {
            match preflight().await {
                Err(PreflightError::MissingPermissions(m)) if m.to_string() == only_escalation => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Holding the ClusterRole's rule makes creating it no escalation: the preflight passes.
    let list_pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]});
    apply_admin(
        &cluster_roles,
        installer_cluster(vec![write_cluster_role, list_pods]),
    )
    .await;
    wait_for("the preflight to pass", DEFAULT_TIMEOUT, || async {
        preflight().await.map_err(|e| e.to_string())
    })
    .await;
    let started = std::time::Instant::now();
    check_permissions(
        &client,
        &ClusterLookups::new(),
        &sa,
        &objects,
        &previous,
        &policy,
        &[],
    )
    .await
    .expect("preflight passes");
    eprintln!(
        "preflight: check_permissions (discovery + reviews) took {:?} for {} objects",
        started.elapsed(),
        objects.len()
    );

    // And what passed really applies as the service account: server-side apply of every object
    // (which creates them), then pruning the dropped ConfigMap.
    let as_sa = client_as(&sa).await;
    let discovery = kube::Discovery::new(as_sa.clone())
        .run_aggregated()
        .await
        .expect("discovery");
    for obj in &objects {
        let dynamic: DynamicObject = serde_json::from_value(obj.clone()).expect("object");
        let types = dynamic.types.as_ref().expect("apiVersion and kind");
        let (resource, _): (ApiResource, _) = discovery.resolve_typemeta(types).expect("served kind");
        let api: Api<DynamicObject> = match dynamic.namespace() {
            Some(ns) => Api::namespaced_with(as_sa.clone(), &ns, &resource),
            None => Api::all_with(as_sa.clone(), &resource),
        };
        api.patch(
            &dynamic.name_any(),
            &PatchParams::apply(MANAGER),
            &Patch::Apply(obj),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "apply {} {} as the service account: {e}",
                types.kind,
                dynamic.name_any()
            )
        });
    }
    Api::<ConfigMap>::namespaced(as_sa.clone(), &ns)
        .delete("old", &Default::default())
        .await
        .expect("prune the dropped ConfigMap as the service account");
    Api::<ClusterRole>::all(client.clone())
        .delete(&cluster_role, &Default::default())
        .await
        .expect("clean up the bundle's ClusterRole");
}

#[tokio::test]
async fn permission_preflight_refuses_a_service_account_with_no_permissions_without_applying() {
    let client = support::client().await;
    let ns = fresh_namespace(&client, "preflight-none").await;
    let sa = ServiceAccountRef::new(&ns, "nobody");
    let objects =
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}})];
    let err = check_permissions(
        &client,
        &ClusterLookups::new(),
        &sa,
        &objects,
        &[],
        &AccessPolicy::default(),
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"{ns}\" APIGroups:[] Resources:[configmaps] ResourceNames:[cfg] Verbs:[create,get,patch]"
        )
    );
    assert!(!err.is_terminal());
    // The preflight only asks: nothing was created.
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get_opt("cfg")
        .await
        .expect("get");
    assert!(cm.is_none());
}

fn widget_crd(group: &str, versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": versions
        }
    })
}

fn widget_schema(size_type: &str, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": required,
                "properties": {
                    "size": {"type": size_type, "description": "How big."},
                    "color": {"type": "string", "enum": ["red", "blue"]}
                }
            }
        }
    })
}

#[tokio::test]
async fn crd_upgrade_safety_reads_the_installed_crd() {
    let client = support::client().await;
    let group = format!("{}.example.com", fresh_name("safety"));
    let name = format!("widgets.{group}");
    let v1 = |schema: Value| json!({"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}});
    let installed = widget_crd(&group, json!([v1(widget_schema("integer", &[]))]));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(installed.clone()).expect("CRD"),
    )
    .await
    .expect("install the CRD");
    wait_for(
        "the CRD to record its stored version",
        DEFAULT_TIMEOUT,
        || async {
            let crd = crds.get(&name).await.map_err(|e| e.to_string())?;
            let stored = crd.status.and_then(|s| s.stored_versions).unwrap_or_default();
            if stored == ["v1"] {
                Ok(())
            } else {
                Err(format!("storedVersions {stored:?}"))
            }
        },
    )
    .await;

    // The manifest as installed (the API server adds defaults and status) is a safe upgrade of itself.
    check_crd_upgrades(&client, std::slice::from_ref(&installed))
        .await
        .expect("same CRD is safe");

    // A description change, an added optional field and an added enum value are safe.
    let mut safe = widget_schema("integer", &[]);
    safe["properties"]["spec"]["properties"]["size"]["description"] = json!("How big, in units.");
    safe["properties"]["spec"]["properties"]["shape"] = json!({"type": "string"});
    safe["properties"]["spec"]["properties"]["color"]["enum"] = json!(["red", "blue", "green"]);
    check_crd_upgrades(&client, &[widget_crd(&group, json!([v1(safe)]))])
        .await
        .expect("safe upgrade");

    // A CRD that is not installed has nothing to break.
    let other = widget_crd(
        &format!("{}.example.com", fresh_name("absent")),
        json!([v1(widget_schema("string", &["size"]))]),
    );
    check_crd_upgrades(&client, &[other]).await.expect("new CRD");

    // A type change, a new required field, and dropping the stored version v1 for v2 are refused,
    // all in one message.
    let unsafe_same_version = widget_crd(&group, json!([v1(widget_schema("string", &["size"]))]));
    let err = check_crd_upgrades(&client, &[unsafe_same_version])
        .await
        .unwrap_err();
    assert!(!err.is_terminal());
    assert_eq!(
        err.to_string(),
        format!(
            "validating upgrade for CRD \"{name}\": \
             v1: ^.spec: required: new required fields: [size]\n\
             v1: ^.spec.size: type: type changed : \"integer\" -> \"string\""
        )
    );
    let v2_only = widget_crd(
        &group,
        json!([{"name": "v2", "served": true, "storage": true, "schema": {"openAPIV3Schema": widget_schema("integer", &[])}}]),
    );
    let err = check_crd_upgrades(&client, &[v2_only]).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("validating upgrade for CRD \"{name}\": storedVersionRemoval: stored versions [v1] removed")
    );
    crds.delete(&name, &Default::default())
        .await
        .expect("clean up the CRD");
}

/// Requests a client sent, by kind: discovery reads and SubjectAccessReviews.
#[derive(Default)]
struct RequestCounts {
    discovery: std::sync::atomic::AtomicU64,
    reviews: std::sync::atomic::AtomicU64,
}

impl RequestCounts {
    fn now(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.discovery.load(SeqCst), self.reviews.load(SeqCst))
    }
}

/// The admin's client, counting the discovery and review requests it sends.
async fn counting_client() -> (Client, std::sync::Arc<RequestCounts>) {
    let counts = std::sync::Arc::new(RequestCounts::default());
    let seen = counts.clone();
    let layer = tower::filter::FilterLayer::new(move |request: http::Request<kube::client::Body>| {
        use std::sync::atomic::Ordering::SeqCst;
        let path = request.uri().path();
        let segments = path.trim_matches('/').split('/').count();
        let discovery = request.method() == http::Method::GET
            && ((path.starts_with("/api") && !path.starts_with("/apis") && segments <= 2)
                || (path.starts_with("/apis") && segments <= 3));
        if discovery {
            seen.discovery.fetch_add(1, SeqCst);
        }
        if request.method() == http::Method::POST && path.ends_with("/subjectaccessreviews") {
            seen.reviews.fetch_add(1, SeqCst);
        }
        Ok::<_, std::convert::Infallible>(request)
    });
    let config = support::env().config().await;
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client config")
        .with_layer(&layer)
        .build();
    (client, counts)
}

#[tokio::test]
async fn discovery_and_review_answers_are_kept_until_a_watch_says_they_changed() {
    let admin = support::client().await;
    let ns = fresh_namespace(&admin, "lookups").await;
    let sa = ServiceAccountRef::new(&ns, "installer");
    let objects: Vec<Value> = bundle(&ns, "unused").into_iter().take(3).collect();
    apply_admin(
        &Api::<ServiceAccount>::namespaced(admin.clone(), &ns),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"}}),
    )
    .await;
    apply_admin(
        &Api::<Role>::namespaced(admin.clone(), &ns),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "installer"},
            "rules": [{"apiGroups": ["", "apps"], "resources": ["configmaps", "serviceaccounts", "deployments"],
                       "verbs": ["get", "create", "patch"]}]}),
    )
    .await;
    apply_admin(
        &Api::<RoleBinding>::namespaced(admin.clone(), &ns),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "installer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]}),
    )
    .await;

    let (client, counts) = counting_client().await;
    let lookups = ClusterLookups::new();
    let watching = tokio::spawn({
        let (lookups, admin) = (lookups.clone(), admin.clone());
        async move { lookups.watch(admin).await }
    });
    let policy = AccessPolicy::default();
    // One preflight: its outcome, and the discovery and review requests it made.
    let attempt = || async {
        let before = counts.now();
        let outcome = check_permissions(&client, &lookups, &sa, &objects, &[], &policy, &[])
            .await
            .map_err(|e| e.to_string());
        let after = counts.now();
        (outcome, (after.0 - before.0, after.1 - before.1))
    };
    let preflight = || async {
        let (outcome, asked) = attempt().await;
        outcome.map(|()| asked)
    };
    // Nothing is kept before the first call: it asks for everything.
    let (_, cold) = attempt().await;
    assert!(cold.0 > 0 && cold.1 > 0, "a first preflight asks: {cold:?}");
    wait_for("the preflight to pass", DEFAULT_TIMEOUT, preflight).await;
    wait_for(
        "a preflight answered from kept answers alone",
        DEFAULT_TIMEOUT,
        || async {
            match preflight().await? {
                (0, 0) => Ok(()),
                other => Err(format!("still asked {other:?}")),
            }
        },
    )
    .await;

    // Any RBAC change drops the kept reviews (not discovery): the next preflight asks again.
    apply_admin(
        &Api::<RoleBinding>::namespaced(admin.clone(), &ns),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "unrelated"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
            "subjects": [{"kind": "ServiceAccount", "name": "someone-else", "namespace": ns}]}),
    )
    .await;
    let after_rbac = wait_for("the reviews to be asked again", DEFAULT_TIMEOUT, || async {
        match preflight().await? {
            (discovery, reviews) if reviews > 0 => Ok((discovery, reviews)),
            other => Err(format!("answered from kept reviews: {other:?}")),
        }
    })
    .await;
    assert_eq!(after_rbac.0, 0, "discovery stays kept across an RBAC change");
    assert_eq!(after_rbac.1, cold.1, "every review is asked again");

    // A new CRD drops the kept discovery: it is read again.
    let crd_group = format!("{}.example.com", fresh_name("lookups"));
    apply_admin(
        &Api::<CustomResourceDefinition>::all(admin.clone()),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("gadgets.{crd_group}")},
            "spec": {"group": crd_group, "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
    )
    .await;
    wait_for("discovery to be read again", DEFAULT_TIMEOUT, || async {
        match preflight().await? {
            (discovery, _) if discovery > 0 => Ok(()),
            other => Err(format!("answered from kept discovery: {other:?}")),
        }
    })
    .await;
    wait_for("everything kept again once settled", DEFAULT_TIMEOUT, || async {
        match preflight().await? {
            (0, 0) => Ok(()),
            other => Err(format!("still asked {other:?}")),
        }
    })
    .await;
    println!(
        "lookups: a {}-object preflight made {} discovery and {} review requests cold, 0 and 0 with kept answers",
        objects.len(),
        cold.0,
        cold.1
    );
    watching.abort();
    Api::<CustomResourceDefinition>::all(admin)
        .delete(&format!("gadgets.{crd_group}"), &Default::default())
        .await
        .unwrap();
}
