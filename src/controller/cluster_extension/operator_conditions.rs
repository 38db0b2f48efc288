//! OLM classic's OperatorConditions under olmv1 (`--operator-conditions`). With them on, each
//! installed bundle gets its OperatorCondition, a Role and RoleBinding for its accounts and
//! `OPERATOR_CONDITION_NAME` in its Deployments (render's part, applied as the installer like
//! every other object), and this module's part:
//! - at start, whether they are on, installing the CRD when asked ([`start`]);
//! - the store of the OperatorConditions the controller applied, fed by their label-filtered
//!   watch (`watches::operator_conditions`), which the reconciles read (no request), and the rule
//!   by which a change brings its extension back: only when what it says about upgrades changes
//!   or its status needs mirroring ([`OperatorConditions::follow`]);
//! - the status mirror of `spec.conditions`, as classic's OperatorCondition controller keeps it;
//! - the hold: an upgrade waits while the installed bundle's OperatorCondition is not
//!   upgradeable ([`Upgradeability`]), the installed bundle reconciled meanwhile.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, reflector, reflector::ObjectRef, watcher},
};
use olmv1_api::{
    operator_condition::{self, OperatorCondition, Upgradeability},
    v1::ClusterExtension,
};
use tracing::{debug, info, warn};

use super::LastApplies;
use crate::apply::ownership::owner_of;

/// How long the start waits for an installed CRD to be served.
const CRD_SERVED_WAIT: Duration = Duration::from_secs(60);
/// How long a reconcile that needs the OperatorConditions waits for their first list.
const LIST_WAIT: Duration = Duration::from_secs(10);

/// `--operator-conditions`: whether each installed bundle gets the OperatorCondition OLM
/// classic keeps for it, and upgrades wait while it says Upgradeable=False.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperatorConditionsMode {
    /// Install the OperatorCondition CRD when no CRD of that name exists (an existing one, such
    /// as classic's, is used as it is), then use it.
    Install,
    /// Use the CRD, which must be served (classic's, or one installed before).
    Use,
    /// Keep no OperatorConditions, as upstream v1.
    Off,
}

/// Why OperatorConditions could not be started.
#[derive(Debug, thiserror::Error)]
pub enum OperatorConditionsError {
    /// `use` without the CRD.
    #[error(
        "--operator-conditions=use: the CustomResourceDefinition {} is not served: install OLM classic's, or start with --operator-conditions=install",
        operator_condition::CRD_NAME
    )]
    NotServed,
    /// The API server refused or failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The installed CRD was not served in time.
    #[error("the CustomResourceDefinition {} is not served {}s after it was created", operator_condition::CRD_NAME, CRD_SERVED_WAIT.as_secs())]
    NotServedInTime,
}

/// Decides at start whether OperatorConditions are kept: `mode` as given, and without one,
/// `use` when the CRD is served and `off` otherwise. `install` creates the CRD when absent.
/// Decided once: a CRD installed later takes a restart.
pub async fn start(
    client: &Client,
    mode: Option<OperatorConditionsMode>,
) -> Result<Option<OperatorConditions>, OperatorConditionsError> {
    let on = match mode {
        Some(OperatorConditionsMode::Off) => false,
        None => is_served(client).await?,
        Some(OperatorConditionsMode::Use) => {
            if !is_served(client).await? {
                return Err(OperatorConditionsError::NotServed);
            }
            true
        }
        Some(OperatorConditionsMode::Install) => {
            install_crd(client).await?;
            true
        }
    };
    info!(on, ?mode, "OperatorConditions");
    Ok(on.then(OperatorConditions::new))
}

