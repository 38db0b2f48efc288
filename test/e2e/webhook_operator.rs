//! olmv1's test operator (test/operator, docs/test-operator.md) installed by a ClusterExtension
//! onto the real node (`OLMV1_NODE=kwok+real`, docs/local-control-plane.md), with cert-manager
//! really running there (hack/cert-manager.sh): the operator's pod runs and becomes Ready before
//! the extension says Installed, it writes its Widgets' status with the RBAC its bundle asked for,
//! the API server calls its validating and conversion webhooks over TLS with the certificate
//! cert-manager issued and the CA olmv1 wired, an upgrade rolls its pod and keeps the Widgets, a
//! bundle whose container exits is reported at its deadline while the old version serves, and an
//! uninstall removes the pod, the webhooks and the CRD. Its OperatorCondition, kept by the
//! controller (`--operator-conditions`): the operator reports Upgradeable on it with the access
//! olmv1 granted, an upgrade waits while it says False (reported, the old pod untouched) and goes
//! as soon as the operator flips it; an admin's override lets another through.

use std::time::Duration;

use k8s_openapi::{
    api::{
        admissionregistration::v1::ValidatingWebhookConfiguration,
        apps::v1::Deployment,
        core::v1::{ConfigMap, Pod},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::{components, node, support};

const PACKAGE: &str = "webhook-operator";
const CRD: &str = "widgets.test.olmv1.dev";
const DEPLOYMENT: &str = "webhook-operator-controller";
/// The progress deadline the extension asks for, in (test) minutes: upstream's minimum.
const DEADLINE_MINUTES: u64 = 10;
/// Pulling the operator's image and starting it on the real node, on 2 busy cores.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// `hack/<script>` run with the environment's env.sh sourced; its last stdout line.
fn run_hack(script: &str) -> String {
    let env = support::env();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(format!("set -e; source \"$1/env.sh\"; exec \"$2/hack/{script}\""))
        .arg("bash")
        .arg(&env.dir)
        .arg(support::repo_root())
        .env("OLMV1_BIN", support::olmv1_bin());
    let out = support::run(&mut cmd).ok();
    out.lines().last().unwrap_or_default().trim().to_string()
}

/// cert-manager running on the real node and the test operator's catalog (packages
/// webhook-operator and gadget-operator) published, once per test process; the catalog image's
/// reference.
pub(crate) async fn published() -> &'static str {
    static CATALOG: OnceCell<String> = OnceCell::const_new();
    CATALOG
        .get_or_init(|| async {
            // Independent of each other: cert-manager's build and rollout overlap the
            // operator's build and push (on a cold machine both compile for minutes).
            tokio::task::spawn_blocking(|| {
                std::thread::scope(|scope| {
                    let cert_manager = scope.spawn(|| run_hack("cert-manager.sh"));
                    let catalog = run_hack("test-operator.sh");
                    cert_manager.join().expect("hack/cert-manager.sh failed");
                    catalog
                })
            })
            .await
            .unwrap()
        })
        .await
}

fn operator_conditions(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The ConfigMap through which the test operator holds its upgrades (`upgradeable: "false"`).
async fn hold_upgrades(client: &Client, namespace: &str, hold: bool) {
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "webhook-operator-upgradeable"},
        "data": {"upgradeable": if hold { "false" } else { "true" }, "reason": "Migrating",
            "message": "moving widgets to the new schema"},
    });
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            "webhook-operator-upgradeable",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap();
}

/// The Upgradeable condition the operator wrote on OperatorCondition `name` (in spec, as
/// operator-lib does), once it says `status`, and mirrored into its status by the controller.
async fn upgradeable(client: &Client, namespace: &str, name: &str, status: &str) -> Value {
    let api = operator_conditions(client, namespace);
    support::wait_for(
        &format!("OperatorCondition {name} Upgradeable={status}, mirrored"),
        RUN_TIMEOUT,
        || async {
            let oc = api.get(name).await.map_err(|e| e.to_string())?;
            let find = |list: &Value| {
                list.as_array()
                    .and_then(|l| l.iter().find(|c| c["type"] == "Upgradeable"))
                    .cloned()
                    .unwrap_or_default()
            };
            let spec = find(&oc.data["spec"]["conditions"]);
            let mirrored = find(&oc.data["status"]["conditions"]);
            if spec["status"] == status
                && mirrored["status"] == status
                && mirrored["observedGeneration"].as_i64() == oc.metadata.generation
            {
                Ok(spec)
            } else {
                Err(format!("spec {spec}, status {mirrored}"))
            }
        },
    )
    .await
}

