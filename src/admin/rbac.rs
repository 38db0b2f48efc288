//! The installer's RBAC for a bundle (`olmv1 rbac`, `olmv1 install` without a ServiceAccount):
//! the permission preflight's own plan ([`required_access`] under [`AccessPolicy::installer`],
//! plus the extension's finalizers) turned into a ServiceAccount, one ClusterRole for
//! cluster-wide requests, one Role per namespace, and their bindings. There is no second list of
//! permissions: whatever the preflight asks the API server, these objects grant, and nothing else.
//!
//! Minimal by construction: every applied object is named (`resourceNames`); requests another
//! granted request already covers (a bundle role's `*` on a resource covers a named `get` of it;
//! a cluster-wide grant covers the same in one namespace) are left out; each rule groups only
//! requests with the same verbs on one resource (named) or in one API group (unnamed), so no rule
//! grants a combination nobody asked for, and dropping any one rule makes the preflight name
//! exactly the requests of that rule.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

use crate::apply::preflight::combined;
pub use crate::apply::preflight::covers;
use crate::apply::preflight::{
    Access, AccessPlan, AccessPolicy, AccessTarget, PreflightError, ResourceTable, grouped,
    owner_finalizers_access, required_access,
};
use crate::apply::revision::ObjectRef;
use olmv1_api::operator_condition;

/// Label on every object of an installer olmv1 created, naming the ClusterExtension it serves
/// (the uninstall removes them by it).
pub const LABEL_INSTALLER_FOR: &str = "olmv1.operatorframework.io/installer-for";

pub use crate::apply::identity::installer_name;

/// What an installer is for.
#[derive(Clone, Debug)]
pub struct InstallerSpec<'a> {
    /// The ClusterExtension's name.
    pub extension: &'a str,
    /// The install namespace (the ServiceAccount's namespace).
    pub namespace: &'a str,
    /// The ServiceAccount's name.
    pub service_account: &'a str,
    /// Grant `escalate`/`bind` on the bundle's own roles instead of the rules they grant.
    pub allow_escalate: bool,
}

/// Every request the installer must be allowed to make to apply `objects` (the rendered target
/// bundle), prune and later uninstall them, and prune what of `installed` (the installed
/// revision's objects) the target no longer has: the preflight's plan, reduced to the requests
/// no other granted request covers, sorted.
pub fn installer_grants(
    spec: &InstallerSpec<'_>,
    objects: &[Value],
    installed: &[ObjectRef],
    resources: &ResourceTable,
) -> Result<Vec<Access>, PreflightError> {
    let mut plan: AccessPlan = required_access(
        objects,
        installed,
        spec.namespace,
        resources,
        &AccessPolicy::installer(),
    )?;
    plan.require(owner_finalizers_access(spec.extension));
    let grants = plan
        .grants(spec.allow_escalate)
        .into_iter()
        .map(any_operator_condition)
        .collect();
    Ok(minimal(&grants))
}

/// `access` on any OperatorCondition of its namespace when it names one. OperatorConditions are
/// named after the CSV, as classic names them, so each upgrade brings a new one: an installer
/// limited to the installed one's name would have to be rewritten before every upgrade along a
/// channel. Only in a namespace (the install namespace), never cluster-wide.
fn any_operator_condition(mut access: Access) -> Access {
    if let AccessTarget::Resource {
        namespace: Some(_),
        group,
        resource,
        name,
        ..
    } = &mut access.target
        && group == operator_condition::GROUP
        && resource == operator_condition::PLURAL
    {
        *name = None;
    }
    access
}

/// `accesses` without those another one of them covers (as an RBAC rule made of it would).
pub fn minimal(accesses: &BTreeSet<Access>) -> Vec<Access> {
    accesses
        .iter()
        .filter(|a| !accesses.iter().any(|b| b != *a && covers(b, a)))
        .cloned()
        .collect()
}

