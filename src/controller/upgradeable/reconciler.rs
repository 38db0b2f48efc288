//! The Upgradeable reconciler: watches ClusterExtensions, their revision record Secrets, the
//! ClusterVersion and the target object, and keeps the target's condition equal to
//! [`compat::assess`]'s verdict: `Upgradeable` on the ClusterOperator olmv1 owns (with the rest of
//! the status a ClusterOperator carries), or only `InstalledOLMOperatorsUpgradeable` on `OLM`
//! `cluster` in integrated mode.

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use olmv1_api::v1::{ClusterExtension, conditions::ConditionStatus};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{
    UpgradeableConfig, UpgradeableMode,
    compat::{
        self, Assessment, CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE, CONDITION_UPGRADEABLE,
        InstalledExtension, MajorMinor, REASON_AS_EXPECTED, UpgradeableCondition,
    },
    metrics::UpgradeableMetrics,
};
use crate::{apply::revision::RevisionStore, backoff::Backoff};

/// The API group and version of ClusterOperator and ClusterVersion.
pub const OPENSHIFT_CONFIG_API_VERSION: &str = "config.openshift.io/v1";
/// The API group and version of the `OLM` operator object.
pub const OPENSHIFT_OPERATOR_API_VERSION: &str = "operator.openshift.io/v1";
/// The `OLM` object cluster-olm-operator reconciles (integrated mode writes there).
pub const OLM_OPERATOR_NAME: &str = "cluster";
/// The ClusterVersion object every OpenShift cluster has.
pub const CLUSTER_VERSION_NAME: &str = "version";
/// The field manager of this reconciler's status writes.
pub const FIELD_MANAGER: &str = "olmv1-upgradeable";

/// Why one pass could not complete.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster version is unknown: nothing can be judged until ClusterVersion changes.
    #[error("cannot read the cluster version from ClusterVersion \"version\": {0}")]
    ClusterVersion(String),
    /// Reading, creating or patching the target object failed.
    #[error("cannot update {target}: {source}")]
    Write {
        /// `ClusterOperator "olmv1"` or `OLM "cluster"`.
        target: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Integrated mode, and the `OLM` object is not there (cluster-olm-operator creates it).
    #[error("{0} does not exist: integrated mode writes to the object cluster-olm-operator creates")]
    Missing(String),
    /// Someone else kept changing the target between our read and our write.
    #[error("{0} kept changing while its conditions were written")]
    Conflict(String),
}

impl Error {
    /// Terminal errors wait for a watched object to change instead of being retried on a timer.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::ClusterVersion(_))
    }
}

fn gvk(kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk("config.openshift.io", "v1", kind)
}

/// The `config.openshift.io/v1` ClusterOperator resource.
pub fn cluster_operator_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&gvk("ClusterOperator"), "clusteroperators")
}

/// The `operator.openshift.io/v1` OLM resource.
pub fn olm_operator_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operator.openshift.io", "v1", "OLM"),
        "olms",
    )
}

/// The object the verdict is written to.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its resource.
    pub resource: ApiResource,
    /// Its name.
    pub name: String,
    /// The condition type of the verdict.
    pub condition_type: &'static str,
    /// Whether olmv1 owns the object: creates it and writes its whole status.
    pub owned: bool,
}

impl Target {
    /// Where `config` says the verdict goes.
    pub fn of(config: &UpgradeableConfig) -> Self {
        match config.mode {
            UpgradeableMode::ClusterOperator => Target {
                resource: cluster_operator_resource(),
                name: config.cluster_operator_name.clone(),
                condition_type: CONDITION_UPGRADEABLE,
                owned: true,
            },
            UpgradeableMode::Integrated => Target {
                resource: olm_operator_resource(),
                name: OLM_OPERATOR_NAME.to_owned(),
                condition_type: CONDITION_INSTALLED_OLM_OPERATORS_UPGRADEABLE,
                owned: false,
            },
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.resource.kind, self.name)
    }
}

