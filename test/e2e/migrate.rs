//! `olmv1 migrate check` and `olmv1 migrate catalogs` against classic's footprint laid down on
//! the local control plane (`classic.rs`): each verdict and reason, and the ClusterCatalogs made
//! from CatalogSources.

use std::collections::{BTreeMap, BTreeSet};

use kube::{Api, api::DynamicObject};
use olmv1_api::v1::ClusterCatalog;
use serde_json::{Value, json};

use crate::{
    classic::{self, Classic, ClassicInstall, Mode},
    components::{self, olmv1},
    fixtures::{Bundle, Channel, Package},
    one_version, support,
};

pub(crate) fn json_out(out: support::CmdOutput) -> Value {
    let text = out.ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The row of `install`'s Subscription in `migrate check -n NS -o json`.
pub(crate) fn check_row(install: &ClassicInstall) -> Value {
    let rows = json_out(olmv1(&[
        "migrate",
        "check",
        &install.subscription,
        "-n",
        &install.namespace,
        "-o",
        "json",
    ]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    rows[0].clone()
}

fn codes(row: &Value) -> BTreeSet<String> {
    row["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["blocking"] == true)
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect()
}

fn reason<'a>(row: &'a Value, code: &str) -> &'a Value {
    row["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == code)
        .unwrap_or_else(|| panic!("no reason {code}: {row:#}"))
}

/// `migrate catalogs` for real, for `install`'s CatalogSource only (tests run side by side);
/// waits for the ClusterCatalog made from it to serve, and returns its name.
pub(crate) async fn migrate_catalogs(client: &kube::Client, install: &ClassicInstall) -> String {
    let plan = json_out(olmv1(&[
        "migrate",
        "catalogs",
        &install.catalog_source,
        "-n",
        &install.catalog_namespace,
        "-o",
        "json",
    ]));
    assert_eq!(plan.as_array().map(Vec::len), Some(1), "{plan:#}");
    let from = format!("{}/{}", install.catalog_namespace, install.catalog_source);
    let line = plan
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["catalogSource"] == from.as_str())
        .unwrap_or_else(|| panic!("no plan line for {from}: {plan:#}"))
        .clone();
    let name = match line["action"].as_str().unwrap() {
        "create" | "update" => line["clusterCatalog"].as_str().unwrap().to_string(),
        "served" => line["detail"].as_str().unwrap().to_string(),
        other => panic!("{from}: {other}: {line:#}"),
    };
    components::wait_catalog_serving(client, &name).await;
    name
}

#[tokio::test]
async fn a_classic_operator_with_its_catalog_served_is_eligible_and_keeps_its_pods() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let package = support::fresh_name("mig-ok");
    let install = classic::lay_down(&client, &Classic::new(one_version(&package))).await;

    // The footprint, as classic leaves it.
    let deployment = classic::wait_available(&client, &install.namespace, &install.deployment).await;
    let owner = &deployment.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        (
            "ClusterServiceVersion",
            install.csv.as_str(),
            install.csv_uid.as_str()
        )
    );
    let labels = deployment.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["olm.owner"], install.csv);
    assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
    let template = deployment.spec.as_ref().unwrap().template.clone();
    let annotations = template.metadata.as_ref().unwrap().annotations.clone().unwrap();
    assert_eq!(annotations["olm.operatorGroup"], install.operator_group);
    assert_eq!(annotations["olm.targetNamespaces"], "");
    let env = template.spec.as_ref().unwrap().containers[0].env.clone().unwrap();
    assert!(
        env.iter()
            .any(|e| e.name == "OPERATOR_CONDITION_NAME" && e.value.as_deref() == Some(install.csv.as_str()))
    );
    let subscription: DynamicObject =
        Api::namespaced_with(client.clone(), &install.namespace, &classic::subscriptions())
            .get(&install.subscription)
            .await
            .unwrap();
    assert_eq!(subscription.data["status"]["installedCSV"], install.csv.as_str());
    assert_eq!(subscription.data["status"]["state"], "AtLatestKnown");
    let plan: DynamicObject =
        Api::namespaced_with(client.clone(), &install.namespace, &classic::install_plans())
            .get(&install.install_plan)
            .await
            .unwrap();
    assert_eq!(plan.data["status"]["phase"], "Complete");
    assert_eq!(
        plan.data["status"]["bundleLookups"][0]["path"],
        install.bundle_image.as_str()
    );
    assert_eq!(
        plan.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Subscription"
    );

    // No ClusterCatalog serves the CatalogSource's image yet.
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Blocked", "{row:#}");
    assert_eq!(
        codes(&row),
        BTreeSet::from(["NoClusterCatalog".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "NoClusterCatalog")["message"],
        format!(
            "no ClusterCatalog serves the image {} of CatalogSource {}/{}",
            install.catalog_image, install.catalog_namespace, install.catalog_source
        )
    );
    assert_eq!(
        reason(&row, "NoClusterCatalog")["fix"],
        "run `olmv1 migrate catalogs`"
    );

    // catalogs --dry-run writes nothing; catalogs makes it with the image, priority, interval.
    let dry = olmv1(&["migrate", "catalogs", "--dry-run"]).ok();
    eprintln!("{dry}");
    let line = dry
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "{}/{}",
                install.catalog_namespace, install.catalog_source
            ))
        })
        .unwrap_or_else(|| panic!("{dry}"));
    assert!(line.contains("would create"), "{line}");
    let catalogs = Api::<ClusterCatalog>::all(client.clone());
    assert!(catalogs.get_opt(&install.catalog_source).await.unwrap().is_none());
    let name = migrate_catalogs(&client, &install).await;
    let made = catalogs.get(&name).await.unwrap();
    let image = made.spec.source.image.as_ref().unwrap();
    assert_eq!(image.reference, install.catalog_image);
    assert_eq!(image.poll_interval_minutes, Some(10));
    assert_eq!(made.spec.priority, -100);
    assert_eq!(
        made.metadata.annotations.as_ref().unwrap()["olmv1.operatorframework.io/catalogsource"],
        format!("{}/{}", install.catalog_namespace, install.catalog_source)
    );
    // The CatalogSource is kept; a second run changes nothing.
    let sources: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &install.catalog_namespace,
        &classic::catalog_sources(),
    );
    assert!(sources.get_opt(&install.catalog_source).await.unwrap().is_some());
    let again = olmv1(&["migrate", "catalogs", "-n", &install.catalog_namespace]).ok();
    eprintln!("{again}");
    assert!(
        again.lines().any(|l| l.starts_with(&format!(
            "{}/{}",
            install.catalog_namespace, install.catalog_source
        )) && l.contains(&format!("served by {name}"))),
        "{again}"
    );

    // Now eligible, and olmv1 renders the pod template as it runs.
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    assert_eq!(row["podsRestart"], "no", "{row:#}");
    assert_eq!(row["clusterCatalog"], name.as_str());
    assert_eq!(row["installedCSV"], install.csv.as_str());
    assert_eq!(row["version"], "1.0.0");
    let text = olmv1(&["migrate", "check", "-n", &install.namespace]).ok();
    eprintln!("{text}");
    assert!(text.starts_with("NAMESPACE"), "{text}");
    assert!(text.contains("Eligible"), "{text}");

    // --delete-catalogsource deletes it once the ClusterCatalog exists; a CatalogSource named
    // needs its namespace, and one that is not there is named.
    let (source, ns) = (&install.catalog_source, &install.catalog_namespace);
    assert_eq!(
        olmv1(&["migrate", "catalogs", source]).err().trim(),
        "olmv1 migrate catalogs: a CATALOGSOURCE is named with its namespace: -n NAMESPACE"
    );
    olmv1(&["migrate", "catalogs", source, "-n", ns, "--delete-catalogsource"]).ok();
    assert!(sources.get_opt(source).await.unwrap().is_none());
    assert_eq!(
        olmv1(&["migrate", "catalogs", source, "-n", ns]).err().trim(),
        format!("olmv1 migrate catalogs: CatalogSource {ns}/{source} not found")
    );
}

