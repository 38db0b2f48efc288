//! OLM classic's footprint on the local control plane, laid down as classic leaves it for an
//! operator installed from a catalog (`../shared/reference/classic-footprint.md`): classic's CRDs
//! (read from `../shared/classic-api` at test time), a grpc CatalogSource backed by a catalog
//! image, the OperatorGroup, the Subscription, its `Complete` InstallPlan, the `Succeeded` CSV
//! with its status, and what classic creates for the CSV (CRD, ServiceAccount, Roles, bindings,
//! the bundle's ConfigMap, the Deployment with its pod-template annotations and injected env,
//! the OperatorCondition, copied CSVs) with classic's owner references and `olm.owner*` labels.
//! Classic's controllers cannot be built here, so nothing reconciles these objects: they are the
//! state a migration starts from.

use std::{path::PathBuf, sync::OnceLock};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use olmv1::bundle::render::names::{deep_hash, object_name_for_base_and_suffix};
use serde_json::{Value, json};

use crate::{
    components,
    fixtures::{self, Bundle, Package},
    support,
};

/// classic's API group.
pub const GROUP: &str = "operators.coreos.com";

/// The OperatorGroup's install mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    AllNamespaces,
    OwnNamespace,
    /// Watches this other namespace.
    SingleNamespace(String),
    /// Watches these namespaces (v1 has no such mode).
    MultiNamespace(Vec<String>),
}

/// What to lay down: `package` published to the registry, `version` of it installed by classic.
#[derive(Clone, Debug)]
pub struct Classic {
    pub package: Package,
    pub version: String,
    pub channel: String,
    pub mode: Mode,
    /// `Automatic` or `Manual`.
    pub approval: String,
    /// `Subscription.spec.config`; its `env` is injected into the Deployment as classic does.
    pub config: Option<Value>,
    /// The CSV as installed was edited in the cluster (a hot-fixed container image), so it no
    /// longer matches the bundle the catalog serves.
    pub hotfix_image: Option<String>,
    /// CatalogSource namespace: classic's global catalog namespace, shared by a test's installs.
    pub catalog_namespace: Option<String>,
}

impl Classic {
    /// Version 1.0.0 of a one-bundle package, AllNamespaces, Automatic, channel `stable`.
    pub fn new(package: Package) -> Classic {
        let version = package.bundles[0].version.clone();
        Classic {
            package,
            version,
            channel: "stable".into(),
            mode: Mode::AllNamespaces,
            approval: "Automatic".into(),
            config: None,
            hotfix_image: None,
            catalog_namespace: None,
        }
    }

    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }

    pub fn hotfix_image(mut self, image: &str) -> Self {
        self.hotfix_image = Some(image.into());
        self
    }

    pub fn in_catalog_namespace(mut self, namespace: &str) -> Self {
        self.catalog_namespace = Some(namespace.into());
        self
    }
}

/// What was laid down, by name.
#[derive(Clone, Debug)]
pub struct ClassicInstall {
    pub package: String,
    pub namespace: String,
    pub subscription: String,
    pub csv: String,
    pub csv_uid: String,
    pub install_plan: String,
    pub operator_group: String,
    pub catalog_source: String,
    pub catalog_namespace: String,
    /// The CatalogSource's image (a tag).
    pub catalog_image: String,
    /// The installed bundle's image (a digest).
    pub bundle_image: String,
    pub deployment: String,
}

/// The ApiResource of a classic kind.
pub fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

pub fn subscriptions() -> ApiResource {
    resource("v1alpha1", "Subscription", "subscriptions")
}
pub fn csvs() -> ApiResource {
    resource("v1alpha1", "ClusterServiceVersion", "clusterserviceversions")
}
pub fn install_plans() -> ApiResource {
    resource("v1alpha1", "InstallPlan", "installplans")
}
pub fn catalog_sources() -> ApiResource {
    resource("v1alpha1", "CatalogSource", "catalogsources")
}
pub fn operator_groups() -> ApiResource {
    resource("v1", "OperatorGroup", "operatorgroups")
}
pub fn operator_conditions() -> ApiResource {
    resource("v2", "OperatorCondition", "operatorconditions")
}

