//! `olmv1 migrate convert` and `rollback`: one Subscription of OLM classic taken over in place by
//! a ClusterExtension, and given back.
//!
//! convert's steps, in this order, each idempotent (a rerun after a kill resumes from the record):
//! 1. record: the Subscription, OperatorGroup, CatalogSource, what is adopted and the
//!    ClusterExtension to create, kept in a ConfigMap of the system namespace (created once:
//!    every later step reads only the record, so a rerun finds it when the Subscription is gone);
//! 2. installer: `<extension>-installer` applied (or the OperatorGroup's ServiceAccount used);
//! 3. the Subscription set to `Manual` approval: from now on classic can only propose an
//!    InstallPlan, never execute one (an Automatic Subscription whose CSV disappears would
//!    reinstall it);
//! 4. adoption, first pass: olmv1's owner labels added to every adopted object and to classic's
//!    roles and bindings olmv1 replaces; cluster-scoped ones lose their `olm.owner*` labels
//!    (classic's `csv-cleanup` finalizer deletes the cluster objects those labels name, and the
//!    operator would lose its cluster permissions before olmv1 grants them). Namespaced objects
//!    keep classic's labels and owner reference for now: classic's olm-operator finds its
//!    Deployments by them and would rewrite one it misses; but the OperatorCondition loses them
//!    (the garbage collector may not follow its kind yet, and would delete it once the CSV is
//!    gone);
//! 5. the CSV deleted with `propagationPolicy: Orphan`: the garbage collector removes the CSV's
//!    owner references from its dependents instead of deleting them; `csv-cleanup` is left to
//!    classic for [`CLASSIC_FINALIZE_WAIT`], then removed (classic may not be running);
//! 6. the Subscription, its InstallPlans and the copied CSVs deleted, and the OperatorCondition
//!    unless olmv1 keeps it (adopted: the operator goes on using it) (after the CSV: a
//!    Subscription deleted while its CSV exists makes classic rewrite a Deployment that carried
//!    the Subscription's config);
//! 7. adoption, second pass: owner references to the CSV and `olm.owner*` labels removed
//!    wherever they remain;
//! 8. the ClusterExtension created, pinned to the installed version: it finds every object
//!    already labelled as its own and applies over it in place;
//! 9. once Installed, olmv1's own grants in place: classic's roles and bindings it replaced
//!    deleted ([`remove_replaced`]; rollback recreates them from the record);
//! 10. ([`follow_subscription`]): unpinned to follow the channel when the Subscription's
//!     approval was Automatic, left pinned when Manual.
//!
//! Between any two steps the workload runs untouched: no step deletes or recreates an adopted
//! object, and no step changes a pod template.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
    discovery::{Scope, pinned_kind},
};
use olmv1_api::v1::{
    ClusterExtension,
    conditions::{ANNOTATION_RELEASED, LABEL_CATALOG_NAME, LABEL_OWNER_KIND, LABEL_OWNER_NAME},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    check::{CheckRow, MIGRATED_FROM_ANNOTATION, Snapshot, Verdict, check, serving_catalog},
    classic::{Kind, Subscription, api_resource, key},
};
use crate::{
    apply::{
        ownership::{is_owned_by, owner_labels},
        revision::{ObjectRef, RevisionStore},
    },
    controller::cluster_extension::holds_finalizer,
};

/// classic's owner labels (`olm.owner`, `olm.owner.namespace`, `olm.owner.kind`).
pub const CLASSIC_OWNER_LABELS: [&str; 3] = ["olm.owner", "olm.owner.namespace", "olm.owner.kind"];

/// The finalizer classic's olm-operator puts on a CSV.
pub const CSV_CLEANUP_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

/// Label on a migration record, naming the ClusterExtension.
pub const RECORD_LABEL: &str = "olmv1.operatorframework.io/migration-record-for";

/// The record's key in its ConfigMap.
pub const RECORD_KEY: &str = "record.json";

/// The field manager of migration writes.
pub const FIELD_MANAGER: &str = "olmv1-migrate";

/// How often rollback makes its deletion again when the extension changed between its read and
/// the deletion (each attempt is two or three requests).
const MAX_DELETE_ATTEMPTS: usize = 20;

/// How long rollback waits for the controller to let go of a released extension (a reconcile
/// of its own): beyond it, no controller is taken to be running.
pub const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// How long classic's olm-operator is given to run its `csv-cleanup` finalizer before convert
/// removes it: classic deletes only what still carries the CSV's labels, which by then nothing
/// adopted does; long enough for a running olm-operator's next sync, short enough to wait for.
pub const CLASSIC_FINALIZE_WAIT: Duration = Duration::from_secs(5);

/// How long convert waits for the CSV to disappear once its finalizers are gone (the garbage
/// collector orphans its dependents first).
pub const CSV_GONE_WAIT: Duration = Duration::from_secs(60);

/// Longest ConfigMap name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// Why convert or rollback stopped.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The Subscription cannot be converted: the reasons say why.
    #[error("{0}")]
    Refused(String),
    /// The API server refused or failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A record or object could not be read.
    #[error("{0}")]
    Invalid(String),
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ConvertError {
    let what = what.into();
    move |source| ConvertError::Api { what, source }
}

/// What convert keeps for rollback and for resuming.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The Subscription's namespace.
    pub namespace: String,
    /// The Subscription's name.
    pub subscription_name: String,
    /// The ClusterExtension.
    pub extension: String,
    /// The installed CSV.
    pub csv: String,
    /// Its version.
    pub version: String,
    /// The Subscription as it was (server fields dropped).
    pub subscription: Value,
    /// The OperatorGroup as it was.
    pub operator_group: Value,
    /// The CatalogSource as it was.
    pub catalog_source: Option<Value>,
    /// The objects classic made for the CSV that olmv1 takes over.
    pub adopted: Vec<ObjectRef>,
    /// Classic's roles and bindings for the CSV that olmv1 does not render (it grants the same
    /// under its own names): adopted with the rest, deleted once the extension is Installed
    /// (its own grants in place), recreated by rollback.
    #[serde(default)]
    pub left: Vec<ObjectRef>,
    /// Those objects as they were, for rollback (empty in records of older versions, which
    /// left them in place).
    #[serde(default)]
    pub left_objects: Vec<Value>,
    /// Whether converting restarts pods, as `check` computed it.
    #[serde(default)]
    pub pods_restart: String,
    /// The serving certificates cert-manager replaces, as `check` reported them.
    #[serde(default)]
    pub certificates: Vec<String>,
    /// The installer's objects convert applies (empty: the OperatorGroup's ServiceAccount).
    pub installer: Vec<Value>,
    /// The ClusterExtension convert creates.
    pub extension_object: Value,
}

/// The ConfigMap name of the record of Subscription `namespace/name`.
pub fn record_name(namespace: &str, name: &str) -> String {
    let plain = format!("migration.{namespace}.{name}");
    if plain.len() <= MAX_NAME {
        return plain;
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(format!("{namespace}/{name}").as_bytes()));
    format!("migration.{}", &digest[..40])
}

/// Who classic made an object for.
#[derive(Clone, Debug)]
pub struct CsvIdentity {
    /// The CSV's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// The CRDs it owns (`<plural>.<group>`), which classic labels only by component.
    pub owned_crds: Vec<String>,
    /// The RoleBindings in `kube-system` classic made for the Deployments serving its
    /// APIServices (`<deployment>-service-auth-reader`), labelled only `olm.managed`.
    pub auth_reader_bindings: Vec<String>,
}

impl CsvIdentity {
    /// The identity of `csv`.
    pub fn of(csv: &super::classic::Csv) -> CsvIdentity {
        let spec = &csv.spec;
        let mut serving: Vec<&str> = spec
            .apiservicedefinitions
            .owned
            .iter()
            .map(|a| a.deployment_name.as_str())
            .collect();
        serving.sort_unstable();
        serving.dedup();
        CsvIdentity {
            namespace: csv.metadata.namespace.clone().unwrap_or_default(),
            name: csv.metadata.name.clone().unwrap_or_default(),
            uid: csv.metadata.uid.clone().unwrap_or_default(),
            owned_crds: spec
                .customresourcedefinitions
                .owned
                .iter()
                .map(|d| d.name.clone())
                .collect(),
            // Classic's names: `<deployment>-service`, dots kept.
            auth_reader_bindings: serving
                .iter()
                .map(|d| format!("{d}-service-auth-reader"))
                .collect(),
        }
    }
}

