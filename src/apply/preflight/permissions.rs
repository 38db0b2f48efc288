//! The permission preflight's pure part: from the objects a bundle applies and the objects the
//! installed revision applied, every API request the service account must be allowed to make, and
//! from the API server's answers, what it lacks.
//!
//! How each request is authorised (kube-apiserver):
//! - Server-side apply is a PATCH: verb `patch` on the named object; when the object does not exist
//!   yet the same request creates it, and the apiserver also authorises verb `create` with the
//!   object's name. The applier reads the object first (`get`) to refuse foreign owners.
//! - Pruning what the new bundle dropped is a DELETE: verb `delete` on the named object.
//! - Creating or updating a Role/ClusterRole is refused by RBAC unless the user may `escalate`
//!   roles/clusterroles, or already holds every rule the role grants (in the role's namespace; a
//!   ClusterRole cluster-wide; an `aggregationRule` needs every permission).
//! - Creating or updating a RoleBinding/ClusterRoleBinding is refused unless the user may `bind`
//!   the referenced role, or already holds every rule that role grants (where the binding applies).
//! - An OperatorCondition's status is kept in step with its spec (the controller mirrors the
//!   operator's conditions, as classic does): verb `patch` on its `status` subresource.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use olmv1_api::operator_condition;

use super::PreflightError;
use crate::apply::revision::ObjectRef;
use crate::go_format::go_quote;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `update` on `clusterextensions/finalizers` of the extension named `extension`: every object is
/// applied with an owner reference to it that sets `blockOwnerDeletion`, which the
/// `OwnerReferencesPermissionEnforcement` admission plugin (enabled on OpenShift) allows only to
/// users who may update the owner's finalizers. Upstream's preflight (v1.10) checks the same.
pub fn owner_finalizers_access(extension: &str) -> Access {
    Access::resource(
        "update",
        "olm.operatorframework.io",
        "clusterextensions/finalizers",
        None,
        Some(extension),
    )
}

/// `patch` on the `status` of OperatorCondition `name`: the controller mirrors its
/// `spec.conditions` there as the installer, as classic's OperatorCondition controller does.
pub fn operator_condition_status_access(namespace: Option<&str>, name: &str) -> Access {
    Access::resource(
        "patch",
        operator_condition::GROUP,
        &format!("{}/status", operator_condition::PLURAL),
        namespace,
        Some(name),
    )
}

/// The service account a ClusterExtension installs with.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceAccountRef {
    /// The ServiceAccount's namespace (the ClusterExtension's `spec.namespace`).
    pub namespace: String,
    /// The ServiceAccount's name (`spec.serviceAccount.name`).
    pub name: String,
}

impl ServiceAccountRef {
    /// A reference to ServiceAccount `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The user name its tokens authenticate as: `system:serviceaccount:<ns>:<name>`.
    pub fn user_name(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups its tokens carry.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_string(),
        ]
    }
}

impl fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a request is about, without its verb: a resource (possibly one named object) or a
/// non-resource URL. Ordered cluster-wide first, then by namespace, group, resource, name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccessTarget {
    /// A resource request.
    Resource {
        /// The namespace; `None` for cluster-scoped resources and cluster-wide requests.
        namespace: Option<String>,
        /// The API group, empty for the core group.
        group: String,
        /// The resource (plural), e.g. `deployments`, or `*`.
        resource: String,
        /// The subresource, e.g. `status`.
        subresource: Option<String>,
        /// The object's name; `None` for requests on the collection.
        name: Option<String>,
    },
    /// A non-resource request, e.g. `/healthz`.
    NonResource {
        /// The URL path.
        path: String,
    },
}

