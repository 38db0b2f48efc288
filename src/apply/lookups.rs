//! API discovery and SubjectAccessReview answers kept between reconciles, each dropped as soon
//! as a watch says it may have changed: discovery on any CustomResourceDefinition or APIService
//! event, reviews and role rules on any Role, ClusterRole, RoleBinding or ClusterRoleBinding
//! event. Nothing is kept while a watch is not running (before its first list, after an error),
//! nor for a few seconds after an event: the API server's own RBAC and discovery caches follow
//! their watches too, and an answer read before they caught up must not be kept. Only allowed
//! reviews are kept: a denial is asked again (the preflight fails and is retried anyway), so a
//! grant is seen as soon as the authorizer knows it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Discovery, Resource};
use serde::de::DeserializeOwned;

use super::preflight::{Access, RoleRef, ServiceAccountRef};

/// How long after a watch event answers are not kept (the API server's caches catch up).
const SETTLE: Duration = Duration::from_secs(5);
/// How long after a CRD or APIService event discovery may still show the APIs as before.
pub const DISCOVERY_SETTLE: Duration = SETTLE;

/// What a set of answers depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Topic {
    /// CRDs and APIServices: discovery.
    Discovery,
    /// RBAC objects: reviews and role rules.
    Rbac,
}

impl Topic {
    /// How many kinds are watched for it.
    fn kinds(self) -> usize {
        match self {
            Topic::Discovery => 2,
            Topic::Rbac => 4,
        }
    }
}

/// The state of one topic's watch and the answers it guards.
#[derive(Default)]
struct Guarded<T> {
    /// Bumped on every event: an answer asked for before a bump is not kept.
    generation: u64,
    /// The kinds whose watch has listed and runs; answers are kept only when all of them do.
    watching: std::collections::BTreeSet<&'static str>,
    kinds: usize,
    last_event: Option<Instant>,
    answers: T,
}

impl<T: Default> Guarded<T> {
    fn invalidate(&mut self) {
        self.generation += 1;
        self.last_event = Some(Instant::now());
        self.answers = T::default();
    }

    fn all_watched(&self) -> bool {
        self.kinds > 0 && self.watching.len() == self.kinds
    }

    /// Whether answers asked for at `generation` may be kept now.
    fn may_keep(&self, generation: u64) -> bool {
        self.all_watched()
            && self.generation == generation
            && self.last_event.is_none_or(|at| at.elapsed() >= SETTLE)
    }
}

#[derive(Default)]
struct RbacAnswers {
    allowed: BTreeMap<(ServiceAccountRef, Access), ()>,
    roles: BTreeMap<RoleRef, Vec<PolicyRule>>,
}

#[derive(Default)]
struct Inner {
    discovery: Mutex<Guarded<Option<Arc<Discovery>>>>,
    rbac: Mutex<Guarded<RbacAnswers>>,
    /// Bumped on every CRD or APIService event (see [`ClusterLookups::discovery_changes`]).
    discovery_changes: tokio::sync::watch::Sender<u64>,
}

/// Discovery and review answers shared by every reconcile (clone freely). Without
/// [`ClusterLookups::watch`] running it keeps nothing and every call asks the API server.
#[derive(Clone, Default)]
pub struct ClusterLookups(Arc<Inner>);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClusterLookups {
    /// Lookups that keep nothing until [`ClusterLookups::watch`] runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Watches (metadata only) what the answers depend on, with `client` (which needs list and
    /// watch on CRDs, APIServices and the four RBAC kinds), until the streams end.
    pub async fn watch(&self, client: Client) {
        futures::join!(
            self.watch_kind::<CustomResourceDefinition>(&client, Topic::Discovery),
            self.watch_beside_crds(client.clone()),
        );
    }

    /// As [`ClusterLookups::watch`] but CRDs, for a caller whose own CRD watch passes through
    /// [`ClusterLookups::follow_crds`] (the controller: one CRD watch for both).
    pub async fn watch_beside_crds(&self, client: Client) {
        futures::join!(
            self.watch_kind::<APIService>(&client, Topic::Discovery),
            self.watch_kind::<Role>(&client, Topic::Rbac),
            self.watch_kind::<ClusterRole>(&client, Topic::Rbac),
            self.watch_kind::<RoleBinding>(&client, Topic::Rbac),
            self.watch_kind::<ClusterRoleBinding>(&client, Topic::Rbac),
        );
    }

    /// Follows a metadata watch of every CRD (discovery changes with them) and passes its events
    /// on unchanged: the controller's one CRD watch, shared with its owned-CRD triggers.
    pub fn follow_crds<S>(&self, events: S) -> impl Stream<Item = S::Item> + Send + 'static
    where
        S: Stream<Item = Result<watcher::Event<PartialObjectMeta<CustomResourceDefinition>>, watcher::Error>>
            + Send
            + 'static,
    {
        let lookups = self.clone();
        let kind = "CustomResourceDefinition";
        events
            .inspect(move |event| lookups.observe(Topic::Discovery, kind, event))
            // The watch ended (the process stops): nothing is kept after it.
            .chain(futures::stream::poll_fn({
                let lookups = self.clone();
                move |_| {
                    lookups.update(Topic::Discovery, |kinds| {
                        kinds.remove(kind);
                    });
                    std::task::Poll::Ready(None)
                }
            }))
    }