/// The status fields, besides `Upgradeable`, of the ClusterOperator olmv1 owns: the conditions
/// every ClusterOperator reports (the cluster-version operator alerts on one that is not
/// Available), `versions` and `relatedObjects` (what must-gather collects).
pub fn owned_cluster_operator_status(
    system_namespace: &str,
) -> (Vec<(&'static str, UpgradeableCondition)>, serde_json::Value) {
    let steady = |status| UpgradeableCondition {
        status,
        reason: REASON_AS_EXPECTED,
        message: String::new(),
    };
    let conditions = vec![
        ("Available", steady(ConditionStatus::True)),
        ("Progressing", steady(ConditionStatus::False)),
        ("Degraded", steady(ConditionStatus::False)),
    ];
    let group = olmv1_api::v1::GROUP;
    let fields = serde_json::json!({
        "versions": [{"name": "operator", "version": env!("CARGO_PKG_VERSION")}],
        "relatedObjects": [
            {"group": "", "resource": "namespaces", "name": system_namespace},
            {"group": group, "resource": "clusterextensions", "name": ""},
            {"group": group, "resource": "clustercatalogs", "name": ""},
        ],
    });
    (conditions, fields)
}

/// The `config.openshift.io/v1` ClusterVersion resource.
pub fn cluster_version_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&gvk("ClusterVersion"), "clusterversions")
}

/// What each ClusterExtension has installed, from its revision record (read through
/// [`RevisionStore::find`], property values as their JSON text). Extensions without a record are
/// not installed yet and are left out; records without an extension are leftovers and are ignored.
pub fn installed_extensions(extension_names: &[String], records: &[Arc<Secret>]) -> Vec<InstalledExtension> {
    extension_names
        .iter()
        .filter_map(|extension| {
            let installed = match RevisionStore::find(extension, records) {
                Ok(None) => return None,
                Ok(Some(record)) => InstalledExtension {
                    extension: extension.clone(),
                    bundle: record.bundle_name,
                    properties: Ok(record
                        .properties
                        .into_iter()
                        .map(|p| (p.type_.to_string(), p.value.raw().to_owned()))
                        .collect()),
                },
                Err(cause) => InstalledExtension {
                    extension: extension.clone(),
                    bundle: "(unknown)".to_owned(),
                    properties: Err(cause.to_string()),
                },
            };
            Some(installed)
        })
        .collect()
}

/// The current `<major>.<minor>` from a ClusterVersion's `status.desired.version`.
pub fn cluster_version_of(cluster_version: Option<&DynamicObject>) -> Result<MajorMinor, Error> {
    let cv = cluster_version.ok_or_else(|| Error::ClusterVersion("it does not exist".to_owned()))?;
    let desired = cv
        .data
        .pointer("/status/desired/version")
        .and_then(|v| v.as_str());
    let desired =
        desired.ok_or_else(|| Error::ClusterVersion("status.desired.version is not set".to_owned()))?;
    compat::parse_cluster_version(desired).map_err(|e| Error::ClusterVersion(e.to_string()))
}

/// Which OpenShift resources the server has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OpenShiftApi {
    cluster_operators: bool,
    cluster_versions: bool,
    olms: bool,
}

/// The plurals `group_version` serves; none when the group is not served.
async fn served_resources(client: &Client, group_version: &str) -> Result<Vec<String>, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources.into_iter().map(|r| r.name).collect()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

async fn discover_openshift_api(client: &Client, mode: UpgradeableMode) -> Result<OpenShiftApi, kube::Error> {
    let config = served_resources(client, OPENSHIFT_CONFIG_API_VERSION).await?;
    let operator = match mode {
        UpgradeableMode::Integrated => served_resources(client, OPENSHIFT_OPERATOR_API_VERSION).await?,
        UpgradeableMode::ClusterOperator => Vec::new(),
    };
    let has = |list: &[String], plural: &str| list.iter().any(|r| r == plural);
    Ok(OpenShiftApi {
        cluster_operators: has(&config, "clusteroperators"),
        cluster_versions: has(&config, "clusterversions"),
        olms: has(&operator, "olms"),
    })
}

impl OpenShiftApi {
    /// Whether the feature can work: the target's resource, and a cluster version (from
    /// ClusterVersion unless one was given on the command line).
    fn usable(self, mode: UpgradeableMode, cluster_version_given: bool) -> bool {
        let target = match mode {
            UpgradeableMode::ClusterOperator => self.cluster_operators,
            UpgradeableMode::Integrated => self.olms,
        };
        target && (self.cluster_versions || cluster_version_given)
    }
}