impl fmt::Display for AccessTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessTarget::Resource {
                namespace,
                group,
                resource,
                subresource,
                name,
            } => {
                if !group.is_empty() {
                    write!(f, "{group}/")?;
                }
                f.write_str(resource)?;
                if let Some(sub) = subresource {
                    write!(f, "/{sub}")?;
                }
                if let Some(name) = name {
                    write!(f, " {}", go_quote(name))?;
                }
                if let Some(ns) = namespace {
                    write!(f, " in namespace {}", go_quote(ns))?;
                }
                Ok(())
            }
            AccessTarget::NonResource { path } => write!(f, "non-resource URL {}", go_quote(path)),
        }
    }
}

/// One request the service account must be allowed to make.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Access {
    /// What the request is about.
    pub target: AccessTarget,
    /// The verb, e.g. `patch`, or `*`.
    pub verb: String,
}

impl Access {
    /// Verb `verb` on a resource.
    pub fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_string())),
            None => (resource, None),
        };
        Access {
            target: AccessTarget::Resource {
                namespace: namespace.map(str::to_string),
                group: group.to_string(),
                resource: resource.to_string(),
                subresource,
                name: name.map(str::to_string),
            },
            verb: verb.to_string(),
        }
    }

    /// Verb `verb` on a non-resource URL.
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Access {
            target: AccessTarget::NonResource {
                path: path.to_string(),
            },
            verb: verb.to_string(),
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.target)
    }
}

/// Which verbs the apply needs, on what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Verbs on every object the bundle applies (named requests).
    pub object_verbs: Vec<String>,
    /// Verbs on every (resource, namespace) collection the bundle applies into.
    pub collection_verbs: Vec<String>,
    /// Verbs on every object of the installed revision the new bundle no longer has.
    pub prune_verbs: Vec<String>,
}

impl Default for AccessPolicy {
    /// What server-side apply and pruning need: `get`, `create`, `patch` on each applied object
    /// (create is authorised with the object's name when the apply creates it), nothing on
    /// collections, `delete` on each pruned object.
    fn default() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        AccessPolicy {
            object_verbs: strings(&["get", "create", "patch"]),
            collection_verbs: Vec::new(),
            prune_verbs: strings(&["delete"]),
        }
    }
}

impl AccessPolicy {
    /// Every request the extension's installer makes over the extension's life, for the RBAC
    /// `olmv1 rbac` writes: what the applier needs (`get`, `create`, `patch`), `delete` on each
    /// object for the uninstall (which reads each recorded object, then deletes it), and `get`,
    /// `delete` on each object an upgrade prunes (the pruner reads before it deletes, too).
    pub fn installer() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        AccessPolicy {
            object_verbs: strings(&["get", "create", "patch", "delete"]),
            collection_verbs: Vec::new(),
            prune_verbs: strings(&["get", "delete"]),
        }
    }

    /// Upstream operator-controller's pre-authorization set (gate `PreflightPermissions`): `get`,
    /// `patch`, `update`, `delete` on each object; `list`, `watch`, `create` on each collection.
    pub fn upstream() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        AccessPolicy {
            object_verbs: strings(&["get", "patch", "update", "delete"]),
            collection_verbs: strings(&["list", "watch", "create"]),
            prune_verbs: strings(&["delete"]),
        }
    }
}

/// What the API serves for one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// The resource (plural), e.g. `deployments`.
    pub plural: String,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// Kind -> resource table, from API discovery and from CRDs the bundle itself creates.
#[derive(Clone, Debug, Default)]
pub struct ResourceTable {
    /// (group, version, kind) -> resource.
    entries: BTreeMap<(String, String, String), ResourceInfo>,
}

