use super::*;
use serde_json::json;

fn table() -> ResourceTable {
    let mut t = ResourceTable::new();
    let entries: &[(&str, &str, &str, &str, bool)] = &[
        ("", "v1", "ServiceAccount", "serviceaccounts", true),
        ("", "v1", "ConfigMap", "configmaps", true),
        ("", "v1", "Service", "services", true),
        ("", "v1", "Namespace", "namespaces", false),
        ("apps", "v1", "Deployment", "deployments", true),
        (RBAC_GROUP, "v1", "Role", "roles", true),
        (RBAC_GROUP, "v1", "RoleBinding", "rolebindings", true),
        (RBAC_GROUP, "v1", "ClusterRole", "clusterroles", false),
        (
            RBAC_GROUP,
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        ),
        (
            "operators.coreos.com",
            "v2",
            "OperatorCondition",
            "operatorconditions",
            true,
        ),
    ];
    for &(group, version, kind, plural, namespaced) in entries {
        t.insert(
            group,
            version,
            kind,
            ResourceInfo {
                plural: plural.to_string(),
                namespaced,
            },
        );
    }
    t
}

fn sa() -> ServiceAccountRef {
    ServiceAccountRef::new("ops", "installer")
}

fn deployment(ns: Option<&str>) -> Value {
    let mut d =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"}, "spec": {}});
    if let Some(ns) = ns {
        d["metadata"]["namespace"] = json!(ns);
    }
    d
}

fn allowed_accesses(plan: &AccessPlan) -> Vec<String> {
    plan.requirements
        .iter()
        .filter_map(|r| match r {
            Requirement::Allowed(a) => Some(a.to_string()),
            _ => None,
        })
        .collect()
}

fn plan_for(objects: &[Value], previous: &[ObjectRef]) -> AccessPlan {
    required_access(objects, previous, "ops", &table(), &AccessPolicy::default()).expect("plan")
}

/// An OperatorCondition is applied as any object, and its status patched: the controller
/// mirrors the operator's conditions there as the installer.
#[test]
fn an_operator_condition_also_needs_patch_on_its_status() {
    let oc = json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": "op.v1"}, "spec": {}});
    assert_eq!(
        allowed_accesses(&plan_for(&[oc], &[])),
        [
            r#"create operators.coreos.com/operatorconditions "op.v1" in namespace "ops""#,
            r#"get operators.coreos.com/operatorconditions "op.v1" in namespace "ops""#,
            r#"patch operators.coreos.com/operatorconditions "op.v1" in namespace "ops""#,
            r#"patch operators.coreos.com/operatorconditions/status "op.v1" in namespace "ops""#,
        ]
    );
}

#[test]
fn server_side_apply_needs_get_create_patch_on_each_named_object() {
    let plan = plan_for(&[deployment(Some("x"))], &[]);
    assert_eq!(
        allowed_accesses(&plan),
        [
            r#"create apps/deployments "op" in namespace "x""#,
            r#"get apps/deployments "op" in namespace "x""#,
            r#"patch apps/deployments "op" in namespace "x""#,
        ]
    );
}

#[test]
fn namespaced_objects_without_namespace_go_to_the_install_namespace_and_cluster_objects_have_none() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra"}});
    let plan = plan_for(&[deployment(None), ns], &[]);
    let accesses = allowed_accesses(&plan);
    assert!(
        accesses.contains(&r#"patch namespaces "extra""#.to_string()),
        "{accesses:?}"
    );
    assert!(
        accesses.contains(&r#"patch apps/deployments "op" in namespace "ops""#.to_string()),
        "{accesses:?}"
    );
}

#[test]
fn upstream_policy_adds_collection_verbs_and_update_delete() {
    let plan = required_access(
        &[deployment(Some("x"))],
        &[],
        "ops",
        &table(),
        &AccessPolicy::upstream(),
    )
    .unwrap();
    let accesses = allowed_accesses(&plan);
    for expected in [
        r#"list apps/deployments in namespace "x""#,
        r#"watch apps/deployments in namespace "x""#,
        r#"create apps/deployments in namespace "x""#,
        r#"update apps/deployments "op" in namespace "x""#,
        r#"delete apps/deployments "op" in namespace "x""#,
    ] {
        assert!(
            accesses.contains(&expected.to_string()),
            "missing {expected} in {accesses:?}"
        );
    }
}

#[test]
fn custom_resources_resolve_through_crds_of_the_same_bundle() {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }
    }))
    .unwrap();
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});

    let err = required_access(
        std::slice::from_ref(&widget),
        &[],
        "ops",
        &table(),
        &AccessPolicy::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"no resource type is served for kind "Widget" in apiVersion "example.com/v1" (object "w")"#
    );
    assert!(!err.is_terminal());

    let mut resources = table();
    resources.add_crd(&crd);
    let plan = required_access(&[widget], &[], "ops", &resources, &AccessPolicy::default()).unwrap();
    assert!(
        allowed_accesses(&plan).contains(&r#"patch example.com/widgets "w" in namespace "ops""#.to_string())
    );
}

