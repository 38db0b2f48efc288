//! The installer RBAC `olmv1 rbac` writes, against the real RBAC authorizer of the local
//! control plane, for every installable real bundle of `../shared/catalogs/*-v4.16` (the render
//! test's set, rendered for AllNamespaces):
//!
//! - the preflight's own decision (`AccessPlan::missing`) over the installer's rules reports
//!   nothing missing, for every bundle (in process, RBAC's matching as `admin::rbac::covers`);
//! - for a sample of bundles, against the real authorizer: applied as the command line applies
//!   it, the permission preflight (the controller's own review, under the installer policy, as
//!   the installer) reports nothing missing, and dropping any one rule makes it name exactly the
//!   requests that rule granted (each request it names is covered by the dropped rule; each
//!   request of the rule is named, unless the cluster's default roles grant it to every
//!   service account anyway);
//! - SSA creates authorised by `create` with `resourceNames` really create;
//! - snapshots of `olmv1 rbac` output for a hand-checked sample (`test/snapshots/rbac`).

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use olmv1::admin::installer::{FIELD_MANAGER, apply_installer, remove_installer};
use olmv1::admin::rbac::{InstallerSpec, covers, installer_grants, installer_name, installer_objects};
use olmv1::apply::lookups::ClusterLookups;
use olmv1::apply::preflight::{
    Access, AccessPlan, AccessPolicy, MissingPermissions, PreflightError, Requirement, ResourceInfo,
    ResourceTable, ServiceAccountRef, discover_resources, owner_finalizers_access, required_access,
    review_access, rule_accesses,
};
use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::bundle::render::render;
use serde_json::{Value, json};
use support::{CatalogBundle, Snapshots};

/// How many bundles get the real-authorizer and every-rule checks (spread evenly over the
/// installable ones).
const MINIMALITY_SAMPLE: usize = 20;
/// Bundles checked at once (each runs up to 16 reviews at a time).
const PARALLEL: usize = 5;
/// RBAC changes reach the authorizer through its informers: a generous bound on a busy machine.
const RBAC_SETTLE: Duration = Duration::from_secs(120);

/// One real bundle and its installer.
struct Case {
    id: String,
    extension: String,
    account: ServiceAccountRef,
    rendered: Vec<Value>,
    resources: ResourceTable,
    grants: Vec<Access>,
    objects: Vec<Value>,
}

