//! API discovery and SubjectAccessReview answers kept between reconciles, each dropped as soon
//! as a watch says it may have changed: discovery on any CustomResourceDefinition or APIService
//! event, reviews and role rules on any Role, ClusterRole, RoleBinding or ClusterRoleBinding
//! event. The RBAC watches run only while answers are looked up (until [`RBAC_LINGER`] after the
//! last lookup): an idle controller holds none. Nothing is kept while a watch is not running
//! (before its first list, after an error),
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
/// How long the RBAC watches run after review answers were last looked up: they run while
/// reconciles apply content (preflights ask reviews), and an idle controller holds none.
pub const RBAC_LINGER: Duration = Duration::from_secs(600);

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
    /// When all the kinds last came to be watched, and how many times they did.
    watched_since: Option<Instant>,
    watched_runs: u64,
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
    /// Bumped on every lookup of review answers: starts the RBAC watches.
    rbac_uses: tokio::sync::watch::Sender<u64>,
    /// When review answers were last looked up.
    rbac_last_use: Mutex<Option<Instant>>,
    /// [`RBAC_LINGER`], shorter in tests (zero: the default).
    rbac_linger: Option<Duration>,
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

    /// As [`ClusterLookups::new`], the RBAC watches ending `linger` after the last lookup of
    /// review answers instead of [`RBAC_LINGER`] (tests).
    pub fn with_rbac_linger(linger: Duration) -> Self {
        Self(Arc::new(Inner {
            rbac_linger: Some(linger),
            ..Inner::default()
        }))
    }

    /// Watches (metadata only) what the answers depend on, with `client` (which needs list and
    /// watch on CRDs, APIServices and the four RBAC kinds), until the streams end.
    pub async fn watch(&self, client: Client) {
        futures::join!(
            self.watch_kind::<CustomResourceDefinition>(&client, Topic::Discovery),
            self.watch_kind::<APIService>(&client, Topic::Discovery),
            self.watch_rbac(client.clone()),
        );
    }

    /// As [`ClusterLookups::watch`] but CRDs and APIServices, for a caller whose own watches of
    /// them pass through [`ClusterLookups::follow_crds`] and [`ClusterLookups::follow_api_services`]
    /// (the controller: one watch of each kind for both).
    pub async fn watch_rbac(&self, client: Client) {
        self.watch_rbac_while_used(&client).await;
    }

    /// The four RBAC watches, from a lookup of review answers until none was looked up for the
    /// linger ([`RBAC_LINGER`]); again from the next lookup. Nothing is kept while they do not
    /// run (the first preflights of a burst ask the API server, as without the watches).
    async fn watch_rbac_while_used(&self, client: &Client) {
        let mut uses = self.0.rbac_uses.subscribe();
        loop {
            if uses.changed().await.is_err() {
                return;
            }
            let watches = async {
                futures::join!(
                    self.watch_kind::<Role>(client, Topic::Rbac),
                    self.watch_kind::<ClusterRole>(client, Topic::Rbac),
                    self.watch_kind::<RoleBinding>(client, Topic::Rbac),
                    self.watch_kind::<ClusterRoleBinding>(client, Topic::Rbac),
                )
            };
            tokio::select! {
                _ = watches => return,
                () = self.rbac_unused() => {}
            }
            self.update(Topic::Rbac, std::collections::BTreeSet::clear);
            // Lookups made while they ran are served; the next one starts them again.
            uses.mark_unchanged();
        }
    }

    /// Returns once the RBAC watches have all listed and no review answer was looked up for the
    /// linger since (a watch that cannot list keeps them all running, as before the linger).
    async fn rbac_unused(&self) {
        let linger = self.0.rbac_linger.unwrap_or(RBAC_LINGER);
        loop {
            let unused_for = lock(&self.0.rbac_last_use).map_or(linger, |at| at.elapsed());
            let idle = {
                let rbac = lock(&self.0.rbac);
                match rbac.watched_since {
                    Some(since) if rbac.all_watched() => since.elapsed().min(unused_for),
                    _ => Duration::ZERO,
                }
            };
            if idle >= linger {
                return;
            }
            tokio::time::sleep(linger - idle).await;
        }
    }

    /// Follows a metadata watch of every CRD (discovery changes with them) and passes its events
    /// on unchanged: the controller's one CRD watch, shared with its owned-CRD triggers.
    pub fn follow_crds<S>(&self, events: S) -> impl Stream<Item = S::Item> + Send + 'static
    where
        S: Stream<Item = Result<watcher::Event<PartialObjectMeta<CustomResourceDefinition>>, watcher::Error>>
            + Send
            + 'static,
    {
        self.follow("CustomResourceDefinition", events)
    }

    /// Follows a watch of every APIService (discovery changes with them, their availability
    /// included) and passes its events on unchanged: the controller's one APIService watch, shared
    /// with its owned-APIService triggers.
    pub fn follow_api_services<S>(&self, events: S) -> impl Stream<Item = S::Item> + Send + 'static
    where
        S: Stream<Item = Result<watcher::Event<APIService>, watcher::Error>> + Send + 'static,
    {
        self.follow("APIService", events)
    }

    /// Follows a watch of `kind` for discovery, passing its events on.
    fn follow<K, S>(&self, kind: &'static str, events: S) -> impl Stream<Item = S::Item> + Send + 'static
    where
        K: Send + 'static,
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    {
        let lookups = self.clone();
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
                let was_watched = guarded.all_watched();
                change(&mut guarded.watching);
                if !was_watched && guarded.all_watched() {
                    guarded.watched_since = Some(Instant::now());
                    guarded.watched_runs += 1;
                }
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
        *lock(&self.0.rbac_last_use) = Some(Instant::now());
        self.0.rbac_uses.send_modify(|n| *n = n.wrapping_add(1));
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// An API server that answers every list with an empty list and holds every watch open,
    /// counting the RBAC lists.
    async fn fake_api_server(rbac_lists: Arc<AtomicUsize>) -> (Client, tokio::task::JoinHandle<()>) {
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let rbac_lists = rbac_lists.clone();
            async move {
                let uri = request.uri().clone();
                if uri.query().is_some_and(|q| q.contains("watch=true")) {
                    // A watch that stays open with nothing to say.
                    let body = axum::body::Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
                    return axum::response::Response::new(body);
                }
                if uri.path().starts_with("/apis/rbac.authorization.k8s.io/") {
                    rbac_lists.fetch_add(1, Ordering::SeqCst);
                }
                let list = serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                    "metadata": {"resourceVersion": "1"}, "items": []});
                axum::response::Response::new(axum::body::Body::from(list.to_string()))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        crate::tls_profile::install_default_provider();
        let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        (client, server)
    }

    async fn wait_until(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn rbac_watches_run_only_while_review_answers_are_looked_up() {
        let rbac_lists = Arc::new(AtomicUsize::new(0));
        let (client, server) = fake_api_server(rbac_lists.clone()).await;
        let lookups = ClusterLookups::with_rbac_linger(Duration::from_millis(200));
        let watching = tokio::spawn({
            let lookups = lookups.clone();
            async move { lookups.watch(client).await }
        });
        let rbac_watched = || lock(&lookups.0.rbac).all_watched();
        let runs = || lock(&lookups.0.rbac).watched_runs;
        let discovery_watching = || lock(&lookups.0.discovery).watching.contains("APIService");
        wait_until("the APIService watch to list", discovery_watching).await;
        assert_eq!(
            rbac_lists.load(Ordering::SeqCst),
            0,
            "no RBAC watch before a lookup"
        );
        assert!(!rbac_watched());

        // A lookup starts the four watches; each lists once.
        lookups.rbac_generation();
        wait_until("the RBAC watches to list", || runs() == 1).await;
        assert_eq!(rbac_lists.load(Ordering::SeqCst), 4);
        // Unused for the linger: they stop, and nothing is kept.
        wait_until("the RBAC watches to stop", || !rbac_watched()).await;
        assert_eq!(rbac_lists.load(Ordering::SeqCst), 4);
        assert_eq!(runs(), 1);
        // The next lookup starts them again.
        lookups.rbac_generation();
        wait_until("the RBAC watches to list again", || runs() == 2).await;
        assert_eq!(rbac_lists.load(Ordering::SeqCst), 8);
        assert!(discovery_watching(), "the APIService watch ran throughout");
        watching.abort();
        server.abort();
    }
}