/// A package with 1.0.0 and 1.1.0, 1.1.0 replacing 1.0.0.
fn two(package: &str) -> Package {
    crate::two_versions(package)
}

#[tokio::test]
async fn each_blocking_case_is_named_with_what_to_do() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let marketplace = support::fresh_namespace(&client, "olm-market").await;
    let lay = |spec: Classic| {
        let client = client.clone();
        let spec = spec.in_catalog_namespace(&marketplace);
        async move { classic::lay_down(&client, &spec).await }
    };

    // A CSV that is not Succeeded.
    let failed =
        lay(Classic::new(one_version(&support::fresh_name("mig-failed"))).mode(Mode::OwnNamespace)).await;
    classic::patch(&client, &classic::csvs(), &failed.namespace, &failed.csv,
        json!({"status": {"phase": "Failed", "reason": "ComponentUnhealthy", "message": "installing: deployment not ready"}}), true).await;

    // An upgrade waiting for approval.
    let manual_package = support::fresh_name("mig-manual");
    let mut manual_spec = Classic::new(two(&manual_package));
    manual_spec.version = "1.0.0".into();
    manual_spec.approval = "Manual".into();
    let manual = lay(manual_spec).await;
    classic::patch(
        &client,
        &classic::install_plans(),
        &manual.namespace,
        &manual.install_plan,
        json!({"status": {"phase": "RequiresApproval"}}),
        true,
    )
    .await;
    classic::patch(&client, &classic::install_plans(), &manual.namespace, &manual.install_plan,
        json!({"spec": {"clusterServiceVersionNames": [format!("{manual_package}.v1.1.0")], "approved": false}}), false).await;
    classic::patch(
        &client,
        &classic::subscriptions(),
        &manual.namespace,
        &manual.subscription,
        json!({"status": {"currentCSV": format!("{manual_package}.v1.1.0"), "state": "UpgradePending"}}),
        true,
    )
    .await;

    // A MultiNamespace OperatorGroup.
    let a = support::fresh_namespace(&client, "mig-target").await;
    let b = support::fresh_namespace(&client, "mig-target").await;
    let multi = lay(Classic::new(one_version(&support::fresh_name("mig-multi")))
        .mode(Mode::MultiNamespace(vec![a.clone(), b.clone()])))
    .await;

    // Subscription.spec.config with a field v1 cannot carry (and env it can).
    let watched = support::fresh_namespace(&client, "mig-watched").await;
    let config = lay(Classic::new(one_version(&support::fresh_name("mig-config")))
        .mode(Mode::SingleNamespace(watched.clone()))
        .config(
            json!({"selector": {"matchLabels": {"a": "b"}}, "env": [{"name": "LOG", "value": "debug"}]}),
        ))
    .await;

    // An OperatorCondition saying Upgradeable=False (an owned APIService no longer blocks:
    // migrate_aggregated.rs converts one).
    let api = lay(Classic::new(one_version(&support::fresh_name("mig-held")))).await;
    classic::patch(&client, &classic::operator_conditions(), &api.namespace, &api.csv,
        json!({"spec": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "a data migration is running", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}), false).await;

    // Two Subscriptions for one package.
    let shared = one_version(&support::fresh_name("mig-twice"));
    let first = lay(Classic::new(shared.clone())).await;
    let second = lay(Classic::new(shared)).await;

    // A catalog that no longer carries the installed bundle (republished without 1.0.0).
    let pruned_package = support::fresh_name("mig-pruned");
    let mut pruned_spec = Classic::new(two(&pruned_package));
    pruned_spec.version = "1.0.0".into();
    let pruned = lay(pruned_spec).await;
    let only_new = Package {
        name: pruned_package.clone(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.1.0"])],
        bundles: vec![Bundle::new("1.1.0")],
        deprecations: vec![],
    };
    crate::fixtures::publish_catalog(
        support::registry(),
        &format!("e2e/{pruned_package}-index"),
        "v1",
        &only_new,
    )
    .await;

    // A CatalogSource served from an address, not an image.
    let address = lay(Classic::new(one_version(&support::fresh_name("mig-address")))).await;
    classic::patch(
        &client,
        &classic::catalog_sources(),
        &address.catalog_namespace,
        &address.catalog_source,
        json!({"spec": {"image": null, "address": "catalog.example.com:50051"}}),
        false,
    )
    .await;

    // A CSV edited in the cluster: olmv1 renders the bundle's image, one rolling update.
    let hotfix = lay(Classic::new(one_version(&support::fresh_name("mig-hotfix")))
        .hotfix_image("registry.invalid/hotfix/manager:patched"))
    .await;

    // Dependencies: one on an eligible Subscription's package, one on a blocked one's.
    let provider = lay(Classic::new(one_version(&support::fresh_name("mig-provider")))).await;
    let needs = |dep: &str| only_dep(&support::fresh_name("mig-needs"), dep);
    let dependent = lay(Classic::new(needs(&provider.package))).await;
    let dependent_on_blocked = lay(Classic::new(needs(&failed.package))).await;

    for install in [
        &failed,
        &manual,
        &multi,
        &config,
        &api,
        &first,
        &second,
        &pruned,
        &address,
        &hotfix,
        &provider,
        &dependent,
        &dependent_on_blocked,
    ] {
        if install.subscription != address.subscription {
            migrate_catalogs(&client, install).await;
        }
    }

    let row = check_row(&failed);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["CSVNotSucceeded".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "CSVNotSucceeded")["message"],
        format!(
            "CSV {} is Failed (ComponentUnhealthy): installing: deployment not ready",
            failed.csv
        )
    );

    let row = check_row(&manual);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["UpgradeWaitingForApproval".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "UpgradeWaitingForApproval")["message"],
        format!(
            "InstallPlan {} waits for approval to install {manual_package}.v1.1.0",
            manual.install_plan
        )
    );

    let row = check_row(&multi);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["MultiNamespace".to_string()]),
        "{row:#}"
    );
    let mut targets = [a.clone(), b.clone()];
    targets.sort();
    assert!(
        reason(&row, "MultiNamespace")["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "OperatorGroup {} targets 2 namespaces ({})",
                multi.operator_group,
                targets.join(", ")
            )),
        "{row:#}"
    );

    let row = check_row(&config);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["ConfigNotCarried".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "ConfigNotCarried")["message"],
        "Subscription.spec.config.selector has no counterpart in olmv1's deploymentConfig"
    );
    // The env it carries is rendered as classic injected it: no restart.
    assert_eq!(row["podsRestart"], "no", "{row:#}");

    let row = check_row(&api);
    assert_eq!(codes(&row), BTreeSet::<String>::new(), "{row:#}");
    // Upgradeable=False is a note: convert keeps the OperatorCondition, olmv1 holds upgrades.
    let not_upgradeable = reason(&row, "NotUpgradeable");
    assert_eq!(not_upgradeable["blocking"], false, "{row:#}");
    assert_eq!(
        not_upgradeable["message"],
        "the operator says Upgradeable=False (Migrating): a data migration is running"
    );

    for install in [&first, &second] {
        let row = check_row(install);
        assert_eq!(
            codes(&row),
            BTreeSet::from(["DuplicatePackage".to_string()]),
            "{row:#}"
        );
        let other = if install.namespace == first.namespace {
            &second
        } else {
            &first
        };
        assert_eq!(
            reason(&row, "DuplicatePackage")["message"],
            format!(
                "package {} is also subscribed by {}/{}: olmv1 installs a package once per cluster",
                install.package, other.namespace, other.subscription
            )
        );
    }

    let row = check_row(&pruned);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["BundleNotInCatalog".to_string()]),
        "{row:#}"
    );
    assert!(reason(&row, "BundleNotInCatalog")["message"].as_str().unwrap().starts_with(&format!(
        "the installed bundle {pruned_package}.v1.0.0 ({pruned_package} 1.0.0) is in no ClusterCatalog: the image {} of ClusterCatalog",
        pruned.catalog_image)), "{row:#}");

    let row = check_row(&address);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["CatalogSourceNotImage".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "CatalogSourceNotImage")["message"],
        format!(
            "CatalogSource {}/{} is served from the address \"catalog.example.com:50051\", not from an image",
            address.catalog_namespace, address.catalog_source
        )
    );

    let row = check_row(&hotfix);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    assert_eq!(
        row["podsRestart"],
        format!(
            "one rolling update: Deployment {} template.spec.containers[manager].image is \"registry.invalid/{}/manager:v1.0.0\" (now \"registry.invalid/hotfix/manager:patched\")",
            hotfix.deployment, hotfix.package
        ),
        "{row:#}"
    );

    let row = check_row(&dependent);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    assert_eq!(
        row["after"],
        json!([format!("{}/{}", provider.namespace, provider.subscription)])
    );
    assert!(
        reason(&row, "DependencyMigratesFirst")["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "requires package {} >=1.0.0: provided by Subscription",
                provider.package
            )),
        "{row:#}"
    );
    let row = check_row(&dependent_on_blocked);
    assert_eq!(
        codes(&row),
        BTreeSet::from(["DependencyBlocked".to_string()]),
        "{row:#}"
    );
    assert_eq!(
        reason(&row, "DependencyBlocked")["message"],
        format!(
            "requires package {} >=1.0.0: provided by Subscription {}/{}, which is Blocked",
            failed.package, failed.namespace, failed.subscription
        )
    );

    // The text form: one table, then every reason with its fix.
    let text = olmv1(&["migrate", "check", "-A"]).ok();
    eprintln!("{text}");
    assert!(
        text.contains(&format!(
            "{}/{}: CSVNotSucceeded: CSV {} is Failed",
            failed.namespace, failed.subscription, failed.csv
        )),
        "{text}"
    );
}