/// Waits until the server has what the configuration needs; logs its absence once.
async fn wait_for_openshift_api(
    client: &Client,
    config: &UpgradeableConfig,
    api_changes: &mut tokio::sync::watch::Receiver<u64>,
) {
    let mut logged = false;
    loop {
        match discover_openshift_api(client, config.mode).await {
            Ok(api) if api.usable(config.mode, config.cluster_version.is_some()) => {
                if logged {
                    info!("the config.openshift.io API is now served: Upgradeable reporting starts");
                }
                return;
            }
            Ok(api) => {
                if !logged {
                    info!(
                        cluster_operators = api.cluster_operators,
                        cluster_versions = api.cluster_versions,
                        olms = api.olms,
                        mode = ?config.mode,
                        "the OpenShift API this mode needs is not served (not an OpenShift cluster): \
                         Upgradeable reporting is idle"
                    );
                    logged = true;
                }
            }
            Err(e) => warn!(error = %e, "cannot discover the config.openshift.io API; will look again"),
        }
        // A CRD or APIService event (the API may have appeared), or the long safety net. A
        // closed channel (no watch follows the APIs) leaves the safety net alone.
        tokio::select! {
            Ok(()) = api_changes.changed() => {
                tokio::time::sleep(crate::apply::lookups::DISCOVERY_SETTLE).await;
                api_changes.mark_unchanged();
            }
            () = tokio::time::sleep(config.api_recheck_interval) => {}
        }
    }
}

/// Watches what the verdict depends on and keeps the ClusterOperator's `Upgradeable` condition
/// up to date. Never returns while the client works; when the `config.openshift.io` API is absent
/// it idles (logged once) and looks again on each of `api_changes` (CRD and APIService events,
/// [`crate::apply::lookups::ClusterLookups::discovery_changes`]) and every `api_recheck_interval`
/// (a safety net; an idle controller polls nothing). Spawn it beside the
/// ClusterExtension controller (only while holding leadership) and abort it on shutdown.
pub async fn run(
    client: Client,
    config: UpgradeableConfig,
    metrics: UpgradeableMetrics,
    mut api_changes: tokio::sync::watch::Receiver<u64>,
) {
    wait_for_openshift_api(&client, &config, &mut api_changes).await;
    info!(
        target = %Target::of(&config),
        cluster_version = ?config.cluster_version.map(|v| v.to_string()),
        "Upgradeable reconciler started"
    );
    watch_and_reconcile(client, config, metrics).await;
}

type EventStream = Pin<Box<dyn Stream<Item = Result<(), watcher::Error>> + Send>>;

struct Context {
    client: Client,
    config: UpgradeableConfig,
    metrics: UpgradeableMetrics,
    extensions: Store<PartialObjectMeta<ClusterExtension>>,
    records: Store<Secret>,
    cluster_version: Option<Store<DynamicObject>>,
}

impl Context {
    fn ready(&self) -> bool {
        let ready = |f: Option<bool>| f.unwrap_or(false);
        ready(
            self.extensions
                .wait_until_ready()
                .now_or_never()
                .map(|r| r.is_ok()),
        ) && ready(self.records.wait_until_ready().now_or_never().map(|r| r.is_ok()))
            && self
                .cluster_version
                .as_ref()
                .is_none_or(|s| ready(s.wait_until_ready().now_or_never().map(|r| r.is_ok())))
    }
}

