//! OLM classic's footprint on the local control plane, laid down as classic leaves it for an
//! operator installed from a catalog (`../shared/reference/classic-footprint.md`): classic's CRDs
//! (read from `../shared/classic-api` at test time), a grpc CatalogSource backed by a catalog
//! image, the OperatorGroup, the Subscription, its `Complete` InstallPlan, the `Succeeded` CSV
//! with its status, and what classic creates for the CSV (its CRDs and other manifests, the
//! ServiceAccounts, Roles and bindings of its permissions, every Deployment of its install
//! strategy with its pod-template annotations and injected env, the OperatorCondition, copied
//! CSVs) with classic's owner references and `olm.owner*` labels; for a CSV owning APIServices,
//! what classic makes to serve them (`install/certresources.go`, `install/apiservice.go`: the
//! Service, a serving certificate signed by a CA of its own in a Secret, its Role and RoleBinding,
//! the auth-delegator and auth-reader bindings, the certificate mounted into the Deployment with
//! `olmcahash`, the APIService with its CA bundle). The installed bundle is a test bundle
//! (`fixtures::Package`), a real one of `../shared/catalogs` ([`RealBundle`]) or one published by
//! `hack/test-operator.sh` ([`ImageBundle`]); either way the footprint is read from the bundle as
//! published to the registry.
//! Classic's controllers cannot be built here, so nothing reconciles these objects: they are the
//! state a migration starts from.

use std::{collections::BTreeSet, path::PathBuf, sync::OnceLock};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use olmv1::bundle::render::names::{deep_hash, object_name_for_base_and_suffix};
use serde_json::{Value, json};

use crate::{
    components,
    fixtures::{self, Package},
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
    /// The Subscription's name (the package's by default).
    pub subscription: Option<String>,
    /// A bundle of `../shared/catalogs` instead of `package`'s test bundles.
    pub real: Option<RealBundle>,
    /// A bundle already published with its catalog (`hack/test-operator.sh`).
    pub image: Option<ImageBundle>,
}

/// A bundle published with its catalog image by `hack/test-operator.sh`, read back from the
/// registry: its manifests and the catalog's properties of it.
#[derive(Clone, Debug)]
pub struct ImageBundle {
    /// The catalog image (holding the package).
    pub catalog_image: String,
    /// The bundle image (a digest).
    pub bundle_image: String,
    /// The bundle's manifests (the CSV among them).
    pub manifests: Vec<Value>,
    /// The catalog's properties of the bundle.
    pub properties: Vec<Value>,
}

impl ImageBundle {
    /// `package` at `version` as the catalog `catalog_image` holds it.
    pub async fn read(catalog_image: &str, package: &str, version: &str) -> ImageBundle {
        let cache = tempfile::tempdir().unwrap();
        let options = olmv1::image::cache::PullOptions::new(cache.path());
        let package_file = format!("configs/{package}/catalog.yaml");
        let (_, entries) = olmv1::image::cache::pull_and_read(catalog_image, &options, |dir| {
            let text = std::fs::read_to_string(dir.join(&package_file)).unwrap();
            text.split("\n---\n")
                .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
                .collect::<Vec<Value>>()
        })
        .await
        .unwrap_or_else(|e| panic!("pulling catalog {catalog_image}: {e}"));
        let bundle = entries
            .iter()
            .find(|e| {
                e["schema"] == "olm.bundle"
                    && e["properties"].as_array().is_some_and(|p| {
                        p.iter()
                            .any(|p| p["type"] == "olm.package" && p["value"]["version"] == version)
                    })
            })
            .unwrap_or_else(|| panic!("{package} {version} is not in {catalog_image}"));
        let bundle_image = bundle["image"].as_str().unwrap().to_string();
        let (_, manifests) = olmv1::image::cache::pull_and_read(&bundle_image, &options, |dir| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("manifests"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            files
                .iter()
                .map(|f| serde_saphyr::from_str::<Value>(&std::fs::read_to_string(f).unwrap()).unwrap())
                .collect::<Vec<Value>>()
        })
        .await
        .unwrap_or_else(|e| panic!("pulling bundle {bundle_image}: {e}"));
        ImageBundle {
            catalog_image: catalog_image.to_string(),
            bundle_image,
            manifests,
            properties: bundle["properties"].as_array().cloned().unwrap_or_default(),
        }
    }
}

/// A bundle of `../shared/catalogs` classic installed: its package rebuilt from the catalog's
/// entries and published as `fixtures::publish_real_package` does.
#[derive(Clone, Debug)]
pub struct RealBundle {
    /// The catalog's directory, e.g. `<repo>/../shared/catalogs/community-operators-v4.16`.
    pub catalog_dir: PathBuf,
    pub package: String,
    /// The bundles the published catalog holds, by name.
    pub published: Vec<String>,
    /// The installed bundle's name, one of `published`.
    pub installed: String,
    /// The catalog image's tag: a test's own, so that no other test's ClusterCatalog serves it.
    pub tag: String,
}