/// The namespace of the RoleBindings an aggregated API server reads its authentication settings
/// through.
const KUBE_SYSTEM: &str = "kube-system";

/// Whether classic made `object` for the CSV: an owner reference to it, its `olm.owner*` labels,
/// (a CRD) one it owns, or (a RoleBinding in `kube-system`) the auth-reader binding of one of its
/// APIService Deployments, which classic labels `olm.managed` only.
pub fn made_for_csv(object: &Value, csv: &CsvIdentity) -> bool {
    let meta = &object["metadata"];
    let referenced = meta["ownerReferences"].as_array().is_some_and(|refs| {
        refs.iter().any(|r| {
            r["kind"] == "ClusterServiceVersion"
                && (r["uid"] == csv.uid.as_str()
                    || (r["name"] == csv.name.as_str()
                        && meta["namespace"].as_str() == Some(csv.namespace.as_str())))
        })
    });
    let labels = &meta["labels"];
    let labelled = labels["olm.owner"] == csv.name.as_str()
        && labels["olm.owner.namespace"] == csv.namespace.as_str()
        && labels["olm.owner.kind"] == "ClusterServiceVersion";
    let owned_crd = object["kind"] == "CustomResourceDefinition"
        && meta["name"]
            .as_str()
            .is_some_and(|n| csv.owned_crds.iter().any(|c| c == n));
    let auth_reader = object["kind"] == "RoleBinding"
        && meta["namespace"] == KUBE_SYSTEM
        && labels["olm.managed"] == "true"
        && object["roleRef"]["name"] == "extension-apiserver-authentication-reader"
        && meta["name"]
            .as_str()
            .is_some_and(|n| csv.auth_reader_bindings.iter().any(|b| b == n))
        && object["subjects"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["namespace"] == csv.namespace.as_str()));
    referenced || labelled || owned_crd || auth_reader
}

/// `ObjectRef` of a rendered object, its namespace defaulted to `namespace` when `namespaced`.
fn reference(object: &Value, namespaced: bool, namespace: &str) -> ObjectRef {
    ObjectRef {
        api_version: object["apiVersion"].as_str().unwrap_or_default().to_string(),
        kind: object["kind"].as_str().unwrap_or_default().to_string(),
        namespace: namespaced.then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace)
                .to_string()
        }),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// `Kind name` or `Kind namespace/name`.
pub fn describe(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
        None => format!("{} {}", r.kind, r.name),
    }
}

/// The objects to adopt: of `existing` (each rendered object's reference and the live object,
/// if any), those classic made for the CSV or already the extension's. Any other existing object
/// is refused, named: the controller would refuse it too.
pub fn plan_adoption(
    existing: &[(ObjectRef, Option<Value>)],
    csv: &CsvIdentity,
    extension: &str,
) -> Result<Vec<ObjectRef>, Vec<String>> {
    let mut adopted = Vec::new();
    let mut refused = Vec::new();
    for (r, live) in existing {
        let Some(live) = live else { continue };
        let labels: Option<BTreeMap<String, String>> =
            serde_json::from_value(live["metadata"]["labels"].clone()).ok();
        if made_for_csv(live, csv) || is_owned_by(labels.as_ref(), extension) {
            adopted.push(r.clone());
        } else {
            refused.push(describe(r));
        }
    }
    if refused.is_empty() {
        Ok(adopted)
    } else {
        Err(refused)
    }
}

/// The ClusterExtension converting `sub`: its package, namespace and channel, the catalog
/// serving it as selector, the installed version pinned, `config` as given, the installer.
pub fn extension_object(
    name: &str,
    sub: &Subscription,
    version: &str,
    cluster_catalog: &str,
    service_account: &str,
    config: &serde_json::Map<String, Value>,
) -> Value {
    let (ns, sub_name) = key(&sub.metadata);
    let mut catalog = json!({
        "packageName": sub.spec.name,
        "version": version,
        "selector": {"matchLabels": {LABEL_CATALOG_NAME: cluster_catalog}},
    });
    if let Some(channel) = sub.spec.channel.as_deref().filter(|c| !c.is_empty()) {
        catalog["channels"] = json!([channel]);
    }
    let mut object = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {
            "name": name,
            "annotations": {MIGRATED_FROM_ANNOTATION: format!("{ns}/{sub_name}")},
        },
        "spec": {
            "namespace": ns,
            "serviceAccount": {"name": service_account},
            "source": {"sourceType": "Catalog", "catalog": catalog},
        }
    });
    if !config.is_empty() {
        object["spec"]["config"] = json!({"configType": "Inline", "inline": config});
    }
    object
}

/// An object as recorded: without the fields the API server sets.
pub fn recorded(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(meta) = o["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
            "finalizers",
        ] {
            meta.remove(k);
        }
    }
    if let Some(map) = o.as_object_mut() {
        map.remove("status");
    }
    o
}

/// Subscription `namespace/name` as rollback recreates it: as recorded, pinned to the installed
/// CSV with Manual approval, so classic takes it back without upgrading.
pub fn rollback_subscription(record: &Record) -> Value {
    let mut sub = recorded(&record.subscription);
    sub["spec"]["startingCSV"] = json!(record.csv);
    sub["spec"]["installPlanApproval"] = json!("Manual");
    sub
}

/// What convert prepares before writing anything.
pub struct Prepared {
    /// The record (its `installer` filled by the caller when olmv1 creates the installer).
    pub record: Record,
    /// The ServiceAccount the extension installs as.
    pub service_account: String,
    /// Whether it is the OperatorGroup's (else `<extension>-installer`).
    pub from_operator_group: bool,
}

/// Reads the record of `namespace/name`, if convert has started.
pub async fn load_record(
    client: &Client,
    system_ns: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Record>, ConvertError> {
    let cms = Api::<ConfigMap>::namespaced(client.clone(), system_ns);
    let record_name = record_name(namespace, name);
    let Some(cm) = cms
        .get_opt(&record_name)
        .await
        .map_err(api_err(format!("reading ConfigMap {system_ns}/{record_name}")))?
    else {
        return Ok(None);
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(RECORD_KEY))
        .cloned()
        .unwrap_or_default();
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ConvertError::Invalid(format!("ConfigMap {system_ns}/{record_name}: {e}")))
}

/// Secrets' API resource.
fn secret_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets")
}

/// The API resource of a kind and whether it is namespaced, found by discovery.
async fn resource_of(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, bool), ConvertError> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = pinned_kind(client, &gvk)
        .await
        .map_err(api_err(format!("discovering {api_version} {kind}")))?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

/// The API of the object `r`.
async fn api_for(client: &Client, r: &ObjectRef) -> Result<Api<DynamicObject>, ConvertError> {
    let (ar, _) = resource_of(client, &r.api_version, &r.kind).await?;
    Ok(match &r.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    })
}

/// Reads a classic object whole (the record keeps every field, not only those `check` reads).
async fn classic_object(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ConvertError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
    let found = api
        .get_opt(name)
        .await
        .map_err(api_err(format!("reading {kind:?} {namespace}/{name}")))?;
    Ok(found.map(|o| serde_json::to_value(o).unwrap_or_default()))
}

/// `check`'s row of `namespace/name` when it is `Eligible`; else refused with its blocking
/// reasons.
pub fn eligible(snapshot: &Snapshot, namespace: &str, name: &str) -> Result<CheckRow, ConvertError> {
    let rows = check(
        snapshot,
        Some((namespace, Some(name))),
        &mut crate::admin::command_meter(),
    );
    let Some(row) = rows.into_iter().next() else {
        return Err(ConvertError::Refused(format!(
            "Subscription {namespace}/{name} not found"
        )));
    };
    if row.verdict != Verdict::Eligible {
        let reasons: Vec<String> = row
            .reasons
            .iter()
            .filter(|r| r.blocking)
            .map(|r| format!("  {}: {}\n  fix: {}", r.code, r.message, r.fix))
            .collect();
        return Err(ConvertError::Refused(format!(
            "Subscription {namespace}/{name} is {}, not Eligible\n{}",
            row.verdict,
            reasons.join("\n")
        )));
    }
    Ok(row)
}

