//! Server-side apply of a revision's objects as the service account, pruning, readiness and
//! uninstall.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams},
    discovery::{self, Scope},
};
use olmv1_api::v1::conditions::ConditionStatus;
use serde_json::Value;

use super::{
    ApplyError,
    lookups::ClusterLookups,
    ownership::{FIELD_MANAGER, is_owned_by, owner_kind_selector, owner_labels},
    revision::{AppliedObject, ObjectRef, WatchedObject},
};

const CRD_API_VERSION: &str = "apiextensions.k8s.io/v1";
const DEPLOYMENT_API_VERSION: &str = "apps/v1";
const API_SERVICE_API_VERSION: &str = "apiregistration.k8s.io/v1";

/// The ClusterExtension that owns the objects of a revision.
#[derive(Clone, Debug)]
pub struct Owner {
    /// The ClusterExtension's name.
    pub name: String,
    /// The ClusterExtension's uid, for ownerReferences (garbage collection on delete).
    pub uid: String,
    /// The install namespace (spec.namespace), for namespaced objects that name none.
    pub install_namespace: String,
    /// Whether the extension still holds its objects, asked before each write.
    pub holding: Holding,
}

/// Whether an owner still holds its objects. An extension being deleted, or let go of (its
/// finalizer taken off, its content handed back to OLM classic), must not be written to again:
/// an owner reference written after the garbage collector orphaned an object makes it delete
/// that object once the owner is gone.
#[derive(Clone)]
pub struct Holding(Arc<dyn Fn() -> bool + Send + Sync>);

impl Holding {
    /// Asks `holds` before each write.
    pub fn new(holds: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(holds))
    }

    /// An owner that always holds its objects (nothing watches it: tests, one-shot commands).
    pub fn always() -> Self {
        Self::new(|| true)
    }

    /// `owner` still holds its objects, or [`ApplyError::LetGo`].
    pub fn check(&self, owner: &str) -> Result<(), ApplyError> {
        if (self.0)() {
            Ok(())
        } else {
            Err(ApplyError::LetGo(owner.to_string()))
        }
    }
}

impl std::fmt::Debug for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if (self.0)() {
            "Holding(holds)"
        } else {
            "Holding(let go)"
        })
    }
}

impl Owner {
    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: "olm.operatorframework.io/v1".into(),
            kind: "ClusterExtension".into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn owns(&self, object: &DynamicObject) -> bool {
        owned_by(&self.name, object)
    }
}

/// One object ready to apply: its API resource, scope and body.
struct Planned {
    resource: ApiResource,
    namespaced: bool,
    object: DynamicObject,
}

impl Planned {
    fn reference(&self) -> ObjectRef {
        ObjectRef {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            namespace: self.object.metadata.namespace.clone(),
            name: self.object.metadata.name.clone().unwrap_or_default(),
        }
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        api_for(
            client,
            &self.resource,
            self.namespaced,
            self.object.metadata.namespace.as_deref(),
        )
    }
}

fn api_for(
    client: &Client,
    resource: &ApiResource,
    namespaced: bool,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match (namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    }
}

/// Finds API resources by kind, once per kind: in the discovery `lookups` keeps when it keeps
/// one, else (and for kinds it does not list yet, e.g. of a CRD just applied) one request each.
#[derive(Default)]
struct ResourceCache<'a> {
    lookups: Option<&'a ClusterLookups>,
    discovery: Option<Arc<kube::Discovery>>,
    found: HashMap<GroupVersionKind, (ApiResource, bool)>,
}

impl ResourceCache<'_> {
    async fn lookup(
        &mut self,
        client: &Client,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, bool), ApplyError> {
        if let Some(found) = self.found.get(gvk) {
            return Ok(found.clone());
        }
        if self.discovery.is_none()
            && let Some(lookups) = self.lookups.filter(|l| l.keeps_discovery())
        {
            self.discovery = lookups.discovery(client).await.ok();
        }
        if let Some((resource, caps)) = self.discovery.as_ref().and_then(|d| d.resolve_gvk(gvk)) {
            let found = (resource, caps.scope == Scope::Namespaced);
            self.found.insert(gvk.clone(), found.clone());
            return Ok(found);
        }
        let (resource, caps) =
            discovery::pinned_kind(client, gvk)
                .await
                .map_err(|source| ApplyError::Discovery {
                    gvk: format_gvk(gvk),
                    source,
                })?;
        let found = (resource, caps.scope == Scope::Namespaced);
        self.found.insert(gvk.clone(), found.clone());
        Ok(found)
    }
}