/// A package whose one bundle requires `dependency` at 1.0.0 or later.
fn only_dep(package: &str, dependency: &str) -> Package {
    crate::only(
        package,
        Bundle::new("1.0.0").requires(
            "olm.package.required",
            json!({"packageName": dependency, "versionRange": ">=1.0.0"}),
        ),
    )
}

/// What a conversion must keep of the workload: each Deployment's uid, generation and pod
/// template (a failure shows what changed in it), the ReplicaSets by name and uid, the pods by uid.
#[derive(Debug, PartialEq)]
pub(crate) struct Workload {
    pub deployments: BTreeMap<String, (String, i64)>,
    pub templates: BTreeMap<String, serde_json::Value>,
    pub replica_sets: BTreeMap<String, String>,
    pub pods: BTreeMap<String, String>,
}

pub(crate) async fn workload(client: &kube::Client, install: &ClassicInstall) -> Workload {
    use k8s_openapi::api::{
        apps::v1::{Deployment, ReplicaSet},
        core::v1::Pod,
    };
    let lp = kube::api::ListParams::default();
    let ns = &install.namespace;
    let mut deployments = BTreeMap::new();
    let mut templates = BTreeMap::new();
    for name in &install.deployments {
        let d = Api::<Deployment>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap();
        let template = d.spec.as_ref().map(|s| &s.template);
        templates.insert(name.clone(), serde_json::to_value(template).unwrap());
        deployments.insert(
            name.clone(),
            (d.metadata.uid.unwrap(), d.metadata.generation.unwrap()),
        );
    }
    let named = |m: kube::api::ObjectMeta| (m.name.unwrap(), m.uid.unwrap());
    Workload {
        deployments,
        templates,
        replica_sets: Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| named(r.metadata))
            .collect(),
        pods: Api::<Pod>::namespaced(client.clone(), ns)
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| named(p.metadata))
            .collect(),
    }
}