/// Judges `namespace/name` (it must be `Eligible`), and plans the adoption of what olmv1
/// renders for it (`rendered`, `config`: [`super::read::render_installed`]'s). Writes nothing.
pub async fn prepare(
    client: &Client,
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
    rendered: &[Value],
    config: &serde_json::Map<String, Value>,
) -> Result<Prepared, ConvertError> {
    let row = eligible(snapshot, namespace, name)?;
    let find =
        |what: &str| ConvertError::Invalid(format!("Subscription {namespace}/{name}: {what} not found"));
    let sub = snapshot
        .subscriptions
        .iter()
        .find(|s| key(&s.metadata) == (namespace.to_string(), name.to_string()))
        .ok_or_else(|| find("the Subscription"))?;
    let csv_name = sub.status.installed_csv.clone().unwrap_or_default();
    let csv = snapshot
        .csvs
        .iter()
        .find(|c| key(&c.metadata) == (namespace.to_string(), csv_name.clone()))
        .ok_or_else(|| find("the installed CSV"))?;
    let og = snapshot
        .operator_groups
        .iter()
        .find(|o| o.metadata.namespace.as_deref() == Some(namespace))
        .ok_or_else(|| find("the OperatorGroup"))?;
    let source = snapshot
        .catalog_sources
        .iter()
        .find(|c| key(&c.metadata) == (sub.spec.source_namespace.clone(), sub.spec.source.clone()));
    let catalog = source
        .and_then(|s| serving_catalog(s, &snapshot.catalogs))
        .ok_or_else(|| find("a ClusterCatalog serving the CatalogSource"))?;
    let version = csv.spec.version.clone().unwrap_or_default();
    let extension = name.to_string();
    if let Some(other) = snapshot.extensions.iter().find(|e| e.name == extension)
        && other.migrated_from.as_deref() != Some(&format!("{namespace}/{name}"))
    {
        return Err(ConvertError::Refused(format!(
            "ClusterExtension {extension} exists and was not converted from Subscription {namespace}/{name}"
        )));
    }
    let identity = CsvIdentity {
        namespace: namespace.to_string(),
        name: csv_name.clone(),
        ..CsvIdentity::of(csv)
    };
    let mut existing = Vec::with_capacity(rendered.len());
    for object in rendered {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let (ar, namespaced) = match resource_of(client, api_version, kind).await {
            Ok(found) => found,
            // A kind the cluster does not serve yet has no objects to adopt.
            Err(ConvertError::Api {
                source: kube::Error::Api(e),
                ..
            }) if e.code == 404 => continue,
            Err(e) => return Err(e),
        };
        let r = reference(object, namespaced, namespace);
        let api: Api<DynamicObject> = match &r.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let live = api
            .get_opt(&r.name)
            .await
            .map_err(api_err(format!("reading {}", describe(&r))))?;
        existing.push((r, live.map(|l| serde_json::to_value(l).unwrap_or_default())));
    }
    // The Secrets olmv1's Certificates write to: classic's serving certificates, taken over in
    // place (cert-manager keeps or replaces what they hold: check's CertificateReplaced).
    let secrets: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &secret_resource());
    for certificate in rendered
        .iter()
        .filter(|o| super::read::is_cert_manager_certificate(o))
    {
        let Some(secret) = certificate["spec"]["secretName"].as_str() else {
            continue;
        };
        let r = ObjectRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some(namespace.to_string()),
            name: secret.to_string(),
        };
        let live = secrets
            .get_opt(secret)
            .await
            .map_err(api_err(format!("reading {}", describe(&r))))?;
        existing.push((r, live.map(|l| serde_json::to_value(l).unwrap_or_default())));
    }
    let adopted = plan_adoption(&existing, &identity, &extension).map_err(|refused| {
        ConvertError::Refused(format!(
            "objects of {csv_name} exist that are neither classic's for {csv_name} nor ClusterExtension {extension}'s: {}",
            refused.join(", ")
        ))
    })?;
    let (service_account, from_operator_group) =
        match og.spec.service_account_name.as_deref().filter(|s| !s.is_empty()) {
            Some(sa) => (sa.to_string(), true),
            None => (crate::apply::identity::installer_name(&extension), false),
        };
    if from_operator_group {
        let og_name = og.metadata.name.as_deref().unwrap_or_default();
        preflight_account(client, namespace, &service_account, og_name, &extension, rendered).await?;
    }
    let extension_object =
        extension_object(&extension, sub, &version, &catalog.name, &service_account, config);
    let (og_ns, og_name) = key(&og.metadata);
    let whole = |found: Option<Value>, what: &str| found.map(|o| recorded(&o)).ok_or_else(|| find(what));
    let subscription = whole(
        classic_object(client, Kind::Subscription, namespace, name).await?,
        "the Subscription",
    )?;
    let operator_group = whole(
        classic_object(client, Kind::OperatorGroup, &og_ns, &og_name).await?,
        "the OperatorGroup",
    )?;
    let left = leftovers(client, &identity, &adopted).await?;
    let catalog_source = match source {
        Some(s) => {
            let (ns, n) = key(&s.metadata);
            classic_object(client, Kind::CatalogSource, &ns, &n)
                .await?
                .map(|o| recorded(&o))
        }
        None => None,
    };
    Ok(Prepared {
        record: Record {
            namespace: namespace.to_string(),
            subscription_name: name.to_string(),
            extension,
            csv: csv_name,
            version,
            subscription,
            operator_group,
            catalog_source,
            left: left.iter().map(|(r, _)| r.clone()).collect(),
            left_objects: left.into_iter().map(|(_, o)| o).collect(),
            pods_restart: row.pods_restart.to_string(),
            certificates: row
                .reasons
                .iter()
                .filter(|r| r.code == "CertificateReplaced")
                .map(|r| format!("{} ({})", r.message, r.fix))
                .collect(),
            adopted,
            installer: Vec::new(),
            extension_object,
        },
        service_account,
        from_operator_group,
    })
}

/// The OperatorGroup's ServiceAccount becomes the extension's installer as it is: it must exist
/// and hold every permission the controller's preflight will ask of it (the same computation,
/// for the rendered bundle and the extension's finalizers), or convert stops before writing.
async fn preflight_account(
    client: &Client,
    namespace: &str,
    service_account: &str,
    operator_group: &str,
    extension: &str,
    rendered: &[Value],
) -> Result<(), ConvertError> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let named = format!(
        "ServiceAccount {namespace}/{service_account} (the serviceAccountName of OperatorGroup {operator_group})"
    );
    if accounts
        .get_opt(service_account)
        .await
        .map_err(api_err(format!("reading {named}")))?
        .is_none()
    {
        return Err(ConvertError::Refused(format!(
            "{named} does not exist: create it, or remove serviceAccountName to have olmv1 compute an installer"
        )));
    }
    let account = crate::apply::preflight::ServiceAccountRef::new(namespace, service_account);
    crate::apply::preflight::check_permissions(
        client,
        &crate::apply::lookups::ClusterLookups::new(),
        &account,
        rendered,
        &[],
        &crate::apply::preflight::AccessPolicy::default(),
        &[crate::apply::preflight::owner_finalizers_access(extension)],
    )
    .await
    .map_err(|e| ConvertError::Refused(format!("{named} cannot install the bundle: {e}")))
}

/// The `Eligible` rows of `rows` as `(namespace, subscription)`, each after the Subscriptions
/// its `after` names (providers of its dependencies first); ties in the rows' order. A row whose
/// `after` names a Subscription not converted in this run is still taken (check judged the
/// dependency met); a cycle is broken in the rows' order.
pub fn conversion_order(rows: &[CheckRow]) -> Vec<(String, String)> {
    let eligible: Vec<&CheckRow> = rows.iter().filter(|r| r.verdict == Verdict::Eligible).collect();
    let id = |r: &CheckRow| format!("{}/{}", r.namespace, r.subscription);
    let mut done: Vec<String> = Vec::new();
    let mut order = Vec::new();
    while order.len() < eligible.len() {
        let pending: Vec<&&CheckRow> = eligible.iter().filter(|r| !done.contains(&id(r))).collect();
        let ready = pending.iter().find(|r| {
            r.after
                .iter()
                .all(|a| done.contains(a) || !eligible.iter().any(|e| &id(e) == a))
        });
        // A cycle: take the first pending one.
        let next = ready.or(pending.first()).map(|r| **r);
        let Some(next) = next else { break };
        done.push(id(next));
        order.push((next.namespace.clone(), next.subscription.clone()));
    }
    order
}