fn format_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

fn gvk_of(object: &Value) -> Result<GroupVersionKind, ApplyError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApplyError::InvalidObject(format!(
            "object {:?} has no apiVersion or kind",
            object["metadata"]["name"].as_str().unwrap_or_default()
        )));
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(GroupVersionKind::gvk(group, version, kind))
}

fn is_crd(object: &Value) -> bool {
    object["kind"] == "CustomResourceDefinition" && object["apiVersion"] == CRD_API_VERSION
}

/// Labels an object as the owner's and points its ownerReferences at the ClusterExtension, so
/// that the garbage collector removes it with the ClusterExtension even when the service
/// account is gone.
fn mark_owned(owner: &Owner, object: &mut DynamicObject) {
    object
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .extend(owner_labels(&owner.name));
    let mut references = object.metadata.owner_references.take().unwrap_or_default();
    references.retain(|r| r.controller != Some(true));
    references.push(owner.owner_reference());
    object.metadata.owner_references = Some(references);
}

/// Applies objects as the service account, CRDs first, and returns what was applied, as the
/// applies left it. Objects that exist and belong to someone else are refused before anything is
/// written.
pub async fn apply(
    sa_client: &Client,
    lookups: &ClusterLookups,
    owner: &Owner,
    objects: &[Value],
) -> Result<Applied, ApplyError> {
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| is_crd(o));
    let mut resources = ResourceCache {
        lookups: Some(lookups),
        ..ResourceCache::default()
    };

    // Check every object that can already exist before writing anything. Instances of a kind the
    // API server does not serve yet (its CRD comes with this bundle) cannot exist.
    let crds = plan(sa_client, owner, &crds, &mut resources).await?;
    let mut rest_planned = Vec::with_capacity(rest.len());
    let mut later = Vec::new();
    for value in rest {
        match plan(sa_client, owner, &[value], &mut resources).await {
            Ok(mut one) => rest_planned.append(&mut one),
            Err(ApplyError::Discovery { .. }) => later.push(value),
            Err(other) => return Err(other),
        }
    }
    refuse_foreign(sa_client, owner, &crds).await?;
    refuse_foreign(sa_client, owner, &rest_planned).await?;

    // CRDs first: the other objects may be instances of them.
    let mut applied = Applied::default();
    for planned in &crds {
        owner.holding.check(&owner.name)?;
        applied.push(server_side_apply(sa_client, planned).await?);
    }
    for planned in &crds {
        wait_crd_established(
            sa_client,
            planned.object.metadata.name.as_deref().unwrap_or_default(),
        )
        .await?;
    }
    let mut instances = plan(sa_client, owner, &later, &mut resources).await?;
    rest_planned.append(&mut instances);
    for planned in &rest_planned {
        owner.holding.check(&owner.name)?;
        applied.push(server_side_apply(sa_client, planned).await?);
    }
    Ok(applied)
}

async fn plan(
    client: &Client,
    owner: &Owner,
    objects: &[&Value],
    resources: &mut ResourceCache<'_>,
) -> Result<Vec<Planned>, ApplyError> {
    let mut planned = Vec::with_capacity(objects.len());
    for value in objects {
        let gvk = gvk_of(value)?;
        let (resource, namespaced) = resources.lookup(client, &gvk).await?;
        let mut object: DynamicObject = serde_json::from_value((*value).clone()).map_err(|e| {
            ApplyError::InvalidObject(format!("{} is not a Kubernetes object: {e}", format_gvk(&gvk)))
        })?;
        if namespaced && object.metadata.namespace.is_none() {
            object.metadata.namespace = Some(owner.install_namespace.clone());
        }
        if !namespaced {
            object.metadata.namespace = None;
        }
        mark_owned(owner, &mut object);
        planned.push(Planned {
            resource,
            namespaced,
            object,
        });
    }
    Ok(planned)
}