async fn watch_and_reconcile(client: Client, config: UpgradeableConfig, metrics: UpgradeableMetrics) {
    let (extensions, extensions_writer) = reflector::store::<PartialObjectMeta<ClusterExtension>>();
    let (records, records_writer) = reflector::store::<Secret>();
    let mut streams: Vec<EventStream> = vec![
        watcher(
            Api::<PartialObjectMeta<ClusterExtension>>::all(client.clone()),
            crate::watch::config(),
        )
        .default_backoff()
        .reflect(extensions_writer)
        .map_ok(|_| ())
        .boxed(),
        RevisionStore::new(client.clone(), &config.system_namespace)
            .watch()
            .default_backoff()
            .reflect(records_writer)
            .map_ok(|_| ())
            .boxed(),
        watcher(
            Api::<DynamicObject>::all_with(client.clone(), &Target::of(&config).resource),
            crate::watch::config().fields(&format!("metadata.name={}", Target::of(&config).name)),
        )
        .default_backoff()
        .map_ok(|_| ())
        .boxed(),
    ];
    let cluster_version = if config.cluster_version.is_none() {
        let writer = reflector::store::Writer::<DynamicObject>::new(cluster_version_resource());
        let store = writer.as_reader();
        streams.push(
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &cluster_version_resource()),
                crate::watch::config().fields(&format!("metadata.name={CLUSTER_VERSION_NAME}")),
            )
            .default_backoff()
            .reflect(writer)
            .map_ok(|_| ())
            .boxed(),
        );
        Some(store)
    } else {
        None
    };
    let ctx = Context {
        client,
        config,
        metrics,
        extensions,
        records,
        cluster_version,
    };
    let mut events = futures::stream::select_all(streams);
    let mut dirty = true;
    let mut failures: u32 = 0;
    let mut last_terminal: Option<String> = None;
    let mut wake_at = Instant::now() + ctx.config.resync_interval;
    loop {
        tokio::select! {
            item = events.next() => match item {
                Some(Ok(())) => dirty = true,
                Some(Err(e)) => warn!(error = %e, "Upgradeable watch failed; retrying"),
                None => return,
            },
            () = tokio::time::sleep_until(wake_at) => {
                dirty = true;
                wake_at = Instant::now() + ctx.config.resync_interval;
            }
        }
        // One recomputation for a burst of events.
        while let Some(Some(item)) = events.next().now_or_never() {
            dirty |= item.is_ok();
        }
        if !dirty || !ctx.ready() {
            continue;
        }
        match reconcile_once(&ctx).await {
            Ok(()) => {
                dirty = false;
                failures = 0;
                last_terminal = None;
            }
            Err(e) if e.is_terminal() => {
                // Wait for ClusterVersion to change; say so once per distinct cause.
                dirty = false;
                let message = e.to_string();
                if last_terminal.as_deref() != Some(message.as_str()) {
                    warn!(error = %message, "Upgradeable condition not updated");
                    last_terminal = Some(message);
                }
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let delay = RETRY_BACKOFF.delay(failures);
                warn!(error = %e, retry_in = ?delay, "Upgradeable condition not updated");
                wake_at = Instant::now() + delay;
            }
        }
    }
}

/// Retries of a failed pass: 1 s, 2 s, 4 s, ... capped at one minute.
const RETRY_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// One pass: read the stores, judge, publish metrics, write the condition if it changed.
async fn reconcile_once(ctx: &Context) -> Result<(), Error> {
    let current = match (ctx.config.cluster_version, &ctx.cluster_version) {
        (Some(version), _) => version,
        (None, Some(store)) => cluster_version_of(store.state().first().map(|cv| cv.as_ref()))?,
        (None, None) => return Err(Error::ClusterVersion("no ClusterVersion watch".to_owned())),
    };
    let mut names: Vec<String> = ctx
        .extensions
        .state()
        .iter()
        .filter_map(|ce| ce.metadata.name.clone())
        .collect();
    names.sort();
    let installed = installed_extensions(&names, &ctx.records.state());
    let assessment = compat::assess(current, &installed);
    let condition = assessment.condition();
    ctx.metrics.observe(&assessment, condition.status);
    debug!(
        current = %current,
        extensions = names.len(),
        installed = installed.len(),
        blocking = assessment.blocking.len(),
        errors = assessment.errors.len(),
        "Upgradeable assessed"
    );
    let target = Target::of(&ctx.config);
    let api = Api::<DynamicObject>::all_with(ctx.client.clone(), &target.resource);
    let written = if target.owned {
        let (mut conditions, fields) = owned_cluster_operator_status(&ctx.config.system_namespace);
        conditions.push((target.condition_type, condition.clone()));
        write_status(&api, &target, &conditions, &fields).await?
    } else {
        let olm_condition = assessment.olm_operator_condition();
        let conditions = [(target.condition_type, olm_condition)];
        write_status(&api, &target, &conditions, &serde_json::json!({})).await?
    };
    if written {
        log_change(&target, &assessment, &condition);
    }
    Ok(())
}