/// The rules granting exactly `grants` (all of one scope): named requests grouped by (group,
/// resource, verbs) with their names; unnamed ones by (group, verbs) with their resources;
/// non-resource ones by verbs with their paths.
pub fn policy_rules(grants: &[Access]) -> Vec<PolicyRule> {
    let mut by_target: BTreeMap<&AccessTarget, BTreeSet<String>> = BTreeMap::new();
    for a in grants {
        by_target.entry(&a.target).or_default().insert(a.verb.clone());
    }
    let mut named: BTreeMap<(String, String, BTreeSet<String>), BTreeSet<String>> = BTreeMap::new();
    let mut unnamed: BTreeMap<(String, BTreeSet<String>), BTreeSet<String>> = BTreeMap::new();
    let mut non_resource: BTreeMap<BTreeSet<String>, BTreeSet<String>> = BTreeMap::new();
    for (target, verbs) in by_target {
        match target {
            AccessTarget::Resource {
                group,
                resource,
                subresource,
                name,
                ..
            } => {
                let resource = combined(resource, subresource.as_deref());
                match name {
                    Some(name) => {
                        named
                            .entry((group.clone(), resource, verbs))
                            .or_default()
                            .insert(name.clone());
                    }
                    None => {
                        unnamed
                            .entry((group.clone(), verbs))
                            .or_default()
                            .insert(resource);
                    }
                }
            }
            AccessTarget::NonResource { path } => {
                non_resource.entry(verbs).or_default().insert(path.clone());
            }
        }
    }
    let list = |set: BTreeSet<String>| Some(set.into_iter().collect::<Vec<_>>());
    let mut rules = Vec::new();
    for ((group, resource, verbs), names) in named {
        rules.push(PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(vec![resource]),
            resource_names: list(names),
            verbs: verbs.into_iter().collect(),
            non_resource_urls: None,
        });
    }
    for ((group, verbs), resources) in unnamed {
        rules.push(PolicyRule {
            api_groups: Some(vec![group]),
            resources: list(resources),
            resource_names: None,
            verbs: verbs.into_iter().collect(),
            non_resource_urls: None,
        });
    }
    for (verbs, paths) in non_resource {
        rules.push(PolicyRule {
            api_groups: None,
            resources: None,
            resource_names: None,
            verbs: verbs.into_iter().collect(),
            non_resource_urls: list(paths),
        });
    }
    rules
}

/// The grants by where they apply: `None` (cluster-wide and non-resource: the ClusterRole) or a
/// namespace (that namespace's Role).
pub fn by_scope(grants: &[Access]) -> BTreeMap<Option<String>, Vec<Access>> {
    let mut out: BTreeMap<Option<String>, Vec<Access>> = BTreeMap::new();
    for a in grants {
        let scope = match &a.target {
            AccessTarget::Resource { namespace, .. } => namespace.clone(),
            AccessTarget::NonResource { .. } => None,
        };
        out.entry(scope).or_default().push(a.clone());
    }
    out
}

/// The installer's objects, in the order to apply them: the ServiceAccount, the ClusterRole and
/// its ClusterRoleBinding, then a Role and RoleBinding per namespace; each labelled
/// [`LABEL_INSTALLER_FOR`] with the extension.
pub fn installer_objects(spec: &InstallerSpec<'_>, grants: &[Access]) -> Vec<Value> {
    let name = installer_name(spec.extension);
    let labels = json!({ LABEL_INSTALLER_FOR: spec.extension });
    let subject = json!([{
        "kind": "ServiceAccount",
        "name": spec.service_account,
        "namespace": spec.namespace,
    }]);
    let mut objects = vec![json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": spec.service_account, "namespace": spec.namespace, "labels": labels},
    })];
    for (scope, accesses) in by_scope(grants) {
        let rules = serde_json::to_value(policy_rules(&accesses)).unwrap_or_default();
        match scope {
            None => {
                objects.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": labels},
                    "rules": rules,
                }));
                objects.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": labels},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject,
                }));
            }
            Some(ns) => {
                objects.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "rules": rules,
                }));
                objects.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": subject,
                }));
            }
        }
    }
    objects
}

/// What an upgrade changes in the installer's permissions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RbacDiff {
    /// Requests the new grants allow and the old ones did not.
    pub added: Vec<Access>,
    /// Requests the old grants allowed and the new ones do not.
    pub dropped: Vec<Access>,
}

impl RbacDiff {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.dropped.is_empty()
    }
}

/// The difference between two sets of grants (a request counts as kept when any grant of the
/// other side covers it).
pub fn diff(old: &[Access], new: &[Access]) -> RbacDiff {
    let uncovered = |from: &[Access], by: &[Access]| -> Vec<Access> {
        from.iter()
            .filter(|a| !by.iter().any(|b| covers(b, a)))
            .cloned()
            .collect()
    };
    RbacDiff {
        added: uncovered(new, old),
        dropped: uncovered(old, new),
    }
}

impl fmt::Display for RbacDiff {
    /// One line per target: `+ create, get apps/deployments "x" in namespace "y"`, `- ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "  (no change)");
        }
        for (_, line) in grouped(&self.added) {
            writeln!(f, "+ {line}")?;
        }
        for (_, line) in grouped(&self.dropped) {
            writeln!(f, "- {line}")?;
        }
        Ok(())
    }
}