impl Case {
    /// The preflight's plan for this bundle, exactly as `olmv1 rbac` computes it.
    fn plan(&self) -> AccessPlan {
        let mut plan = required_access(
            &self.rendered,
            &[],
            &self.account.namespace,
            &self.resources,
            &AccessPolicy::installer(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", self.id));
        plan.require(owner_finalizers_access(&self.extension));
        plan
    }

    /// What a preflight refusal names: every denied request; for a role or binding the
    /// installer may `escalate`/`bind`, that permission, else the role's rules it lacks.
    fn named(&self, missing: MissingPermissions) -> BTreeSet<Access> {
        let mut named: BTreeSet<Access> = missing.denied.into_iter().collect();
        for refusal in missing.refused_rbac {
            if self.grants.iter().any(|g| covers(g, &refusal.permission)) {
                named.insert(refusal.permission);
            } else {
                named.extend(refusal.uncovered);
            }
        }
        named
    }
}

/// The real preflight, as the installer: what it names missing (empty: it passes).
async fn preflight(client: &Client, case: &Case) -> BTreeSet<Access> {
    match review_access(client, &ClusterLookups::new(), &case.account, &case.plan()).await {
        Ok(()) => BTreeSet::new(),
        Err(PreflightError::MissingPermissions(m)) => case.named(m),
        Err(e) => panic!("{}: preflight failed: {e}", case.id),
    }
}

/// What the preflight names missing when the API server answers as the installer's rules grant
/// (RBAC's matching, in process): its own first and second rounds and `missing`.
fn missing_in_process(case: &Case) -> BTreeSet<Access> {
    let granted: Vec<Access> = case
        .objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
        .flat_map(|o| {
            let rules: Vec<PolicyRule> = serde_json::from_value(o["rules"].clone()).unwrap();
            rule_accesses(&rules, o["metadata"]["namespace"].as_str())
        })
        .collect();
    let decide = |a: &Access| granted.iter().any(|g| covers(g, a));
    let plan = case.plan();
    let mut decisions: std::collections::BTreeMap<Access, bool> = plan
        .first_round()
        .into_iter()
        .map(|a| (a.clone(), decide(&a)))
        .collect();
    let roles = std::collections::BTreeMap::new();
    for a in plan.second_round(&decisions, &roles) {
        let d = decide(&a);
        decisions.insert(a, d);
    }
    match plan.missing(&case.account, &decisions, &roles) {
        None => BTreeSet::new(),
        Some(m) => case.named(m),
    }
}

/// Which of `accesses` `account` may make (asked with SubjectAccessReview through the
/// preflight's own review).
async fn allowed(client: &Client, account: &ServiceAccountRef, accesses: &[Access]) -> BTreeSet<Access> {
    let plan = AccessPlan {
        requirements: accesses.iter().cloned().map(Requirement::Allowed).collect(),
    };
    let denied: BTreeSet<Access> = match review_access(client, &ClusterLookups::new(), account, &plan).await {
        Ok(()) => BTreeSet::new(),
        Err(PreflightError::MissingPermissions(m)) => m.denied.into_iter().collect(),
        Err(e) => panic!("review: {e}"),
    };
    accesses.iter().filter(|a| !denied.contains(a)).cloned().collect()
}

/// The kinds the bundle applies that this API server does not serve (ServiceMonitor, cert-manager
/// Issuer, ...) get a stand-in entry, so that the plan and the RBAC can be computed; RBAC only
/// compares strings, so the reviews are the same as on a cluster serving them. Returns how many.
fn add_stand_ins(table: &mut ResourceTable, rendered: &[Value]) -> usize {
    let mut added = 0;
    for object in rendered {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if table.lookup(group, version, kind).is_none() {
            let info = ResourceInfo {
                plural: format!("{}s", kind.to_lowercase()),
                namespaced: object["metadata"]["namespace"].is_string(),
            };
            table.insert(group, version, kind, info);
            added += 1;
        }
    }
    added
}

fn installable(bundle: &CatalogBundle, namespace: &str) -> Option<Vec<Value>> {
    let loaded =
        RegistryV1Bundle::from_catalog_bundle(&bundle.package, &bundle.name, &bundle.properties).ok()?;
    render(&loaded, namespace, None).ok()
}

/// Creates every namespace the installer's Roles go to (the install namespace exists).
async fn ensure_namespaces(client: &Client, objects: &[Value]) {
    let api = Api::<Namespace>::all(client.clone());
    for ns in objects.iter().filter_map(|o| o["metadata"]["namespace"].as_str()) {
        if api.get_opt(ns).await.unwrap().is_none() {
            let body = json!({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns, "labels": {"olmv1.test/fresh": "true"}}});
            let _ = api
                .create(&PostParams::default(), &serde_json::from_value(body).unwrap())
                .await;
        }
    }
}

async fn apply_role(client: &Client, role: &Value, rules: &[PolicyRule]) {
    let mut body = role.clone();
    body["rules"] = serde_json::to_value(rules).unwrap();
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match body["metadata"]["namespace"].as_str() {
        Some(ns) => {
            Api::<Role>::namespaced(client.clone(), ns)
                .patch(&name, &params, &Patch::Apply(&body))
                .await
                .unwrap();
        }
        None => {
            Api::<ClusterRole>::all(client.clone())
                .patch(&name, &params, &Patch::Apply(&body))
                .await
                .unwrap();
        }
    }
}

/// Drops each rule of each installer role in turn and checks what the preflight names.
/// Returns (rules checked, rules whose requests the cluster's default roles grant anyway).
async fn check_every_rule(client: &Client, case: &Case) -> Result<(usize, usize), String> {
    let nobody = ServiceAccountRef::new(case.account.namespace.clone(), "nobody-at-all");
    let mut checked = 0;
    let mut by_default = 0;
    let mut problems = Vec::new();
    for role in case
        .objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
    {
        let scope = role["metadata"]["namespace"].as_str();
        let rules: Vec<PolicyRule> = serde_json::from_value(role["rules"].clone()).unwrap();
        for (i, rule) in rules.iter().enumerate() {
            let own = rule_accesses(std::slice::from_ref(rule), scope);
            let default_granted = allowed(client, &nobody, &own).await;
            let expected: Vec<Access> = own
                .iter()
                .filter(|a| !default_granted.contains(*a))
                .cloned()
                .collect();
            let mut without = rules.clone();
            without.remove(i);
            apply_role(client, role, &without).await;
            checked += 1;
            if expected.is_empty() {
                by_default += 1;
                continue;
            }
            let probe = expected[0].clone();
            support::wait_for(
                &format!("{}: the authorizer to see rule {i} dropped", case.id),
                RBAC_SETTLE,
                || async {
                    if allowed(client, &case.account, std::slice::from_ref(&probe))
                        .await
                        .is_empty()
                    {
                        Ok(())
                    } else {
                        Err(format!("{probe} still allowed"))
                    }
                },
            )
            .await;
            let named = preflight(client, case).await;
            let foreign: Vec<String> = named
                .iter()
                .filter(|a| !own.iter().any(|r| covers(r, a)))
                .map(ToString::to_string)
                .collect();
            let unnamed: Vec<String> = expected
                .iter()
                .filter(|a| !named.contains(*a))
                .map(ToString::to_string)
                .collect();
            if !foreign.is_empty() || !unnamed.is_empty() {
                problems.push(format!(
                    "{}: dropping rule {i} of {} {:?} ({rule:?}): named but not of the rule: {foreign:?}; of the rule but not named: {unnamed:?}",
                    case.id,
                    role["kind"],
                    role["metadata"]["name"]
                ));
            }
        }
        apply_role(client, role, &rules).await;
    }
    // Restored: the preflight passes again.
    support::wait_for(
        &format!("{}: the preflight to pass with every rule restored", case.id),
        RBAC_SETTLE,
        || async {
            let named = preflight(client, case).await;
            if named.is_empty() {
                Ok(())
            } else {
                Err(format!("{named:?}"))
            }
        },
    )
    .await;
    if problems.is_empty() {
        Ok((checked, by_default))
    } else {
        Err(problems.join("\n"))
    }
}

/// The installer `olmv1 rbac` computes for `rendered` (extension `extension` in `namespace`), and
/// how many stand-in kinds its resource table needed.
fn case_of(
    id: String,
    rendered: Vec<Value>,
    namespace: &str,
    extension: String,
    base: &ResourceTable,
) -> (Case, usize) {
    let mut resources = base.clone();
    for crd in rendered
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        resources.add_crd(&serde_json::from_value(crd.clone()).unwrap());
    }
    let stand_ins = add_stand_ins(&mut resources, &rendered);
    let account_name = installer_name(&extension);
    let spec = InstallerSpec {
        extension: &extension,
        namespace,
        service_account: &account_name,
        allow_escalate: false,
    };
    let grants = installer_grants(&spec, &rendered, &[], &resources).unwrap_or_else(|e| panic!("{id}: {e}"));
    let objects = installer_objects(&spec, &grants);
    let case = Case {
        id,
        account: ServiceAccountRef::new(namespace.to_string(), account_name),
        extension,
        rendered,
        resources,
        grants,
        objects,
    };
    (case, stand_ins)
}