async fn gone(client: &kube::Client, ar: &kube::api::ApiResource, ns: &str, name: &str) -> bool {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, ar)
        .get_opt(name)
        .await
        .unwrap()
        .is_none()
}

/// What classic's roles and bindings for `install`'s CSV grant its accounts: each request as
/// (ServiceAccount, namespace or cluster-wide, verb, group, resource, object name).
type Grant = (String, Option<String>, String, String, String, Option<String>);

async fn classic_grants(client: &kube::Client, install: &ClassicInstall) -> BTreeSet<Grant> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
    let ns = install.namespace.as_str();
    let lp = kube::api::ListParams::default().labels(&format!("olm.owner={}", install.csv));
    let mut grants = BTreeSet::new();
    let mut add = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>,
                   rules: &Option<Vec<PolicyRule>>,
                   namespace: Option<&str>| {
        for subject in subjects.iter().flatten() {
            for rule in rules.iter().flatten() {
                for verb in &rule.verbs {
                    for group in rule.api_groups.iter().flatten() {
                        for resource in rule.resources.iter().flatten() {
                            let names: Vec<Option<String>> = match &rule.resource_names {
                                Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
                                _ => vec![None],
                            };
                            for name in names {
                                grants.insert((
                                    subject.name.clone(),
                                    namespace.map(str::to_string),
                                    verb.clone(),
                                    group.clone(),
                                    resource.clone(),
                                    name,
                                ));
                            }
                        }
                    }
                }
            }
        }
    };
    let roles = Api::<Role>::namespaced(client.clone(), ns);
    for binding in Api::<RoleBinding>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
    {
        let role = roles.get(&binding.role_ref.name).await.unwrap();
        add(&binding.subjects, &role.rules, Some(ns));
    }
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    for binding in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        let role = cluster_roles.get(&binding.role_ref.name).await.unwrap();
        add(&binding.subjects, &role.rules, None);
    }
    grants
}

/// The grants of `grants` the API server denies (SubjectAccessReview as each account).
async fn denied(client: &kube::Client, namespace: &str, grants: &BTreeSet<Grant>) -> Vec<Grant> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let api = Api::<SubjectAccessReview>::all(client.clone());
    let mut out = Vec::new();
    for grant in grants {
        let (sa, scope, verb, group, resource, name) = grant;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{namespace}:{sa}")),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{namespace}"),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    namespace: scope.clone(),
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    resource: Some(resource.clone()),
                    name: name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api.create(&Default::default(), &review).await.unwrap();
        if !answer.status.is_some_and(|s| s.allowed) {
            out.push(grant.clone());
        }
    }
    out
}