/// The RBAC kinds classic makes for a CSV: `(apiVersion, kind, namespaced)`.
const CLASSIC_RBAC: [(&str, &str, bool); 4] = [
    ("rbac.authorization.k8s.io/v1", "Role", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
];

/// Classic's roles and bindings made for the CSV (owner reference or labels) that are not
/// adopted, each with its body as recorded.
async fn leftovers(
    client: &Client,
    csv: &CsvIdentity,
    adopted: &[ObjectRef],
) -> Result<Vec<(ObjectRef, Value)>, ConvertError> {
    let mut left = Vec::new();
    for (api_version, kind, namespaced) in CLASSIC_RBAC {
        let (ar, _) = resource_of(client, api_version, kind).await?;
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), &csv.namespace, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let list = api
            .list(&ListParams::default().labels(&format!("olm.owner={}", csv.name)))
            .await
            .map_err(api_err(format!("listing {kind}s of {}", csv.name)))?;
        for o in list.items {
            let value = serde_json::to_value(&o).unwrap_or_default();
            let r = ObjectRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: namespaced.then(|| csv.namespace.clone()),
                name: o.name_any(),
            };
            if made_for_csv(&value, csv) && !adopted.contains(&r) {
                // List items carry no kind; rollback creates from the body.
                let mut body = recorded(&value);
                body["apiVersion"] = json!(api_version);
                body["kind"] = json!(kind);
                left.push((r, body));
            }
        }
    }
    Ok(left)
}

/// Saves the record unless one exists; returns the one in force (a rerun resumes from it).
pub async fn save_record(client: &Client, system_ns: &str, record: &Record) -> Result<Record, ConvertError> {
    if let Some(existing) =
        load_record(client, system_ns, &record.namespace, &record.subscription_name).await?
    {
        return Ok(existing);
    }
    let name = record_name(&record.namespace, &record.subscription_name);
    let text = serde_json::to_string(record).map_err(|e| ConvertError::Invalid(e.to_string()))?;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": system_ns, "labels": {RECORD_LABEL: record.extension}},
        "data": {RECORD_KEY: text},
    }))
    .map_err(|e| ConvertError::Invalid(e.to_string()))?;
    Api::<ConfigMap>::namespaced(client.clone(), system_ns)
        .create(&PostParams::default(), &cm)
        .await
        .map_err(api_err(format!("creating ConfigMap {system_ns}/{name}")))?;
    Ok(record.clone())
}

/// Server-side applies `objects` as [`FIELD_MANAGER`].
async fn apply_all(client: &Client, objects: &[Value]) -> Result<(), ConvertError> {
    for object in objects {
        let (ar, namespaced) = resource_of(
            client,
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
        )
        .await?;
        let r = reference(object, namespaced, "");
        let api: Api<DynamicObject> = match &r.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &r.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(api_err(format!("applying {}", describe(&r))))?;
    }
    Ok(())
}

/// The merge patch adopting `live` for `extension`: olmv1's owner labels added; when `detach`
/// (or the object is cluster-scoped, where classic's finalizer selects by label) classic's
/// `olm.owner*` labels removed; when `detach`, owner references to a CSV removed; a serving
/// certificate's Secret gets its CA where cert-manager's injector reads it. `None` when nothing
/// changes.
pub fn adoption_patch(live: &Value, extension: &str, cluster_scoped: bool, detach: bool) -> Option<Value> {
    let meta = &live["metadata"];
    let mut labels = serde_json::Map::new();
    for (k, v) in owner_labels(extension) {
        if meta["labels"][&k] != v.as_str() {
            labels.insert(k, json!(v));
        }
    }
    if detach || cluster_scoped {
        for k in CLASSIC_OWNER_LABELS {
            if !meta["labels"][k].is_null() {
                labels.insert(k.to_string(), Value::Null);
            }
        }
    }
    let mut patch = json!({"metadata": {}});
    if !labels.is_empty() {
        patch["metadata"]["labels"] = Value::Object(labels);
    }
    if detach && let Some(refs) = meta["ownerReferences"].as_array() {
        let kept: Vec<Value> = refs
            .iter()
            .filter(|r| r["kind"] != "ClusterServiceVersion")
            .cloned()
            .collect();
        if kept.len() != refs.len() {
            patch["metadata"]["ownerReferences"] = json!(kept);
        }
    }
    if live["kind"] == "Secret"
        && let Some(data) = super::certificate::ca_data_patch(live)
    {
        patch["data"] = data;
    }
    if patch["metadata"].as_object().is_some_and(|m| m.is_empty()) && patch.get("data").is_none() {
        return None;
    }
    // Guarded by the version read: a concurrent write by classic makes the patch fail, not lost.
    patch["metadata"]["resourceVersion"] = meta["resourceVersion"].clone();
    Some(patch)
}

/// One adoption pass over the record's objects, classic's roles and bindings it replaces
/// included; returns how many were changed.
async fn adopt(client: &Client, record: &Record, detach: bool) -> Result<usize, ConvertError> {
    let mut changed = 0;
    for r in record.adopted.iter().chain(&record.left) {
        let api = api_for(client, r).await?;
        let Some(live) = api
            .get_opt(&r.name)
            .await
            .map_err(api_err(format!("reading {}", describe(r))))?
        else {
            if record.left.contains(r) {
                // Replaced and deleted by an earlier run (or by classic): nothing to adopt.
                continue;
            }
            return Err(ConvertError::Invalid(format!(
                "{} is gone: it was to be adopted; nothing more was changed (rollback restores classic)",
                describe(r)
            )));
        };
        let live = serde_json::to_value(live).unwrap_or_default();
        // The OperatorCondition is detached at once: a custom resource the garbage collector may
        // not follow yet (its CRD new), so it would not orphan it with the CSV and would then
        // delete it for its dangling owner reference. No classic controller rewrites it.
        let detach = detach || r.kind == olmv1_api::operator_condition::KIND;
        if let Some(patch) = adoption_patch(&live, &record.extension, r.namespace.is_none(), detach) {
            api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("adopting {}", describe(r))))?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Deletes an object if it exists, with `propagation`; whether it existed.
async fn delete_if_present(
    api: &Api<DynamicObject>,
    name: &str,
    orphan: bool,
    what: &str,
) -> Result<bool, ConvertError> {
    let params = if orphan {
        DeleteParams::orphan()
    } else {
        DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(source) => Err(ConvertError::Api {
            what: format!("deleting {what}"),
            source,
        }),
    }
}

/// Deletes the CSV with Orphan propagation and waits until it is gone, removing classic's
/// finalizer after [`CLASSIC_FINALIZE_WAIT`].
async fn delete_csv(client: &Client, record: &Record) -> Result<bool, ConvertError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &record.namespace, &api_resource(Kind::Csv));
    let what = format!("CSV {}/{}", record.namespace, record.csv);
    if !delete_if_present(&api, &record.csv, true, &what).await? {
        return Ok(false);
    }
    let start = tokio::time::Instant::now();
    loop {
        let Some(csv) = api
            .get_opt(&record.csv)
            .await
            .map_err(api_err(format!("reading {what}")))?
        else {
            return Ok(true);
        };
        let finalizers = csv.finalizers();
        if start.elapsed() >= CLASSIC_FINALIZE_WAIT && finalizers.iter().any(|f| f == CSV_CLEANUP_FINALIZER) {
            let kept: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != CSV_CLEANUP_FINALIZER)
                .collect();
            let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": csv.resource_version()}});
            match api
                .patch(&record.csv, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(source) => {
                    return Err(ConvertError::Api {
                        what: format!("removing the finalizer of {what}"),
                        source,
                    });
                }
            }
        }
        if start.elapsed() > CLASSIC_FINALIZE_WAIT + CSV_GONE_WAIT {
            return Err(ConvertError::Invalid(format!(
                "{what} is still there after {}s (finalizers {finalizers:?}); run convert again",
                (CLASSIC_FINALIZE_WAIT + CSV_GONE_WAIT).as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deletes classic's bookkeeping of the CSV: the Subscription (Orphan), the InstallPlans that
/// name the CSV or serve the Subscription, the copied CSVs, the OperatorCondition. Returns what
/// was deleted.
async fn delete_classic(client: &Client, record: &Record) -> Result<Vec<String>, ConvertError> {
    let ns = &record.namespace;
    let mut deleted = Vec::new();
    let subs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &api_resource(Kind::Subscription));
    let what = format!("Subscription {ns}/{}", record.subscription_name);
    if delete_if_present(&subs, &record.subscription_name, true, &what).await? {
        deleted.push(what);
    }
    let plans: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &api_resource(Kind::InstallPlan));
    let list = plans
        .list(&ListParams::default())
        .await
        .map_err(api_err(format!("listing InstallPlans in {ns}")))?;
    for ip in list.items {
        let names_csv = ip.data["spec"]["clusterServiceVersionNames"]
            .as_array()
            .is_some_and(|n| n.iter().any(|c| c == record.csv.as_str()));
        let serves_sub = ip
            .owner_references()
            .iter()
            .any(|o| o.kind == "Subscription" && o.name == record.subscription_name);
        if names_csv || serves_sub {
            let what = format!("InstallPlan {ns}/{}", ip.name_any());
            if delete_if_present(&plans, &ip.name_any(), true, &what).await? {
                deleted.push(what);
            }
        }
    }
    let csvs: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(Kind::Csv));
    let copies = csvs
        .list(&ListParams::default().labels(&format!("olm.copiedFrom={ns}")))
        .await
        .map_err(api_err("listing copied CSVs"))?;
    for copy in copies.items.into_iter().filter(|c| c.name_any() == record.csv) {
        let copy_ns = copy.namespace().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &copy_ns, &api_resource(Kind::Csv));
        let what = format!("copied CSV {copy_ns}/{}", record.csv);
        if delete_if_present(&api, &record.csv, true, &what).await? {
            deleted.push(what);
        }
    }
    let conditions: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &api_resource(Kind::OperatorCondition));
    let what = format!("OperatorCondition {ns}/{}", record.csv);
    // Not Orphan: its Role and RoleBinding exist only for classic.
    if !record.adopted.iter().any(|r| r.kind == "OperatorCondition")
        && delete_if_present(&conditions, &record.csv, false, &what).await?
    {
        deleted.push(what);
    }
    Ok(deleted)
}

