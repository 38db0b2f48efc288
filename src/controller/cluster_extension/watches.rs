//! Every watch of the ClusterExtension controller, in one place: one watch per kind, shared by
//! whatever follows that kind, metadata only where names, labels, uid and generation are all
//! that is read, each with [`crate::watch::config`]'s long jittered timeout. A new watch is a
//! function here and one `watches_stream` line in [`super::run`].
//!
//! | kind | watch | who follows it |
//! |---|---|---|
//! | ClusterExtension | full (the controller's own) | the reconciles |
//! | ClusterCatalog | full | the catalogs resolution reads ([`super::Context::catalog_store`]); every extension's trigger; the catalog cache's forgetting of deleted catalogs |
//! | Deployment | full, by owner label | owned rollouts and drift ([`LastApplies`]) |
//! | CustomResourceDefinition | metadata, all | owned CRDs' drift; discovery kept by [`ClusterLookups`] |
//! | APIService | full, all (their availability is in their status) | discovery kept by [`ClusterLookups`]; owned APIServices' availability ([`LastApplies`]) |
//! | Role, ClusterRole, RoleBinding, ClusterRoleBinding | metadata, all, only while preflights ask reviews | review answers kept ([`ClusterLookups::watch_rbac`]) |
//! | OperatorCondition | full, by owner label, only with `--operator-conditions` on | the hold's store and its owners' triggers ([`OperatorConditions::follow`]) |
//!
//! The owned objects of every other kind are not watched: the drift check ([`super::drift`])
//! compares them with their last apply every 30 minutes, with a few lists for all extensions.

use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, Resource,
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef},
        watcher,
    },
};
use olmv1_api::{
    operator_condition::OperatorCondition,
    v1::{ClusterCatalog, ClusterExtension},
};
use tracing::warn;

use super::{LastApplies, operator_conditions::OperatorConditions};
use crate::{
    apply::{
        lookups::ClusterLookups,
        objects::{crd_state, ready_api_service, ready_deployment},
        ownership::{owner_kind_selector, owner_of},
        revision::WatchedObject,
    },
    catalog::cache::CachedCatalogClient,
};

/// ClusterCatalogs, into `store` (what the reconciles resolve from: a reconcile lists none) and
/// as triggers; the catalog cache drops the index of each one deleted (the triggers cannot tell
/// a deletion from a change).
pub fn catalogs(
    client: Client,
    store: reflector::store::Writer<ClusterCatalog>,
    cache: Arc<CachedCatalogClient>,
) -> impl Stream<Item = Result<ClusterCatalog, watcher::Error>> + Send + 'static {
    watcher(Api::<ClusterCatalog>::all(client), crate::watch::config())
        // Errors (e.g. after stepping down, when every request is refused) must not spin.
        .default_backoff()
        .reflect(store)
        .inspect(move |event| match event {
            Ok(event) => cache.forget_deleted(event),
            Err(e) => warn!(error = %e, "ClusterCatalog watch error"),
        })
        .touched_objects()
}

/// The Deployments the controller applied, as triggers of their owners.
pub fn owned_deployments(
    client: Client,
    last_apply: &LastApplies,
) -> impl Stream<Item = Result<Deployment, watcher::Error>> + Send + 'static {
    owned_objects(
        watcher(
            Api::<Deployment>::all(client),
            crate::watch::config().labels(&owner_kind_selector()),
        ),
        last_apply,
    )
}

/// Every CRD's metadata: followed by `lookups` (discovery), and as triggers of the owners of those
/// the controller applied.
pub fn crds(
    client: Client,
    lookups: &ClusterLookups,
    last_apply: &LastApplies,
) -> impl Stream<Item = Result<PartialObjectMeta<CustomResourceDefinition>, watcher::Error>> + Send + 'static
{
    let events = watcher(
        Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client),
        crate::watch::config(),
    );
    owned_objects(lookups.follow_crds(events), last_apply)
}

/// Every APIService (a few dozen in a cluster; whole, for their availability): followed by
/// `lookups` (discovery), and as triggers of the owners of those the controller applied.
pub fn api_services(
    client: Client,
    lookups: &ClusterLookups,
    last_apply: &LastApplies,
) -> impl Stream<Item = Result<APIService, watcher::Error>> + Send + 'static {
    let events = watcher(Api::<APIService>::all(client), crate::watch::config());
    owned_objects(lookups.follow_api_services(events), last_apply)
}

/// What an APIService's event says of its owner's last apply: one no longer Available forgets
/// it, so the next reconcile checks readiness and reports it.
pub fn api_service_changed(
    api_service: &APIService,
    last_apply: &LastApplies,
) -> Option<ObjectRef<ClusterExtension>> {
    owner_changed(api_service, ready_api_service(api_service), last_apply)
}

/// The OperatorConditions the controller applied (only when it keeps them): into their store, and
/// as triggers of their owners when what they say of upgrades changes. `None` once taken.
pub fn operator_conditions(
    client: Client,
    conditions: &OperatorConditions,
    last_apply: &LastApplies,
) -> Option<impl Stream<Item = Result<OperatorCondition, watcher::Error>> + Send + 'static> {
    let events = watcher(
        Api::<OperatorCondition>::all(client),
        crate::watch::config().labels(&owner_kind_selector()),
    );
    conditions.follow(events, last_apply)
}