/// The extension once it reports its upgrade held by the OperatorCondition.
async fn held(client: &Client, name: &str) -> olmv1_api::v1::ClusterExtension {
    components::wait_extension_within(
        client,
        name,
        "Progressing=True/OperatorConditionNotUpgradeable",
        RUN_TIMEOUT,
        |ext| {
            components::condition(ext, "Progressing")
                .is_some_and(|c| c.status == "True" && c.reason == "OperatorConditionNotUpgradeable")
        },
    )
    .await
}

fn container_env(deployment: &Deployment, name: &str) -> Option<String> {
    deployment.spec.as_ref()?.template.spec.as_ref()?.containers[0]
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

fn widgets(client: &Client, namespace: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.olmv1.dev", version, "Widget");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

fn widget(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("test.olmv1.dev/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

/// The operator's one pod, Ready, on the real node.
async fn ready_pod(client: &Client, namespace: &str, node: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let pod = support::wait_for("the operator's pod Ready", RUN_TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=webhook-operator"))
            .await
            .map_err(|e| e.to_string())?;
        let ready: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p))
            .collect();
        match ready.as_slice() {
            [pod] => Ok(pod.clone()),
            other => Err(format!("{} Ready pods", other.len())),
        }
    })
    .await;
    assert_eq!(
        pod.spec.as_ref().unwrap().node_name.as_deref(),
        Some(node),
        "the operator runs on the real node"
    );
    pod
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn apply_version(client: &Client, name: &str, namespace: &str, version: &str) {
    let mut body = components::extension(name, namespace, PACKAGE, json!({"version": version}));
    body["spec"]["progressDeadlineMinutes"] = json!(DEADLINE_MINUTES);
    components::apply_extension(client, body).await;
}

/// The status the operator wrote on a Widget, once it describes the Widget's generation and
/// was written by `bundle_version`.
async fn reconciled(api: &Api<DynamicObject>, name: &str, bundle_version: &str) -> Value {
    support::wait_for(
        &format!("Widget {name} reconciled by {bundle_version}"),
        RUN_TIMEOUT,
        || async {
            let w = api.get(name).await.map_err(|e| e.to_string())?;
            let status = w.data.get("status").cloned().unwrap_or_default();
            let generation = w.metadata.generation;
            if status["observedGeneration"].as_i64() == generation
                && status["bundleVersion"] == bundle_version
            {
                Ok(status)
            } else {
                Err(format!("status {status}"))
            }
        },
    )
    .await
}

#[tokio::test]
async fn the_webhook_operator_runs_on_the_real_node_from_install_to_uninstall() {
    let Some(node) = node::real_node() else {
        return;
    };
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let catalog_image = published().await.to_string();
    let catalog = support::fresh_name("webhook-operator");
    components::apply_catalog(&client, &catalog, &catalog_image, 0, PACKAGE).await;
    components::wait_catalog_serving(&client, &catalog).await;
    let namespace = components::namespace_with_admin_installer(&client, "webhook-op").await;
    let name = support::fresh_name("webhook-op");

    // Installed only once the pod really runs: its Ready condition precedes Installed=True.
    apply_version(&client, &name, &namespace, "0.1.0").await;
    let installed = components::wait_installed_within(&client, &name, "0.1.0", RUN_TIMEOUT).await;
    let pod = ready_pod(&client, &namespace, &node).await;
    let ready_at = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.clone())
        .expect("the Ready condition's time")
        .0;
    let installed_at = components::condition(&installed, "Installed")
        .unwrap()
        .last_transition_time
        .0;
    assert!(
        ready_at <= installed_at,
        "Installed=True at {installed_at}, the pod Ready only at {ready_at}"
    );
    let container = &pod.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert!(
        container.state.as_ref().unwrap().running.is_some(),
        "{container:?}"
    );
    let first_pod = pod.metadata.uid.clone().unwrap();

    // The operator reconciles a Widget with the RBAC its bundle asked for.
    let v1 = widgets(&client, &namespace, "v1");
    let alpha = widgets(&client, &namespace, "v1alpha1");
    let pp = PostParams::default();
    // The first call through the webhook waits until kube-proxy has programmed the new
    // Service's ClusterIP on the node (it may lag the pod's readiness by a moment); any other
    // refusal fails at once.
    support::wait_for(
        "the first Widget admitted through the webhook",
        RUN_TIMEOUT,
        || async {
            match v1
                .create(&pp, &widget("v1", "three", json!({"replicas": 3})))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.message.contains("failed to call webhook") => Err(e.message),
                Err(e) => panic!("Widget three refused: {e}"),
            }
        },
    )
    .await;
    let status = reconciled(&v1, "three", "0.1.0").await;
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(
        status["message"],
        "3 replicas reconciled by webhook-operator 0.1.0"
    );

    // The validating webhook: called over TLS through the Service olmv1 rendered, with the
    // certificate cert-manager issued, trusted through the CA olmv1 wired.
    let refused = v1
        .create(&pp, &widget("v1", "eleven", json!({"replicas": 11})))
        .await
        .unwrap_err();
    let kube::Error::Api(refusal) = refused else {
        panic!("not an API refusal: {refused}")
    };
    assert!(
        refusal.message.contains("denied the request: Widget \"eleven\" is refused: spec.replicas 11 is more than 10, the most this operator runs"),
        "{}",
        refusal.message
    );
    let webhooks = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let ours = webhooks
        .items
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten())
        .find(|w| {
            w.client_config
                .service
                .as_ref()
                .is_some_and(|s| s.namespace == namespace)
        })
        .expect("the operator's validating webhook");
    assert!(
        ours.client_config
            .ca_bundle
            .as_ref()
            .is_some_and(|b| !b.0.is_empty()),
        "the CA is injected: {ours:?}"
    );

    // The conversion webhook serves both versions: a v1alpha1 Widget read as v1 and back.
    alpha
        .create(&pp, &widget("v1alpha1", "large", json!({"size": "large"})))
        .await
        .unwrap();
    let as_v1 = v1.get("large").await.unwrap();
    assert_eq!(as_v1.data["spec"], json!({"replicas": 3}));
    let three_as_alpha = alpha.get("three").await.unwrap();
    assert_eq!(three_as_alpha.data["spec"], json!({"size": "large"}));
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD)
        .await
        .unwrap();
    let conversion = crd.spec.conversion.as_ref().unwrap();
    assert_eq!(conversion.strategy, "Webhook");
    assert!(
        conversion
            .webhook
            .as_ref()
            .and_then(|w| w.client_config.as_ref())
            .and_then(|c| c.ca_bundle.as_ref())
            .is_some_and(|b| !b.0.is_empty()),
        "the conversion's CA is injected"
    );

    // Its OperatorCondition, named as classic names it, lists what classic lists; the operator
    // finds it through OPERATOR_CONDITION_NAME and reports Upgradeable=True with the access olmv1
    // granted it; the controller mirrors it into status (classic is not running here).
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    let v1_condition = "webhook-operator.v0.1.0";
    let oc = operator_conditions(&client, &namespace)
        .get(v1_condition)
        .await
        .unwrap();
    assert_eq!(
        oc.data["spec"]["deployments"],
        json!([DEPLOYMENT]),
        "{:?}",
        oc.data
    );
    assert_eq!(
        oc.data["spec"]["serviceAccounts"],
        json!(["webhook-operator", "webhook-operator"]),
        "clusterPermissions' then permissions' accounts, as classic lists them"
    );
    let deployment = deployments.get(DEPLOYMENT).await.unwrap();
    assert_eq!(
        container_env(&deployment, "OPERATOR_CONDITION_NAME").as_deref(),
        Some(v1_condition)
    );
    upgradeable(&client, &namespace, v1_condition, "True").await;

    // The operator holds upgrades (a data migration): an upgrade waits, reported with its
    // words, the installed bundle's pod untouched.
    hold_upgrades(&client, &namespace, true).await;
    let said = upgradeable(&client, &namespace, v1_condition, "False").await;
    assert_eq!(said["message"], "moving widgets to the new schema");
    let generation = deployments.get(DEPLOYMENT).await.unwrap().metadata.generation;
    apply_version(&client, &name, &namespace, "0.2.0").await;
    let waiting = held(&client, &name).await;
    let progressing = components::condition(&waiting, "Progressing").unwrap();
    assert_eq!(
        progressing.message,
        format!(
            "upgrade to webhook-operator.v0.2.0 0.2.0 held: OperatorCondition {namespace}/{v1_condition}: \
             the operator says Upgradeable=False (Migrating): moving widgets to the new schema"
        )
    );
    assert_eq!(components::installed_version(&waiting), Some("0.1.0"));
    assert_eq!(
        components::condition(&waiting, "Installed").unwrap().status,
        "True"
    );
    assert_eq!(
        deployments.get(DEPLOYMENT).await.unwrap().metadata.generation,
        generation,
        "the installed bundle's Deployment is not touched while the upgrade waits"
    );
    assert_eq!(
        ready_pod(&client, &namespace, &node)
            .await
            .metadata
            .uid
            .as_deref(),
        Some(first_pod.as_str())
    );

    // The operator flips it: the upgrade goes at once (the watch of OperatorConditions), rolls
    // the pod; the Widgets stay, now reconciled by the new version.
    let flipped = std::time::Instant::now();
    hold_upgrades(&client, &namespace, false).await;
    components::wait_installed_within(&client, &name, "0.2.0", RUN_TIMEOUT).await;
    println!(
        "the held upgrade was installed {:.1}s after the operator's ConfigMap said so",
        flipped.elapsed().as_secs_f64()
    );
    let pod = ready_pod(&client, &namespace, &node).await;
    assert_ne!(pod.metadata.uid.as_deref(), Some(first_pod.as_str()), "a new pod");
    let status = reconciled(&v1, "three", "0.2.0").await;
    assert_eq!(
        status["message"],
        "3 replicas reconciled by webhook-operator 0.2.0"
    );
    assert_eq!(
        v1.get("large").await.unwrap().data["spec"],
        json!({"replicas": 3})
    );
    let serving_pod = pod.metadata.uid.clone().unwrap();
    // One OperatorCondition, the new bundle's: the old one pruned with its bundle.
    let v2_condition = "webhook-operator.v0.2.0";
    upgradeable(&client, &namespace, v2_condition, "True").await;
    assert!(
        operator_conditions(&client, &namespace)
            .get_opt(v1_condition)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        container_env(
            &deployments.get(DEPLOYMENT).await.unwrap(),
            "OPERATOR_CONDITION_NAME"
        )
        .as_deref(),
        Some(v2_condition)
    );

    // 0.2.0 holds upgrades too; the admin overrides it (spec.overrides win, as in classic).
    hold_upgrades(&client, &namespace, true).await;
    upgradeable(&client, &namespace, v2_condition, "False").await;
    apply_version(&client, &name, &namespace, "0.3.0").await;
    held(&client, &name).await;
    let overridden = std::time::Instant::now();
    operator_conditions(&client, &namespace)
        .patch(
            v2_condition,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"overrides": [{"type": "Upgradeable", "status": "True",
                "reason": "AdminOverride", "message": "the migration can be resumed by 0.3.0"}]}}),
            ),
        )
        .await
        .unwrap();
    support::wait_for("the overridden upgrade to start", RUN_TIMEOUT, || async {
        let d = deployments.get(DEPLOYMENT).await.map_err(|e| e.to_string())?;
        let args = d.spec.unwrap().template.spec.unwrap().containers[0]
            .args
            .clone()
            .unwrap_or_default();
        if args.contains(&"--fail-at-start".to_string()) {
            Ok(())
        } else {
            Err(format!("args {args:?}"))
        }
    })
    .await;
    println!(
        "the overridden upgrade was applied {:.1}s after the override",
        overridden.elapsed().as_secs_f64()
    );

    // A bundle whose container exits at start: reported at its deadline, 0.2.0 still installed
    // and serving (its pod kept, its webhook answering).
    let deadline = Duration::from_secs(DEADLINE_MINUTES * components::PROGRESS_DEADLINE_UNIT_SECONDS);
    let stuck = components::wait_extension_within(
        &client,
        &name,
        "Progressing=False/ProgressDeadlineExceeded",
        deadline + RUN_TIMEOUT,
        |ext| {
            components::condition(ext, "Progressing")
                .is_some_and(|c| c.status == "False" && c.reason == "ProgressDeadlineExceeded")
        },
    )
    .await;
    let progressing = components::condition(&stuck, "Progressing").unwrap();
    assert!(
        progressing.message.starts_with(&format!(
            "Revision has not rolled out for {DEADLINE_MINUTES} minute(s)."
        )) && progressing.message.contains(DEPLOYMENT),
        "{}",
        progressing.message
    );
    assert_eq!(components::installed_version(&stuck), Some("0.2.0"));
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let old = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=webhook-operator"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.metadata.uid.as_deref() == Some(serving_pod.as_str()))
        .expect("0.2.0's pod still there");
    assert!(pod_ready(&old), "0.2.0's pod still Ready");
    let refused = v1
        .create(&pp, &widget("v1", "twelve", json!({"replicas": 12})))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("spec.replicas 12 is more than 10"),
        "{refused}"
    );
    v1.create(&pp, &widget("v1", "two", json!({"replicas": 2})))
        .await
        .unwrap();
    reconciled(&v1, "two", "0.2.0").await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get(DEPLOYMENT)
        .await
        .unwrap();
    let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.contains(&"--fail-at-start".to_string()), "{args:?}");

    // Uninstall: the pod, the webhooks and the CRD go.
    Api::<olmv1_api::v1::ClusterExtension>::all(client.clone())
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    support::wait_for("the operator uninstalled", RUN_TIMEOUT, || async {
        let left_pods = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=webhook-operator"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        let crd = Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(CRD)
            .await
            .map_err(|e| e.to_string())?;
        let hooks = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .flat_map(|c| c.webhooks.iter().flatten())
            .filter(|w| {
                w.client_config
                    .service
                    .as_ref()
                    .is_some_and(|s| s.namespace == namespace)
            })
            .count();
        if left_pods == 0 && crd.is_none() && hooks == 0 {
            Ok(())
        } else {
            Err(format!(
                "{left_pods} pods, CRD {}, {hooks} webhooks",
                if crd.is_some() { "present" } else { "gone" }
            ))
        }
    })
    .await;
}