async fn refuse_foreign(client: &Client, owner: &Owner, planned: &[Planned]) -> Result<(), ApplyError> {
    let mut foreign = Vec::new();
    for p in planned {
        let name = p.object.metadata.name.clone().unwrap_or_default();
        match p.api(client).get_opt(&name).await {
            Ok(Some(existing)) if !owner.owns(&existing) => foreign.push(describe(&p.reference())),
            Ok(_) => {}
            Err(source) => {
                return Err(ApplyError::Read {
                    object: describe(&p.reference()),
                    source,
                });
            }
        }
    }
    if foreign.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::OwnedByOthers(foreign))
    }
}

/// `Kind 'name' in namespace 'ns'` or `Kind 'name'`, as messages name objects.
pub fn describe(object: &ObjectRef) -> String {
    match &object.namespace {
        Some(ns) => format!("{} '{}' in namespace '{}'", object.kind, object.name, ns),
        None => format!("{} '{}'", object.kind, object.name),
    }
}

/// What an apply wrote: every object as it left it, and the spec generation it left on each
/// object whose readiness [`rollout_status`] reads (CRDs, Deployments, APIServices): the same
/// uid and generation read later mean the same object with the spec as applied.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// Every object written, in order.
    pub objects: Vec<AppliedObject>,
    /// The readiness kinds' objects as the apply left them.
    pub states: Vec<WatchedObject>,
}

impl Applied {
    fn push(&mut self, (object, state): (AppliedObject, Option<WatchedObject>)) {
        self.objects.push(object);
        self.states.extend(state);
    }

    /// `other`'s objects after these.
    pub fn extend(&mut self, other: Applied) {
        self.objects.extend(other.objects);
        self.states.extend(other.states);
    }
}

/// Whether [`rollout_status`] reads objects like `object`.
pub fn is_readiness_kind(object: &ObjectRef) -> bool {
    matches!(
        (object.api_version.as_str(), object.kind.as_str()),
        (CRD_API_VERSION, "CustomResourceDefinition")
            | (DEPLOYMENT_API_VERSION, "Deployment")
            | (API_SERVICE_API_VERSION, "APIService")
    )
}

async fn server_side_apply(
    client: &Client,
    planned: &Planned,
) -> Result<(AppliedObject, Option<WatchedObject>), ApplyError> {
    let name = planned.object.metadata.name.clone().unwrap_or_default();
    let mut body = planned.object.clone();
    body.types = Some(kube::api::TypeMeta {
        api_version: planned.resource.api_version.clone(),
        kind: planned.resource.kind.clone(),
    });
    // Force: olmv1 owns the fields it applies, and a drifted field is taken back.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = planned
        .api(client)
        .patch(&name, &params, &Patch::Apply(&body))
        .await
        .map_err(|source| ApplyError::Write {
            object: describe(&planned.reference()),
            source,
        })?;
    let object = planned.reference();
    let state = is_readiness_kind(&object).then(|| watched_state(object.clone(), &written.metadata));
    let applied = AppliedObject {
        object,
        uid: written.metadata.uid.unwrap_or_default(),
        resource_version: written.metadata.resource_version.unwrap_or_default(),
    };
    Ok((applied, state))
}

/// Whether the controller's watches report changes to objects like `object` (CRDs and
/// Deployments): the drift of any other kind is found by [`list_owned`] and [`read_applied`].
pub fn is_watched_kind(object: &ObjectRef) -> bool {
    matches!(
        (object.api_version.as_str(), object.kind.as_str()),
        (CRD_API_VERSION, "CustomResourceDefinition") | (DEPLOYMENT_API_VERSION, "Deployment")
    )
}

/// Every object of kind `api_version`/`kind` that carries a ClusterExtension's owner labels, in
/// every namespace, as uid and resourceVersion by object: one metadata-only list request.
pub async fn list_owned(
    client: &Client,
    lookups: &ClusterLookups,
    api_version: &str,
    kind: &str,
) -> Result<HashMap<ObjectRef, (String, String)>, ApplyError> {
    let gvk = gvk_of_parts(api_version, kind);
    let mut resources = ResourceCache {
        lookups: Some(lookups),
        ..ResourceCache::default()
    };
    let (resource, _) = resources.lookup(client, &gvk).await?;
    let params = ListParams::default().labels(&owner_kind_selector());
    let listed = Api::<DynamicObject>::all_with(client.clone(), &resource)
        .list_metadata(&params)
        .await
        .map_err(|source| ApplyError::Read {
            object: format!("{kind} objects of ClusterExtensions"),
            source,
        })?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|item| {
            let meta = item.metadata;
            let object = ObjectRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: meta.namespace,
                name: meta.name?,
            };
            Some((
                object,
                (
                    meta.uid.unwrap_or_default(),
                    meta.resource_version.unwrap_or_default(),
                ),
            ))
        })
        .collect())
}