impl ResourceTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `group/version` serves `kind` as `info`.
    pub fn insert(&mut self, group: &str, version: &str, kind: &str, info: ResourceInfo) {
        self.entries
            .insert((group.to_string(), version.to_string(), kind.to_string()), info);
    }

    /// Records every version of a CRD (which the bundle may create before its custom resources).
    pub fn add_crd(&mut self, crd: &CustomResourceDefinition) {
        let info = ResourceInfo {
            plural: crd.spec.names.plural.clone(),
            namespaced: crd.spec.scope == "Namespaced",
        };
        for version in &crd.spec.versions {
            self.insert(&crd.spec.group, &version.name, &crd.spec.names.kind, info.clone());
        }
    }

    /// Records every table entry the API server's discovery lists.
    pub fn add_discovery(&mut self, discovery: &kube::Discovery) {
        for group in discovery.groups() {
            for version in group.versions() {
                for (resource, caps) in group.versioned_resources(version) {
                    let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
                    let info = ResourceInfo {
                        plural: resource.plural.clone(),
                        namespaced,
                    };
                    self.insert(&resource.group, &resource.version, &resource.kind, info);
                }
            }
        }
    }

    /// The resource serving `kind` in `group/version`; failing that, in another version of the
    /// group (the plural and scope of a kind do not change between versions).
    pub fn lookup(&self, group: &str, version: &str, kind: &str) -> Option<&ResourceInfo> {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        self.entries.get(&key).or_else(|| {
            self.entries
                .iter()
                .find(|((g, _, k), _)| g == group && k == kind)
                .map(|(_, info)| info)
        })
    }
}

/// A Role or ClusterRole a binding refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The Role's namespace; `None` for a ClusterRole.
    pub namespace: Option<String>,
    /// The role's name.
    pub name: String,
}

/// One condition the apply's authorisation depends on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Requirement {
    /// This request must be allowed.
    Allowed(Access),
    /// A Role/ClusterRole the bundle applies: allowed when `escalate` is, or every rule access is.
    RoleRules {
        /// `escalate` on the role.
        escalate: Access,
        /// The role's rules as accesses, where they apply.
        rules: Vec<Access>,
    },
    /// A binding the bundle applies: allowed when `bind` is, or every rule of the role is.
    BindingRules {
        /// `bind` on the referenced role.
        bind: Access,
        /// The referenced role.
        role: RoleRef,
        /// Where the role's rules apply through this binding (`None`: cluster-wide).
        rules_namespace: Option<String>,
        /// The role's rules as accesses when the bundle itself defines the role; `None` when they
        /// must be read from the cluster.
        bundle_rules: Option<Vec<Access>>,
    },
}

/// Everything one apply needs authorised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessPlan {
    /// The conditions, deduplicated and sorted.
    pub requirements: Vec<Requirement>,
}

/// Computes every request the service account must be allowed to make to apply `objects` (plain
/// manifests with `apiVersion`, `kind`, `metadata`) and prune what of `previous` (the installed
/// revision's objects) the new set no longer has. Namespaced objects without a namespace are
/// counted in `install_namespace`. Kinds resolve through `resources`; pruned objects whose kind is
/// no longer served are skipped (there is nothing left to delete).
pub fn required_access(
    objects: &[Value],
    previous: &[ObjectRef],
    install_namespace: &str,
    resources: &ResourceTable,
    policy: &AccessPolicy,
) -> Result<AccessPlan, PreflightError> {
    let mut requirements = BTreeSet::new();
    let mut applied = BTreeSet::new();
    let manifest = parse_objects(objects)?;
    let roles = bundle_roles(&manifest);

    for obj in &manifest {
        let info = resources
            .lookup(&obj.group, &obj.version, &obj.kind)
            .ok_or_else(|| PreflightError::UnknownKind {
                api_version: obj.api_version.clone(),
                kind: obj.kind.clone(),
                name: obj.name.clone(),
            })?;
        let namespace = info.namespaced.then(|| {
            obj.namespace
                .clone()
                .unwrap_or_else(|| install_namespace.to_string())
        });
        applied.insert((
            obj.group.clone(),
            obj.kind.clone(),
            namespace.clone(),
            obj.name.clone(),
        ));
        let ns = namespace.as_deref();
        for verb in &policy.object_verbs {
            let access = Access::resource(verb, &obj.group, &info.plural, ns, Some(&obj.name));
            requirements.insert(Requirement::Allowed(access));
        }
        for verb in &policy.collection_verbs {
            requirements.insert(Requirement::Allowed(Access::resource(
                verb,
                &obj.group,
                &info.plural,
                ns,
                None,
            )));
        }
        if obj.group == RBAC_GROUP
            && let Some(req) = rbac_requirement(obj, ns, &roles)?
        {
            requirements.insert(req);
        }
        if obj.group == operator_condition::GROUP && obj.kind == operator_condition::KIND {
            requirements.insert(Requirement::Allowed(operator_condition_status_access(
                ns, &obj.name,
            )));
        }
    }

    for old in previous {
        let (group, version) = split_api_version(&old.api_version);
        let Some(info) = resources.lookup(group, version, &old.kind) else {
            continue;
        };
        let namespace = info.namespaced.then(|| {
            old.namespace
                .clone()
                .unwrap_or_else(|| install_namespace.to_string())
        });
        let key = (
            group.to_string(),
            old.kind.clone(),
            namespace.clone(),
            old.name.clone(),
        );
        if applied.contains(&key) {
            continue;
        }
        for verb in &policy.prune_verbs {
            let access = Access::resource(verb, group, &info.plural, namespace.as_deref(), Some(&old.name));
            requirements.insert(Requirement::Allowed(access));
        }
    }
    Ok(AccessPlan {
        requirements: requirements.into_iter().collect(),
    })
}