#[tokio::test]
async fn convert_takes_all_and_own_namespace_operators_over_in_place_and_rollback_gives_them_back() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let all = classic::lay_down(
        &client,
        &Classic::new(one_version(&support::fresh_name("mig-all"))),
    )
    .await;
    let own = classic::lay_down(
        &client,
        &Classic::new(one_version(&support::fresh_name("mig-own"))).mode(Mode::OwnNamespace),
    )
    .await;
    for install in [&all, &own] {
        migrate_catalogs(&client, install).await;
        classic::wait_available(&client, &install.namespace, &install.deployment).await;
    }
    let extensions = Api::<olmv1_api::v1::ClusterExtension>::all(client.clone());
    for install in [&all, &own] {
        let before = workload(&client, install).await;
        assert!(!before.pods.is_empty(), "{before:?}");
        let (sub, ns) = (install.subscription.as_str(), install.namespace.as_str());

        // The dry run shows the installer, the ClusterExtension and what is adopted; writes nothing.
        let plan = olmv1(&["migrate", "convert", sub, "-n", ns, "--dry-run"]).ok();
        eprintln!("{plan}");
        assert!(plan.contains(&format!("name: {sub}-installer")), "{plan}");
        assert!(plan.contains("version: \"1.0.0\""), "{plan}");
        assert!(
            plan.contains(&format!("#   Deployment {ns}/{}", install.deployment)),
            "{plan}"
        );
        // classic's roles for the CSV, under names olmv1 does not render, are replaced: adopted,
        // then deleted once olmv1's own are in place. Its OperatorCondition is kept.
        assert!(plan.contains("# replaced: 4 roles and bindings"), "{plan}");
        assert!(plan.contains(&format!("#   Role {ns}/")), "{plan}");
        assert!(
            plan.contains(&format!("#   OperatorCondition {ns}/{}", install.csv)),
            "{plan}"
        );
        assert!(!gone(&client, &classic::subscriptions(), ns, sub).await);
        let grants = classic_grants(&client, install).await;
        // widgets and widgets/status cluster-wide (`*`), configmaps get/list/watch in its namespace.
        assert_eq!(grants.len(), 5, "{grants:?}");
        assert_eq!(denied(&client, ns, &grants).await, Vec::<Grant>::new());
        let conditions =
            Api::<DynamicObject>::namespaced_with(client.clone(), ns, &classic::operator_conditions());
        let condition_uid = conditions.get(&install.csv).await.unwrap().metadata.uid;

        let out = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).ok();
        eprintln!("{out}");
        assert!(
            out.contains(&format!(
                "clusterextension/{sub} Installed: {} 1.0.0",
                install.csv
            )),
            "{out}"
        );

        // The workload as it was: same pods, ReplicaSets, Deployment and generation.
        assert_eq!(workload(&client, install).await, before);
        let ext = extensions.get(sub).await.unwrap();
        assert_eq!(
            ext.metadata.annotations.as_ref().unwrap()
                [olmv1::admin::migrate::check::MIGRATED_FROM_ANNOTATION],
            format!("{ns}/{sub}")
        );
        // Installed pinned at 1.0.0, then unpinned: the Subscription's approval was Automatic.
        assert!(
            out.contains(&format!(
                "clusterextension/{sub} created, pinned to {} 1.0.0",
                install.csv
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "clusterextension/{sub} follows stable (the Subscription's approval was Automatic)"
            )),
            "{out}"
        );
        let catalog = ext.spec.source.catalog.as_ref().unwrap();
        assert_eq!(catalog.version, None);
        assert_eq!(catalog.channels, ["stable"]);
        let watch = ext
            .spec
            .config
            .as_ref()
            .and_then(|c| c.inline.as_ref())
            .and_then(|i| i.get("watchNamespace").cloned());
        if std::ptr::eq(install, &own) {
            assert_eq!(watch, Some(json!(ns)));
        } else {
            assert_eq!(watch, None);
        }
        // Classic is gone; what it made for the CSV is the extension's, with no reference to it.
        // (Deleted with Orphan propagation: gone once the garbage collector has orphaned what
        // they owned.)
        for (ar, name) in [
            (classic::subscriptions(), sub),
            (classic::csvs(), install.csv.as_str()),
            (classic::install_plans(), install.install_plan.as_str()),
        ] {
            support::wait_for(
                &format!("{} {ns}/{name} gone", ar.kind),
                components::INSTALL_TIMEOUT,
                || async {
                    if gone(&client, &ar, ns, name).await {
                        Ok(())
                    } else {
                        Err("still there")
                    }
                },
            )
            .await;
        }
        let d = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
            .get(&install.deployment)
            .await
            .unwrap();
        let labels = d.metadata.labels.clone().unwrap();
        assert_eq!(labels["olm.operatorframework.io/owner-name"], sub);
        assert!(!labels.contains_key("olm.owner"));
        assert!(
            d.metadata
                .owner_references
                .iter()
                .flatten()
                .all(|r| r.kind != "ClusterServiceVersion"),
            "{:?}",
            d.metadata.owner_references
        );

        // classic's roles and bindings are gone, the operator never without what they granted:
        // olmv1's own grant it now.
        assert!(
            out.contains(&format!(
                "4 roles and bindings classic made for {} deleted: ClusterExtension {sub}'s own grants are in place",
                install.csv
            )),
            "{out}"
        );
        assert!(classic_grants(&client, install).await.is_empty());
        assert_eq!(denied(&client, ns, &grants).await, Vec::<Grant>::new());
        // Its OperatorCondition is the same object, the extension's now, under the same name.
        let condition = conditions.get(&install.csv).await.unwrap();
        assert_eq!(condition.metadata.uid, condition_uid);
        assert_eq!(
            condition.metadata.labels.as_ref().unwrap()["olm.operatorframework.io/owner-name"],
            sub
        );
        assert!(
            condition
                .metadata
                .owner_references
                .iter()
                .flatten()
                .all(|r| r.kind == "ClusterExtension"),
            "{:?}",
            condition.metadata.owner_references
        );
        assert!(
            !out.contains(&format!("OperatorCondition {ns}/{} deleted", install.csv)),
            "{out}"
        );
        let condition_access: BTreeSet<Grant> = ["get", "update", "patch"]
            .iter()
            .map(|verb| {
                let sa = condition.data["spec"]["serviceAccounts"][0]
                    .as_str()
                    .unwrap()
                    .to_string();
                (
                    sa,
                    Some(ns.to_string()),
                    verb.to_string(),
                    "operators.coreos.com".into(),
                    "operatorconditions".into(),
                    Some(install.csv.clone()),
                )
            })
            .collect();
        assert_eq!(denied(&client, ns, &condition_access).await, Vec::<Grant>::new());

        // Again: it converges and changes nothing.
        let again = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).ok();
        assert!(again.contains("# resuming"), "{again}");
        assert_eq!(workload(&client, install).await, before);
        let row = check_row(install);
        assert_eq!(row["verdict"], "Migrated", "{row:#}");
    }

    // Rollback: the extension deleted without uninstalling, classic's Subscription and
    // OperatorGroup back, the workload untouched.
    let before = workload(&client, &all).await;
    let (sub, ns) = (all.subscription.as_str(), all.namespace.as_str());
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &classic::operator_groups())
        .delete(&all.operator_group, &Default::default())
        .await
        .unwrap();
    let out = olmv1(&["migrate", "rollback", sub, "--yes"]).ok();
    eprintln!("{out}");
    support::wait_for("ClusterExtension gone", components::INSTALL_TIMEOUT, || async {
        match extensions.get_opt(sub).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    // Give the controller and the garbage collector time to act, were they to remove anything.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(workload(&client, &all).await, before);
    let subscription: DynamicObject = Api::namespaced_with(client.clone(), ns, &classic::subscriptions())
        .get(sub)
        .await
        .unwrap();
    assert_eq!(subscription.data["spec"]["startingCSV"], all.csv.as_str());
    assert_eq!(subscription.data["spec"]["installPlanApproval"], "Manual");
    assert!(!gone(&client, &classic::operator_groups(), ns, &all.operator_group).await);
    let d = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .get(&all.deployment)
        .await
        .unwrap();
    assert!(
        !d.metadata
            .labels
            .unwrap()
            .contains_key("olm.operatorframework.io/owner-name")
    );
    // classic's roles and bindings for the CSV are back as classic left them, and grant again.
    assert!(
        out.contains(&format!(
            "4 roles and bindings classic made for {} restored as classic left them",
            all.csv
        )),
        "{out}"
    );
    let restored = classic_grants(&client, &all).await;
    assert_eq!(restored.len(), 5, "{restored:?}");
    assert_eq!(denied(&client, ns, &restored).await, Vec::<Grant>::new());

    // The recreated Subscription has no installed CSV until classic reinstalls it: refused, with
    // check's reason; the extension is gone with its record: nothing to roll back.
    let refused = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).err();
    assert!(
        refused.contains(&format!(
            "Subscription {ns}/{sub} is Blocked, not Eligible\n  NoInstalledCSV: "
        )),
        "{refused}"
    );
    let refused = olmv1(&["migrate", "rollback", sub, "--yes"]).err();
    assert!(
        refused.contains(&format!(
            "no migration record for ClusterExtension {sub} in namespace {}",
            components::SYSTEM_NAMESPACE
        )),
        "{refused}"
    );
}