impl RealBundle {
    /// The installed bundle as the catalog holds it (its properties carry its manifests).
    fn catalog_bundle(&self) -> support::CatalogBundle {
        support::read_catalog_bundles(&self.catalog_dir.join(&self.package), "")
            .into_iter()
            .find(|b| b.name == self.installed)
            .unwrap_or_else(|| panic!("{} is not in {:?}", self.installed, self.catalog_dir))
    }

    /// The installed bundle's version (its `olm.package` property).
    fn version(&self) -> String {
        let bundle = self.catalog_bundle();
        let package = bundle
            .properties
            .iter()
            .find(|p| &*p.type_ == "olm.package")
            .unwrap_or_else(|| panic!("{} has no olm.package property", self.installed));
        package.value.to_value()["version"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: olm.package has no version", self.installed))
            .to_string()
    }
}

impl Classic {
    /// Version 1.0.0 of a one-bundle package, AllNamespaces, Automatic, channel `stable`.
    pub fn new(package: Package) -> Classic {
        Classic {
            version: package.bundles[0].version.clone(),
            ..Classic::new_empty(package)
        }
    }

    /// `bundle` of a real package, AllNamespaces, Automatic, channel `stable`.
    pub fn real(bundle: RealBundle) -> Classic {
        let package = Package {
            name: bundle.package.clone(),
            default_channel: "stable".into(),
            channels: Vec::new(),
            bundles: Vec::new(),
            deprecations: Vec::new(),
        };
        Classic {
            version: bundle.version(),
            real: Some(bundle),
            ..Classic::new_empty(package)
        }
    }

    /// `version` of `package`, published by `hack/test-operator.sh`, AllNamespaces, Automatic,
    /// channel `stable`.
    pub fn published(package: &str, version: &str, bundle: ImageBundle) -> Classic {
        let package = Package {
            name: package.into(),
            default_channel: "stable".into(),
            channels: Vec::new(),
            bundles: Vec::new(),
            deprecations: Vec::new(),
        };
        Classic {
            version: version.into(),
            image: Some(bundle),
            ..Classic::new_empty(package)
        }
    }

    /// `package`, no version chosen yet.
    fn new_empty(package: Package) -> Classic {
        Classic {
            package,
            version: String::new(),
            channel: "stable".into(),
            mode: Mode::AllNamespaces,
            approval: "Automatic".into(),
            config: None,
            hotfix_image: None,
            catalog_namespace: None,
            subscription: None,
            real: None,
            image: None,
        }
    }