/// One object of the manifest, identified.
struct ManifestObject<'a> {
    api_version: String,
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    value: &'a Value,
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

fn parse_objects(objects: &[Value]) -> Result<Vec<ManifestObject<'_>>, PreflightError> {
    objects
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let field = |pointer: &str| {
                value
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            let invalid = |reason: &str| PreflightError::InvalidObject {
                index,
                reason: reason.to_string(),
            };
            let api_version = field("/apiVersion").ok_or_else(|| invalid("it has no apiVersion"))?;
            let kind = field("/kind").ok_or_else(|| invalid("it has no kind"))?;
            let name = field("/metadata/name").ok_or_else(|| invalid("it has no metadata.name"))?;
            let (group, version) = split_api_version(api_version);
            Ok(ManifestObject {
                api_version: api_version.to_string(),
                group: group.to_string(),
                version: version.to_string(),
                kind: kind.to_string(),
                name: name.to_string(),
                namespace: field("/metadata/namespace").map(str::to_string),
                value,
            })
        })
        .collect()
}

/// The rules of every Role and ClusterRole in the manifest, keyed by reference.
fn bundle_roles(manifest: &[ManifestObject<'_>]) -> BTreeMap<RoleRef, Vec<PolicyRule>> {
    let mut roles = BTreeMap::new();
    for obj in manifest.iter().filter(|o| o.group == RBAC_GROUP) {
        let (namespace, rules) = match obj.kind.as_str() {
            "Role" => match serde_json::from_value::<Role>(obj.value.clone()) {
                Ok(role) => (obj.namespace.clone(), role.rules),
                Err(_) => continue,
            },
            "ClusterRole" => match serde_json::from_value::<ClusterRole>(obj.value.clone()) {
                Ok(role) => (None, role.rules),
                Err(_) => continue,
            },
            _ => continue,
        };
        let key = RoleRef {
            kind: obj.kind.clone(),
            namespace,
            name: obj.name.clone(),
        };
        roles.insert(key, rules.unwrap_or_default());
    }
    roles
}

fn rbac_requirement(
    obj: &ManifestObject<'_>,
    namespace: Option<&str>,
    bundle_roles: &BTreeMap<RoleRef, Vec<PolicyRule>>,
) -> Result<Option<Requirement>, PreflightError> {
    let invalid = |e: serde_json::Error| PreflightError::InvalidRbacObject {
        kind: obj.kind.clone(),
        name: obj.name.clone(),
        reason: e.to_string(),
    };
    let requirement = match obj.kind.as_str() {
        "Role" => {
            let role: Role = serde_json::from_value(obj.value.clone()).map_err(invalid)?;
            let escalate = Access::resource("escalate", RBAC_GROUP, "roles", namespace, Some(&obj.name));
            Requirement::RoleRules {
                escalate,
                rules: rule_accesses(role.rules.as_deref().unwrap_or_default(), namespace),
            }
        }
        "ClusterRole" => {
            let role: ClusterRole = serde_json::from_value(obj.value.clone()).map_err(invalid)?;
            let escalate = Access::resource("escalate", RBAC_GROUP, "clusterroles", None, Some(&obj.name));
            let mut rules = rule_accesses(role.rules.as_deref().unwrap_or_default(), None);
            if role.aggregation_rule.is_some() {
                // An aggregated role can gather anything: RBAC asks for every permission.
                rules.push(Access::resource("*", "*", "*", None, None));
                rules.push(Access::non_resource("*", "*"));
            }
            Requirement::RoleRules { escalate, rules }
        }
        "RoleBinding" => {
            let binding: RoleBinding = serde_json::from_value(obj.value.clone()).map_err(invalid)?;
            let role_ns =
                (binding.role_ref.kind == "Role").then(|| namespace.unwrap_or_default().to_string());
            binding_requirement(
                &binding.role_ref.kind,
                &binding.role_ref.name,
                role_ns,
                namespace,
                bundle_roles,
            )
        }
        "ClusterRoleBinding" => {
            let binding: ClusterRoleBinding = serde_json::from_value(obj.value.clone()).map_err(invalid)?;
            binding_requirement(
                &binding.role_ref.kind,
                &binding.role_ref.name,
                None,
                None,
                bundle_roles,
            )
        }
        _ => return Ok(None),
    };
    Ok(Some(requirement))
}

fn binding_requirement(
    role_kind: &str,
    role_name: &str,
    role_namespace: Option<String>,
    binding_namespace: Option<&str>,
    bundle_roles: &BTreeMap<RoleRef, Vec<PolicyRule>>,
) -> Requirement {
    let resource = if role_kind == "Role" {
        "roles"
    } else {
        "clusterroles"
    };
    let bind = Access::resource("bind", RBAC_GROUP, resource, binding_namespace, Some(role_name));
    let role = RoleRef {
        kind: role_kind.to_string(),
        namespace: role_namespace,
        name: role_name.to_string(),
    };
    let rules_namespace = binding_namespace.map(str::to_string);
    let bundle_rules = bundle_roles
        .get(&role)
        .map(|rules| rule_accesses(rules, binding_namespace));
    Requirement::BindingRules {
        bind,
        role,
        rules_namespace,
        bundle_rules,
    }
}

/// Whether a rule granting exactly `rule` allows request `request` (RBAC's matching: `*` verbs,
/// groups and resources, `*/subresource`, no name = every name, cluster-wide = every namespace,
/// non-resource paths ending in `*` as prefixes).
pub fn covers(rule: &Access, request: &Access) -> bool {
    let verb = rule.verb == "*" || rule.verb == request.verb;
    match (&rule.target, &request.target) {
        (
            AccessTarget::Resource {
                namespace: rns,
                group: rg,
                resource: rr,
                subresource: rs,
                name: rn,
            },
            AccessTarget::Resource {
                namespace: qns,
                group: qg,
                resource: qr,
                subresource: qs,
                name: qn,
            },
        ) => {
            let rule_resource = combined(rr, rs.as_deref());
            let resource = rule_resource == "*"
                || rule_resource == combined(qr, qs.as_deref())
                || qs.as_deref().is_some_and(|s| rule_resource == format!("*/{s}"));
            verb && (rg == "*" || rg == qg)
                && resource
                && (rn.is_none() || rn == qn)
                && (rns.is_none() || rns == qns)
        }
        (AccessTarget::NonResource { path: rule }, AccessTarget::NonResource { path }) => {
            verb && (rule == path || rule.strip_suffix('*').is_some_and(|p| path.starts_with(p)))
        }
        _ => false,
    }
}

pub(crate) fn combined(resource: &str, subresource: Option<&str>) -> String {
    match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    }
}