/// An operator that holds its upgrades through its OperatorCondition goes on doing so once
/// converted: `check` notes it (not blocking), `convert` keeps the OperatorCondition, the
/// extension follows the Automatic Subscription's channel and the upgrade waits, reported in the
/// operator's words, until the operator says Upgradeable=True (as operator-lib writes it).
#[tokio::test]
async fn a_converted_operator_holds_its_upgrade_through_its_operator_condition() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let install = classic::lay_down(&client, &Classic::new(two(&support::fresh_name("mig-hold")))).await;
    let (sub, ns, csv) = (
        install.subscription.as_str(),
        install.namespace.as_str(),
        install.csv.as_str(),
    );
    let upgradeable = |status: &str, message: &str| {
        json!({"spec": {"conditions": [{"type": "Upgradeable", "status": status, "reason": "Migrating",
            "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    classic::patch(
        &client,
        &classic::operator_conditions(),
        ns,
        csv,
        upgradeable("False", "a data migration is running"),
        false,
    )
    .await;
    migrate_catalogs(&client, &install).await;
    classic::wait_available(&client, ns, &install.deployment).await;
    let before = workload(&client, &install).await;
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    assert_eq!(reason(&row, "NotUpgradeable")["blocking"], false);

    let out = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).ok();
    assert!(
        out.contains(&format!("clusterextension/{sub} follows stable")),
        "{out}"
    );
    let extension = components::wait_extension(&client, sub, "the upgrade held", |ext| {
        components::condition(ext, "Progressing")
            .is_some_and(|c| c.reason == "OperatorConditionNotUpgradeable")
    })
    .await;
    let next = crate::fixtures::bundle_name(&install.package, "1.1.0");
    assert_eq!(
        components::condition(&extension, "Progressing").unwrap().message,
        format!(
            "upgrade to {next} 1.1.0 held: OperatorCondition {ns}/{csv}: the operator says \
             Upgradeable=False (Migrating): a data migration is running"
        )
    );
    assert_eq!(components::installed_version(&extension), Some("1.0.0"));
    assert_eq!(workload(&client, &install).await, before);
    // The controller mirrors the operator's word into status, as classic did.
    let conditions =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &classic::operator_conditions());
    let condition = conditions.get(csv).await.unwrap();
    let mirrored = &condition.data["status"]["conditions"][0];
    assert_eq!(mirrored["status"], "False", "{:?}", condition.data);
    assert_eq!(
        mirrored["observedGeneration"].as_i64(),
        condition.metadata.generation
    );

    // The operator allows it: the upgrade goes; the new bundle has its own OperatorCondition.
    classic::patch(
        &client,
        &classic::operator_conditions(),
        ns,
        csv,
        upgradeable("True", "done"),
        false,
    )
    .await;
    components::wait_installed(&client, sub, "1.1.0").await;
    assert!(conditions.get_opt(&next).await.unwrap().is_some());
    assert!(gone(&client, &classic::operator_conditions(), ns, csv).await);
}

#[tokio::test]
async fn an_operator_groups_account_is_preflighted_and_the_operator_group_deleted_when_asked() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let install = classic::lay_down(
        &client,
        &Classic::new(one_version(&support::fresh_name("mig-ogsa"))).mode(Mode::OwnNamespace),
    )
    .await;
    let (sub, ns, og) = (
        install.subscription.as_str(),
        install.namespace.as_str(),
        install.operator_group.as_str(),
    );
    classic::patch(
        &client,
        &classic::operator_groups(),
        ns,
        og,
        json!({"spec": {"serviceAccountName": "installer"}}),
        false,
    )
    .await;
    migrate_catalogs(&client, &install).await;
    classic::wait_available(&client, ns, &install.deployment).await;
    let before = workload(&client, &install).await;
    let named = format!("ServiceAccount {ns}/installer (the serviceAccountName of OperatorGroup {og})");

    // Refused before anything is written: the account is missing, then lacks permissions.
    let refused = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).err();
    assert!(
        refused.contains(&format!(
            "{named} does not exist: create it, or remove serviceAccountName to have olmv1 compute an installer"
        )),
        "{refused}"
    );
    components::create_service_account(&client, ns, "installer").await;
    let refused = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).err();
    assert!(
        refused.contains(&format!(
            "{named} cannot install the bundle: {}",
            olmv1::apply::preflight::permissions::MISSING_PERMISSIONS_HEADER
        )),
        "{refused}"
    );
    assert!(refused.contains("customresourcedefinitions"), "{refused}");
    let record = olmv1::admin::migrate::convert::record_name(ns, sub);
    let records = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        client.clone(),
        components::SYSTEM_NAMESPACE,
    );
    assert!(records.get_opt(&record).await.unwrap().is_none());
    let subscription = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &classic::subscriptions())
        .get(sub)
        .await
        .unwrap();
    assert_eq!(subscription.data["spec"]["installPlanApproval"], "Automatic");

    // Allowed: converted with that account; the OperatorGroup is kept while another
    // Subscription is left in the namespace, deleted once none is.
    components::grant_cluster_admin(&client, ns).await;
    support::kubectl_apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: other\n  namespace: {ns}\nspec:\n  name: other\n  source: none\n  sourceNamespace: {ns}\n"
    ))
    .ok();
    let out = olmv1(&[
        "migrate",
        "convert",
        sub,
        "-n",
        ns,
        "--yes",
        "--delete-operatorgroup",
    ])
    .ok();
    eprintln!("{out}");
    assert!(
        out.contains(&format!(
            "# installer: ServiceAccount {ns}/installer (the OperatorGroup's serviceAccountName)"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "clusterextension/{sub} Installed: {} 1.0.0",
            install.csv
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "OperatorGroup {ns}/{og} kept: Subscriptions other are left in {ns}"
        )),
        "{out}"
    );
    assert!(!gone(&client, &classic::operator_groups(), ns, og).await);
    let ext = Api::<olmv1_api::v1::ClusterExtension>::all(client.clone())
        .get(sub)
        .await
        .unwrap();
    assert_eq!(ext.spec.service_account.unwrap().name, "installer");
    assert_eq!(workload(&client, &install).await, before);
    support::kubectl(&["delete", "subscriptions.operators.coreos.com", "other", "-n", ns]).ok();
    let out = olmv1(&[
        "migrate",
        "convert",
        sub,
        "-n",
        ns,
        "--yes",
        "--delete-operatorgroup",
    ])
    .ok();
    assert!(out.contains(&format!("OperatorGroup {ns}/{og} deleted")), "{out}");
    assert!(gone(&client, &classic::operator_groups(), ns, og).await);
    assert_eq!(workload(&client, &install).await, before);

    // Rollback recreates it as it was, with its account.
    olmv1(&["migrate", "rollback", sub, "--yes"]).ok();
    let back = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &classic::operator_groups())
        .get(og)
        .await
        .unwrap();
    assert_eq!(back.data["spec"]["serviceAccountName"], "installer");
    assert_eq!(back.data["spec"]["targetNamespaces"], json!([ns]));
    assert!(!gone(&client, &classic::subscriptions(), ns, sub).await);
    assert_eq!(workload(&client, &install).await, before);
}