    pub fn subscription(mut self, name: &str) -> Self {
        self.subscription = Some(name.into());
        self
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
    /// The CSV's first deployment.
    pub deployment: String,
    /// Every deployment of the CSV's install strategy.
    pub deployments: Vec<String>,
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

/// The API of `object`'s kind, found by discovery, and whether it is namespaced.
async fn api_of(client: &Client, object: &Value) -> (ApiResource, bool) {
    let (group, version) = group_version(object["apiVersion"].as_str().unwrap());
    let kind = object["kind"].as_str().unwrap();
    let (ar, capabilities) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .unwrap_or_else(|e| panic!("no API serves {group}/{version} {kind}: {e}"));
    (ar, capabilities.scope == kube::discovery::Scope::Namespaced)
}

async fn namespaced(client: &Client, object: &Value) -> bool {
    api_of(client, object).await.1
}

/// Creates any object from JSON (server-side apply as classic's field manager).
async fn apply_object(client: &Client, object: Value) {
    let (ar, _) = api_of(client, &object).await;
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.patch(&name, &PatchParams::apply("olm").force(), &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("cannot apply {} {name}: {e}", ar.kind));
}

/// The installed bundle as published to the registry: what classic reads from it.
struct Published {
    /// The catalog image (a tag).
    catalog_image: String,
    /// The bundle image (a digest).
    bundle_image: String,
    /// The bundle's CSV, as in the bundle.
    csv: Value,
    /// Every other manifest of the bundle (CRDs, Services, ConfigMaps...).
    manifests: Vec<Value>,
    /// The bundle's properties, as the InstallPlan writes them on the CSV.
    properties: Vec<Value>,
}

/// Publishes `spec`'s package (a test package, or a real one rebuilt from its catalog entries)
/// and reads the installed bundle's manifests from what was pushed.
async fn publish(spec: &Classic) -> Published {
    let registry = support::registry();
    let (catalog_image, bundle_image, manifests, properties) = match (&spec.real, &spec.image) {
        (_, Some(image)) => (
            image.catalog_image.clone(),
            image.bundle_image.clone(),
            image.manifests.clone(),
            image.properties.clone(),
        ),
        (None, None) => {
            let package = &spec.package.name;
            let bundle = spec
                .package
                .bundles
                .iter()
                .find(|b| b.version == spec.version)
                .expect("the installed version is a bundle of the package");
            let catalog_image =
                fixtures::publish_catalog(registry, &format!("e2e/{package}-index"), "v1", &spec.package)
                    .await;
            // Pushing the same bundle again gives its digest reference (the push is reproducible).
            let bundle_image = fixtures::publish_bundle(registry, package, bundle).await;
            let dir = tempfile::tempdir().unwrap();
            fixtures::write_bundle(dir.path(), package, bundle);
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("manifests"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            let manifests: Vec<Value> = files
                .iter()
                .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
                .collect();
            // What the catalog says of a test bundle: the package, the owned API, the dependencies.
            let mut properties = vec![
                json!({"type": "olm.package", "value": {"packageName": package, "version": bundle.version}}),
                json!({"type": "olm.gvk", "value": {"group": fixtures::crd_group(package), "version": "v1", "kind": "Widget"}}),
            ];
            properties.extend(bundle.dependencies.iter().cloned());
            (catalog_image, bundle_image, manifests, properties)
        }
        (Some(real), None) => {
            let published: Vec<&str> = real.published.iter().map(String::as_str).collect();
            let catalog_image = fixtures::publish_real_package(
                registry,
                &real.catalog_dir,
                &real.package,
                &published,
                &real.tag,
            )
            .await;
            let bundle = real.catalog_bundle();
            let dir = tempfile::tempdir().unwrap();
            bundle.write_dir(dir.path());
            // The content publish_real_package pushed, under its reference: the same digest.
            let bundle_image = fixtures::push(
                dir.path(),
                &format!("{registry}/real/{}:bundle", real.installed),
                "/",
                &[],
            )
            .await;
            let manifests: Vec<Value> = bundle
                .manifests()
                .iter()
                .map(|m| {
                    serde_json::from_slice(m)
                        .unwrap_or_else(|e| panic!("{}: a manifest is not JSON: {e}", real.installed))
                })
                .collect();
            // The registry serves a bundle's properties without its manifests.
            let properties: Vec<Value> = bundle
                .properties
                .iter()
                .filter(|p| !matches!(&*p.type_, "olm.bundle.object" | "olm.csv.metadata"))
                .map(|p| json!({"type": &*p.type_, "value": p.value.to_value()}))
                .collect();
            (catalog_image, bundle_image, manifests, properties)
        }
    };
    let (csvs, manifests): (Vec<Value>, Vec<Value>) = manifests
        .into_iter()
        .partition(|m: &Value| m["kind"] == "ClusterServiceVersion");
    let [csv] = <[Value; 1]>::try_from(csvs).expect("one CSV in the bundle");
    Published {
        catalog_image,
        bundle_image,
        csv,
        manifests,
        properties,
    }
}

/// `json[key]` as a list (none when absent).
fn list(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// `(group, version)` of an `apiVersion`.
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// FNV-1a, 64 bits, in hex: the hash classic's installed-alongside annotation keys use.
fn fnv64a_hex(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:x}")
}

/// `entries` added to `object`'s `metadata.<field>` (labels or annotations), what it has kept.
fn add(object: &mut Value, field: &str, entries: Value) {
    if !object["metadata"][field].is_object() {
        object["metadata"][field] = json!({});
    }
    let map = object["metadata"][field].as_object_mut().unwrap();
    map.extend(entries.as_object().unwrap().clone());
}

/// `env` merged as classic merges a Subscription's env into a container's: by name, the
/// existing order kept, new variables appended.
fn merge_env(container: &mut Value, env: &[Value]) {
    let mut merged = list(&container["env"]);
    for var in env {
        match merged.iter_mut().find(|e| e["name"] == var["name"]) {
            Some(existing) => *existing = var.clone(),
            None => merged.push(var.clone()),
        }
    }
    container["env"] = json!(merged);
}

/// Lays down classic's footprint of `spec` and waits for the operator's Deployments to be
/// Available on kwok's node. Everything but the names classic chooses comes from the installed
/// bundle's CSV and manifests, as published to the registry.
pub async fn lay_down(client: &Client, spec: &Classic) -> ClassicInstall {
    ensure_classic_crds();
    let package = spec.package.name.clone();
    let published = publish(spec).await;
    let Published {
        catalog_image,
        bundle_image,
        manifests,
        ..
    } = &published;

    let namespace = support::fresh_namespace(client, &package).await;
    let catalog_namespace = match &spec.catalog_namespace {
        Some(ns) => ns.clone(),
        None => support::fresh_namespace(client, "olm").await,
    };
    let catalog_source = format!("{package}-catalog");
    let subscription = spec.subscription.clone().unwrap_or_else(|| package.clone());
    let csv = published.csv["metadata"]["name"].as_str().unwrap().to_string();
    let component = component_label(&package, &namespace);
    let operator_group = format!("{namespace}-og");
    let strategy = published.csv["spec"]["install"]["spec"].clone();
    let deployments: Vec<String> = list(&strategy["deployments"])
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    let permissions = list(&strategy["permissions"]);
    let cluster_permissions = list(&strategy["clusterPermissions"]);
    // The ServiceAccounts the permissions name; classic never creates `default`.
    let service_accounts: BTreeSet<String> = permissions
        .iter()
        .chain(&cluster_permissions)
        .filter_map(|p| p["serviceAccountName"].as_str())
        .filter(|sa| *sa != "default")
        .map(str::to_string)
        .collect();
    let owned_crds = list(&published.csv["spec"]["customresourcedefinitions"]["owned"]);
    let sa_of = |p: &Value| p["serviceAccountName"].as_str().unwrap_or_default().to_string();
    // Role and ClusterRole names: classic's `<csv>-<sa>` / `<csv>` base and a hash of the
    // permission (and, for cluster roles, the namespace), cut to a valid name.
    let role_names: Vec<String> = permissions
        .iter()
        .map(|p| object_name_for_base_and_suffix(&format!("{csv}-{}", sa_of(p)), &deep_hash(&p.to_string())))
        .collect();
    let cluster_role_names: Vec<String> = cluster_permissions
        .iter()
        .map(|p| object_name_for_base_and_suffix(&csv, &deep_hash(&format!("{namespace}{p}"))))
        .collect();

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

    // OperatorGroup and its target namespaces; it names the APIs its CSVs provide.
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
    let owned_api_services = list(&published.csv["spec"]["apiservicedefinitions"]["owned"]);
    let provided: BTreeSet<String> = owned_crds
        .iter()
        .map(|o| {
            let group = o["name"]
                .as_str()
                .unwrap()
                .split_once('.')
                .map(|(_, g)| g)
                .unwrap_or_default();
            format!(
                "{}.{}.{group}",
                o["kind"].as_str().unwrap(),
                o["version"].as_str().unwrap()
            )
        })
        .chain(owned_api_services.iter().map(|a| {
            format!(
                "{}.{}.{}",
                a["kind"].as_str().unwrap(),
                a["version"].as_str().unwrap(),
                a["group"].as_str().unwrap()
            )
        }))
        .collect();
    let og = create(
        client,
        &operator_groups(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "OperatorGroup",
            "metadata": {"name": operator_group, "namespace": namespace,
                "annotations": {"olm.providedAPIs": provided.into_iter().collect::<Vec<_>>().join(",")}},
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
            "metadata": {"name": subscription, "namespace": namespace, "labels": {component.clone(): ""}},
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
                    "name": subscription, "uid": sub_uid, "blockOwnerDeletion": false, "controller": false}]},
            "spec": {"clusterServiceVersionNames": [csv], "approval": spec.approval,
                "approved": true, "generation": 1}
        }),
    )
    .await;
    let install_plan = ip.metadata.name.clone().unwrap();