/// Runs convert's steps for `record` (see the module's documentation), reporting each step's
/// outcome through `report`. Every step is idempotent.
pub async fn convert(
    client: &Client,
    system_ns: &str,
    record: &Record,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let record = save_record(client, system_ns, record).await?;
    report(format!(
        "recorded Subscription, OperatorGroup and CatalogSource in ConfigMap {system_ns}/{}",
        record_name(&record.namespace, &record.subscription_name)
    ));
    if !record.installer.is_empty() {
        apply_all(client, &record.installer).await?;
        report(format!(
            "installer {} applied in namespace {}",
            crate::apply::identity::installer_name(&record.extension),
            record.namespace
        ));
    }
    let subs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &record.namespace,
        &api_resource(Kind::Subscription),
    );
    if subs
        .get_opt(&record.subscription_name)
        .await
        .map_err(api_err("reading the Subscription"))?
        .is_some()
    {
        let patch = json!({"spec": {"installPlanApproval": "Manual"}});
        subs.patch(
            &record.subscription_name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(api_err("setting the Subscription's approval to Manual"))?;
        report(format!(
            "Subscription {}/{} set to Manual approval",
            record.namespace, record.subscription_name
        ));
    }
    let labelled = adopt(client, &record, false).await?;
    report(format!(
        "{} objects labelled as ClusterExtension {}'s ({labelled} changed)",
        record.adopted.len(),
        record.extension
    ));
    if delete_csv(client, &record).await? {
        report(format!(
            "CSV {}/{} deleted, its dependents orphaned",
            record.namespace, record.csv
        ));
    }
    for what in delete_classic(client, &record).await? {
        report(format!("{what} deleted"));
    }
    let detached = adopt(client, &record, true).await?;
    report(format!(
        "classic's owner references and labels removed ({detached} objects changed)"
    ));
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    if extensions
        .get_opt(&record.extension)
        .await
        .map_err(api_err("reading the ClusterExtension"))?
        .is_none()
    {
        let ext: ClusterExtension = serde_json::from_value(record.extension_object.clone())
            .map_err(|e| ConvertError::Invalid(format!("the recorded ClusterExtension: {e}")))?;
        extensions
            .create(&PostParams::default(), &ext)
            .await
            .map_err(api_err(format!("creating ClusterExtension {}", record.extension)))?;
    }
    report(format!(
        "clusterextension/{} created, pinned to {} {}",
        record.extension, record.csv, record.version
    ));
    Ok(())
}

/// Once the extension is Installed (its own grants in place): classic's roles and bindings for
/// the CSV that olmv1 replaced, deleted, each only while it still carries the extension's owner
/// labels (adopted by convert). The record keeps them for rollback. Idempotent.
pub async fn remove_replaced(
    client: &Client,
    record: &Record,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let mut deleted = 0;
    for r in &record.left {
        let api = api_for(client, r).await?;
        let Some(live) = api
            .get_opt(&r.name)
            .await
            .map_err(api_err(format!("reading {}", describe(r))))?
        else {
            continue;
        };
        if !is_owned_by(live.metadata.labels.as_ref(), &record.extension) {
            report(format!(
                "{} kept: it no longer carries ClusterExtension {}'s labels",
                describe(r),
                record.extension
            ));
            continue;
        }
        if delete_if_present(&api, &r.name, false, &describe(r)).await? {
            deleted += 1;
        }
    }
    if deleted > 0 {
        report(format!(
            "{deleted} roles and bindings classic made for {} deleted: ClusterExtension {}'s own grants are in place",
            record.csv, record.extension
        ));
    }
    Ok(())
}

/// `--delete-operatorgroup`, once the extension is Installed: the recorded OperatorGroup is
/// deleted when no Subscription is left in its namespace (another operator there still needs
/// it), and kept, saying why, otherwise. Rollback recreates it from the record. Idempotent.
pub async fn delete_operator_group(
    client: &Client,
    record: &Record,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let ns = &record.namespace;
    let og_name = record.operator_group["metadata"]["name"]
        .as_str()
        .ok_or_else(|| ConvertError::Invalid("the recorded OperatorGroup has no name".into()))?;
    let subs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &api_resource(Kind::Subscription));
    let left: Vec<String> = subs
        .list(&ListParams::default())
        .await
        .map_err(api_err(format!("listing Subscriptions in {ns}")))?
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    if !left.is_empty() {
        report(format!(
            "OperatorGroup {ns}/{og_name} kept: Subscriptions {} are left in {ns}",
            left.join(", ")
        ));
        return Ok(());
    }
    let ogs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &api_resource(Kind::OperatorGroup));
    let what = format!("OperatorGroup {ns}/{og_name}");
    if delete_if_present(&ogs, og_name, false, &what).await? {
        report(format!("{what} deleted"));
    }
    Ok(())
}

/// Whether the recorded Subscription asked classic to upgrade on its own (`Automatic`, the
/// default when unset).
pub fn automatic(record: &Record) -> bool {
    record.subscription["spec"]["installPlanApproval"]
        .as_str()
        .is_none_or(|a| a != "Manual")
}

/// Once the pinned version is installed: an Automatic Subscription's extension unpinned, so it
/// follows the channel as classic did; a Manual one's left pinned (upgrades by `olmv1 upgrade`).
/// Idempotent.
pub async fn follow_subscription(
    client: &Client,
    record: &Record,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let channel = record.subscription["spec"]["channel"]
        .as_str()
        .unwrap_or("the default channel");
    if !automatic(record) {
        report(format!(
            "clusterextension/{} stays pinned at {} (the Subscription's approval was Manual: upgrade with olmv1 upgrade)",
            record.extension, record.version
        ));
        return Ok(());
    }
    let patch = json!({"spec": {"source": {"catalog": {"version": null}}}});
    Api::<ClusterExtension>::all(client.clone())
        .patch(&record.extension, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_err(format!(
            "unpinning ClusterExtension {}",
            record.extension
        )))?;
    report(format!(
        "clusterextension/{} follows {channel} (the Subscription's approval was Automatic)",
        record.extension
    ));
    Ok(())
}