#[tokio::test]
async fn a_template_olmv1_renders_otherwise_is_reported_then_rolled_once() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let install = classic::lay_down(
        &client,
        &Classic::new(one_version(&support::fresh_name("mig-roll")))
            .hotfix_image("registry.invalid/hotfix/manager:patched"),
    )
    .await;
    migrate_catalogs(&client, &install).await;
    classic::wait_available(&client, &install.namespace, &install.deployment).await;
    let before = workload(&client, &install).await;
    let (sub, ns) = (install.subscription.as_str(), install.namespace.as_str());
    let plan = olmv1(&["migrate", "convert", sub, "-n", ns, "--dry-run"]).ok();
    let expected = format!(
        "# pods restart: one rolling update: Deployment {} template.spec.containers[manager].image is \"registry.invalid/{}/manager:v1.0.0\" (now \"registry.invalid/hotfix/manager:patched\")",
        install.deployment, install.package
    );
    assert!(plan.contains(&expected), "{plan}");
    olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).ok();
    let d = classic::wait_available(&client, ns, &install.deployment).await;
    // The same Deployment, one generation later (the image olmv1 renders), rolled to a new
    // ReplicaSet.
    let (uid, generation) = &before.deployments[&install.deployment];
    assert_eq!(d.metadata.uid.as_ref(), Some(uid));
    assert_eq!(d.metadata.generation, Some(generation + 1));
    let image = d.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert_eq!(
        image,
        format!("registry.invalid/{}/manager:v1.0.0", install.package)
    );
    let after = support::wait_for(
        "the rollout's ReplicaSet",
        components::INSTALL_TIMEOUT,
        || async {
            let after = workload(&client, &install).await;
            if after.replica_sets.len() == before.replica_sets.len() + 1 {
                Ok(after)
            } else {
                Err(format!("{after:?}"))
            }
        },
    )
    .await;
    assert!(
        before
            .replica_sets
            .iter()
            .all(|(name, uid)| after.replica_sets.get(name) == Some(uid)),
        "{after:?}"
    );
}