    async fn watch_kind<K>(&self, client: &Client, topic: Topic)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let kind = K::kind(&());
        let kind: &'static str = match kind {
            std::borrow::Cow::Borrowed(kind) => kind,
            std::borrow::Cow::Owned(kind) => Box::leak(kind.into_boxed_str()),
        };
        let api = Api::<PartialObjectMeta<K>>::all(client.clone());
        let mut events = std::pin::pin!(watcher(api, crate::watch::config()).default_backoff());
        while let Some(event) = events.next().await {
            self.observe(topic, kind, &event);
        }
        self.update(topic, |kinds| {
            kinds.remove(kind);
        });
    }

    /// Drops a topic's answers on an event of one of its kinds' watches (but the initial list's
    /// objects), and counts the kind as watched from its initial list's end until an error.
    fn observe<K>(
        &self,
        topic: Topic,
        kind: &'static str,
        event: &Result<watcher::Event<K>, watcher::Error>,
    ) {
        match event {
            Ok(watcher::Event::InitDone) => self.update(topic, |kinds| {
                kinds.insert(kind);
            }),
            Ok(watcher::Event::InitApply(_)) => {}
            Ok(_) => self.update(topic, |_| {}),
            Err(error) => {
                tracing::debug!(%error, kind, "lookup cache watch failed; not caching until it lists again");
                self.update(topic, |kinds| {
                    kinds.remove(kind);
                });
            }
        }
    }

    /// Drops a topic's answers after `change` to the set of running watches.
    fn update(&self, topic: Topic, change: impl FnOnce(&mut std::collections::BTreeSet<&'static str>)) {
        match topic {
            Topic::Discovery => {
                let mut guarded = lock(&self.0.discovery);
                guarded.kinds = topic.kinds();
                change(&mut guarded.watching);
                guarded.invalidate();
                self.0.discovery_changes.send_modify(|n| *n = n.wrapping_add(1));
            }
            Topic::Rbac => {
                let mut guarded = lock(&self.0.rbac);
                guarded.kinds = topic.kinds();
                change(&mut guarded.watching);
                guarded.invalidate();
            }
        }
    }

    /// The API server's discovery: kept, or read with `client` (aggregated discovery, or the
    /// classic per-group walk when that is not served).
    pub async fn discovery(&self, client: &Client) -> Result<Arc<Discovery>, kube::Error> {
        let generation = {
            let guarded = lock(&self.0.discovery);
            if let Some(kept) = &guarded.answers {
                return Ok(kept.clone());
            }
            guarded.generation
        };
        let discovery = match Discovery::new(client.clone()).run_aggregated().await {
            Ok(discovery) => discovery,
            Err(_) => Discovery::new(client.clone()).run().await?,
        };
        let discovery = Arc::new(discovery);
        let mut guarded = lock(&self.0.discovery);
        if guarded.may_keep(generation) {
            guarded.answers = Some(discovery.clone());
        }
        Ok(discovery)
    }

    /// Signals each CRD or APIService event (while [`ClusterLookups::watch`] runs): the APIs the
    /// cluster serves may have changed. What the API server serves follows such an event a
    /// little later: wait [`DISCOVERY_SETTLE`] before reading discovery again.
    pub fn discovery_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.discovery_changes.subscribe()
    }

    /// Discovery if it is kept (no request), for callers that can look kinds up one by one.
    pub fn kept_discovery(&self) -> Option<Arc<Discovery>> {
        lock(&self.0.discovery).answers.clone()
    }

    /// Whether discovery can be kept (its watch runs): then reading it whole once is cheaper
    /// than a request per kind.
    pub fn keeps_discovery(&self) -> bool {
        lock(&self.0.discovery).all_watched()
    }

    /// The generation to pass back with answers read now.
    pub fn rbac_generation(&self) -> u64 {
        lock(&self.0.rbac).generation
    }

    /// Whether `service_account` was allowed `access` since the last RBAC change.
    pub fn allowed(&self, service_account: &ServiceAccountRef, access: &Access) -> bool {
        lock(&self.0.rbac)
            .answers
            .allowed
            .contains_key(&(service_account.clone(), access.clone()))
    }

    /// Keeps the allowed answers among `decisions`, read at `generation`.
    pub fn remember_reviews(
        &self,
        service_account: &ServiceAccountRef,
        decisions: &BTreeMap<Access, bool>,
        generation: u64,
    ) {
        let mut guarded = lock(&self.0.rbac);
        if !guarded.may_keep(generation) {
            return;
        }
        for (access, allowed) in decisions {
            if *allowed {
                guarded
                    .answers
                    .allowed
                    .insert((service_account.clone(), access.clone()), ());
            }
        }
    }

    /// A role's rules, if kept.
    pub fn role_rules(&self, role: &RoleRef) -> Option<Vec<PolicyRule>> {
        lock(&self.0.rbac).answers.roles.get(role).cloned()
    }

    /// Keeps a role's rules, read at `generation`.
    pub fn remember_role(&self, role: &RoleRef, rules: &[PolicyRule], generation: u64) {
        let mut guarded = lock(&self.0.rbac);
        if guarded.may_keep(generation) {
            guarded.answers.roles.insert(role.clone(), rules.to_vec());
        }
    }
}