/// Deletes ClusterExtension `extension` without uninstalling. It is released to `to` first
/// ([`ANNOTATION_RELEASED`]): the controller stops writing its content and takes its finalizer off
/// in a reconcile of its own, which runs after any reconcile still writing. A write after the
/// deletion would put back the owner reference the garbage collector takes off (Orphan
/// propagation), and the collector would then delete that object. With no controller answering
/// within [`RELEASE_WAIT`], the finalizer is removed here. Each deletion is made against the
/// version just read (preconditions), so it never runs with the finalizer on (an uninstall).
async fn delete_released(
    extensions: &Api<ClusterExtension>,
    extension: &str,
    to: &str,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let api_error = |what: &str| {
        let what = format!("{what} ClusterExtension {extension}");
        move |source| ConvertError::Api { what, source }
    };
    let release = json!({"metadata": {"annotations": {ANNOTATION_RELEASED: to}}});
    match extensions
        .patch(extension, &PatchParams::default(), &Patch::Merge(&release))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(source) => return Err(api_error("releasing")(source)),
    }
    let let_go = |e: Option<&ClusterExtension>| e.is_none_or(|e| !holds_finalizer(e));
    let answered = tokio::time::timeout(
        RELEASE_WAIT,
        kube::runtime::wait::await_condition(extensions.clone(), extension, let_go),
    )
    .await;
    if !matches!(answered, Ok(Ok(_))) {
        report(format!(
            "the controller did not let go of clusterextension/{extension} within {}s (is it running?): its finalizer is removed here",
            RELEASE_WAIT.as_secs()
        ));
    }
    for attempt in 1.. {
        let Some(mut current) = extensions
            .get_opt(extension)
            .await
            .map_err(api_error("reading"))?
        else {
            return Ok(());
        };
        if holds_finalizer(&current) {
            let patch = json!({"metadata": {"finalizers": null}});
            current = match extensions
                .patch(extension, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(e) => e,
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
                Err(source) => return Err(api_error("removing the finalizers of")(source)),
            };
        }
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: current.metadata.resource_version.clone(),
                uid: current.metadata.uid.clone(),
            }),
            ..DeleteParams::orphan()
        };
        match extensions.delete(extension, &params).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < MAX_DELETE_ATTEMPTS => continue,
            Err(source) => return Err(api_error("deleting")(source)),
        }
    }
    unreachable!("the attempts end in a return")
}

/// Gives `extension` back to classic: the ClusterExtension released, then deleted without
/// uninstalling ([`delete_released`]), olmv1's owner labels removed from what it had
/// installed, its revision record deleted, then the recorded OperatorGroup (if gone) and the
/// Subscription recreated, pinned to the installed CSV with Manual approval. The migration
/// record is deleted last.
pub async fn rollback(
    client: &Client,
    system_ns: &str,
    extension: &str,
    report: &mut dyn FnMut(String),
) -> Result<(), ConvertError> {
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    let ext = extensions
        .get_opt(extension)
        .await
        .map_err(api_err(format!("reading ClusterExtension {extension}")))?;
    let from = match &ext {
        Some(e) => e.annotations().get(MIGRATED_FROM_ANNOTATION).cloned(),
        None => None,
    };
    let records = Api::<ConfigMap>::namespaced(client.clone(), system_ns)
        .list(&ListParams::default().labels(&format!("{RECORD_LABEL}={extension}")))
        .await
        .map_err(api_err("listing migration records"))?;
    let record: Option<Record> = records
        .items
        .iter()
        .filter_map(|cm| cm.data.as_ref()?.get(RECORD_KEY))
        .filter_map(|t| serde_json::from_str(t).ok())
        .find(|r: &Record| {
            from.as_deref()
                .is_none_or(|f| f == format!("{}/{}", r.namespace, r.subscription_name))
        });
    let Some(record) = record else {
        return Err(ConvertError::Refused(match ext {
            Some(_) if from.is_none() => format!(
                "ClusterExtension {extension} was not converted from OLM classic (no {MIGRATED_FROM_ANNOTATION} annotation): uninstall it instead"
            ),
            _ => format!("no migration record for ClusterExtension {extension} in namespace {system_ns}"),
        }));
    };
    let store = RevisionStore::new(client.clone(), system_ns);
    let installed = store
        .load(extension)
        .await
        .map_err(|e| ConvertError::Invalid(e.to_string()))?
        .map(|r| r.objects)
        .unwrap_or_default();
    if ext.is_some() {
        let to = format!("ClusterServiceVersion {}/{}", record.namespace, record.csv);
        delete_released(&extensions, extension, &to, report).await?;
        report(format!(
            "clusterextension/{extension} deleted without uninstalling"
        ));
    }
    let mut objects = installed;
    for r in record.adopted.iter().chain(&record.left) {
        if !objects.contains(r) {
            objects.push(r.clone());
        }
    }
    let mut released = 0;
    let mut handed_back = 0;
    let mut certificates_removed = Vec::new();
    for r in &objects {
        let api = match api_for(client, r).await {
            Ok(a) => a,
            Err(ConvertError::Api {
                source: kube::Error::Api(e),
                ..
            }) if e.code == 404 => continue,
            Err(e) => return Err(e),
        };
        let Some(live) = api
            .get_opt(&r.name)
            .await
            .map_err(api_err(format!("reading {}", describe(r))))?
        else {
            continue;
        };
        let live = serde_json::to_value(live).unwrap_or_default();
        if is_cert_manager_object(r) {
            // olmv1's, not classic's: classic issues its certificate itself, and a Certificate
            // left behind would reissue it under classic.
            delete_if_present(&api, &r.name, false, &describe(r)).await?;
            certificates_removed.push(describe(r));
            continue;
        }
        if let Some(patch) = release_patch(&live, extension) {
            api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("releasing {}", describe(r))))?;
            released += 1;
        }
        if let Some(patch) = hand_back_patch(&live, &record) {
            api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("handing {} back to classic", describe(r))))?;
            handed_back += 1;
        }
    }
    report(format!(
        "{} objects kept, olmv1's labels removed ({released} changed)",
        objects.len() - certificates_removed.len()
    ));
    if handed_back > 0 {
        report(format!(
            "{handed_back} APIServices labelled as CSV {}/{}'s again (classic adopts only those)",
            record.namespace, record.csv
        ));
    }
    for removed in certificates_removed {
        report(format!(
            "{removed} deleted (olmv1's: classic issues its own certificate)"
        ));
    }
    let restored = restore_replaced(client, &record).await?;
    if !record.left_objects.is_empty() {
        report(format!(
            "{restored} roles and bindings classic made for {} restored as classic left them",
            record.csv
        ));
    }
    store
        .delete(extension)
        .await
        .map_err(|e| ConvertError::Invalid(e.to_string()))?;
    let ogs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &record.namespace,
        &api_resource(Kind::OperatorGroup),
    );
    let og_list = ogs
        .list(&ListParams::default())
        .await
        .map_err(api_err("listing OperatorGroups"))?;
    if og_list.items.is_empty() {
        let og = recorded(&record.operator_group);
        let og: DynamicObject =
            serde_json::from_value(og).map_err(|e| ConvertError::Invalid(e.to_string()))?;
        ogs.create(&PostParams::default(), &og)
            .await
            .map_err(api_err("recreating the OperatorGroup"))?;
        report(format!(
            "OperatorGroup {}/{} recreated",
            record.namespace,
            og.name_any()
        ));
    }
    let subs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &record.namespace,
        &api_resource(Kind::Subscription),
    );
    if subs
        .get_opt(&record.subscription_name)
        .await
        .map_err(api_err("reading the Subscription"))?
        .is_none()
    {
        let sub: DynamicObject = serde_json::from_value(rollback_subscription(&record))
            .map_err(|e| ConvertError::Invalid(e.to_string()))?;
        subs.create(&PostParams::default(), &sub)
            .await
            .map_err(api_err("recreating the Subscription"))?;
    }
    report(format!(
        "Subscription {}/{} recreated: startingCSV {}, Manual approval",
        record.namespace, record.subscription_name, record.csv
    ));
    let name = record_name(&record.namespace, &record.subscription_name);
    match Api::<ConfigMap>::namespaced(client.clone(), system_ns)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(source) => {
            return Err(ConvertError::Api {
                what: format!("deleting ConfigMap {system_ns}/{name}"),
                source,
            });
        }
    }
    Ok(())
}