    // The CSV: the bundle's, as the InstallPlan created it and the OperatorGroup annotated it.
    let mut csv_body = published.csv.clone();
    if let Some(image) = &spec.hotfix_image {
        csv_body["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
            ["image"] = json!(image);
    }
    if !csv_body["metadata"]["annotations"].is_object() {
        csv_body["metadata"]["annotations"] = json!({});
    }
    let annotations = csv_body["metadata"]["annotations"].as_object_mut().unwrap();
    annotations.insert("olm.operatorGroup".into(), json!(operator_group));
    annotations.insert("olm.operatorNamespace".into(), json!(namespace));
    annotations.insert("olm.targetNamespaces".into(), json!(target_annotation));
    annotations.insert(
        "operatorframework.io/properties".into(),
        json!(json!({"properties": published.properties}).to_string()),
    );
    let csv_annotations = csv_body["metadata"]["annotations"].clone();
    csv_body["metadata"]["namespace"] = json!(namespace);
    csv_body["metadata"]["labels"] = json!({"olm.managed": "true", component.clone(): ""});
    csv_body["metadata"]["finalizers"] = json!(["operators.coreos.com/csv-cleanup"]);
    let created = create(client, &csvs(), Some(&namespace), csv_body.clone()).await;
    let csv_uid = created.metadata.uid.clone().unwrap();
    let rule_status = |scope: &str, rule: &Value| {
        json!({"group": "rbac.authorization.k8s.io", "kind": "PolicyRule", "version": "v1",
            "status": "Satisfied", "message": format!("{scope} rule:{rule}")})
    };
    let mut requirements: Vec<Value> = owned_crds
        .iter()
        .map(|o| {
            json!({"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "name": o["name"],
                "version": "v1", "status": "Present", "uuid": "00000000-0000-0000-0000-000000000000",
                "message": "CRD is present and Established condition is true"})
        })
        .collect();
    for sa in &service_accounts {
        let of_sa = |p: &&Value| p["serviceAccountName"] == sa.as_str();
        let dependents: Vec<Value> = cluster_permissions
            .iter()
            .filter(of_sa)
            .flat_map(|p| list(&p["rules"]))
            .map(|r| rule_status("cluster", &r))
            .chain(
                permissions
                    .iter()
                    .filter(of_sa)
                    .flat_map(|p| list(&p["rules"]))
                    .map(|r| rule_status("namespaced", &r)),
            )
            .collect();
        requirements.push(
            json!({"group": "", "kind": "ServiceAccount", "name": sa, "version": "v1",
            "status": "Present", "message": "Service account exists", "uuid": "", "dependents": dependents}),
        );
    }
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
            "requirementStatus": requirements,
            "cleanup": {}
        }),
    )
    .await;

    // The Subscription's and InstallPlan's statuses, now that the CSV exists. The plan has a
    // step per object the InstallPlan created: the CSV, the bundle's manifests, the generated
    // ServiceAccounts, roles and bindings.
    let step = |group: &str, version: &str, kind: &str, name: &str| {
        json!({"resolving": csv, "status": "Created", "resource": {
            "group": group, "version": version, "kind": kind, "name": name,
            "sourceName": catalog_source, "sourceNamespace": catalog_namespace, "manifest": "{}"}})
    };
    let rbac = "rbac.authorization.k8s.io";
    let mut plan = vec![step(GROUP, "v1alpha1", "ClusterServiceVersion", &csv)];
    for m in manifests {
        let (group, version) = group_version(m["apiVersion"].as_str().unwrap_or_default());
        plan.push(step(
            group,
            version,
            m["kind"].as_str().unwrap_or_default(),
            m["metadata"]["name"].as_str().unwrap_or_default(),
        ));
    }
    plan.extend(
        service_accounts
            .iter()
            .map(|sa| step("", "v1", "ServiceAccount", sa)),
    );
    for name in &role_names {
        plan.push(step(rbac, "v1", "Role", name));
        plan.push(step(rbac, "v1", "RoleBinding", name));
    }
    for name in &cluster_role_names {
        plan.push(step(rbac, "v1", "ClusterRole", name));
        plan.push(step(rbac, "v1", "ClusterRoleBinding", name));
    }
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
            "plan": plan,
            "bundleLookups": [{"path": bundle_image, "identifier": csv, "replaces": "",
                "catalogSourceRef": {"name": catalog_source, "namespace": catalog_namespace},
                "properties": json!({"properties": published.properties}).to_string()}],
            "startTime": "2026-01-01T00:00:00Z"
        }),
    )
    .await;
    set_status(
        client,
        &subscriptions(),
        &namespace,
        &subscription,
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

    // The bundle's manifests, as the InstallPlan created them: CRDs labelled and annotated as
    // installed alongside the CSV; namespaced objects owned by the CSV; cluster-scoped ones
    // labelled (ClusterRoles and ClusterRoleBindings with olm.managed only, on creation).
    let alongside = format!("{namespace}/{csv}");
    let mut crds = Vec::new();
    for manifest in manifests {
        let mut object = manifest.clone();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if kind == "CustomResourceDefinition" {
            add(
                &mut object,
                "labels",
                json!({"olm.managed": "true", component.clone(): ""}),
            );
            add(
                &mut object,
                "annotations",
                json!({
                    format!("operatorframework.io/installed-alongside-{}", fnv64a_hex(&alongside)): alongside
                }),
            );
            crds.push(format!("crd/{name}"));
        } else if namespaced(client, &object).await {
            object["metadata"]["namespace"] = json!(namespace);
            add(&mut object, "labels", json!({"olm.managed": "true"}));
            object["metadata"]["ownerReferences"] = csv_owner(&csv, &csv_uid);
        } else if matches!(kind.as_str(), "ClusterRole" | "ClusterRoleBinding") {
            add(&mut object, "labels", json!({"olm.managed": "true"}));
        } else {
            add(&mut object, "labels", owner_labels(&csv, &namespace));
        }
        apply_object(client, object).await;
    }
    if !crds.is_empty() {
        let crds: Vec<&str> = crds.iter().map(String::as_str).collect();
        support::wait_crds_established(&crds);
    }

    // What the InstallPlan generates for the CSV's permissions: the ServiceAccounts, a Role
    // and RoleBinding per namespaced permission (owned by the CSV), a ClusterRole and
    // ClusterRoleBinding per cluster permission (labelled).
    let owned_meta = |name: &str| {
        json!({"name": name, "namespace": namespace, "labels": {"olm.managed": "true"},
            "ownerReferences": csv_owner(&csv, &csv_uid)})
    };
    for sa in &service_accounts {
        apply_object(
            client,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": owned_meta(sa)}),
        )
        .await;
    }
    for (permission, role) in permissions.iter().zip(&role_names) {
        let rules = &permission["rules"];
        let mut role_meta = owned_meta(role);
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
                "subjects": [{"kind": "ServiceAccount", "name": sa_of(permission), "namespace": namespace}]}),
        )
        .await;
    }
    for (permission, cluster_role) in cluster_permissions.iter().zip(&cluster_role_names) {
        let rules = &permission["rules"];
        let mut cluster_meta = json!({"name": cluster_role, "labels": owner_labels(&csv, &namespace)});
        cluster_meta["labels"]["olm.permissions.hash"] = json!(&deep_hash(&rules.to_string())[..16]);
        apply_object(
            client,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": cluster_meta, "rules": rules}),
        )
        .await;
        apply_object(
            client,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": cluster_meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                "subjects": [{"kind": "ServiceAccount", "name": sa_of(permission), "namespace": namespace}]}),
        )
        .await;
    }

    // What classic makes to serve owned APIServices, per serving Deployment.
    let serving = serving_certificates(client, &csv_body, &namespace, &csv, &csv_uid).await;

    // The Deployments, as the olm-operator writes them: each of the CSV's deployment specs,
    // every CSV annotation on the pod template (the template's own win), the Subscription's env
    // merged by name, OPERATOR_CONDITION_NAME appended, revisionHistoryLimit 1, the strategy's
    // labels and owner labels, the spec hash and one non-blocking owner reference.
    let config_env: Vec<Value> = spec.config.as_ref().map(|c| list(&c["env"])).unwrap_or_default();
    for strategy in list(&csv_body["spec"]["install"]["spec"]["deployments"]) {
        let name = strategy["name"].as_str().unwrap().to_string();
        let mut dep_spec = strategy["spec"].clone();
        let template_annotations = dep_spec["template"]["metadata"]
            .get("annotations")
            .cloned()
            .unwrap_or(json!({}));
        let mut merged = csv_annotations.as_object().unwrap().clone();
        merged.extend(template_annotations.as_object().unwrap().clone());
        dep_spec["template"]["metadata"]["annotations"] = Value::Object(merged);
        for container in dep_spec["template"]["spec"]["containers"].as_array_mut().unwrap() {
            merge_env(container, &config_env);
            merge_env(
                container,
                &[json!({"name": "OPERATOR_CONDITION_NAME", "value": csv})],
            );
        }
        dep_spec["revisionHistoryLimit"] = json!(1);
        if let Some(cert) = serving.get(&name) {
            mount_serving_certificate(&mut dep_spec, cert);
        }
        let mut labels = strategy.get("label").cloned().unwrap_or(json!({}));
        for (k, v) in owner_labels(&csv, &namespace).as_object().unwrap() {
            labels[k] = v.clone();
        }
        labels["olm.deployment-spec-hash"] = json!(&deep_hash(&dep_spec.to_string())[..16]);
        apply_object(
            client,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace, "labels": labels,
                    "ownerReferences": csv_owner(&csv, &csv_uid)},
                "spec": dep_spec}),
        )
        .await;
    }

    // The OperatorCondition (owned by the CSV as its controller) and its Role and RoleBinding;
    // its accounts as classic's generator lists them: clusterPermissions' then permissions',
    // repeats kept, `default` when none.
    let mut condition_accounts: Vec<String> = cluster_permissions
        .iter()
        .chain(&permissions)
        .map(sa_of)
        .filter(|sa| !sa.is_empty())
        .collect();
    if condition_accounts.is_empty() {
        condition_accounts.push("default".into());
    }
    let condition = create(
        client,
        &operator_conditions(),
        Some(&namespace),
        json!({
            "apiVersion": format!("{GROUP}/v2"), "kind": "OperatorCondition",
            "metadata": {"name": csv, "namespace": namespace, "labels": {"olm.managed": "true", component.clone(): ""},
                "ownerReferences": [{"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterServiceVersion",
                    "name": csv, "uid": csv_uid, "blockOwnerDeletion": false, "controller": true}]},
            "spec": {"deployments": deployments, "serviceAccounts": condition_accounts}
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
    let condition_subjects: Vec<Value> = condition_accounts
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa}))
        .collect();
    apply_object(
        client,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": condition_meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": csv},
            "subjects": condition_subjects}),
    )
    .await;

    // Copied CSVs in the other target namespaces (none for OwnNamespace or AllNamespaces here:
    // copies of AllNamespaces operators can be turned off, and no test reads them).
    for t in targets.iter().flatten().filter(|t| **t != namespace) {
        let mut copy = csv_body.clone();
        let mut copied_annotations = csv_annotations.clone();
        copied_annotations
            .as_object_mut()
            .unwrap()
            .remove("olm.targetNamespaces");
        copy["metadata"] = json!({
            "name": csv, "namespace": t,
            "labels": {"olm.managed": "true", "olm.copiedFrom": namespace},
            "annotations": copied_annotations
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

    for deployment in &deployments {
        wait_available(client, &namespace, deployment).await;
    }
    // The APIServices, with the CA of their Deployment's certificate; once their servers run.
    for api in &owned_api_services {
        let deployment = api["deploymentName"].as_str().unwrap();
        let cert = &serving[deployment];
        let port = api["containerPort"].as_i64().filter(|p| *p > 0).unwrap_or(443);
        let name = format!(
            "{}.{}",
            api["version"].as_str().unwrap(),
            api["group"].as_str().unwrap()
        );
        apply_object(
            client,
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name, "labels": owner_labels(&csv, &namespace)},
                "spec": {"group": api["group"], "version": api["version"],
                    "groupPriorityMinimum": 2000, "versionPriority": 15,
                    "service": {"namespace": namespace, "name": cert.service, "port": port},
                    "caBundle": base64(cert.ca_pem.as_bytes())}}),
        )
        .await;
        wait_api_service_available(client, &name).await;
    }
    ClassicInstall {
        package,
        namespace,
        subscription,
        csv,
        csv_uid,
        install_plan,
        operator_group,
        catalog_source,
        catalog_namespace,
        catalog_image: catalog_image.clone(),
        bundle_image: bundle_image.clone(),
        deployment: deployments[0].clone(),
        deployments,
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

/// What classic made to serve a Deployment's APIServices: the Service and the certificate.
#[derive(Clone, Debug)]
pub struct ServingCertificate {
    /// `<deployment>-service`.
    pub service: String,
    /// `<service>-cert`: the Secret.
    pub secret: String,
    /// Classic's CA (PEM), also in the Secret as `olmCAKey` and in each APIService's caBundle.
    pub ca_pem: String,
    /// SHA-256 of the CA, hex: the pod template's `olmcahash`.
    pub ca_hash: String,
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A CA and a serving certificate as classic's `certs.CreateSignedServingPair` makes them: ECDSA
/// P-256 keys (the serving key in SEC1 form), organization "Red Hat, Inc.", the CA named
/// `olm-selfsigned-<serial>`, the leaf for `<service>.<ns>`, `.svc` and `.svc.cluster.local`
/// (the first also its common name), server auth, 730 days. Returns (CA, certificate, key) PEM.
fn classic_serving_pair(service: &str, namespace: &str) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let hosts = [
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    std::fs::write(
        path("leaf.ext"),
        format!(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\nsubjectAltName={}\n",
            hosts
                .iter()
                .map(|h| format!("DNS:{h}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
    )
    .unwrap();
    let serial = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let openssl = |args: &[&str]| support::run(std::process::Command::new("openssl").args(args)).ok();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &path("ca.key"),
        "-out",
        &path("ca.crt"),
        "-days",
        "730",
        "-subj",
        &format!("/O=Red Hat, Inc./CN=olm-selfsigned-{serial}"),
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &path("pkcs8.key"),
        "-out",
        &path("leaf.csr"),
        "-subj",
        &format!("/O=Red Hat, Inc./CN={}", hosts[0]),
    ]);
    openssl(&["ec", "-in", &path("pkcs8.key"), "-out", &path("tls.key")]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &path("leaf.csr"),
        "-CA",
        &path("ca.crt"),
        "-CAkey",
        &path("ca.key"),
        "-CAcreateserial",
        "-days",
        "730",
        "-extfile",
        &path("leaf.ext"),
        "-out",
        &path("tls.crt"),
    ]);
    let read = |f: &str| std::fs::read_to_string(path(f)).unwrap();
    (read("ca.crt"), read("tls.crt"), read("tls.key"))
}

/// For each Deployment serving an owned APIService: the Service (its APIServices' ports), the
/// Secret with classic's certificate, the Secret's Role and RoleBinding (owned by the CSV), the
/// auth-delegator ClusterRoleBinding (owner labels) and the auth-reader RoleBinding in
/// kube-system (`olm.managed` only), as classic's `installCertRequirementsForDeployment` makes
/// them. Keyed by Deployment.
async fn serving_certificates(
    client: &Client,
    csv_body: &Value,
    namespace: &str,
    csv: &str,
    csv_uid: &str,
) -> std::collections::BTreeMap<String, ServingCertificate> {
    use sha2::Digest;
    let owned = list(&csv_body["spec"]["apiservicedefinitions"]["owned"]);
    let strategies = list(&csv_body["spec"]["install"]["spec"]["deployments"]);
    let mut out = std::collections::BTreeMap::new();
    for api in &owned {
        let deployment = api["deploymentName"].as_str().unwrap().to_string();
        if out.contains_key(&deployment) {
            continue;
        }
        let strategy = strategies
            .iter()
            .find(|d| d["name"] == deployment.as_str())
            .expect("the APIService's Deployment");
        let account = strategy["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .filter(|a| !a.is_empty())
            .unwrap_or("default");
        let service = format!("{deployment}-service");
        let secret = format!("{service}-cert");
        let ports: BTreeSet<i64> = owned
            .iter()
            .filter(|a| a["deploymentName"] == deployment.as_str())
            .map(|a| a["containerPort"].as_i64().filter(|p| *p > 0).unwrap_or(443))
            .collect();
        let (ca_pem, cert_pem, key_pem) = classic_serving_pair(&service, namespace);
        let ca_hash = hex::encode(sha2::Sha256::digest(ca_pem.as_bytes()));
        let owned_by_csv = |name: &str| {
            json!({"name": name, "namespace": namespace, "labels": {"olm.managed": "true"},
                "ownerReferences": csv_owner(csv, csv_uid)})
        };
        let subject =
            json!([{"kind": "ServiceAccount", "apiGroup": "", "name": account, "namespace": namespace}]);
        let objects = [
            json!({"apiVersion": "v1", "kind": "Service", "metadata": owned_by_csv(&service),
                "spec": {"ports": ports.iter().map(|p| json!({"name": p.to_string(), "port": p, "targetPort": p})).collect::<Vec<_>>(),
                    "selector": strategy["spec"]["selector"]["matchLabels"]}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": namespace, "labels": {"olm.managed": "true"},
                    "annotations": {"olmcahash": ca_hash}, "ownerReferences": csv_owner(csv, csv_uid)},
                "data": {"tls.crt": base64(cert_pem.as_bytes()), "tls.key": base64(key_pem.as_bytes()),
                    "olmCAKey": base64(ca_pem.as_bytes())}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": owned_by_csv(&secret),
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": owned_by_csv(&secret),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": secret},
                "subjects": subject}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("{service}-system:auth-delegator"), "labels": owner_labels(csv, namespace)},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
                "subjects": subject}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": format!("{service}-auth-reader"), "namespace": "kube-system",
                    "labels": {"olm.managed": "true"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "extension-apiserver-authentication-reader"},
                "subjects": subject}),
        ];
        for object in objects {
            apply_object(client, object).await;
        }
        out.insert(
            deployment,
            ServingCertificate {
                service,
                secret,
                ca_pem,
                ca_hash,
            },
        );
    }
    out
}