/// A bundle owning APIServices (`test/fixtures/bundles/aggregated-operator`): its installer names
/// the APIServices, the two bindings and the roles they bind (`bind`, not the roles' rules), in
/// kube-system where the auth-reader binding goes; applied, the real preflight passes, and
/// dropping any one rule makes it name exactly that rule's requests.
#[tokio::test]
async fn the_installer_of_a_bundle_owning_api_services_grants_exactly_what_they_need() {
    let client = support::client().await;
    let namespace = support::fresh_namespace(&client, "rbac-api").await;
    let base = discover_resources(&client, &ClusterLookups::new(), &[])
        .await
        .expect("discovery");
    let bundle = RegistryV1Bundle::from_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("test/fixtures/bundles/aggregated-operator"),
    )
    .expect("the fixture loads");
    let rendered = render(&bundle, &namespace, None).expect("it renders");
    let (case, stand_ins) = case_of(
        "aggregated-operator".into(),
        rendered,
        &namespace,
        support::fresh_name("rbac-api"),
        &base,
    );
    assert_eq!(
        stand_ins, 2,
        "cert-manager's Issuer and Certificate only: APIServices are served"
    );
    let granted: BTreeSet<String> = case.grants.iter().map(ToString::to_string).collect();
    for wanted in [
        "patch apiregistration.k8s.io/apiservices \"v1.metrics.example.com\"",
        "create apiregistration.k8s.io/apiservices \"v1beta1.metrics.example.com\"",
        "get apiregistration.k8s.io/apiservices \"v1beta1.metrics.example.com\"",
        "bind rbac.authorization.k8s.io/clusterroles \"system:auth-delegator\"",
        "bind rbac.authorization.k8s.io/roles \"extension-apiserver-authentication-reader\" in namespace \"kube-system\"",
        "patch rbac.authorization.k8s.io/rolebindings \"metrics-server-service-auth-reader\" in namespace \"kube-system\"",
        "patch rbac.authorization.k8s.io/clusterrolebindings \"metrics-server-service-system:auth-delegator\"",
    ] {
        assert!(
            granted.iter().any(|g| g.contains(wanted)),
            "{wanted} in {granted:#?}"
        );
    }
    assert!(
        !granted.iter().any(|g| g.contains("tokenreviews")
            || g.contains("subjectaccessreviews")
            || g.contains("configmaps \"extension-apiserver-authentication\"")),
        "bind on the two roles, not their rules: {granted:#?}"
    );
    assert!(missing_in_process(&case).is_empty());
    ensure_namespaces(&client, &case.objects).await;
    apply_installer(&client, &case.extension, &case.objects)
        .await
        .unwrap();
    support::wait_for("the preflight to pass", RBAC_SETTLE, || async {
        let named = preflight(&client, &case).await;
        if named.is_empty() {
            Ok(())
        } else {
            Err(format!("missing: {named:?}"))
        }
    })
    .await;
    let checked = check_every_rule(&client, &case).await;
    remove_installer(&client, &case.extension).await.unwrap();
    let (rules, _) = checked.unwrap_or_else(|problems| panic!("{problems}"));
    assert!(rules >= 10, "{rules} rules");
}