/// Classic's roles and bindings convert replaced, as the record keeps them: recreated where
/// convert deleted them, their labels (`olm.owner*` included) given back where they remain.
/// Returns how many were written.
async fn restore_replaced(client: &Client, record: &Record) -> Result<usize, ConvertError> {
    let mut written = 0;
    for body in &record.left_objects {
        let Some(r) = record
            .left
            .iter()
            .find(|r| r.kind == body["kind"] && r.name == body["metadata"]["name"])
        else {
            continue;
        };
        let api = api_for(client, r).await?;
        let live = api
            .get_opt(&r.name)
            .await
            .map_err(api_err(format!("reading {}", describe(r))))?;
        match live {
            None => {
                let object: DynamicObject = serde_json::from_value(recorded(body))
                    .map_err(|e| ConvertError::Invalid(format!("the recorded {}: {e}", describe(r))))?;
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => written += 1,
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(source) => {
                        return Err(ConvertError::Api {
                            what: format!("recreating {}", describe(r)),
                            source,
                        });
                    }
                }
            }
            Some(live) => {
                let live = serde_json::to_value(live).unwrap_or_default();
                if let Some(patch) = relabel_patch(&live, body) {
                    api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map_err(api_err(format!("restoring {}", describe(r))))?;
                    written += 1;
                }
            }
        }
    }
    Ok(written)
}

/// The merge patch giving `live` back the labels `recorded` had (classic's `olm.owner*`
/// included); `None` when it has them.
pub fn relabel_patch(live: &Value, recorded: &Value) -> Option<Value> {
    let mut labels = serde_json::Map::new();
    for (k, v) in recorded["metadata"]["labels"].as_object().into_iter().flatten() {
        if live["metadata"]["labels"][k] != *v {
            labels.insert(k.clone(), v.clone());
        }
    }
    (!labels.is_empty()).then(|| json!({"metadata": {"labels": labels}}))
}

/// Whether `r` is a cert-manager Certificate or Issuer (olmv1 renders them; classic has none).
fn is_cert_manager_object(r: &ObjectRef) -> bool {
    r.api_version.starts_with("cert-manager.io/") && matches!(r.kind.as_str(), "Certificate" | "Issuer")
}

/// The merge patch giving an APIService back to classic: its `olm.owner*` labels naming the
/// recorded CSV again (classic refuses to take over an APIService without them: "pre-existing
/// APIService ... is not adoptable"). `None` for other objects, or when it has them.
pub fn hand_back_patch(live: &Value, record: &Record) -> Option<Value> {
    if live["kind"] != "APIService" {
        return None;
    }
    let wanted = [
        ("olm.owner", record.csv.as_str()),
        ("olm.owner.namespace", record.namespace.as_str()),
        ("olm.owner.kind", "ClusterServiceVersion"),
        ("olm.managed", "true"),
    ];
    let labels = &live["metadata"]["labels"];
    if wanted.iter().all(|(k, v)| labels[*k] == *v) {
        return None;
    }
    let labels: serde_json::Map<String, Value> =
        wanted.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    Some(json!({"metadata": {"labels": labels}}))
}