#[test]
fn objects_dropped_by_the_new_bundle_need_delete() {
    let previous = vec![
        ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("x".into()),
            name: "old".into(),
        },
        // Same object, another version of its group: kept, not pruned.
        ObjectRef {
            api_version: "apps/v1beta1".into(),
            kind: "Deployment".into(),
            namespace: Some("x".into()),
            name: "op".into(),
        },
        // A kind no longer served: nothing left to delete.
        ObjectRef {
            api_version: "gone.example.com/v1".into(),
            kind: "Gone".into(),
            namespace: None,
            name: "g".into(),
        },
    ];
    let plan = plan_for(&[deployment(Some("x"))], &previous);
    let accesses = allowed_accesses(&plan);
    assert!(
        accesses.contains(&r#"delete configmaps "old" in namespace "x""#.to_string()),
        "{accesses:?}"
    );
    assert!(
        !accesses.iter().any(|a| a.starts_with("delete apps/deployments")),
        "{accesses:?}"
    );
    assert_eq!(accesses.len(), 4, "{accesses:?}");
}

#[test]
fn invalid_objects_are_terminal_and_named_by_position() {
    let err = required_access(
        &[deployment(None), json!({"apiVersion": "v1", "kind": "ConfigMap"})],
        &[],
        "ops",
        &table(),
        &AccessPolicy::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bundle object 1 cannot be applied: it has no metadata.name"
    );
    assert!(err.is_terminal());
}

#[test]
fn rules_expand_to_accesses() {
    let rules: Vec<PolicyRule> = serde_json::from_value(json!([
        {"apiGroups": ["", "apps"], "resources": ["pods", "deployments/scale"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["update"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]))
    .unwrap();
    let accesses: Vec<String> = rule_accesses(&rules, Some("x"))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        accesses,
        [
            r#"update configmaps "a" in namespace "x""#,
            r#"update configmaps "b" in namespace "x""#,
            r#"get deployments/scale in namespace "x""#,
            r#"list deployments/scale in namespace "x""#,
            r#"get pods in namespace "x""#,
            r#"list pods in namespace "x""#,
            r#"get apps/deployments/scale in namespace "x""#,
            r#"list apps/deployments/scale in namespace "x""#,
            r#"get apps/pods in namespace "x""#,
            r#"list apps/pods in namespace "x""#,
            r#"get non-resource URL "/metrics""#,
        ]
    );
}

fn rbac_bundle() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "op-manager"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "op-manager"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "op-manager"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "x"}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "op-view", "namespace": "x"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "x"}]
        }),
    ]
}

#[test]
fn roles_and_bindings_need_escalate_or_bind_or_the_rules_they_grant() {
    let plan = plan_for(&rbac_bundle(), &[]);
    let rbac: Vec<&Requirement> = plan
        .requirements
        .iter()
        .filter(|r| !matches!(r, Requirement::Allowed(_)))
        .collect();
    assert_eq!(
        rbac,
        [
            &Requirement::RoleRules {
                escalate: Access::resource("escalate", RBAC_GROUP, "clusterroles", None, Some("op-manager")),
                rules: vec![
                    Access::resource("list", "", "pods", None, None),
                    Access::resource("watch", "", "pods", None, None),
                ],
            },
            &Requirement::BindingRules {
                bind: Access::resource("bind", RBAC_GROUP, "clusterroles", None, Some("op-manager")),
                role: RoleRef {
                    kind: "ClusterRole".into(),
                    namespace: None,
                    name: "op-manager".into()
                },
                rules_namespace: None,
                bundle_rules: Some(vec![
                    Access::resource("list", "", "pods", None, None),
                    Access::resource("watch", "", "pods", None, None),
                ]),
            },
            &Requirement::BindingRules {
                bind: Access::resource("bind", RBAC_GROUP, "clusterroles", Some("x"), Some("view")),
                role: RoleRef {
                    kind: "ClusterRole".into(),
                    namespace: None,
                    name: "view".into()
                },
                rules_namespace: Some("x".into()),
                bundle_rules: None,
            },
        ]
    );
}

#[test]
fn aggregated_cluster_roles_need_every_permission() {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "agg"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}
    });
    let plan = plan_for(&[role], &[]);
    let rules = plan.requirements.iter().find_map(|r| match r {
        Requirement::RoleRules { rules, .. } => Some(rules.clone()),
        _ => None,
    });
    assert_eq!(
        rules.unwrap(),
        [
            Access::resource("*", "*", "*", None, None),
            Access::non_resource("*", "*")
        ]
    );
}