/// What a Deployment's event says of its owner's last apply.
pub fn deployment_changed(
    deployment: &Deployment,
    last_apply: &LastApplies,
) -> Option<ObjectRef<ClusterExtension>> {
    owner_changed(deployment, ready_deployment(deployment), last_apply)
}

/// What a CRD's event says of its owner's last apply.
pub fn crd_changed(
    crd: &PartialObjectMeta<CustomResourceDefinition>,
    last_apply: &LastApplies,
) -> Option<ObjectRef<ClusterExtension>> {
    owner_changed(crd, crd_state(&crd.metadata), last_apply)
}

/// The events of a watch of objects some of which the controller applied, as reconcile triggers.
/// A deletion forgets the owner's last apply here, where it is still known as one: the deleted
/// object's last state may look unchanged to [`owner_changed`].
fn owned_objects<K, S>(
    events: S,
    last_apply: &LastApplies,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let last_apply = last_apply.clone();
    events
        .default_backoff()
        .map_ok(move |event| {
            if let watcher::Event::Delete(object) = &event
                && let Some(owner) = owner_of(object)
            {
                last_apply.object_deleted(
                    owner,
                    ObjectRef::from_obj(object).erase(),
                    object.meta().uid.as_deref(),
                );
            }
            event
        })
        .touched_objects()
}

/// The ClusterExtension that owns a changed object; its last apply is forgotten unless the object
/// is as that apply left it (see [`LastApplies::object_changed`]).
fn owner_changed<K: Resource<DynamicType = ()>>(
    object: &K,
    ready_state: Option<WatchedObject>,
    last_apply: &LastApplies,
) -> Option<ObjectRef<ClusterExtension>> {
    let owner = owner_of(object)?;
    last_apply.object_changed(
        owner,
        ObjectRef::from_obj(object).erase(),
        object.meta().uid.as_deref(),
        ready_state.as_ref(),
    );
    Some(ObjectRef::new(owner))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use futures::StreamExt;
    use kube::api::ObjectMeta;

    use olmv1_api::v1::conditions::{LABEL_OWNER_KIND, LABEL_OWNER_NAME};

    use super::*;
    use crate::controller::cluster_extension::Freshness;

    fn crd(name: &str, owner: Option<&str>, generation: i64) -> PartialObjectMeta<CustomResourceDefinition> {
        let labels = owner.map(|owner| {
            BTreeMap::from([
                (LABEL_OWNER_KIND.to_string(), "ClusterExtension".to_string()),
                (LABEL_OWNER_NAME.to_string(), owner.to_string()),
            ])
        });
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                generation: Some(generation),
                resource_version: Some(generation.to_string()),
                labels,
                ..Default::default()
            },
            _phantom: Default::default(),
        }
    }

    /// The triggers of a stream of CRD events, as the controller maps them.
    async fn triggers(
        events: Vec<watcher::Event<PartialObjectMeta<CustomResourceDefinition>>>,
        lookups: &ClusterLookups,
        last_apply: &LastApplies,
    ) -> Vec<Option<ObjectRef<ClusterExtension>>> {
        let events = futures::stream::iter(events.into_iter().map(Ok));
        owned_objects(lookups.follow_crds(events), last_apply)
            .map(|crd| crd.ok().and_then(|crd| crd_changed(&crd, last_apply)))
            .collect()
            .await
    }

    #[tokio::test]
    async fn one_crd_metadata_watch_keeps_discovery_and_tells_owners_what_changed() {
        let (lookups, last_apply) = (ClusterLookups::new(), LastApplies::default());
        let owned = crd("widgets.example.com", Some("ext"), 1);
        let remember = || {
            last_apply
                .remember("ext", "fp", crd_state(&owned.metadata).into_iter().collect())
                .is_ok()
        };
        last_apply.freshness("ext", "fp");
        assert!(remember());
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);
        let discovery_changes = lookups.discovery_changes();

        let initial = vec![
            watcher::Event::Init,
            watcher::Event::InitApply(owned.clone()),
            watcher::Event::InitApply(crd("others.example.com", None, 1)),
            watcher::Event::InitDone,
        ];
        // The initial list: the owned CRD re-enqueues its owner, an unlabelled one nobody; the
        // same uid and generation leave the last apply trusted.
        assert_eq!(
            triggers(initial, &lookups, &last_apply).await,
            [Some(ObjectRef::new("ext")), None]
        );
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);
        assert!(
            discovery_changes.has_changed().unwrap(),
            "CRD events say discovery may have changed"
        );

        // A status-only change (same generation) keeps it; a spec change or a deletion does not.
        triggers(vec![watcher::Event::Apply(owned.clone())], &lookups, &last_apply).await;
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Fresh);
        let spec_changed = crd("widgets.example.com", Some("ext"), 2);
        triggers(vec![watcher::Event::Apply(spec_changed)], &lookups, &last_apply).await;
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Stale);
        assert!(remember());
        triggers(vec![watcher::Event::Delete(owned.clone())], &lookups, &last_apply).await;
        assert_eq!(last_apply.freshness("ext", "fp"), Freshness::Stale);
    }
}
