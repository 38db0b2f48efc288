//! Runs every scenario at once with whichever controller is running, records what it reported,
//! and removes what the scenarios installed: the part of the driver that the CI test
//! (`test/interop/ci.rs`) and `hack/interop.sh` share.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::{core::v1::Namespace, rbac::v1::ClusterRoleBinding};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams},
    discovery::{Discovery, verbs},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use crate::components;
use crate::scenarios::{self, CATALOG_LABEL, CONDITION_TYPES, Expect, Outcome, Run, Scenario, Step};
use crate::support;

/// How long one step may take on 2 busy cores: resolution, pull, apply and rollout.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(240);

/// The label both controllers put on every object they apply.
const OWNER_KIND: &str = "olm.operatorframework.io/owner-kind";
const OWNER_NAME: &str = "olm.operatorframework.io/owner-name";

/// Settled: two snapshots this far apart are equal (longer than the controllers' requeue of a
/// step that just finished, short enough for 19 scenarios at once).
const SETTLE_INTERVAL: Duration = Duration::from_secs(3);
/// Snapshots taken at most while waiting for the status to settle (one minute).
const SETTLE_SNAPSHOTS: usize = 20;

/// What replaces the registry's `host:port` in recorded text: the local registry's port changes
/// from one environment to the next, the rest of an image reference (path, digest) does not.
pub const REGISTRY_PLACEHOLDER: &str = "<registry>";

/// A namespace holding ServiceAccount `installer` with cluster-admin (olmv1 applies as it;
/// upstream ignores it).
pub async fn namespace_with_installer(client: &Client, name: &str) {
    create_namespace(client, name).await;
    components::create_service_account(client, name, "installer").await;
    components::grant_cluster_admin(client, name).await;
}

async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
}