/// Decisions: everything in `allowed` is allowed, the rest of `reviewed` denied.
fn decide(reviewed: impl IntoIterator<Item = Access>, allowed: &[Access]) -> BTreeMap<Access, bool> {
    reviewed
        .into_iter()
        .map(|a| (a.clone(), allowed.contains(&a)))
        .collect()
}

#[test]
fn nothing_missing_when_everything_is_allowed() {
    let plan = plan_for(&[deployment(Some("x"))], &[]);
    let all: Vec<Access> = plan.first_round().into_iter().collect();
    let decisions = decide(all.clone(), &all);
    assert_eq!(plan.missing(&sa(), &decisions, &BTreeMap::new()), None);
}

#[test]
fn escalate_and_bind_make_rule_checks_unnecessary() {
    let plan = plan_for(&rbac_bundle(), &[]);
    let first: Vec<Access> = plan.first_round().into_iter().collect();
    let decisions = decide(first.clone(), &first);
    assert!(plan.roles_to_fetch(&decisions).is_empty());
    assert!(plan.second_round(&decisions, &BTreeMap::new()).is_empty());
    assert_eq!(plan.missing(&sa(), &decisions, &BTreeMap::new()), None);
}

#[test]
fn holding_the_rules_is_as_good_as_escalate_and_bind() {
    let plan = plan_for(&rbac_bundle(), &[]);
    let first: Vec<Access> = plan.first_round().into_iter().collect();
    let plain: Vec<Access> = first
        .iter()
        .filter(|a| a.verb != "escalate" && a.verb != "bind")
        .cloned()
        .collect();
    let mut decisions = decide(first, &plain);

    let to_fetch = plan.roles_to_fetch(&decisions);
    let view = RoleRef {
        kind: "ClusterRole".into(),
        namespace: None,
        name: "view".into(),
    };
    assert_eq!(
        to_fetch.into_iter().collect::<Vec<_>>(),
        std::slice::from_ref(&view)
    );
    let view_rules: Vec<PolicyRule> =
        serde_json::from_value(json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]))
            .unwrap();
    let fetched = BTreeMap::from([(view, view_rules)]);

    let second: Vec<Access> = plan.second_round(&decisions, &fetched).into_iter().collect();
    assert_eq!(
        second.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["list pods", "watch pods", r#"get configmaps in namespace "x""#]
    );
    decisions.extend(decide(second.clone(), &second));
    assert_eq!(plan.missing(&sa(), &decisions, &fetched), None);
}

/// kube-apiserver reads the rules of a bound role it does not hold `bind` on, and a role that
/// does not exist cannot be read: the binding is refused, so `bind` is what is missing.
#[test]
fn binding_a_role_the_cluster_does_not_have_needs_bind() {
    let plan = plan_for(&rbac_bundle(), &[]);
    let first: Vec<Access> = plan.first_round().into_iter().collect();
    let bind_view = Access::resource("bind", RBAC_GROUP, "clusterroles", Some("x"), Some("view"));
    let allowed: Vec<Access> = first.iter().filter(|a| **a != bind_view).cloned().collect();
    let decisions = decide(first, &allowed);
    assert_eq!(plan.second_round(&decisions, &BTreeMap::new()), BTreeSet::new());
    let missing = plan
        .missing(&sa(), &decisions, &BTreeMap::new())
        .expect("refused");
    assert_eq!(missing.denied, [bind_view]);
    assert!(missing.refused_rbac.is_empty());
    // The same role, existing with no rules: binding it escalates nothing.
    let view = RoleRef {
        kind: "ClusterRole".into(),
        namespace: None,
        name: "view".into(),
    };
    assert_eq!(
        plan.missing(&sa(), &decisions, &BTreeMap::from([(view, vec![])])),
        None
    );
}