fn log_change(target: &Target, assessment: &Assessment, condition: &UpgradeableCondition) {
    let blocking: Vec<String> = assessment
        .blocking
        .iter()
        .map(|b| format!("{} ({} max {})", b.extension, b.bundle, b.max_openshift_version))
        .collect();
    info!(
        %target,
        status = condition.status.as_str(),
        reason = condition.reason,
        next_version = %assessment.next,
        blocking = ?blocking,
        errors = ?assessment.errors,
        "Upgradeable condition updated"
    );
}

/// Sets `conditions` (type, condition) in the target's `status.conditions` and the top-level
/// status `fields` (an object), creating an owned target when missing. Every other condition and
/// status field is kept: the whole conditions list is written back under the resourceVersion it
/// was read at. Returns whether anything was written.
pub async fn write_status(
    api: &Api<DynamicObject>,
    target: &Target,
    conditions: &[(&str, UpgradeableCondition)],
    fields: &serde_json::Value,
) -> Result<bool, Error> {
    let api_error = |source| Error::Write {
        target: target.to_string(),
        source,
    };
    for _attempt in 0..5 {
        let object = match api.get_opt(&target.name).await.map_err(api_error)? {
            Some(object) => object,
            None if !target.owned => return Err(Error::Missing(target.to_string())),
            None => match create_owned(api, target).await {
                Ok(object) => object,
                Err(kube::Error::Api(status)) if status.is_already_exists() => continue,
                Err(e) => return Err(api_error(e)),
            },
        };
        let mut merged: Vec<serde_json::Value> = object
            .data
            .pointer("/status/conditions")
            .and_then(|c| c.as_array())
            .cloned()
            .unwrap_or_default();
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut changed = false;
        for (condition_type, condition) in conditions {
            if let Some(next) = compat::merge_condition(&merged, condition_type, condition, &now) {
                merged = next;
                changed = true;
            }
        }
        let mut status = serde_json::Map::new();
        for (key, value) in fields.as_object().into_iter().flatten() {
            changed |= object.data.pointer(&format!("/status/{key}")) != Some(value);
            status.insert(key.clone(), value.clone());
        }
        if !changed {
            return Ok(false);
        }
        status.insert("conditions".to_owned(), merged.into());
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": object.metadata.resource_version },
            "status": status,
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match api
            .patch_status(&target.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.is_conflict() => continue,
            Err(e) => return Err(api_error(e)),
        }
    }
    Err(Error::Conflict(target.to_string()))
}