/// Whether the API server serves `operators.coreos.com/v2` OperatorConditions (the admin
/// commands ask it too, to render as the controller's default does).
pub async fn served(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(operator_condition::API_VERSION)
        .await
    {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|r| r.name == operator_condition::PLURAL)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// [`served`], its error said.
async fn is_served(client: &Client) -> Result<bool, OperatorConditionsError> {
    served(client)
        .await
        .map_err(|source| OperatorConditionsError::Api {
            what: format!("discovering {}", operator_condition::API_VERSION),
            source,
        })
}

/// Creates the CRD unless one of that name exists (never changes an existing one: classic's,
/// or another olmv1's), and waits until it is served.
async fn install_crd(client: &Client) -> Result<(), OperatorConditionsError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds
        .create(&PostParams::default(), &operator_condition::crd())
        .await
    {
        Ok(_) => info!(crd = operator_condition::CRD_NAME, "installed"),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            debug!(crd = operator_condition::CRD_NAME, "exists; used as it is")
        }
        Err(source) => {
            return Err(OperatorConditionsError::Api {
                what: format!(
                    "creating CustomResourceDefinition {}",
                    operator_condition::CRD_NAME
                ),
                source,
            });
        }
    }
    let deadline = tokio::time::Instant::now() + CRD_SERVED_WAIT;
    while !is_served(client).await? {
        if tokio::time::Instant::now() > deadline {
            return Err(OperatorConditionsError::NotServedInTime);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// The OperatorConditions the controller applied, as its watch last saw them.
#[derive(Clone)]
pub struct OperatorConditions {
    store: reflector::Store<OperatorCondition>,
    /// Taken by [`OperatorConditions::stream`], which feeds the store.
    writer: Arc<Mutex<Option<reflector::store::Writer<OperatorCondition>>>>,
    /// True once the first list is in the store.
    listed: Arc<tokio::sync::watch::Sender<bool>>,
    /// Per object, what it said about upgrades when its extension was last brought back.
    verdicts: Arc<Mutex<HashMap<(String, String), Upgradeability>>>,
}

/// What a reconcile reads of the installed bundle's OperatorCondition.
#[derive(Debug)]
pub enum Found {
    /// It is there (the watch's copy).
    Present(Arc<OperatorCondition>),
    /// The controller applied none of that name for the extension.
    Absent,
}

impl OperatorConditions {
    fn new() -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            writer: Arc::new(Mutex::new(Some(writer))),
            listed: Arc::new(tokio::sync::watch::channel(false).0),
            verdicts: Arc::default(),
        }
    }

    /// Follows `events` (the watch of the OperatorConditions labelled as ClusterExtensions',
    /// `watches::operator_conditions`) into the store, as reconcile triggers: an object whose
    /// verdict on upgrades changed, whose status needs mirroring, or that was deleted (its
    /// extension's last apply forgotten, so it is applied again). The controller's own status
    /// writes change neither, so they wake nothing. `None` once followed.
    pub fn follow<S>(
        &self,
        events: S,
        last_apply: &LastApplies,
    ) -> Option<impl Stream<Item = Result<OperatorCondition, watcher::Error>> + Send + 'static>
    where
        S: Stream<Item = Result<watcher::Event<OperatorCondition>, watcher::Error>> + Send + 'static,
    {
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let (listed, verdicts, last_apply) = (self.listed.clone(), self.verdicts.clone(), last_apply.clone());
        Some(events.default_backoff().reflect(writer).filter_map(move |event| {
            let triggered = match event {
                Ok(watcher::Event::InitDone) => {
                    listed.send_replace(true);
                    None
                }
                Ok(watcher::Event::Apply(oc) | watcher::Event::InitApply(oc)) => {
                    let mut verdicts = verdicts.lock().unwrap_or_else(|e| e.into_inner());
                    wakes_owner(&mut verdicts, &oc).then_some(Ok(oc))
                }
                Ok(watcher::Event::Delete(oc)) => {
                    let key = (oc.namespace().unwrap_or_default(), oc.name_any());
                    verdicts.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                    if let Some(owner) = owner_of(&oc) {
                        last_apply.content_changed(owner);
                    }
                    Some(Ok(oc))
                }
                Ok(watcher::Event::Init) => None,
                Err(e) => Some(Err(e)),
            };
            std::future::ready(triggered)
        }))
    }

    /// The OperatorCondition `name` in `namespace` that the controller applied for `extension`,
    /// once the watch has listed them (waiting up to [`LIST_WAIT`]; `None` if it has not).
    pub async fn get(&self, namespace: &str, name: &str, extension: &str) -> Option<Found> {
        let mut listed = self.listed.subscribe();
        if tokio::time::timeout(LIST_WAIT, listed.wait_for(|l| *l))
            .await
            .is_err()
        {
            return None;
        }
        let found = self.store.get(&ObjectRef::new(name).within(namespace));
        Some(match found {
            Some(oc) if owner_of(oc.as_ref()) == Some(extension) => Found::Present(oc),
            _ => Found::Absent,
        })
    }
}