/// The merge patch removing `extension`'s owner labels and owner references from `live`;
/// `None` when it carries neither.
pub fn release_patch(live: &Value, extension: &str) -> Option<Value> {
    let meta = &live["metadata"];
    let mut patch = json!({"metadata": {}});
    if meta["labels"][LABEL_OWNER_NAME] == extension {
        patch["metadata"]["labels"] = json!({LABEL_OWNER_KIND: null, LABEL_OWNER_NAME: null});
    }
    if let Some(refs) = meta["ownerReferences"].as_array() {
        let kept: Vec<Value> = refs
            .iter()
            .filter(|r| !(r["kind"] == "ClusterExtension" && r["name"] == extension))
            .cloned()
            .collect();
        if kept.len() != refs.len() {
            patch["metadata"]["ownerReferences"] = json!(kept);
        }
    }
    if patch["metadata"].as_object().is_some_and(|m| m.is_empty()) {
        None
    } else {
        Some(patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv() -> CsvIdentity {
        CsvIdentity {
            namespace: "ns".into(),
            name: "op.v1".into(),
            uid: "u1".into(),
            owned_crds: vec!["widgets.example.com".into()],
            auth_reader_bindings: vec!["op-server-service-auth-reader".into()],
        }
    }

    fn r(kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: ns.map(String::from),
            name: name.into(),
        }
    }

    #[test]
    fn classic_objects_are_known_by_owner_reference_labels_or_owned_crd() {
        let by_ref = json!({"kind": "Deployment", "metadata": {"namespace": "ns", "ownerReferences": [
            {"kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u1"}]}});
        let by_label = json!({"kind": "ClusterRole", "metadata": {"labels": {
            "olm.owner": "op.v1", "olm.owner.namespace": "ns", "olm.owner.kind": "ClusterServiceVersion"}}});
        let crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}});
        for o in [&by_ref, &by_label, &crd] {
            assert!(made_for_csv(o, &csv()), "{o}");
        }
        // Another CSV's, another namespace's, or a stranger's are not.
        let other_csv = json!({"kind": "ClusterRole", "metadata": {"labels": {
            "olm.owner": "op.v2", "olm.owner.namespace": "ns", "olm.owner.kind": "ClusterServiceVersion"}}});
        let other_ns = json!({"kind": "ClusterRole", "metadata": {"labels": {
            "olm.owner": "op.v1", "olm.owner.namespace": "other", "olm.owner.kind": "ClusterServiceVersion"}}});
        let stranger = json!({"kind": "ConfigMap", "metadata": {"namespace": "ns", "ownerReferences": [
            {"kind": "ClusterServiceVersion", "name": "x", "uid": "u9"}]}});
        let other_crd =
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.example.com"}});
        for o in [&other_csv, &other_ns, &stranger, &other_crd] {
            assert!(!made_for_csv(o, &csv()), "{o}");
        }
    }

    #[test]
    fn adoption_takes_classic_and_own_objects_and_names_every_other() {
        let classic = json!({"kind": "Deployment", "metadata": {"namespace": "ns", "ownerReferences": [
            {"kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u1"}]}});
        let ours = json!({"kind": "ServiceAccount", "metadata": {"labels": owner_labels("ext")}});
        let stranger = json!({"kind": "ConfigMap", "metadata": {"name": "c"}});
        let existing = vec![
            (r("Deployment", Some("ns"), "d"), Some(classic)),
            (r("ServiceAccount", Some("ns"), "s"), Some(ours)),
            (r("Service", Some("ns"), "new"), None),
        ];
        assert_eq!(
            plan_adoption(&existing, &csv(), "ext").unwrap(),
            [
                r("Deployment", Some("ns"), "d"),
                r("ServiceAccount", Some("ns"), "s")
            ]
        );
        let mut with_stranger = existing;
        with_stranger.push((r("ConfigMap", Some("ns"), "c"), Some(stranger)));
        with_stranger.push((r("ClusterRole", None, "cr"), Some(json!({"metadata": {}}))));
        assert_eq!(
            plan_adoption(&with_stranger, &csv(), "ext").unwrap_err(),
            ["ConfigMap ns/c", "ClusterRole cr"]
        );
    }

    #[test]
    fn adoption_patches_label_first_then_detach() {
        let live = json!({"metadata": {"resourceVersion": "7",
            "labels": {"olm.owner": "op.v1", "olm.owner.namespace": "ns", "olm.owner.kind": "ClusterServiceVersion", "app": "a"},
            "ownerReferences": [{"kind": "ClusterServiceVersion", "name": "op.v1"}, {"kind": "Other", "name": "o"}]}});
        // First pass, namespaced: olmv1's labels only; classic keeps its own.
        let first = adoption_patch(&live, "ext", false, false).unwrap();
        assert_eq!(
            first,
            json!({"metadata": {"resourceVersion": "7", "labels": {
                LABEL_OWNER_KIND: "ClusterExtension", LABEL_OWNER_NAME: "ext"}}})
        );
        // Cluster-scoped: classic's labels go at once (its finalizer selects by them).
        let cluster = adoption_patch(&live, "ext", true, false).unwrap();
        assert_eq!(cluster["metadata"]["labels"]["olm.owner"], Value::Null);
        assert!(
            cluster["metadata"]["labels"]
                .as_object()
                .unwrap()
                .contains_key("olm.owner.kind")
        );
        assert!(cluster["metadata"].get("ownerReferences").is_none());
        // Detach: the CSV's reference goes, the other stays.
        let detach = adoption_patch(&live, "ext", false, true).unwrap();
        assert_eq!(
            detach["metadata"]["ownerReferences"],
            json!([{"kind": "Other", "name": "o"}])
        );
        // Done: nothing to patch.
        let done =
            json!({"metadata": {"labels": owner_labels("ext"), "ownerReferences": [{"kind": "Other"}]}});
        assert_eq!(adoption_patch(&done, "ext", true, true), None);
        // A serving certificate's Secret gets classic's CA where cert-manager's injector reads it.
        let secret = json!({"kind": "Secret", "metadata": {"resourceVersion": "3", "labels": owner_labels("ext")},
            "data": {"tls.crt": "Yw==", "tls.key": "aw==", "olmCAKey": "Q0E="}});
        assert_eq!(
            adoption_patch(&secret, "ext", false, true),
            Some(json!({"metadata": {"resourceVersion": "3"}, "data": {"ca.crt": "Q0E="}}))
        );
    }

    #[test]
    fn classics_auth_reader_binding_is_known_by_its_name_role_and_subjects() {
        let binding = |name: &str, role: &str, subject_ns: &str| {
            json!({"kind": "RoleBinding", "metadata": {"name": name, "namespace": "kube-system",
                "labels": {"olm.managed": "true"}},
                "roleRef": {"kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": subject_ns}]})
        };
        let reader = "extension-apiserver-authentication-reader";
        assert!(made_for_csv(
            &binding("op-server-service-auth-reader", reader, "ns"),
            &csv()
        ));
        // Another Deployment's, another role, another namespace's account: not classic's for it.
        assert!(!made_for_csv(
            &binding("other-service-auth-reader", reader, "ns"),
            &csv()
        ));
        assert!(!made_for_csv(
            &binding("op-server-service-auth-reader", "admin", "ns"),
            &csv()
        ));
        assert!(!made_for_csv(
            &binding("op-server-service-auth-reader", reader, "other"),
            &csv()
        ));
        let mut unlabelled = binding("op-server-service-auth-reader", reader, "ns");
        unlabelled["metadata"]["labels"] = json!({});
        assert!(!made_for_csv(&unlabelled, &csv()));
    }

    #[test]
    fn a_replaced_role_gets_back_the_labels_classic_gave_it() {
        let recorded = json!({"metadata": {"labels": {"olm.owner": "op.v1", "olm.owner.namespace": "ns",
            "olm.owner.kind": "ClusterServiceVersion", "olm.managed": "true"}}});
        // Adopted (classic's owner labels gone from a cluster-scoped one), then released.
        let live = json!({"metadata": {"labels": {"olm.managed": "true"}}});
        assert_eq!(
            relabel_patch(&live, &recorded).unwrap(),
            json!({"metadata": {"labels": {"olm.owner": "op.v1", "olm.owner.namespace": "ns",
                "olm.owner.kind": "ClusterServiceVersion"}}})
        );
        assert_eq!(relabel_patch(&recorded, &recorded), None);
    }

    #[test]
    fn release_removes_only_this_extensions_marks() {
        let live = json!({"metadata": {"labels": owner_labels("ext"), "ownerReferences": [
            {"kind": "ClusterExtension", "name": "ext"}, {"kind": "ClusterExtension", "name": "other"}]}});
        assert_eq!(
            release_patch(&live, "ext").unwrap(),
            json!({"metadata": {"labels": {LABEL_OWNER_KIND: null, LABEL_OWNER_NAME: null},
                "ownerReferences": [{"kind": "ClusterExtension", "name": "other"}]}})
        );
        assert_eq!(
            release_patch(&json!({"metadata": {"labels": owner_labels("b")}}), "ext"),
            None
        );
    }

    #[test]
    fn the_extension_pins_the_installed_version_in_the_subscriptions_place() {
        let sub: Subscription = serde_json::from_value(json!({
            "metadata": {"name": "sub", "namespace": "ns"},
            "spec": {"name": "pkg", "channel": "stable", "source": "cs", "sourceNamespace": "olm"}}))
        .unwrap();
        let mut config = serde_json::Map::new();
        config.insert("watchNamespace".into(), json!("ns"));
        let ext = extension_object("sub", &sub, "1.2.3", "cat", "sub-installer", &config);
        assert_eq!(
            ext,
            json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                "metadata": {"name": "sub", "annotations": {MIGRATED_FROM_ANNOTATION: "ns/sub"}},
                "spec": {"namespace": "ns", "serviceAccount": {"name": "sub-installer"},
                    "source": {"sourceType": "Catalog", "catalog": {"packageName": "pkg", "version": "1.2.3",
                        "channels": ["stable"],
                        "selector": {"matchLabels": {LABEL_CATALOG_NAME: "cat"}}}},
                    "config": {"configType": "Inline", "inline": {"watchNamespace": "ns"}}}})
        );
        // It is a valid ClusterExtension.
        let _: ClusterExtension = serde_json::from_value(ext).unwrap();
        let none = extension_object(
            "sub",
            &Subscription::default(),
            "1",
            "c",
            "s",
            &serde_json::Map::new(),
        );
        assert!(none["spec"].get("config").is_none());
        assert!(none["spec"]["source"]["catalog"].get("channels").is_none());
    }

    #[test]
    fn rollback_recreates_the_subscription_pinned_and_manual() {
        let record = Record {
            namespace: "ns".into(),
            subscription_name: "sub".into(),
            extension: "sub".into(),
            csv: "op.v1".into(),
            version: "1.0.0".into(),
            subscription: json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "sub", "namespace": "ns", "uid": "x", "resourceVersion": "3"},
                "spec": {"name": "pkg", "installPlanApproval": "Automatic"}, "status": {"state": "AtLatestKnown"}}),
            operator_group: json!({}),
            catalog_source: None,
            adopted: Vec::new(),
            left: Vec::new(),
            left_objects: Vec::new(),
            pods_restart: "no".into(),
            certificates: Vec::new(),
            installer: Vec::new(),
            extension_object: json!({}),
        };
        assert!(automatic(&record));
        let api_service = json!({"kind": "APIService", "metadata": {"name": "v1.example.com",
            "labels": {"olm.managed": "true"}}});
        assert_eq!(
            hand_back_patch(&api_service, &record),
            Some(
                json!({"metadata": {"labels": {"olm.owner": "op.v1", "olm.owner.namespace": "ns",
                "olm.owner.kind": "ClusterServiceVersion", "olm.managed": "true"}}})
            )
        );
        let mut handed_back = api_service.clone();
        handed_back["metadata"]["labels"] =
            hand_back_patch(&api_service, &record).unwrap()["metadata"]["labels"].clone();
        assert_eq!(hand_back_patch(&handed_back, &record), None, "once is enough");
        assert_eq!(
            hand_back_patch(&json!({"kind": "Service", "metadata": {}}), &record),
            None
        );
        let mut manual = record.clone();
        manual.subscription["spec"]["installPlanApproval"] = json!("Manual");
        assert!(!automatic(&manual));
        assert_eq!(
            rollback_subscription(&record),
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "sub", "namespace": "ns"},
                "spec": {"name": "pkg", "installPlanApproval": "Manual", "startingCSV": "op.v1"}})
        );
    }

    #[test]
    fn providers_convert_first_and_blocked_rows_not_at_all() {
        let row = |ns: &str, verdict: Verdict, after: &[&str]| CheckRow {
            namespace: ns.into(),
            subscription: "s".into(),
            package: ns.into(),
            installed_csv: None,
            version: None,
            catalog_source: None,
            cluster_catalog: None,
            extension: None,
            verdict,
            pods_restart: super::super::check::PodRestart::No,
            after: after.iter().map(|a| a.to_string()).collect(),
            reasons: Vec::new(),
        };
        let rows = [
            row("a", Verdict::Eligible, &["b/s"]),
            row("b", Verdict::Eligible, &["c/s"]),
            row("c", Verdict::Eligible, &[]),
            row("d", Verdict::Blocked, &[]),
            row("e", Verdict::Eligible, &["x/s"]),
        ];
        let order: Vec<String> = conversion_order(&rows).into_iter().map(|(ns, _)| ns).collect();
        assert_eq!(order, ["c", "b", "a", "e"]);
        // A cycle still converts each once.
        let cycle = [
            row("a", Verdict::Eligible, &["b/s"]),
            row("b", Verdict::Eligible, &["a/s"]),
        ];
        assert_eq!(conversion_order(&cycle).len(), 2);
    }

    #[test]
    fn record_names_fit_a_configmap() {
        assert_eq!(record_name("ns", "sub"), "migration.ns.sub");
        let long = record_name(&"n".repeat(63), &"s".repeat(253));
        assert!(long.len() <= MAX_NAME && long.starts_with("migration."));
        assert_ne!(long, record_name(&"n".repeat(63), &"t".repeat(253)));
    }
}