async fn create_owned(api: &Api<DynamicObject>, target: &Target) -> Result<DynamicObject, kube::Error> {
    let mut object = DynamicObject::new(&target.name, &target.resource);
    object.data = serde_json::json!({ "spec": {} });
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let created = api.create(&params, &object).await?;
    info!(%target, "created ClusterOperator");
    Ok(created)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::apply::{
        ownership::owner_labels,
        revision::{InstalledRevision, RECORD_KEY, RECORD_SECRET_TYPE},
    };
    use crate::catalog::Property;

    fn record_secret(extension: &str, data: &[u8]) -> Arc<Secret> {
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("{extension}-revision"));
        secret.metadata.namespace = Some("olmv1-system".to_owned());
        secret.metadata.labels = Some(owner_labels(extension));
        secret.type_ = Some(RECORD_SECRET_TYPE.to_owned());
        secret.data = Some(BTreeMap::from([(
            RECORD_KEY.to_owned(),
            ByteString(data.to_vec()),
        )]));
        Arc::new(secret)
    }

    fn revision(bundle: &str, max: Option<serde_json::Value>) -> Vec<u8> {
        let record = InstalledRevision {
            revision: 1,
            package: "pkg".to_owned(),
            bundle_name: bundle.to_owned(),
            bundle_version: "1.0.0".to_owned(),
            image: "registry/bundle@sha256:00".to_owned(),
            properties: max
                .into_iter()
                .map(|value| Property::new("olm.maxOpenShiftVersion", value.into()))
                .collect(),
            ..InstalledRevision::default()
        };
        serde_json::to_vec(&record).expect("serializes")
    }

    #[test]
    fn reads_the_records_the_controller_writes() {
        let records = vec![
            record_secret("a", &revision("a.v1", Some(serde_json::json!("4.18")))),
            record_secret("b", &revision("b.v1", None)),
            record_secret("orphan", &revision("orphan.v1", Some(serde_json::json!("4.1")))),
        ];
        let names = vec!["a".to_owned(), "b".to_owned(), "not-installed".to_owned()];
        let installed = installed_extensions(&names, &records);
        assert_eq!(
            installed,
            vec![
                InstalledExtension {
                    extension: "a".to_owned(),
                    bundle: "a.v1".to_owned(),
                    properties: Ok(vec![(
                        "olm.maxOpenShiftVersion".to_owned(),
                        "\"4.18\"".to_owned()
                    )]),
                },
                InstalledExtension {
                    extension: "b".to_owned(),
                    bundle: "b.v1".to_owned(),
                    properties: Ok(vec![])
                },
            ]
        );
    }

    #[test]
    fn keeps_the_raw_text_of_a_number() {
        let json = br#"{"revision":1,"package":"x","bundleName":"x.v1","bundleVersion":"1.0.0","image":"i","properties":[{"type":"olm.maxOpenShiftVersion","value":4.10}]}"#;
        let installed = installed_extensions(&["x".to_owned()], &[record_secret("x", json)]);
        assert_eq!(
            installed[0].properties,
            Ok(vec![("olm.maxOpenShiftVersion".to_owned(), "4.10".to_owned())])
        );
    }

    /// `olm.maxOpenShiftVersion: 4.10` (a JSON number) keeps its digits from the catalog through
    /// the index, the resolver and the revision record to the verdict: on 4.9, 4.10 allows the
    /// next minor; read as `4.1` it would block.
    #[test]
    fn a_max_version_of_4_10_survives_catalog_index_record_and_verdict() {
        use crate::catalog::CatalogIndex;
        use crate::resolve::{CatalogInput, ResolveRequest, resolve};

        let jsonl = concat!(
            r#"{"schema":"olm.package","name":"p","defaultChannel":"stable"}"#,
            "\n",
            r#"{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1.0.0"}]}"#,
            "\n",
            r#"{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"registry/p@sha256:00","#,
            r#""properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},"#,
            r#"{"type":"olm.maxOpenShiftVersion","value":4.10}]}"#,
            "\n",
        );
        let index = CatalogIndex::from_jsonl(
            bytes::Bytes::from_static(jsonl.as_bytes()),
            "catalog",
            crate::catalog::DEFAULT_MAX_JSONL_LINE_BYTES,
        )
        .expect("the catalog indexes");
        let request = ResolveRequest {
            package: "p".to_owned(),
            version_range: None,
            channels: Vec::new(),
            selector: None,
            upgrade_constraint_policy: olmv1_api::v1::UpgradeConstraintPolicy::CatalogProvided,
            installed: None,
        };
        let resolution =
            resolve(&request, &[CatalogInput::new("catalog", Arc::new(index))]).expect("p resolves");
        let record = InstalledRevision {
            revision: 1,
            package: "p".to_owned(),
            bundle_name: resolution.bundle.name.clone(),
            bundle_version: resolution.bundle.status_version.clone(),
            image: resolution.bundle.image.clone(),
            properties: resolution.bundle.properties.clone(),
            ..InstalledRevision::default()
        };
        let json = serde_json::to_vec(&record).expect("the record serializes");
        assert!(
            String::from_utf8_lossy(&json).contains(r#""value":4.10}"#),
            "the record keeps the text"
        );
        let installed = installed_extensions(&["x".to_owned()], &[record_secret("x", &json)]);
        let on_4_9 = compat::assess(MajorMinor::new(4, 9), &installed);
        assert!(
            on_4_9.blocking.is_empty() && on_4_9.errors.is_empty(),
            "{on_4_9:?}"
        );
        assert_eq!(on_4_9.condition().status, ConditionStatus::True);
        let on_4_10 = compat::assess(MajorMinor::new(4, 10), &installed);
        assert_eq!(on_4_10.blocking.len(), 1, "{on_4_10:?}");
        assert_eq!(on_4_10.blocking[0].max_openshift_version, MajorMinor::new(4, 10));
    }

    #[test]
    fn a_broken_record_is_an_error_for_its_extension() {
        let installed = installed_extensions(&["x".to_owned()], &[record_secret("x", b"not json")]);
        let error = installed[0].properties.as_ref().expect_err("broken");
        assert!(
            error.starts_with("the revision record of ClusterExtension \"x\" is corrupt: "),
            "{error}"
        );
    }

    #[test]
    fn ignores_secrets_that_are_not_records_of_that_extension() {
        let mut wrong_type = (*record_secret("x", &revision("x.v1", None))).clone();
        wrong_type.type_ = Some("Opaque".to_owned());
        let mut wrong_owner = (*record_secret("y", &revision("y.v1", None))).clone();
        wrong_owner.metadata.name = Some("x-revision".to_owned());
        let installed =
            installed_extensions(&["x".to_owned()], &[Arc::new(wrong_type), Arc::new(wrong_owner)]);
        assert!(installed.is_empty(), "{installed:?}");
    }

    #[test]
    fn reads_the_desired_cluster_version() {
        let mut cv = DynamicObject::new(CLUSTER_VERSION_NAME, &cluster_version_resource());
        cv.data = serde_json::json!({"status": {"desired": {"version": "4.18.0-rc1"}}});
        assert_eq!(
            cluster_version_of(Some(&cv)).expect("valid"),
            MajorMinor::new(4, 18)
        );
        cv.data = serde_json::json!({"status": {}});
        assert!(cluster_version_of(Some(&cv)).expect_err("unset").is_terminal());
        assert!(
            cluster_version_of(None)
                .expect_err("missing")
                .to_string()
                .contains("does not exist")
        );
    }

    #[test]
    fn the_feature_needs_cluster_operators_and_a_cluster_version() {
        let api = |cluster_operators, cluster_versions, olms| OpenShiftApi {
            cluster_operators,
            cluster_versions,
            olms,
        };
        let owned = UpgradeableMode::ClusterOperator;
        let integrated = UpgradeableMode::Integrated;
        assert!(api(true, true, false).usable(owned, false));
        assert!(
            api(true, false, false).usable(owned, true),
            "--cluster-version replaces ClusterVersion"
        );
        assert!(!api(true, false, false).usable(owned, false));
        assert!(!api(false, true, true).usable(owned, true), "nowhere to write");
        assert!(!api(true, true, false).usable(integrated, false), "no OLM");
        assert!(api(false, true, true).usable(integrated, false));
    }

    /// A real HTTP server standing in for a Kubernetes API server without config.openshift.io.
    #[tokio::test]
    async fn idles_without_the_openshift_api_and_never_writes() {
        use std::sync::Mutex;
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = requests.clone();
        let app = axum::Router::new().fallback(move |uri: http::Uri| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("lock").push(uri.path().to_owned());
                let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404});
                (http::StatusCode::NOT_FOUND, axum::Json(body))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        crate::tls_profile::install_default_provider();
        let client = Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client");
        let mut config = UpgradeableConfig::new("olmv1-system");
        config.api_recheck_interval = Duration::from_millis(20);
        let (_changes, api_changes) = tokio::sync::watch::channel(0);
        let task = tokio::spawn(run(client, config, UpgradeableMetrics::default(), api_changes));
        let deadline = Instant::now() + Duration::from_secs(20);
        while requests.lock().expect("lock").len() < 3 {
            assert!(
                Instant::now() < deadline,
                "run() never looked for the API: {:?}",
                requests.lock()
            );
            assert!(!task.is_finished(), "run() must keep idling, not return");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!task.is_finished(), "run() must keep idling, not return");
        let paths = requests.lock().expect("lock").clone();
        assert!(
            paths.iter().all(|p| p == "/apis/config.openshift.io/v1"),
            "only discovery: {paths:?}"
        );
        task.abort();
        server.abort();
    }

    #[test]
    fn retries_back_off_to_a_minute() {
        assert_eq!(RETRY_BACKOFF.delay(1), Duration::from_secs(1));
        assert_eq!(RETRY_BACKOFF.delay(3), Duration::from_secs(4));
        assert_eq!(RETRY_BACKOFF.delay(40), Duration::from_secs(60));
    }
}