/// Whether `oc`, listed or changed, brings its extension back: what it says of upgrades differs
/// from what `verdicts` last saw of it (remembered now), or its status needs mirroring. The
/// controller's own mirror leaves both as they were.
fn wakes_owner(verdicts: &mut HashMap<(String, String), Upgradeability>, oc: &OperatorCondition) -> bool {
    let key = (oc.namespace().unwrap_or_default(), oc.name_any());
    let verdict = oc.upgradeability();
    let changed = verdicts.get(&key) != Some(&verdict);
    verdicts.insert(key, verdict);
    changed || oc.mirrored_status("").is_some()
}

/// Mirrors `spec.conditions` into `status` as classic does, as the installer (`client`), when
/// they differ. Best effort: the verdict never depends on it.
pub async fn mirror_status(client: &Client, oc: &OperatorCondition) {
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let Some(conditions) = oc.mirrored_status(&now) else {
        return;
    };
    let (namespace, name) = (oc.namespace().unwrap_or_default(), oc.name_any());
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), &namespace);
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": oc.resource_version()},
        "status": {"conditions": conditions},
    });
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => debug!(%namespace, %name, "OperatorCondition status mirrored"),
        // A newer version arrives through the watch and is mirrored then.
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => warn!(%namespace, %name, error = %e, "mirroring the OperatorCondition's status failed"),
    }
}

/// An upgrade the installed bundle's OperatorCondition holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldUpgrade {
    /// The bundle resolution chose.
    pub bundle: String,
    /// Its version.
    pub version: String,
    /// `namespace/name` of the OperatorCondition.
    pub condition: String,
    /// What holds it.
    pub hold: operator_condition::Hold,
}

impl std::fmt::Display for HeldUpgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "upgrade to {} {} held: OperatorCondition {}: {}",
            self.bundle, self.version, self.condition, self.hold
        )
    }
}

/// The ClusterExtension an OperatorCondition was applied for.
pub fn owner(oc: &OperatorCondition) -> Option<ObjectRef<ClusterExtension>> {
    owner_of(oc).map(ObjectRef::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(generation: i64, spec: serde_json::Value, status: serde_json::Value) -> OperatorCondition {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "op.v1", "namespace": "ns", "generation": generation},
            "spec": spec, "status": status,
        }))
        .unwrap()
    }

    fn upgradeable(status: &str, generation: Option<i64>) -> serde_json::Value {
        let mut c = json!({"type": "Upgradeable", "status": status, "reason": "R", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        if let Some(g) = generation {
            c["observedGeneration"] = json!(g);
        }
        c
    }

    /// The watch wakes an extension when its OperatorCondition's word on upgrades changes or
    /// its status needs mirroring, not on the controller's own mirror write.
    #[test]
    fn only_a_new_word_on_upgrades_or_a_status_to_mirror_wakes_the_extension() {
        let mut verdicts = HashMap::new();
        // First seen (a start): woken once.
        let fresh = condition(1, json!({}), json!({}));
        assert!(wakes_owner(&mut verdicts, &fresh));
        assert!(!wakes_owner(&mut verdicts, &fresh));
        // The operator says False (spec, a new generation): woken, its status to mirror.
        let said = condition(2, json!({"conditions": [upgradeable("False", None)]}), json!({}));
        assert!(wakes_owner(&mut verdicts, &said));
        // The controller mirrored it: nothing new.
        let mirrored = condition(
            2,
            json!({"conditions": [upgradeable("False", None)]}),
            json!({"conditions": [upgradeable("False", Some(2))]}),
        );
        assert!(!wakes_owner(&mut verdicts, &mirrored));
        // The admin overrides it: woken.
        let overridden = condition(
            3,
            json!({"conditions": [upgradeable("False", None)],
                "overrides": [{"type": "Upgradeable", "status": "True", "reason": "Admin", "message": ""}]}),
            json!({"conditions": [upgradeable("False", Some(2))]}),
        );
        assert!(wakes_owner(&mut verdicts, &overridden));
    }
}