#[test]
fn missing_permissions_are_listed_sorted_grouped_and_once() {
    let mut objects = rbac_bundle();
    objects.push(deployment(Some("x")));
    objects.push(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "x"}}),
    );
    let previous = vec![ObjectRef {
        api_version: "v1".into(),
        kind: "Service".into(),
        namespace: Some("x".into()),
        name: "old-metrics".into(),
    }];
    let plan = plan_for(&objects, &previous);
    // The service account may only get and patch the deployment, manage its ServiceAccount, and
    // list pods; no escalate, no bind.
    let granted = [
        Access::resource("get", "apps", "deployments", Some("x"), Some("op")),
        Access::resource("patch", "apps", "deployments", Some("x"), Some("op")),
        Access::resource("get", "", "serviceaccounts", Some("x"), Some("op")),
        Access::resource("create", "", "serviceaccounts", Some("x"), Some("op")),
        Access::resource("patch", "", "serviceaccounts", Some("x"), Some("op")),
        Access::resource("list", "", "pods", None, None),
    ];
    let mut decisions = decide(plan.first_round(), &granted);
    let fetched = BTreeMap::from([(
        RoleRef {
            kind: "ClusterRole".into(),
            namespace: None,
            name: "view".into(),
        },
        serde_json::from_value(
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
        )
        .unwrap(),
    )]);
    decisions.extend(decide(plan.second_round(&decisions, &fetched), &granted));
    let missing = plan
        .missing(&sa(), &decisions, &fetched)
        .expect("permissions are missing");
    assert_eq!(
        missing.to_string(),
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[] Resources:[pods] Verbs:[watch]
  Namespace:\"\" APIGroups:[rbac.authorization.k8s.io] Resources:[clusterrolebindings] ResourceNames:[op-manager] Verbs:[create,get,patch]
  Namespace:\"\" APIGroups:[rbac.authorization.k8s.io] Resources:[clusterroles] ResourceNames:[op-manager] Verbs:[create,get,patch]
  Namespace:\"x\" APIGroups:[] Resources:[configmaps] Verbs:[get,list]
  Namespace:\"x\" APIGroups:[] Resources:[services] ResourceNames:[old-metrics] Verbs:[delete]
  Namespace:\"x\" APIGroups:[apps] Resources:[deployments] ResourceNames:[op] Verbs:[create]
  Namespace:\"x\" APIGroups:[rbac.authorization.k8s.io] Resources:[rolebindings] ResourceNames:[op-view] Verbs:[create,get,patch]
or, instead of holding every rule of the role it names: bind rbac.authorization.k8s.io/clusterroles \"op-manager\"
or, instead of holding every rule of the role it names: escalate rbac.authorization.k8s.io/clusterroles \"op-manager\"
or, instead of holding every rule of the role it names: bind rbac.authorization.k8s.io/clusterroles \"view\" in namespace \"x\""
    );
    let err = PreflightError::from(missing);
    assert!(!err.is_terminal());
}

#[test]
fn owner_finalizers_update_is_required_and_reported_with_the_other_missing_rules() {
    let mut plan = plan_for(&[deployment(Some("x"))], &[]);
    plan.require(owner_finalizers_access("my-ext"));
    plan.require(owner_finalizers_access("my-ext"));
    let accesses = allowed_accesses(&plan);
    assert_eq!(
        accesses
            .iter()
            .filter(|a| a.contains("clusterextensions/finalizers"))
            .collect::<Vec<_>>(),
        [r#"update olm.operatorframework.io/clusterextensions/finalizers "my-ext""#],
        "required once, named by the extension: {accesses:?}"
    );
    let granted = [
        Access::resource("get", "apps", "deployments", Some("x"), Some("op")),
        Access::resource("create", "apps", "deployments", Some("x"), Some("op")),
    ];
    let decisions = decide(plan.first_round(), &granted);
    let missing = plan
        .missing(&sa(), &decisions, &BTreeMap::new())
        .expect("permissions are missing");
    assert_eq!(
        missing.to_string(),
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[olm.operatorframework.io] Resources:[clusterextensions/finalizers] ResourceNames:[my-ext] Verbs:[update]
  Namespace:\"x\" APIGroups:[apps] Resources:[deployments] ResourceNames:[op] Verbs:[patch]"
    );
    let mut all = plan.first_round().into_iter().collect::<Vec<_>>();
    all.retain(|a| a.verb != "update");
    let decisions = decide(plan.first_round(), &all);
    assert_eq!(
        plan.missing(&sa(), &decisions, &BTreeMap::new())
            .map(|m| m.to_string()),
        Some(
            "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[olm.operatorframework.io] Resources:[clusterextensions/finalizers] ResourceNames:[my-ext] Verbs:[update]"
                .to_string()
        ),
        "the finalizers rule alone is reported"
    );
}

#[test]
fn missing_permissions_use_upstreams_rule_layout_for_every_kind_of_request() {
    let missing = MissingPermissions {
        service_account: sa(),
        denied: vec![
            Access::non_resource("get", "/metrics"),
            Access::resource("list", "", "pods", None, None),
            Access::resource("watch", "", "pods", None, None),
            Access::resource("get", "*", "*", Some("x"), None),
            Access::resource("*", "*", "*", Some("x"), None),
            Access::resource("patch", "", "services", Some("x"), Some("metrics")),
        ],
        refused_rbac: vec![],
    };
    assert_eq!(
        missing.to_string(),
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:
  Namespace:\"\" APIGroups:[] Resources:[pods] Verbs:[list,watch]
  Namespace:\"\" Verbs:[get] NonResourceURLs:[/metrics]
  Namespace:\"x\" APIGroups:[*] Resources:[*] Verbs:[*]
  Namespace:\"x\" APIGroups:[] Resources:[services] ResourceNames:[metrics] Verbs:[patch]"
    );
}