/// Each of `objects` as it is now (uid and resourceVersion; `None`: gone), read one by one
/// with `client` (an installer may read the objects it applies, not list their kinds).
pub async fn read_applied(
    client: &Client,
    lookups: &ClusterLookups,
    objects: &[ObjectRef],
) -> Result<Vec<Option<(String, String)>>, ApplyError> {
    let mut resources = ResourceCache {
        lookups: Some(lookups),
        ..ResourceCache::default()
    };
    let mut found = Vec::with_capacity(objects.len());
    for object in objects {
        let gvk = gvk_of_parts(&object.api_version, &object.kind);
        let (resource, namespaced) = match resources.lookup(client, &gvk).await {
            Ok(resource) => resource,
            // The kind is not served any more: its objects are gone.
            Err(ApplyError::Discovery { .. }) => {
                found.push(None);
                continue;
            }
            Err(other) => return Err(other),
        };
        let api = api_for(client, &resource, namespaced, object.namespace.as_deref());
        let meta = api
            .get_metadata_opt(&object.name)
            .await
            .map_err(|source| ApplyError::Read {
                object: describe(object),
                source,
            })?;
        found.push(meta.map(|m| {
            (
                m.metadata.uid.unwrap_or_default(),
                m.metadata.resource_version.unwrap_or_default(),
            )
        }));
    }
    Ok(found)
}