/// classic's CRDs, applied once per test process from `../shared/classic-api` (server-side: the
/// CSV CRD is larger than the last-applied annotation allows) and Established.
pub fn ensure_classic_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let dir = support::repo_root().join("../shared/classic-api");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("classic's CRDs not found at {dir:?}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        assert_eq!(files.len(), 8, "classic's eight CRDs in {dir:?}: {files:?}");
        for f in &files {
            support::kubectl(&[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager",
                "e2e-classic",
                "-f",
                f.to_str().unwrap(),
            ])
            .ok();
        }
        support::wait_crds_established(&[
            "crd/subscriptions.operators.coreos.com",
            "crd/clusterserviceversions.operators.coreos.com",
            "crd/installplans.operators.coreos.com",
            "crd/catalogsources.operators.coreos.com",
            "crd/operatorgroups.operators.coreos.com",
            "crd/operatorconditions.operators.coreos.com",
            "crd/operators.operators.coreos.com",
            "crd/olmconfigs.operators.coreos.com",
        ]);
    });
}

/// `operators.coreos.com/<pkg>.<ns>`: classic's component label, cut to 63 characters.
pub fn component_label(package: &str, namespace: &str) -> String {
    let name: String = format!("{package}.{namespace}").chars().take(63).collect();
    format!("operators.coreos.com/{}", name.trim_end_matches(['.', '_', '-']))
}

fn owner_labels(csv: &str, namespace: &str) -> Value {
    json!({
        "olm.owner": csv, "olm.owner.namespace": namespace,
        "olm.owner.kind": "ClusterServiceVersion", "olm.managed": "true"
    })
}

fn csv_owner(csv: &str, uid: &str) -> Value {
    json!([{
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterServiceVersion",
        "name": csv, "uid": uid, "blockOwnerDeletion": false, "controller": false
    }])
}

async fn create(client: &Client, ar: &ApiResource, namespace: Option<&str>, body: Value) -> DynamicObject {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let object: DynamicObject = serde_json::from_value(body.clone()).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("cannot create {} {}: {e}", ar.kind, body["metadata"]))
}

async fn set_status(client: &Client, ar: &ApiResource, namespace: &str, name: &str, status: Value) {
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, ar)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot set the status of {} {namespace}/{name}: {e}", ar.kind));
}

/// Creates any object from JSON (server-side apply as classic's field manager).
async fn apply_object(client: &Client, object: Value) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let plural = match kind {
        "CustomResourceDefinition" => "customresourcedefinitions".to_string(),
        "ServiceAccount" => "serviceaccounts".to_string(),
        "ConfigMap" => "configmaps".to_string(),
        "Deployment" => "deployments".to_string(),
        "Role" => "roles".to_string(),
        "RoleBinding" => "rolebindings".to_string(),
        "ClusterRole" => "clusterroles".to_string(),
        "ClusterRoleBinding" => "clusterrolebindings".to_string(),
        other => panic!("no plural known for {other}"),
    };
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.patch(&name, &PatchParams::apply("olm").force(), &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("cannot apply {kind} {name}: {e}"));
}

/// The properties classic's InstallPlan writes on the CSV (`operatorframework.io/properties`):
/// the package, the owned API, the bundle's dependencies.
fn properties(package: &str, bundle: &Bundle) -> Value {
    let mut properties = vec![
        json!({"type": "olm.package", "value": {"packageName": package, "version": bundle.version}}),
        json!({"type": "olm.gvk", "value": {"group": fixtures::crd_group(package), "version": "v1", "kind": "Widget"}}),
    ];
    properties.extend(bundle.dependencies.iter().cloned());
    json!({"properties": properties})
}