/// convert's steps, each by the line it prints once the step is done (its stdout is written a
/// line at a time), as (start, part): convert is killed right after each.
const CONVERT_STEPS: [(&str, &str); 9] = [
    ("recorded Subscription, OperatorGroup and CatalogSource", ""),
    ("installer ", " applied in namespace "),
    ("Subscription ", " set to Manual approval"),
    ("", " objects labelled as ClusterExtension "),
    ("CSV ", " deleted, its dependents orphaned"),
    ("Subscription ", " deleted"), // classic's bookkeeping, the Subscription first
    ("classic's owner references and labels removed", ""),
    ("clusterextension/", " created, pinned to "),
    ("clusterextension/", " Installed: "), // then the Subscription's approval is followed
];

/// Runs `migrate convert` on `install` and SIGKILLs it as soon as it prints a line that starts
/// with `start` and holds `part`, from the first step's line on (the plan before it is not a
/// step). Returns what it printed.
fn convert_killed_after(install: &ClassicInstall, (start, part): (&str, &str)) -> String {
    use std::io::BufRead as _;
    let (sub, ns) = (install.subscription.as_str(), install.namespace.as_str());
    let mut child = support::env()
        .command(support::olmv1_bin())
        .args(["migrate", "convert", sub, "-n", ns, "--yes"])
        .env("RUST_LOG", "off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let mut steps_started = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        steps_started |= line.starts_with(CONVERT_STEPS[0].0);
        if steps_started && line.starts_with(start) && line.contains(part) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return printed;
        }
    }
    let status = child.wait().unwrap();
    panic!("convert ended ({status}) before printing {start:?}...{part:?}:\n{printed}");
}

#[tokio::test]
async fn convert_killed_after_each_step_completes_when_run_again() {
    use futures::StreamExt as _;
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    // Three at a time: nine conversions one after the other take long, nine at once load the
    // machine past the waits' deadlines.
    futures::stream::iter(CONVERT_STEPS.iter().enumerate())
        .for_each_concurrent(3, |(step, &marker)| {
            let client = client.clone();
            async move {
                let install = classic::lay_down(
                    &client,
                    &Classic::new(one_version(&support::fresh_name("mig-kill"))),
                )
                .await;
                migrate_catalogs(&client, &install).await;
                classic::wait_available(&client, &install.namespace, &install.deployment).await;
                let before = workload(&client, &install).await;
                let killed = {
                    let install = install.clone();
                    tokio::task::spawn_blocking(move || convert_killed_after(&install, marker))
                        .await
                        .unwrap()
                };
                let at = format!("killed after step {} ({marker:?})", step + 1);
                eprintln!("{at}:\n{killed}");
                // Nothing of the workload went while it lay half converted.
                assert_eq!(workload(&client, &install).await, before, "{at}");
                let (sub, ns) = (install.subscription.as_str(), install.namespace.as_str());
                let out = olmv1(&["migrate", "convert", sub, "-n", ns, "--yes"]).ok();
                assert!(
                    out.contains(&format!(
                        "clusterextension/{sub} Installed: {} 1.0.0",
                        install.csv
                    )),
                    "{at}: {out}"
                );
                assert_eq!(workload(&client, &install).await, before, "{at}, then resumed");
                assert!(gone(&client, &classic::csvs(), ns, &install.csv).await, "{at}");
                assert!(gone(&client, &classic::subscriptions(), ns, sub).await, "{at}");
                assert!(classic_grants(&client, &install).await.is_empty(), "{at}");
                assert_eq!(check_row(&install)["verdict"], "Migrated", "{at}");
            }
        })
        .await;
}

#[tokio::test]
async fn convert_all_takes_the_provider_of_a_dependency_first() {
    // Alone: `--all` converts every Eligible Subscription of the cluster.
    let _share = components::exclusive_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let provider = classic::lay_down(
        &client,
        &Classic::new(one_version(&support::fresh_name("mig-prov"))),
    )
    .await;
    let dependent = classic::lay_down(
        &client,
        &Classic::new(only_dep(&support::fresh_name("mig-dep"), &provider.package)),
    )
    .await;
    let mut before = Vec::new();
    for install in [&provider, &dependent] {
        migrate_catalogs(&client, install).await;
        classic::wait_available(&client, &install.namespace, &install.deployment).await;
        before.push(workload(&client, install).await);
    }
    assert_eq!(
        check_row(&dependent)["after"],
        json!([format!("{}/{}", provider.namespace, provider.subscription)])
    );
    // Other tests' leftovers are converted too (or fail): only these two are asserted.
    let out = olmv1(&["migrate", "convert", "--all", "--yes"]).stdout;
    eprintln!("{out}");
    let installed = |install: &ClassicInstall| {
        out.find(&format!(
            "clusterextension/{} Installed: {} 1.0.0",
            install.subscription, install.csv
        ))
        .unwrap_or_else(|| panic!("{} not converted: {out}", install.subscription))
    };
    assert!(installed(&provider) < installed(&dependent), "{out}");
    for (install, before) in [&provider, &dependent].into_iter().zip(before) {
        assert_eq!(workload(&client, install).await, before);
        assert_eq!(check_row(install)["verdict"], "Migrated");
    }
}