/// The grants the installer's Roles and ClusterRoles in the cluster hold (their rules as
/// requests, where they apply).
pub fn grants_of_roles(
    cluster_rules: &[PolicyRule],
    namespaced: &[(String, Vec<PolicyRule>)],
) -> Vec<Access> {
    let mut out: BTreeSet<Access> = crate::apply::preflight::rule_accesses(cluster_rules, None)
        .into_iter()
        .collect();
    for (ns, rules) in namespaced {
        out.extend(crate::apply::preflight::rule_accesses(rules, Some(ns)));
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::preflight::ResourceInfo;

    fn table() -> ResourceTable {
        let mut t = ResourceTable::new();
        let info = |plural: &str, namespaced| ResourceInfo {
            plural: plural.into(),
            namespaced,
        };
        t.insert("", "v1", "ConfigMap", info("configmaps", true));
        t.insert("", "v1", "ServiceAccount", info("serviceaccounts", true));
        t.insert("apps", "v1", "Deployment", info("deployments", true));
        let rbac = "rbac.authorization.k8s.io";
        t.insert(rbac, "v1", "ClusterRole", info("clusterroles", false));
        t.insert(
            rbac,
            "v1",
            "ClusterRoleBinding",
            info("clusterrolebindings", false),
        );
        t.insert(rbac, "v1", "Role", info("roles", true));
        t.insert(rbac, "v1", "RoleBinding", info("rolebindings", true));
        t
    }

    fn spec(allow_escalate: bool) -> InstallerSpec<'static> {
        InstallerSpec {
            extension: "op",
            namespace: "ops",
            service_account: "op-installer",
            allow_escalate,
        }
    }

    fn bundle() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "op-manager"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
                             {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "op-manager"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "op-manager"},
                   "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "reader"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]}),
        ]
    }

    fn lines(grants: &[Access]) -> Vec<String> {
        grouped(grants).into_iter().map(|(_, s)| s).collect()
    }

    /// The OperatorCondition, named after the CSV, is granted by kind in the install namespace
    /// (its Role's rules too): the next bundle's, of another name, needs no new installer. Its
    /// Role and RoleBinding, named after the package, stay named.
    #[test]
    fn operator_conditions_are_granted_in_the_namespace_whatever_their_name() {
        let mut table = table();
        table.insert(
            "operators.coreos.com",
            "v2",
            "OperatorCondition",
            crate::apply::preflight::ResourceInfo {
                plural: "operatorconditions".into(),
                namespaced: true,
            },
        );
        let objects = vec![
            json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
                   "metadata": {"name": "op.v1.0.0", "namespace": "ops"}, "spec": {}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "op-operator-condition", "namespace": "ops"},
                   "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions"],
                              "resourceNames": ["op.v1.0.0"], "verbs": ["get", "update", "patch"]}]}),
        ];
        let grants = installer_grants(&spec(false), &objects, &[], &table).unwrap();
        assert_eq!(
            lines(&grants),
            [
                "update olm.operatorframework.io/clusterextensions/finalizers \"op\"",
                "create, delete, get, patch, update operators.coreos.com/operatorconditions in namespace \"ops\"",
                "patch operators.coreos.com/operatorconditions/status in namespace \"ops\"",
                "create, delete, get, patch rbac.authorization.k8s.io/roles \"op-operator-condition\" in namespace \"ops\"",
            ]
        );
    }

    #[test]
    fn grants_name_every_object_and_grant_the_bundle_roles_rules_instead_of_escalate() {
        let grants = installer_grants(&spec(false), &bundle(), &[], &table()).unwrap();
        assert_eq!(
            lines(&grants),
            [
                "* configmaps",
                "list, watch pods",
                "update olm.operatorframework.io/clusterextensions/finalizers \"op\"",
                "create, delete, get, patch rbac.authorization.k8s.io/clusterrolebindings \"op-manager\"",
                "create, delete, get, patch rbac.authorization.k8s.io/clusterroles \"op-manager\"",
                // The ConfigMap's own requests are covered by the role's `*` on configmaps.
                "create, delete, get, patch apps/deployments \"op\" in namespace \"ops\"",
                "bind rbac.authorization.k8s.io/clusterroles \"view\" in namespace \"ops\"",
                "create, delete, get, patch rbac.authorization.k8s.io/rolebindings \"reader\" in namespace \"ops\"",
            ]
        );
    }

    #[test]
    fn allow_escalate_grants_escalate_and_bind_instead_of_the_rules() {
        let grants = installer_grants(&spec(true), &bundle(), &[], &table()).unwrap();
        let text = lines(&grants).join("\n");
        assert!(
            text.contains("bind, create, delete, escalate, get, patch rbac.authorization.k8s.io/clusterroles \"op-manager\""),
            "{text}"
        );
        assert!(!text.contains("pods"), "{text}");
        assert!(
            text.contains("create, delete, get, patch configmaps \"cfg\" in namespace \"ops\""),
            "{text}"
        );
    }

    /// A role that itself grants `escalate`/`bind` on roles (trilio's operator does): the
    /// installer gets `escalate`/`bind` on that one role, not a copy of rules that would hand it
    /// `escalate` on every role.
    #[test]
    fn a_role_granting_escalate_and_bind_itself_gets_them_named_not_its_rules() {
        let mut objects = bundle();
        objects[2]["rules"] = json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings"],
             "verbs": ["create", "bind", "escalate"]},
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        ]);
        let grants = installer_grants(&spec(false), &objects, &[], &table()).unwrap();
        let text = lines(&grants).join("\n");
        assert!(
            text.contains("bind, create, delete, escalate, get, patch rbac.authorization.k8s.io/clusterroles \"op-manager\""),
            "{text}"
        );
        assert!(!text.contains("*/*"), "{text}");
        assert!(
            !text.contains("escalate rbac.authorization.k8s.io/clusterroles\n"),
            "{text}"
        );
        // The ConfigMap, no longer covered by a copied rule, is named.
        assert!(
            text.contains("create, delete, get, patch configmaps \"cfg\" in namespace \"ops\""),
            "{text}"
        );
    }

    #[test]
    fn pruned_objects_of_the_installed_revision_need_get_and_delete() {
        let installed = [ObjectRef {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some("ops".into()),
            name: "old".into(),
        }];
        let grants = installer_grants(&spec(false), &bundle()[..2], &installed, &table()).unwrap();
        assert!(
            lines(&grants).contains(&"delete, get serviceaccounts \"old\" in namespace \"ops\"".to_string()),
            "{:?}",
            lines(&grants)
        );
    }

    #[test]
    fn rules_group_only_what_was_asked_and_objects_are_labelled() {
        let grants = installer_grants(&spec(false), &bundle(), &[], &table()).unwrap();
        let objects = installer_objects(&spec(false), &grants);
        let kinds: Vec<(&str, &str)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("ServiceAccount", "ops"),
                ("ClusterRole", "-"),
                ("ClusterRoleBinding", "-"),
                ("Role", "ops"),
                ("RoleBinding", "ops"),
            ]
        );
        for o in &objects {
            assert_eq!(o["metadata"]["labels"][LABEL_INSTALLER_FOR], "op");
        }
        let rules: Vec<PolicyRule> = serde_json::from_value(objects[1]["rules"].clone()).unwrap();
        // Every rule's requests, expanded again, are exactly the cluster-wide grants.
        let expanded: BTreeSet<Access> = crate::apply::preflight::rule_accesses(&rules, None)
            .into_iter()
            .collect();
        let cluster: BTreeSet<Access> = by_scope(&grants).remove(&None).unwrap().into_iter().collect();
        assert_eq!(expanded, cluster);
        let role_rules: Vec<PolicyRule> = serde_json::from_value(objects[3]["rules"].clone()).unwrap();
        assert!(
            role_rules.iter().all(|r| r.resource_names.is_some()),
            "{role_rules:?}"
        );
    }

    #[test]
    fn covering_follows_rbac_matching() {
        let named = Access::resource("get", "", "pods", Some("a"), Some("p"));
        assert!(covers(&Access::resource("*", "", "pods", None, None), &named));
        assert!(covers(
            &Access::resource("get", "*", "*", Some("a"), None),
            &named
        ));
        assert!(!covers(
            &Access::resource("get", "", "pods", Some("b"), None),
            &named
        ));
        assert!(!covers(
            &named,
            &Access::resource("get", "", "pods", Some("a"), None)
        ));
        let status = Access::resource("update", "", "pods/status", None, None);
        assert!(covers(
            &Access::resource("update", "", "*/status", None, None),
            &status
        ));
        assert!(!covers(
            &Access::resource("update", "", "pods", None, None),
            &status
        ));
        assert!(covers(
            &Access::non_resource("get", "/metrics*"),
            &Access::non_resource("get", "/metrics/x")
        ));
    }

    #[test]
    fn diff_lists_what_an_upgrade_adds_and_drops() {
        let old = [
            Access::resource("get", "", "configmaps", Some("ops"), Some("a")),
            Access::resource("get", "", "secrets", Some("ops"), Some("s")),
        ];
        let new = [
            Access::resource("*", "", "configmaps", None, None),
            Access::resource("get", "", "services", Some("ops"), Some("svc")),
        ];
        let d = diff(&old, &new);
        assert_eq!(
            d.to_string(),
            "+ * configmaps\n+ get services \"svc\" in namespace \"ops\"\n- get secrets \"s\" in namespace \"ops\"\n"
        );
        assert!(diff(&new, &new).is_empty());
    }
}