fn gvk_of_parts(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

async fn wait_crd_established(client: &Client, name: &str) -> Result<(), ApplyError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let crd = crds.get(name).await.map_err(|source| ApplyError::Read {
            object: format!("CustomResourceDefinition '{name}'"),
            source,
        })?;
        if is_established(&crd) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ApplyError::NotReady(format!(
                "CustomResourceDefinition '{name}' is not Established yet"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    let conditions = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    conditions
        .iter()
        .any(|c| c.type_ == "Established" && c.status == ConditionStatus::True.as_str())
}

/// True when `object` carries the owner labels of ClusterExtension `owner`.
fn owned_by(owner: &str, object: &DynamicObject) -> bool {
    is_owned_by(object.metadata.labels.as_ref(), owner)
}

/// Deletes, as the service account, the objects of `previous` that `current` no longer has.
pub async fn prune(
    sa_client: &Client,
    owner: &str,
    previous: &[ObjectRef],
    current: &[ObjectRef],
) -> Result<(), ApplyError> {
    let keep: BTreeSet<&ObjectRef> = current.iter().collect();
    let dropped: Vec<ObjectRef> = previous.iter().filter(|o| !keep.contains(o)).cloned().collect();
    delete_all(sa_client, owner, &dropped).await
}

/// Deletes objects as the given client; objects already gone are fine. Each object is read
/// first and deleted only while it still carries the owner labels of ClusterExtension `owner`
/// (with its uid as a precondition): a recorded name that now belongs to someone else is left
/// alone. APIServices go first: one whose server is gone breaks discovery for every client and
/// blocks namespace deletion, so it never outlives the Deployment serving it. CRDs go last so
/// that their instances are removed through their own APIs first.
pub async fn delete_all(client: &Client, owner: &str, objects: &[ObjectRef]) -> Result<(), ApplyError> {
    let mut ordered: Vec<&ObjectRef> = objects.iter().collect();
    ordered.sort_by_key(|o| deletion_rank(o));
    let mut resources = ResourceCache::default();
    for object in ordered {
        let gvk = gvk_of_parts(&object.api_version, &object.kind);
        let (resource, namespaced) = match resources.lookup(client, &gvk).await {
            Ok(found) => found,
            // The kind itself is gone (its CRD was removed): so are its objects.
            Err(ApplyError::Discovery { .. }) => continue,
            Err(other) => return Err(other),
        };
        let api = api_for(client, &resource, namespaced, object.namespace.as_deref());
        let existing = match api.get_opt(&object.name).await {
            Ok(Some(existing)) => existing,
            Ok(None) => continue,
            Err(source) => {
                return Err(ApplyError::Read {
                    object: describe(object),
                    source,
                });
            }
        };
        if !owned_by(owner, &existing) {
            tracing::warn!(object = %describe(object), %owner, "not deleting an object that no longer carries this extension's owner labels");
            continue;
        }
        let mut params = DeleteParams::background();
        params.preconditions = existing.metadata.uid.clone().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        });
        match api.delete(&object.name, &params).await {
            Ok(_) => {}
            // Gone, or replaced since it was read (the uid precondition failed): not ours.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(source) => {
                return Err(ApplyError::Delete {
                    object: describe(object),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// The order [`delete_all`] deletes in: APIServices, then everything else, then CRDs (stable
/// within each).
fn deletion_rank(object: &ObjectRef) -> u8 {
    match (object.api_version.as_str(), object.kind.as_str()) {
        (API_SERVICE_API_VERSION, "APIService") => 0,
        (CRD_API_VERSION, "CustomResourceDefinition") => 2,
        _ => 1,
    }
}

/// What a readiness check found: the first object still rolling out, if any, and the CRDs,
/// Deployments and APIServices it saw ready (all of them when nothing is rolling out).
#[derive(Debug)]
pub struct Rollout {
    /// The first object still rolling out, and why.
    pub waiting: Option<String>,
    /// That object as read (`None` when nothing is rolling out).
    pub waiting_state: Option<WatchedObject>,
    /// The watched objects checked ready, in order.
    pub watched: Vec<WatchedObject>,
}

/// Whether the applied objects are ready: CRDs Established, Deployments Available with every
/// replica updated, APIServices Available (the API server reaches their server); stops at the
/// first thing still rolling out.
pub async fn rollout_status(sa_client: &Client, objects: &[ObjectRef]) -> Result<Rollout, ApplyError> {
    let mut watched = Vec::new();
    for object in objects {
        let read_error = |source| ApplyError::Read {
            object: describe(object),
            source,
        };
        let (meta, waiting) = match (object.api_version.as_str(), object.kind.as_str()) {
            (CRD_API_VERSION, "CustomResourceDefinition") => {
                let crd = Api::<CustomResourceDefinition>::all(sa_client.clone())
                    .get(&object.name)
                    .await
                    .map_err(read_error)?;
                let waiting =
                    (!is_established(&crd)).then(|| format!("{} is not Established", describe(object)));
                (crd.metadata, waiting)
            }
            (DEPLOYMENT_API_VERSION, "Deployment") => {
                let ns = object.namespace.as_deref().unwrap_or_default();
                let deployment = Api::<Deployment>::namespaced(sa_client.clone(), ns)
                    .get(&object.name)
                    .await
                    .map_err(read_error)?;
                let waiting = deployment_rollout(&deployment).map(|w| format!("{}: {w}", describe(object)));
                (deployment.metadata, waiting)
            }
            (API_SERVICE_API_VERSION, "APIService") => {
                let api_service = Api::<APIService>::all(sa_client.clone())
                    .get(&object.name)
                    .await
                    .map_err(read_error)?;
                let waiting =
                    api_service_unavailable(&api_service).map(|w| format!("{} {w}", describe(object)));
                (api_service.metadata, waiting)
            }
            _ => continue,
        };
        let state = watched_state(object.clone(), &meta);
        if waiting.is_some() {
            return Ok(Rollout {
                waiting,
                waiting_state: Some(state),
                watched,
            });
        }
        watched.push(state);
    }
    Ok(Rollout {
        waiting: None,
        waiting_state: None,
        watched,
    })
}

/// Whether every object of `watched` is still the one a readiness check saw (same uid and
/// generation) and still ready. Reads with `client` by listing one name (the controller may list
/// and watch these kinds, not get them); makes no write.
pub async fn still_ready(client: &Client, watched: &[WatchedObject]) -> Result<bool, ApplyError> {
    for seen in watched {
        let object = &seen.object;
        let by_name = ListParams::default().fields(&format!("metadata.name={}", object.name));
        let read_error = |source| ApplyError::Read {
            object: describe(object),
            source,
        };
        let now = match (object.api_version.as_str(), object.kind.as_str()) {
            (CRD_API_VERSION, "CustomResourceDefinition") => {
                Api::<CustomResourceDefinition>::all(client.clone())
                    .list(&by_name)
                    .await
                    .map_err(read_error)?
                    .items
                    .first()
                    .and_then(ready_crd)
            }
            (DEPLOYMENT_API_VERSION, "Deployment") => {
                let ns = object.namespace.as_deref().unwrap_or_default();
                Api::<Deployment>::namespaced(client.clone(), ns)
                    .list(&by_name)
                    .await
                    .map_err(read_error)?
                    .items
                    .first()
                    .and_then(ready_deployment)
            }
            (API_SERVICE_API_VERSION, "APIService") => Api::<APIService>::all(client.clone())
                .list(&by_name)
                .await
                .map_err(read_error)?
                .items
                .first()
                .and_then(ready_api_service),
            _ => None,
        };
        if now.as_ref() != Some(seen) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A CRD's state when it is Established (`None` when it is not).
pub fn ready_crd(crd: &CustomResourceDefinition) -> Option<WatchedObject> {
    let object = ObjectRef {
        api_version: CRD_API_VERSION.into(),
        kind: "CustomResourceDefinition".into(),
        namespace: None,
        name: crd.metadata.name.clone()?,
    };
    is_established(crd).then(|| watched_state(object, &crd.metadata))
}

/// A CRD's state as a metadata-only watch sees it: which object, at which uid and generation.
/// Whether it is Established is not in the metadata; a CRD stays Established once it is, so one
/// seen at the uid and generation of a ready state remembered earlier is still that state.
pub fn crd_state(crd: &ObjectMeta) -> Option<WatchedObject> {
    let object = ObjectRef {
        api_version: CRD_API_VERSION.into(),
        kind: "CustomResourceDefinition".into(),
        namespace: None,
        name: crd.name.clone()?,
    };
    Some(watched_state(object, crd))
}

/// A Deployment's state when it is rolled out (`None` when it is not).
pub fn ready_deployment(deployment: &Deployment) -> Option<WatchedObject> {
    let object = ObjectRef {
        api_version: DEPLOYMENT_API_VERSION.into(),
        kind: "Deployment".into(),
        namespace: deployment.metadata.namespace.clone(),
        name: deployment.metadata.name.clone()?,
    };
    deployment_rollout(deployment)
        .is_none()
        .then(|| watched_state(object, &deployment.metadata))
}

/// An APIService's state when it is Available (`None` when it is not).
pub fn ready_api_service(api_service: &APIService) -> Option<WatchedObject> {
    let object = ObjectRef {
        api_version: API_SERVICE_API_VERSION.into(),
        kind: "APIService".into(),
        namespace: None,
        name: api_service.metadata.name.clone()?,
    };
    api_service_unavailable(api_service)
        .is_none()
        .then(|| watched_state(object, &api_service.metadata))
}

/// Why an APIService is not Available (its condition's reason and message), or `None` when it
/// is. An unavailable aggregated API fails discovery for every client and blocks the deletion of
/// namespaces, so it is reported, never taken as installed.
fn api_service_unavailable(api_service: &APIService) -> Option<String> {
    let available = api_service
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == "Available");
    match available {
        Some(c) if c.status == ConditionStatus::True.as_str() => None,
        Some(c) => {
            let mut why = format!(
                "is not Available ({})",
                c.reason.as_deref().unwrap_or("no reason")
            );
            if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
                why.push_str(": ");
                why.push_str(message);
            }
            Some(why)
        }
        None => Some("is not Available yet".into()),
    }
}

fn watched_state(object: ObjectRef, meta: &ObjectMeta) -> WatchedObject {
    WatchedObject {
        object,
        uid: meta.uid.clone().unwrap_or_default(),
        generation: meta.generation.unwrap_or_default(),
    }
}

/// Why a Deployment is not rolled out yet, or `None` when it is.
fn deployment_rollout(deployment: &Deployment) -> Option<String> {
    let generation = deployment.metadata.generation.unwrap_or_default();
    let desired = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = deployment.status.as_ref() else {
        return Some("waiting for the deployment controller".into());
    };
    if status.observed_generation.unwrap_or_default() < generation {
        return Some("waiting for the deployment controller to observe the new generation".into());
    }
    let updated = status.updated_replicas.unwrap_or_default();
    if updated < desired {
        return Some(format!("{updated} of {desired} replicas updated"));
    }
    if status.replicas.unwrap_or_default() > updated {
        return Some("old replicas are pending termination".into());
    }
    let available = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Available" && c.status == ConditionStatus::True.as_str());
    if !available {
        return Some("not Available yet".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentSpec, DeploymentStatus};

    fn deployment(replicas: i32, updated: i32, total: i32, available: bool) -> Deployment {
        Deployment {
            metadata: kube::api::ObjectMeta {
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: Some(DeploymentStatus {
                observed_generation: Some(2),
                replicas: Some(total),
                updated_replicas: Some(updated),
                conditions: Some(vec![DeploymentCondition {
                    type_: "Available".into(),
                    status: ConditionStatus::from_bool(available).as_str().into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_deployment_is_rolled_out_when_every_replica_is_updated_and_it_is_available() {
        assert_eq!(deployment_rollout(&deployment(2, 2, 2, true)), None);
        assert_eq!(
            deployment_rollout(&deployment(2, 1, 2, true)).unwrap(),
            "1 of 2 replicas updated"
        );
        assert!(
            deployment_rollout(&deployment(2, 2, 3, true))
                .unwrap()
                .contains("old replicas")
        );
        assert!(
            deployment_rollout(&deployment(2, 2, 2, false))
                .unwrap()
                .contains("Available")
        );
    }

    #[test]
    fn api_services_are_deleted_first_and_crds_last() {
        let object = |api_version: &str, kind: &str, name: &str| ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            name: name.into(),
        };
        let mut objects = [
            object(CRD_API_VERSION, "CustomResourceDefinition", "c"),
            object(DEPLOYMENT_API_VERSION, "Deployment", "d"),
            object(API_SERVICE_API_VERSION, "APIService", "v1.a"),
            object("v1", "Service", "s"),
            object(API_SERVICE_API_VERSION, "APIService", "v1.b"),
        ];
        objects.sort_by_key(deletion_rank);
        let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["v1.a", "v1.b", "d", "s", "c"]);
    }

    #[test]
    fn an_api_service_is_ready_only_when_available_and_says_why_not() {
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
            APIServiceCondition, APIServiceStatus,
        };
        let api_service = |status: Option<(&str, &str, &str)>| APIService {
            metadata: kube::api::ObjectMeta {
                name: Some("v1.example.com".into()),
                uid: Some("u".into()),
                generation: Some(1),
                ..Default::default()
            },
            status: status.map(|(status, reason, message)| APIServiceStatus {
                conditions: Some(vec![APIServiceCondition {
                    type_: "Available".into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    last_transition_time: None,
                }]),
            }),
            ..Default::default()
        };
        assert!(ready_api_service(&api_service(Some(("True", "Passed", "all checks passed")))).is_some());
        assert_eq!(
            api_service_unavailable(&api_service(None)).unwrap(),
            "is not Available yet"
        );
        assert_eq!(
            api_service_unavailable(&api_service(Some((
                "False",
                "MissingEndpoints",
                "endpoints for service/s in \"ns\" have no addresses"
            ))))
            .unwrap(),
            "is not Available (MissingEndpoints): endpoints for service/s in \"ns\" have no addresses"
        );
        assert!(ready_api_service(&api_service(Some(("False", "FailedDiscoveryCheck", "")))).is_none());
    }

    #[test]
    fn a_rolled_out_deployment_is_known_by_its_uid_and_generation() {
        let named = |mut d: Deployment| {
            d.metadata.name = Some("op".into());
            d.metadata.namespace = Some("ns".into());
            d.metadata.uid = Some("u1".into());
            d
        };
        assert_eq!(
            ready_deployment(&named(deployment(1, 1, 1, true))),
            Some(WatchedObject {
                object: ObjectRef {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("ns".into()),
                    name: "op".into(),
                },
                uid: "u1".into(),
                generation: 2,
            })
        );
        assert_eq!(
            ready_deployment(&named(deployment(1, 1, 1, false))),
            None,
            "not Available"
        );
    }

    #[test]
    fn owned_objects_carry_the_owner_labels_and_one_controller_reference() {
        let owner = Owner {
            name: "ext".into(),
            uid: "u1".into(),
            install_namespace: "ns".into(),
            holding: Holding::always(),
        };
        let mut object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}
        }))
        .unwrap();
        mark_owned(&owner, &mut object);
        mark_owned(&owner, &mut object);
        assert!(owner.owns(&object));
        let references = object.metadata.owner_references.unwrap();
        assert_eq!(references.len(), 1);
        assert_eq!(references[0].uid, "u1");
    }
}