#[tokio::test]
async fn installer_rbac_of_every_real_bundle_passes_the_preflight_and_every_rule_is_needed() {
    let started = Instant::now();
    let client = support::client().await;
    let namespace = support::fresh_namespace(&client, "rbac").await;
    let run = support::fresh_name("rbac");
    let base = discover_resources(&client, &ClusterLookups::new(), &[])
        .await
        .expect("discovery");

    let mut cases = Vec::new();
    let mut stand_ins = 0;
    let bundles = support::read_v4_16_bundles();
    for (i, bundle) in bundles.iter().enumerate() {
        let Some(rendered) = installable(bundle, &namespace) else {
            continue;
        };
        let id = format!("{}/{}", bundle.catalog, bundle.name);
        let (case, added) = case_of(id, rendered, &namespace, format!("{run}-{i}"), &base);
        stand_ins += added;
        cases.push(Arc::new(case));
    }
    let in_process: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let named = missing_in_process(c);
            (!named.is_empty()).then(|| format!("{}: {named:?}", c.id))
        })
        .collect();
    assert!(
        in_process.is_empty(),
        "installers the preflight finds lacking: {in_process:#?}"
    );
    let computed = started.elapsed();

    // The sample's installers, applied as `olmv1 install` applies them, pass the real preflight.
    let step = (cases.len() / MINIMALITY_SAMPLE).max(1);
    let sample: Vec<Arc<Case>> = cases
        .iter()
        .step_by(step)
        .take(MINIMALITY_SAMPLE)
        .cloned()
        .collect();
    let client_ref = &client;
    let passed: Vec<Result<(), String>> = futures::stream::iter(sample.iter().cloned())
        .map(|case| async move {
            ensure_namespaces(client_ref, &case.objects).await;
            apply_installer(client_ref, &case.extension, &case.objects)
                .await
                .map_err(|e| format!("{}: {e}", case.id))?;
            support::wait_for(
                &format!("{}: the preflight to pass", case.id),
                RBAC_SETTLE,
                || async {
                    let named = preflight(client_ref, &case).await;
                    if named.is_empty() {
                        Ok(())
                    } else {
                        Err(format!("missing: {named:?}"))
                    }
                },
            )
            .await;
            Ok(())
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let failures: Vec<String> = passed.into_iter().filter_map(Result::err).collect();
    assert!(
        failures.is_empty(),
        "installers that could not be applied: {failures:#?}"
    );
    let all_passed = started.elapsed();

    // Minimality: every rule of a sample, dropped one at a time.
    let step = (cases.len() / MINIMALITY_SAMPLE).max(1);
    let sample: Vec<Arc<Case>> = cases
        .iter()
        .step_by(step)
        .take(MINIMALITY_SAMPLE)
        .cloned()
        .collect();
    let results: Vec<Result<(usize, usize), String>> = futures::stream::iter(sample.iter().cloned())
        .map(|case| async move { check_every_rule(client_ref, &case).await })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut rules_checked = 0;
    let mut rules_by_default = 0;
    let mut problems = Vec::new();
    for r in results {
        match r {
            Ok((checked, by_default)) => {
                rules_checked += checked;
                rules_by_default += by_default;
            }
            Err(e) => problems.push(e),
        }
    }

    for case in &sample {
        remove_installer(&client, &case.extension).await.unwrap();
    }
    let rules: usize = cases
        .iter()
        .flat_map(|c| c.objects.iter())
        .filter_map(|o| o["rules"].as_array().map(Vec::len))
        .sum();
    let grants: usize = cases.iter().map(|c| c.grants.len()).sum();
    println!(
        "installer RBAC: {} installable bundles of {}, {grants} grants in {rules} rules, {stand_ins} stand-in kinds; \
         computed and checked in process in {computed:.1?}; {} applied, passed the real preflight at \
         {all_passed:.1?}, \
         {rules_checked} rules dropped one at a time ({rules_by_default} granted to every account by the \
         cluster's default roles), done at {:.1?}",
        cases.len(),
        bundles.len(),
        sample.len(),
        started.elapsed()
    );
    assert!(
        problems.is_empty(),
        "rules whose drop the preflight did not name exactly:\n{}",
        problems.join("\n")
    );
    assert!(
        sample.len() >= 20,
        "only {} bundles in the minimality sample",
        sample.len()
    );
    assert!(cases.len() >= 400, "only {} installable bundles", cases.len());
}

/// kube-apiserver authorises the create half of a server-side apply with the object's name, so
/// `create` restricted by `resourceNames` lets the installer create exactly the objects it
/// names (and a plain POST create, which has no name to check, stays refused).
#[tokio::test]
async fn create_with_resource_names_allows_the_server_side_apply_that_creates_the_object() {
    let client = support::client().await;
    let namespace = support::fresh_namespace(&client, "rbac-ssa").await;
    let extension = support::fresh_name("rbac-ssa");
    let rendered = vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "cfg", "namespace": namespace}, "data": {"a": "b"}})];
    let resources = discover_resources(&client, &ClusterLookups::new(), &rendered)
        .await
        .unwrap();
    let account_name = installer_name(&extension);
    let spec = InstallerSpec {
        extension: &extension,
        namespace: &namespace,
        service_account: &account_name,
        allow_escalate: false,
    };
    let grants = installer_grants(&spec, &rendered, &[], &resources).unwrap();
    let objects = installer_objects(&spec, &grants);
    let role = objects.iter().find(|o| o["kind"] == "Role").unwrap();
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"],
                "verbs": ["create", "delete", "get", "patch"]}])
    );
    apply_installer(&client, &extension, &objects).await.unwrap();
    let account = ServiceAccountRef::new(namespace.clone(), account_name);
    let mut config = support::env().config().await;
    config.auth_info.impersonate = Some(account.user_name());
    config.auth_info.impersonate_groups = Some(account.groups());
    let as_installer = Client::try_from(config).unwrap();
    let api = Api::<ConfigMap>::namespaced(as_installer, &namespace);
    let created = support::wait_for("the installer's SSA to create cfg", RBAC_SETTLE, || async {
        api.patch(
            "cfg",
            &PatchParams::apply("olmv1-test").force(),
            &Patch::Apply(&rendered[0]),
        )
        .await
        .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(created.name_any(), "cfg");
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap();
    let refused = api.create(&PostParams::default(), &other).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let other_ssa = api
        .patch(
            "other",
            &PatchParams::apply("olmv1-test").force(),
            &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&other_ssa, kube::Error::Api(s) if s.code == 403),
        "{other_ssa:?}"
    );
    remove_installer(&client, &extension).await.unwrap();
}