/// Every (verb, group, resource, name) a list of rules grants, as accesses in `namespace`.
pub fn rule_accesses(rules: &[PolicyRule], namespace: Option<&str>) -> Vec<Access> {
    let mut out = BTreeSet::new();
    for rule in rules {
        for verb in &rule.verbs {
            for path in rule.non_resource_urls.iter().flatten() {
                out.insert(Access::non_resource(verb, path));
            }
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    let names = rule.resource_names.as_deref().unwrap_or_default();
                    if names.is_empty() {
                        out.insert(Access::resource(verb, group, resource, namespace, None));
                    }
                    for name in names {
                        out.insert(Access::resource(verb, group, resource, namespace, Some(name)));
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

impl AccessPlan {
    /// Adds one request the apply makes besides those its objects need (kept sorted and unique).
    pub fn require(&mut self, access: Access) {
        let requirement = Requirement::Allowed(access);
        if let Err(at) = self.requirements.binary_search(&requirement) {
            self.requirements.insert(at, requirement);
        }
    }

    /// Requests that, all allowed, authorise the whole plan whatever the cluster holds: every
    /// plain access; for each Role/ClusterRole the bundle writes, every rule it grants (or
    /// `escalate` on it when `allow_escalate`); for each binding of a role the bundle defines,
    /// that role's rules where the binding applies (or `bind` when `allow_escalate`); for a
    /// binding of a role the bundle does not define, `bind` on that one role (its rules live in
    /// the cluster and may change).
    ///
    /// A role whose own rules grant `escalate` (or `bind`) on it gets that one named permission
    /// instead of its rules even without `allow_escalate`: holding its rules would mean holding
    /// `escalate` on every such role, strictly more than `escalate` on this one, and the
    /// preflight (like the API server) asks for `escalate`/`bind` before the rules.
    pub fn grants(&self, allow_escalate: bool) -> BTreeSet<Access> {
        let implied_by = |rules: &[Access], permission: &Access| rules.iter().any(|r| covers(r, permission));
        let mut out = BTreeSet::new();
        for req in &self.requirements {
            match req {
                Requirement::Allowed(access) => {
                    out.insert(access.clone());
                }
                Requirement::RoleRules { escalate, rules } => {
                    if allow_escalate || implied_by(rules, escalate) {
                        out.insert(escalate.clone());
                    } else {
                        out.extend(rules.iter().cloned());
                    }
                }
                Requirement::BindingRules {
                    bind, bundle_rules, ..
                } => match bundle_rules {
                    Some(rules) if !allow_escalate && !implied_by(rules, bind) => {
                        out.extend(rules.iter().cloned())
                    }
                    _ => {
                        out.insert(bind.clone());
                    }
                },
            }
        }
        out
    }

    /// The requests to review first: every plain access and every `escalate`/`bind`.
    pub fn first_round(&self) -> BTreeSet<Access> {
        self.requirements
            .iter()
            .map(|req| match req {
                Requirement::Allowed(access) => access.clone(),
                Requirement::RoleRules { escalate, .. } => escalate.clone(),
                Requirement::BindingRules { bind, .. } => bind.clone(),
            })
            .collect()
    }

    /// Roles whose rules must be read from the cluster because a binding of them is not allowed
    /// by `bind` and the bundle does not define them.
    pub fn roles_to_fetch(&self, decisions: &BTreeMap<Access, bool>) -> BTreeSet<RoleRef> {
        self.requirements
            .iter()
            .filter_map(|req| match req {
                Requirement::BindingRules {
                    bind,
                    role,
                    bundle_rules: None,
                    ..
                } if !allowed(decisions, bind) => Some(role.clone()),
                _ => None,
            })
            .collect()
    }

    /// The rule accesses to review once `escalate`/`bind` answers are known.
    pub fn second_round(
        &self,
        decisions: &BTreeMap<Access, bool>,
        cluster_roles: &BTreeMap<RoleRef, Vec<PolicyRule>>,
    ) -> BTreeSet<Access> {
        self.fallback_rules(decisions, cluster_roles)
            .into_iter()
            .flat_map(|(_, rules)| rules)
            .collect()
    }

    /// For each role/binding whose `escalate`/`bind` is denied: that access and the rules the
    /// service account would need to hold instead.
    fn fallback_rules(
        &self,
        decisions: &BTreeMap<Access, bool>,
        cluster_roles: &BTreeMap<RoleRef, Vec<PolicyRule>>,
    ) -> Vec<(Access, Vec<Access>)> {
        let mut out = Vec::new();
        for req in &self.requirements {
            match req {
                Requirement::RoleRules { escalate, rules } if !allowed(decisions, escalate) => {
                    out.push((escalate.clone(), rules.clone()));
                }
                Requirement::BindingRules {
                    bind,
                    role,
                    rules_namespace,
                    bundle_rules,
                } if !allowed(decisions, bind) => {
                    let rules = match (bundle_rules, cluster_roles.get(role)) {
                        (Some(rules), _) => rules.clone(),
                        (None, Some(rules)) => rule_accesses(rules, rules_namespace.as_deref()),
                        // kube-apiserver cannot read a role that does not exist, so only `bind`
                        // allows binding it (see `missing`).
                        (None, None) => continue,
                    };
                    out.push((bind.clone(), rules));
                }
                _ => {}
            }
        }
        out
    }

    /// What the service account lacks, given the API server's answer for every reviewed access
    /// and the rules of the fetched roles that exist (`cluster_roles`); `None` when the apply is
    /// fully authorised.
    pub fn missing(
        &self,
        service_account: &ServiceAccountRef,
        decisions: &BTreeMap<Access, bool>,
        cluster_roles: &BTreeMap<RoleRef, Vec<PolicyRule>>,
    ) -> Option<MissingPermissions> {
        let denied: BTreeSet<Access> = self
            .requirements
            .iter()
            .filter_map(|req| match req {
                Requirement::Allowed(access) if !allowed(decisions, access) => Some(access.clone()),
                Requirement::BindingRules {
                    bind,
                    role,
                    bundle_rules: None,
                    ..
                } if !allowed(decisions, bind) && !cluster_roles.contains_key(role) => Some(bind.clone()),
                _ => None,
            })
            .collect();
        let mut refused_rbac: Vec<RbacRefusal> = self
            .fallback_rules(decisions, cluster_roles)
            .into_iter()
            .filter_map(|(permission, rules)| {
                let uncovered: Vec<Access> = rules.into_iter().filter(|r| !allowed(decisions, r)).collect();
                (!uncovered.is_empty()).then_some(RbacRefusal {
                    permission,
                    uncovered,
                })
            })
            .collect();
        refused_rbac.sort();
        refused_rbac.dedup();
        if denied.is_empty() && refused_rbac.is_empty() {
            return None;
        }
        Some(MissingPermissions {
            service_account: service_account.clone(),
            denied: denied.into_iter().collect(),
            refused_rbac,
        })
    }
}

fn allowed(decisions: &BTreeMap<Access, bool>, access: &Access) -> bool {
    decisions.get(access).copied().unwrap_or(false)
}

/// A Role, ClusterRole or binding RBAC would refuse to let the service account write.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RbacRefusal {
    /// The `escalate` or `bind` access that would allow it.
    pub permission: Access,
    /// The rules of the role the service account does not hold (holding them also allows it).
    pub uncovered: Vec<Access>,
}

/// Every permission the service account lacks for one apply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct MissingPermissions {
    /// The service account.
    pub service_account: ServiceAccountRef,
    /// Requests that would be refused, sorted.
    pub denied: Vec<Access>,
    /// Roles and bindings RBAC would refuse, sorted.
    pub refused_rbac: Vec<RbacRefusal>,
}

/// The first line of upstream v1.10's pre-authorization error, which runbooks and scripts written
/// for upstream match; one line per rule follows it.
pub const MISSING_PERMISSIONS_HEADER: &str = "pre-authorization failed: service account requires the following permissions to manage cluster extension:";

/// Accesses to the same target merged into one rule, as upstream compacts its missing rules.
fn merged(accesses: &[Access]) -> BTreeMap<&AccessTarget, BTreeSet<&str>> {
    let mut by_target: BTreeMap<&AccessTarget, BTreeSet<&str>> = BTreeMap::new();
    for a in accesses {
        by_target.entry(&a.target).or_default().insert(&a.verb);
    }
    by_target
}

/// One rule in upstream's layout:
/// `Namespace:"ns" APIGroups:[apps] Resources:[deployments] ResourceNames:[op] Verbs:[create,patch]`
/// (`APIGroups:[]` is the core group; a cluster-wide rule has `Namespace:""`; a non-resource rule
/// reads `Namespace:"" Verbs:[get] NonResourceURLs:[/metrics]`; `*` among the verbs stands alone).
fn rule_line(target: &AccessTarget, verbs: &BTreeSet<&str>) -> String {
    let verbs = if verbs.contains("*") {
        "*".to_string()
    } else {
        verbs.iter().copied().collect::<Vec<_>>().join(",")
    };
    match target {
        AccessTarget::Resource {
            namespace,
            group,
            resource,
            subresource,
            name,
        } => {
            let mut line = format!(
                "Namespace:{} APIGroups:[{group}] Resources:[{resource}",
                go_quote(namespace.as_deref().unwrap_or_default())
            );
            if let Some(sub) = subresource {
                line.push('/');
                line.push_str(sub);
            }
            line.push(']');
            if let Some(name) = name {
                line.push_str(&format!(" ResourceNames:[{name}]"));
            }
            line.push_str(&format!(" Verbs:[{verbs}]"));
            line
        }
        AccessTarget::NonResource { path } => {
            format!("Namespace:\"\" Verbs:[{verbs}] NonResourceURLs:[{path}]")
        }
    }
}

/// Upstream v1.10's text: its header, then every rule the service account lacks, one per line
/// (indented by two spaces, sorted as text, as upstream sorts them): the requests that would be
/// refused and the rules of each Role, ClusterRole or binding RBAC would refuse. Upstream lists
/// only those; olmv1 adds, after them, the `escalate`/`bind` permission that would allow each such
/// role or binding instead of holding its rules.
impl fmt::Display for MissingPermissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rules: Vec<Access> = self.denied.clone();
        for refusal in &self.refused_rbac {
            rules.extend(refusal.uncovered.iter().cloned());
        }
        let mut lines: Vec<String> = merged(&rules)
            .into_iter()
            .map(|(target, verbs)| rule_line(target, &verbs))
            .collect();
        lines.sort();
        lines.dedup();
        f.write_str(MISSING_PERMISSIONS_HEADER)?;
        for line in &lines {
            write!(f, "\n  {line}")?;
        }
        for refusal in &self.refused_rbac {
            write!(
                f,
                "\nor, instead of holding every rule of the role it names: {}",
                refusal.permission
            )?;
        }
        Ok(())
    }
}

/// Accesses to the same target merged: `create, get, patch apps/deployments "x" in namespace "y"`.
pub fn grouped(accesses: &[Access]) -> Vec<(AccessTarget, String)> {
    merged(accesses)
        .into_iter()
        .map(|(target, verbs)| {
            let verbs: Vec<&str> = verbs.into_iter().collect();
            (target.clone(), format!("{} {target}", verbs.join(", ")))
        })
        .collect()
}

#[cfg(test)]
#[path = "permissions_tests.rs"]
mod tests;