/// Deletes namespaces and the installers' bindings, and waits until the namespaces are gone.
pub async fn delete_namespaces(client: &Client, names: &[String]) {
    let api = Api::<Namespace>::all(client.clone());
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    for name in names {
        api.delete(name, &DeleteParams::default()).await.ok();
        bindings
            .delete(&format!("{name}-installer"), &DeleteParams::default())
            .await
            .ok();
    }
    for name in names {
        support::wait_for(&format!("namespace {name} to go"), STEP_TIMEOUT, || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
}

/// Waits until the object `name` is gone.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::wait_for(&format!("{name} to be deleted"), STEP_TIMEOUT, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

fn extension_api(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<ClusterExtension>(&());
    Api::all_with(client.clone(), &resource)
}

/// Runs all scenarios at once as `run` says (the controller for it is running), records their
/// outcomes (the registry's `host:port` replaced by [`REGISTRY_PLACEHOLDER`]), then removes what
/// they installed.
pub async fn run_scenarios(client: &Client, run: Run, registry: &str) -> BTreeMap<String, Outcome> {
    let all = scenarios::all();
    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
    let namespaces: Vec<String> = all.iter().map(Scenario::namespace).collect();
    for scenario in &all {
        if run.names_installer(scenario) {
            namespace_with_installer(client, &scenario.namespace()).await;
        } else {
            create_namespace(client, &scenario.namespace()).await;
        }
    }
    let settled = futures::future::join_all(all.iter().map(|s| run_scenario(client, s, run))).await;
    let objects = support::wait_for("the applied objects", STEP_TIMEOUT, || {
        applied_objects(client, &names)
    })
    .await;
    let mut outcomes = BTreeMap::new();
    for (scenario, mut outcome) in all.iter().zip(settled) {
        outcome.objects = objects.get(scenario.name).cloned().unwrap_or_default();
        outcomes.insert(scenario.name.to_string(), normalized(outcome, registry));
    }
    eprintln!(
        "interop: {} scenarios recorded ({}); cleaning up",
        outcomes.len(),
        run.label()
    );
    let api = extension_api(client);
    for scenario in &all {
        api.delete(scenario.name, &DeleteParams::default()).await.ok();
    }
    for scenario in &all {
        wait_gone(&api, scenario.name).await;
    }
    support::wait_for("the applied objects to go", STEP_TIMEOUT, || async {
        let left = applied_objects(client, &names).await?;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    delete_namespaces(client, &namespaces).await;
    outcomes
}

/// Applies each step, waits for its expectation, then waits until the status stops changing.
async fn run_scenario(client: &Client, scenario: &Scenario, run: Run) -> Outcome {
    let api = extension_api(client);
    for step in &scenario.steps {
        let expect = step.expect_in(run);
        components::apply_extension(client, extension_body(scenario, step, run)).await;
        support::wait_for_every(
            &format!("scenario {} ({}): {expect:?}", scenario.name, run.label()),
            STEP_TIMEOUT,
            Duration::from_millis(500),
            || async {
                let ext = api.get(scenario.name).await.map_err(|e| e.to_string())?;
                if step_reached(&ext, expect) {
                    Ok(())
                } else {
                    Err(ext.data["status"].to_string())
                }
            },
        )
        .await;
    }
    let mut last = snapshot(&api.get(scenario.name).await.unwrap());
    for _ in 0..SETTLE_SNAPSHOTS {
        tokio::time::sleep(SETTLE_INTERVAL).await;
        let now = snapshot(&api.get(scenario.name).await.unwrap());
        if now == last {
            break;
        }
        last = now;
    }
    eprintln!("interop: scenario {} settled ({})", scenario.name, run.label());
    last
}

fn extension_body(scenario: &Scenario, step: &Step, run: Run) -> Value {
    let (label, value) = CATALOG_LABEL;
    let mut catalog = json!({"packageName": scenario.package, "selector": {"matchLabels": {label: value}}});
    if let Value::Object(fields) = &step.catalog {
        catalog.as_object_mut().unwrap().extend(fields.clone());
    }
    let mut body = json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": scenario.name},
        "spec": {
            "namespace": scenario.namespace(),
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    });
    if run.names_installer(scenario) {
        body["spec"]["serviceAccount"] = json!({"name": "installer"});
    }
    if let Some(config) = &step.config {
        body["spec"]["config"] = config.clone();
    }
    body
}

fn condition<'a>(ext: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    ext.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether the controller has reported on the current generation as `expect` says.
fn step_reached(ext: &DynamicObject, expect: &Expect) -> bool {
    let generation = ext.metadata.generation.unwrap_or_default();
    let Some(progressing) = condition(ext, "Progressing") else {
        return false;
    };
    if progressing["observedGeneration"].as_i64() != Some(generation) {
        return false;
    }
    match expect {
        Expect::Installed(version) => {
            condition(ext, "Installed").is_some_and(|c| c["status"] == "True")
                && ext.data["status"]["install"]["bundle"]["version"] == *version
                && progressing["reason"] == "Succeeded"
        }
        Expect::Refused => progressing["reason"] != "Succeeded" && progressing["reason"] != "RollingOut",
    }
}

fn snapshot(ext: &DynamicObject) -> Outcome {
    let conditions = CONDITION_TYPES
        .iter()
        .map(|t| {
            let value = condition(ext, t).map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                [text("status"), text("reason"), text("message")]
            });
            (t.to_string(), value)
        })
        .collect();
    Outcome {
        conditions,
        install: ext.data["status"]["install"].clone(),
        objects: vec![],
    }
}

/// `outcome` with the registry's `host:port` replaced wherever it appears.
pub fn normalized(outcome: Outcome, registry: &str) -> Outcome {
    let mut text = serde_json::to_string(&outcome).unwrap();
    if !registry.is_empty() {
        text = text.replace(registry, REGISTRY_PLACEHOLDER);
    }
    serde_json::from_str(&text).unwrap()
}

/// Every object labelled as applied for one of the ClusterExtensions `owners`, by its owner's
/// name, as sorted `Kind namespace/name` (cluster-scoped: `Kind name`). The controllers' own
/// records in the system namespace (olmv1's revision Secret; upstream's Helm release Secrets carry
/// no owner label) are bookkeeping, not bundle content, and are left out; so are the objects of
/// other extensions (a shared control plane's other tests).
/// Fails while discovery does (a CRD being deleted can make a group 404 for a moment).
async fn applied_objects(client: &Client, owners: &[&str]) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, meta) in labelled_objects(client).await? {
        if meta.namespace.as_deref() == Some(components::SYSTEM_NAMESPACE) {
            continue;
        }
        let owner = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER_NAME))
            .cloned()
            .unwrap_or_default();
        if owners.contains(&owner.as_str()) {
            by_owner.entry(owner).or_default().push(id);
        }
    }
    for ids in by_owner.values_mut() {
        ids.sort();
        ids.dedup();
    }
    Ok(by_owner)
}

/// Every object, of any listable kind but events, labelled as applied for a ClusterExtension:
/// `Kind namespace/name` (cluster-scoped: `Kind name`) and its metadata.
pub async fn labelled_objects(client: &Client) -> Result<Vec<(String, kube::api::ObjectMeta)>, String> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| format!("API discovery: {e}"))?;
    let params = ListParams::default().labels(&format!("{OWNER_KIND}=ClusterExtension"));
    let mut objects = Vec::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || resource.kind == "Event" {
                continue;
            }
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            let Ok(list) = api.list_metadata(&params).await else {
                continue;
            };
            for object in list.items {
                let meta = object.metadata;
                let name = meta.name.clone().unwrap_or_default();
                let id = match &meta.namespace {
                    Some(ns) => format!("{} {ns}/{name}", resource.kind),
                    None => format!("{} {name}", resource.kind),
                };
                objects.push((id, meta));
            }
        }
    }
    Ok(objects)
}