/// Bundles whose `olmv1 rbac` output is pinned in `test/snapshots/rbac/<catalog>__<bundle>.yaml`
/// (hand-checked: see docs/cli.md): (catalog, package, version).
/// (Bundles with webhooks need cert-manager's kinds, which the test control plane does not serve.)
const SNAPSHOT_BUNDLES: [(&str, &str, &str); 2] = [
    ("community-operators-v4.16", "apicurio-registry-3", "3.3.1"),
    (
        "certified-operators-v4.16",
        "stackable-zookeeper-operator",
        "25.11.0",
    ),
];

fn snapshot_path(catalog: &str, package: &str, version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/rbac")
        .join(format!("{catalog}__{package}.v{version}.yaml"))
}

fn check_snapshots(snapshots: Snapshots) {
    let root = support::shared_catalogs_root();
    for (catalog, package, version) in SNAPSHOT_BUNDLES {
        let out = support::run(
            support::env()
                .command(support::olmv1_bin())
                .args([
                    "rbac",
                    "--package",
                    package,
                    "--version",
                    version,
                    "-n",
                    "operators",
                    // As on a cluster without OLM classic's OperatorCondition CRD, whatever this
                    // shared control plane serves.
                    "--operator-conditions",
                    "off",
                    "--catalog",
                ])
                .arg(format!("{catalog}={}", root.join(catalog).display()))
                .env("RUST_LOG", "off"),
        );
        let text = out.ok();
        if let Err(e) = snapshots.check(&snapshot_path(catalog, package, version), &text) {
            panic!("olmv1 rbac of {catalog}/{package} {version}: {e}");
        }
    }
}

#[test]
fn olmv1_rbac_prints_the_pinned_installer_of_sample_bundles() {
    check_snapshots(Snapshots::Compare);
}

#[test]
#[ignore = "writes the snapshot files: run by hack/update-snapshots.sh only"]
fn write_snapshots() {
    check_snapshots(Snapshots::Write);
}