/// Lays down classic's footprint of `spec` and waits for the operator Deployment to be
/// Available on kwok's node.
pub async fn lay_down(client: &Client, spec: &Classic) -> ClassicInstall {
    ensure_classic_crds();
    let package = spec.package.name.clone();
    let bundle = spec
        .package
        .bundles
        .iter()
        .find(|b| b.version == spec.version)
        .expect("the installed version is a bundle of the package")
        .clone();
    let registry = support::registry();
    let catalog_image =
        fixtures::publish_catalog(registry, &format!("e2e/{package}-index"), "v1", &spec.package).await;
    // Pushing the same bundle again gives its digest reference (the push is reproducible).
    let bundle_image = fixtures::publish_bundle(registry, &package, &bundle).await;

    let namespace = support::fresh_namespace(client, &package).await;
    let catalog_namespace = match &spec.catalog_namespace {
        Some(ns) => ns.clone(),
        None => support::fresh_namespace(client, "olm").await,
    };
    let catalog_source = format!("{package}-catalog");
    let csv = fixtures::bundle_name(&package, &bundle.version);
    let component = component_label(&package, &namespace);
    let operator_group = format!("{namespace}-og");
    let deployment = fixtures::deployment_name(&package);

    // CatalogSource: grpc, image-backed, polled every 10 minutes, healthy; two installs of one
    // package in one catalog namespace share it, as classic's users share a global catalog.
    let existing =
        Api::<DynamicObject>::namespaced_with(client.clone(), &catalog_namespace, &catalog_sources())
            .get_opt(&catalog_source)
            .await
            .unwrap();
    if existing.is_none() {
        create(
            client,
            &catalog_sources(),
            Some(&catalog_namespace),
            json!({
                "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "CatalogSource",
                "metadata": {"name": catalog_source, "namespace": catalog_namespace},
                "spec": {
                    "sourceType": "grpc", "image": catalog_image, "priority": -100,
                    "displayName": format!("{package} catalog"), "publisher": "e2e",
                    "updateStrategy": {"registryPoll": {"interval": "10m"}}
                }
            }),
        )
        .await;
        let service = catalog_source.replace('.', "-");
        set_status(
            client,
            &catalog_sources(),
            &catalog_namespace,
            &catalog_source,
            json!({
                "registryService": {"protocol": "grpc", "serviceName": service,
                    "serviceNamespace": catalog_namespace, "port": "50051",
                    "createdAt": "2026-01-01T00:00:00Z"},
                "connectionState": {"address": format!("{service}.{catalog_namespace}.svc:50051"),
                    "lastObservedState": "READY", "lastConnect": "2026-01-01T00:00:00Z"}
            }),
        )
        .await;
    }

    // OperatorGroup and its target namespaces.
    let (targets, status_namespaces): (Option<Vec<String>>, Vec<String>) = match &spec.mode {
        Mode::AllNamespaces => (None, vec![String::new()]),
        Mode::OwnNamespace => (Some(vec![namespace.clone()]), vec![namespace.clone()]),
        Mode::SingleNamespace(target) => (Some(vec![target.clone()]), vec![target.clone()]),
        Mode::MultiNamespace(targets) => (Some(targets.clone()), targets.clone()),
    };
    let mut og_spec = json!({"upgradeStrategy": "Default"});
    if let Some(t) = &targets {
        og_spec["targetNamespaces"] = json!(t);
    }
    let og = create(
        client,
        &operator_groups(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "OperatorGroup",
            "metadata": {"name": operator_group, "namespace": namespace,
                "annotations": {"olm.providedAPIs": format!("Widget.v1.{}", fixtures::crd_group(&package))}},
            "spec": og_spec
        }),
    )
    .await;
    set_status(
        client,
        &operator_groups(),
        &namespace,
        &operator_group,
        json!({"namespaces": status_namespaces, "lastUpdated": "2026-01-01T00:00:00Z"}),
    )
    .await;
    let og_uid = og.metadata.uid.clone().unwrap();
    for t in targets.iter().flatten() {
        support::kubectl(&[
            "label",
            "namespace",
            t,
            &format!("olm.operatorgroup.uid/{og_uid}="),
        ])
        .ok();
    }
    let target_annotation = {
        let mut sorted = status_namespaces.clone();
        sorted.sort();
        sorted.join(",")
    };

    // Subscription (a user's: no owner, the component label).
    let mut sub_spec = json!({
        "source": catalog_source, "sourceNamespace": catalog_namespace, "name": package,
        "channel": spec.channel, "installPlanApproval": spec.approval
    });
    if let Some(config) = &spec.config {
        sub_spec["config"] = config.clone();
    }
    let sub = create(
        client,
        &subscriptions(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Subscription",
            "metadata": {"name": package, "namespace": namespace, "labels": {component.clone(): ""}},
            "spec": sub_spec
        }),
    )
    .await;
    let sub_uid = sub.metadata.uid.clone().unwrap();

    // InstallPlan, owned by the Subscription, Complete.
    let ip = create(
        client,
        &install_plans(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "InstallPlan",
            "metadata": {"generateName": "install-", "namespace": namespace,
                "labels": {component.clone(): ""},
                "ownerReferences": [{"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Subscription",
                    "name": package, "uid": sub_uid, "blockOwnerDeletion": false, "controller": false}]},
            "spec": {"clusterServiceVersionNames": [csv], "approval": spec.approval,
                "approved": true, "generation": 1}
        }),
    )
    .await;
    let install_plan = ip.metadata.name.clone().unwrap();

    // The CSV: the bundle's, as the InstallPlan created it and the OperatorGroup annotated it.
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_bundle(dir.path(), &package, &bundle);
    let mut csv_body: Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join(format!("manifests/{package}.clusterserviceversion.yaml")),
        )
        .unwrap(),
    )
    .unwrap();
    if let Some(image) = &spec.hotfix_image {
        csv_body["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
            ["image"] = json!(image);
    }
    let annotations = csv_body["metadata"]["annotations"].as_object_mut().unwrap();
    annotations.insert("olm.operatorGroup".into(), json!(operator_group));
    annotations.insert("olm.operatorNamespace".into(), json!(namespace));
    annotations.insert("olm.targetNamespaces".into(), json!(target_annotation));
    annotations.insert(
        "operatorframework.io/properties".into(),
        json!(properties(&package, &bundle).to_string()),
    );
    let csv_annotations = csv_body["metadata"]["annotations"].clone();
    csv_body["metadata"]["namespace"] = json!(namespace);
    csv_body["metadata"]["labels"] = json!({"olm.managed": "true", component.clone(): ""});
    csv_body["metadata"]["finalizers"] = json!(["operators.coreos.com/csv-cleanup"]);
    let created = create(client, &csvs(), Some(&namespace), csv_body.clone()).await;
    let csv_uid = created.metadata.uid.clone().unwrap();
    let operator = fixtures::deployment_name(&package);
    let crd_name = fixtures::crd_name(&package);
    let rule_text = |scope: &str, rule: &Value| format!("{scope} rule:{rule}");
    let cluster_rules = csv_body["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"].clone();
    let rules = csv_body["spec"]["install"]["spec"]["permissions"][0]["rules"].clone();
    let dependents: Vec<Value> = cluster_rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!({"group": "rbac.authorization.k8s.io", "kind": "PolicyRule", "version": "v1",
            "status": "Satisfied", "message": rule_text("cluster", r)})
        })
        .chain(rules.as_array().unwrap().iter().map(|r| {
            json!({"group": "rbac.authorization.k8s.io", "kind": "PolicyRule", "version": "v1",
                "status": "Satisfied", "message": rule_text("namespaced", r)})
        }))
        .collect();
    let history = [
        ("Pending", "RequirementsUnknown", "requirements not yet checked"),
        (
            "InstallReady",
            "AllRequirementsMet",
            "all requirements found, attempting install",
        ),
        (
            "Installing",
            "InstallSucceeded",
            "waiting for install components to report healthy",
        ),
        (
            "Succeeded",
            "InstallSucceeded",
            "install strategy completed with no errors",
        ),
    ];
    set_status(
        client,
        &csvs(),
        &namespace,
        &csv,
        json!({
            "phase": "Succeeded", "reason": "InstallSucceeded",
            "message": "install strategy completed with no errors",
            "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "conditions": history.iter().map(|(phase, reason, message)| json!({
                "phase": phase, "reason": reason, "message": message,
                "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"
            })).collect::<Vec<_>>(),
            "requirementStatus": [
                {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": crd_name,
                 "version": "v1", "status": "Present", "uuid": "00000000-0000-0000-0000-000000000000",
                 "message": "CRD is present and Established condition is true"},
                {"group": "", "kind": "ServiceAccount", "name": operator, "version": "v1",
                 "status": "Present", "message": "Service account exists", "uuid": "", "dependents": dependents}
            ],
            "cleanup": {}
        }),
    )
    .await;

    // The Subscription's and InstallPlan's statuses, now that the CSV exists.
    let ip_ref = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "InstallPlan",
        "name": install_plan, "namespace": namespace, "uid": ip.metadata.uid});
    set_status(
        client,
        &install_plans(),
        &namespace,
        &install_plan,
        json!({
            "phase": "Complete",
            "conditions": [{"type": "Installed", "status": "True",
                "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "catalogSources": [],
            "plan": [{"resolving": csv, "status": "Created", "resource": {
                "group": GROUP, "version": "v1alpha1", "kind": "ClusterServiceVersion", "name": csv,
                "sourceName": catalog_source, "sourceNamespace": catalog_namespace, "manifest": "{}"}},
                {"resolving": csv, "status": "Created", "resource": {
                "group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
                "name": crd_name, "sourceName": catalog_source, "sourceNamespace": catalog_namespace,
                "manifest": "{}"}}],
            "bundleLookups": [{"path": bundle_image, "identifier": csv, "replaces": "",
                "catalogSourceRef": {"name": catalog_source, "namespace": catalog_namespace},
                "properties": properties(&package, &bundle).to_string()}],
            "startTime": "2026-01-01T00:00:00Z"
        }),
    )
    .await;
    set_status(
        client,
        &subscriptions(),
        &namespace,
        &package,
        json!({
            "currentCSV": csv, "installedCSV": csv, "state": "AtLatestKnown",
            "installPlanRef": ip_ref, "installPlanGeneration": 1,
            "installplan": {"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "InstallPlan",
                "name": install_plan, "uuid": ip.metadata.uid},
            "catalogHealth": [{"catalogSourceRef": {"apiVersion": format!("{GROUP}/v1alpha1"),
                "kind": "CatalogSource", "name": catalog_source, "namespace": catalog_namespace},
                "healthy": true, "lastUpdated": "2026-01-01T00:00:00Z"}],
            "conditions": [{"type": "CatalogSourcesUnhealthy", "status": "False",
                "reason": "AllCatalogSourcesHealthy", "message": "all available catalogsources are healthy",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "lastUpdated": "2026-01-01T00:00:00Z"
        }),
    )
    .await;

    // The CRD, as the InstallPlan created it.
    let mut crd: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifests/widgets.crd.yaml")).unwrap())
            .unwrap();
    let alongside = format!("{namespace}/{csv}");
    crd["metadata"]["labels"] = json!({"olm.managed": "true", component.clone(): ""});
    crd["metadata"]["annotations"] = json!({
        format!("operatorframework.io/installed-alongside-{}", &deep_hash(&alongside)[..16]): alongside
    });
    apply_object(client, crd).await;
    support::wait_crds_established(&[&format!("crd/{crd_name}")]);

    // What the InstallPlan creates for the CSV: the ServiceAccount, the permissions' roles and
    // bindings (namespaced ones owned by the CSV, cluster ones labelled), the bundle's ConfigMap.
    let owned_meta = |name: &str| {
        json!({"name": name, "namespace": namespace, "labels": {"olm.managed": "true"},
            "ownerReferences": csv_owner(&csv, &csv_uid)})
    };
    apply_object(
        client,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": owned_meta(&operator)}),
    )
    .await;
    let role = object_name_for_base_and_suffix(&format!("{csv}-{operator}"), &deep_hash(&rules.to_string()));
    let mut role_meta = owned_meta(&role);
    role_meta["labels"] = owner_labels(&csv, &namespace);
    role_meta["labels"]["olm.permissions.hash"] = json!(&deep_hash(&rules.to_string())[..16]);
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": role_meta, "rules": rules}),
    )
    .await;
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": role_meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": operator, "namespace": namespace}]}),
    )
    .await;
    let cluster_role =
        object_name_for_base_and_suffix(&csv, &deep_hash(&format!("{namespace}{cluster_rules}")));
    let cluster_meta = json!({"name": cluster_role, "labels": owner_labels(&csv, &namespace)});
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": cluster_meta, "rules": cluster_rules}),
    )
    .await;
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": cluster_meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"kind": "ServiceAccount", "name": operator, "namespace": namespace}]}),
    )
    .await;
    if bundle.with_config_map {
        apply_object(
            client,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": owned_meta(&format!("{package}-settings")),
                "data": {"version": bundle.version}}),
        )
        .await;
    }

    // The Deployment, as the olm-operator writes it: the CSV's deployment spec, every CSV
    // annotation on the pod template, the Subscription's env, OPERATOR_CONDITION_NAME,
    // revisionHistoryLimit 1, owner labels, the spec hash and one non-blocking owner reference.
    let strategy = &csv_body["spec"]["install"]["spec"]["deployments"][0];
    let mut dep_spec = strategy["spec"].clone();
    let template_annotations = dep_spec["template"]["metadata"]
        .get("annotations")
        .cloned()
        .unwrap_or(json!({}));
    let mut merged = csv_annotations.as_object().unwrap().clone();
    merged.extend(template_annotations.as_object().unwrap().clone());
    dep_spec["template"]["metadata"]["annotations"] = Value::Object(merged);
    let config_env: Vec<Value> = spec
        .config
        .as_ref()
        .and_then(|c| c["env"].as_array().cloned())
        .unwrap_or_default();
    for container in dep_spec["template"]["spec"]["containers"].as_array_mut().unwrap() {
        let mut env = config_env.clone();
        env.push(json!({"name": "OPERATOR_CONDITION_NAME", "value": csv}));
        container["env"] = json!(env);
    }
    dep_spec["revisionHistoryLimit"] = json!(1);
    let mut labels = owner_labels(&csv, &namespace);
    labels["olm.deployment-spec-hash"] = json!(&deep_hash(&dep_spec.to_string())[..16]);
    apply_object(
        client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": deployment, "namespace": namespace, "labels": labels,
                "ownerReferences": csv_owner(&csv, &csv_uid)},
            "spec": dep_spec}),
    )
    .await;

    // The OperatorCondition (owned by the CSV as its controller) and its Role and RoleBinding.
    let condition = create(
        client,
        &operator_conditions(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v2"), "kind": "OperatorCondition",
            "metadata": {"name": csv, "namespace": namespace, "labels": {"olm.managed": "true", component.clone(): ""},
                "ownerReferences": [{"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterServiceVersion",
                    "name": csv, "uid": csv_uid, "blockOwnerDeletion": false, "controller": true}]},
            "spec": {"deployments": [deployment], "serviceAccounts": [operator]}
        }),
    )
    .await;
    let condition_owner = json!([{"apiVersion": format!("{GROUP}/v2"), "kind": "OperatorCondition",
        "name": csv, "uid": condition.metadata.uid, "blockOwnerDeletion": false, "controller": true}]);
    let condition_meta = json!({"name": csv, "namespace": namespace, "labels": {"olm.managed": "true"},
        "ownerReferences": condition_owner});
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": condition_meta,
            "rules": [{"apiGroups": [GROUP], "resources": ["operatorconditions"], "resourceNames": [csv],
                "verbs": ["get", "update", "patch"]}]}),
    )
    .await;
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": condition_meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": csv},
            "subjects": [{"kind": "ServiceAccount", "name": operator}]}),
    )
    .await;

    // Copied CSVs in the other target namespaces (none for OwnNamespace or AllNamespaces here:
    // copies of AllNamespaces operators can be turned off, and no test reads them).
    for t in targets.iter().flatten().filter(|t| **t != namespace) {
        let mut copy = csv_body.clone();
        copy["metadata"] = json!({
            "name": csv, "namespace": t,
            "labels": {"olm.managed": "true", "olm.copiedFrom": namespace},
            "annotations": {
                "olm.operatorGroup": operator_group, "olm.operatorNamespace": namespace,
                "capabilities": csv_annotations["capabilities"],
                "operatorframework.io/properties": csv_annotations["operatorframework.io/properties"]
            }
        });
        create(client, &csvs(), Some(t), copy).await;
        set_status(
            client,
            &csvs(),
            t,
            &csv,
            json!({"phase": "Succeeded", "reason": "Copied",
                "message": format!("The operator is running in {namespace} but is managing this namespace")}),
        )
        .await;
    }

    wait_available(client, &namespace, &deployment).await;
    ClassicInstall {
        package,
        namespace,
        subscription: spec.package.name.clone(),
        csv,
        csv_uid,
        install_plan,
        operator_group,
        catalog_source,
        catalog_namespace,
        catalog_image,
        bundle_image,
        deployment,
    }
}

/// Waits until a Deployment is Available (kwok runs its pods).
pub async fn wait_available(client: &Client, namespace: &str, name: &str) -> Deployment {
    let api = Api::<Deployment>::namespaced(client.clone(), namespace);
    support::wait_for(
        &format!("Deployment {namespace}/{name} Available"),
        components::INSTALL_TIMEOUT,
        || async {
            let d = api.get(name).await.map_err(|e| e.to_string())?;
            let available = d
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
            if available {
                Ok(d)
            } else {
                Err(format!("{:?}", d.status))
            }
        },
    )
    .await
}

/// Merges `patch` into a classic object (`status: true`: its status).
pub async fn patch(
    client: &Client,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    patch: Value,
    status: bool,
) {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, ar);
    let result = if status {
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    } else {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    };
    result.unwrap_or_else(|e| panic!("cannot patch {} {namespace}/{name}: {e}", ar.kind));
}