/// Classic's `AddDefaultCertVolumeAndVolumeMounts` and `SetCAAnnotation` on a Deployment spec:
/// the Secret mounted as `apiservice-cert` (apiserver.crt/.key under
/// /apiserver.local.config/certificates) and `webhook-cert` (tls.crt/.key under
/// /tmp/k8s-webhook-server/serving-certs) in every container, and `olmcahash` on the template.
fn mount_serving_certificate(dep_spec: &mut Value, cert: &ServingCertificate) {
    let pod = &mut dep_spec["template"]["spec"];
    let mut volumes = list(&pod["volumes"]);
    for (name, crt, key) in [
        ("apiservice-cert", "apiserver.crt", "apiserver.key"),
        ("webhook-cert", "tls.crt", "tls.key"),
    ] {
        volumes.retain(|v| v["name"] != name);
        volumes.push(
            json!({"name": name, "secret": {"secretName": cert.secret, "items": [
            {"key": "tls.crt", "path": crt}, {"key": "tls.key", "path": key}]}}),
        );
    }
    pod["volumes"] = json!(volumes);
    for container in pod["containers"].as_array_mut().unwrap() {
        let mut mounts = list(&container["volumeMounts"]);
        for (name, path) in [
            ("apiservice-cert", "/apiserver.local.config/certificates"),
            ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs"),
        ] {
            if !mounts.iter().any(|m| m["name"] == name) {
                mounts.push(json!({"name": name, "mountPath": path}));
            }
        }
        container["volumeMounts"] = json!(mounts);
    }
    dep_spec["template"]["metadata"]["annotations"]["olmcahash"] = json!(cert.ca_hash);
}

/// Waits until an APIService is Available (its server answers the API server).
pub async fn wait_api_service_available(client: &Client, name: &str) {
    let api =
        Api::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>::all(client.clone());
    support::wait_for(
        &format!("APIService {name} Available"),
        components::INSTALL_TIMEOUT,
        || async {
            let a = api.get(name).await.map_err(|e| e.to_string())?;
            let available = a
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
            if available {
                Ok(())
            } else {
                Err(format!("{:?}", a.status))
            }
        },
    )
    .await
}
