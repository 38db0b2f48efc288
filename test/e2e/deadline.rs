//! `spec.progressDeadlineMinutes`: a rollout that does not become ready in time is reported as
//! `Progressing=False/ProgressDeadlineExceeded`, what is installed stays installed, and the
//! rollout becoming ready later clears it. The test controllers count a deadline minute as
//! [`components::PROGRESS_DEADLINE_UNIT_SECONDS`] seconds (the CRD still asks for 10 to 720).

use std::time::Duration;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{Node, Secret},
    },
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, PostParams},
};
use serde_json::json;

use crate::{
    Scenario, components,
    fixtures::{Bundle, Channel, NODE_POOL_KEY, Package, deployment_name},
    support,
};

/// The extension's deadline, in (test) minutes: upstream's minimum.
const DEADLINE_MINUTES: i64 = 10;

/// 1.0.0, and 1.1.0 (replaces it) whose pods run only on the Nodes of pool `package`.
fn stuck_upgrade(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0")
                .replaces("1.0.0", package)
                .on_node_pool(package),
        ],
        deprecations: vec![],
    }
}

async fn apply_version(s: &Scenario, version: &str) {
    let mut body = components::extension(
        &s.extension,
        &s.namespace,
        &s.package,
        json!({"version": version}),
    );
    body["spec"]["progressDeadlineMinutes"] = json!(DEADLINE_MINUTES);
    components::apply_extension(&s.client, body).await;
}

/// A fake Node kwok keeps Ready, in pool `pool` and tainted so only that pool's pods go there.
pub(crate) fn pool_node(name: &str, pool: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", NODE_POOL_KEY: pool}
        },
        "spec": {"taints": [{"key": NODE_POOL_KEY, "value": pool, "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
            "nodeInfo": {"architecture": "amd64", "kubeletVersion": "fake", "kubeProxyVersion": "fake", "operatingSystem": "linux",
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": ""}
        }
    }))
    .expect("a valid Node")
}

#[tokio::test]
async fn a_rollout_past_its_deadline_is_reported_keeps_the_installed_version_and_clears_when_ready() {
    let s = Scenario::new("deadline", stuck_upgrade).await;
    apply_version(&s, "1.0.0").await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // 1.1.0's pods have no Node to run on: the rollout never becomes ready.
    apply_version(&s, "1.1.0").await;
    let deadline = Duration::from_secs(DEADLINE_MINUTES as u64 * components::PROGRESS_DEADLINE_UNIT_SECONDS);
    let stuck = components::wait_extension_within(
        &s.client,
        &s.extension,
        "Progressing=False/ProgressDeadlineExceeded",
        deadline + components::INSTALL_TIMEOUT,
        |ext| {
            components::condition(ext, "Progressing")
                .is_some_and(|c| c.status == "False" && c.reason == "ProgressDeadlineExceeded")
        },
    )
    .await;
    let progressing = components::condition(&stuck, "Progressing").unwrap();
    let prefix = format!("Revision has not rolled out for {DEADLINE_MINUTES} minute(s). Last status: ");
    assert!(
        progressing.message.starts_with(&prefix)
            && progressing
                .message
                .contains(&crate::fixtures::deployment_name(&s.package)),
        "upstream's message, naming what the rollout waits for: {}",
        progressing.message
    );
    // What was installed stays installed, and is still reported so.
    assert_eq!(components::installed_version(&stuck), Some("1.0.0"));
    assert_eq!(
        components::condition(&stuck, "Installed").map(|c| c.status.as_str()),
        Some("True")
    );
    // Not reported before the deadline: the record names when the rollout began.
    let record = s.record().await;
    let started: Timestamp = record["rollout"]["startedAt"]
        .as_str()
        .expect("the record names when the rollout began")
        .parse()
        .unwrap();
    let reported = progressing.last_transition_time.0;
    assert!(
        reported.duration_since(started).unsigned_abs() >= deadline && reported >= started,
        "reported at {reported}, the rollout began at {started}, the deadline is {deadline:?}"
    );

    // A Node for 1.1.0's pods: the rollout completes and the condition clears.
    let nodes = Api::<Node>::all(s.client.clone());
    let node_name = format!("{}-node", s.package);
    nodes
        .create(&PostParams::default(), &pool_node(&node_name, &s.package))
        .await
        .unwrap();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert!(
        s.record().await.get("rollout").is_none(),
        "a ready rollout has no start any more"
    );

    // Uninstalled before its Node goes, so that no pod is left without one.
    s.uninstall().await;
    nodes.delete(&node_name, &DeleteParams::default()).await.unwrap();
}

/// 1.0.0, whose pods run only on the Nodes of pool `package`: there are none.
fn never_ready(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0"])],
        bundles: vec![Bundle::new("1.0.0").on_node_pool(package)],
        deprecations: vec![],
    }
}

#[tokio::test]
async fn a_rollout_in_progress_is_followed_by_reads_and_what_is_deleted_meanwhile_is_applied_again() {
    let s = Scenario::new("rollreads", never_ready).await;
    s.apply_extension(json!({})).await;
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let name = deployment_name(&s.package);
    let applied = support::wait_for("the Deployment applied", components::INSTALL_TIMEOUT, || async {
        deployments.get_opt(&name).await.ok().flatten().ok_or("not yet")
    })
    .await;

    // The reconciles while it rolls out (polled, and on each change of its status) read the
    // record and readiness and apply nothing: a full apply reads and writes each of the
    // bundle's objects (9 requests or more here).
    let costs = support::wait_for(
        "three reconciles of the rollout that apply nothing",
        components::INSTALL_TIMEOUT,
        || async {
            let costs = components::reconcile_requests(&s.extension);
            let reads_only = match costs.iter().position(|cost| *cost >= 9) {
                Some(full_apply) => costs[full_apply + 1..].iter().filter(|cost| **cost <= 3).count(),
                None => 0,
            };
            if reads_only >= 3 {
                Ok(costs)
            } else {
                Err(format!("API requests per reconcile: {costs:?}"))
            }
        },
    )
    .await;
    println!("API requests of the reconciles of a rollout in progress: {costs:?}");

    // The revision record deleted meanwhile (no watch tells): the first reconcile begun after
    // the deletion finds it is not the one the trusted apply wrote, applies in full and writes it
    // again. Reconciles of one extension never overlap, so the second to finish after the
    // deletion began after it (the first may have read the record before). Trusting the apply
    // regardless would read the readiness of no object at all and report the rollout, which
    // never ends, Succeeded: the extension's Progressing is watched throughout.
    let (listening, listened) = tokio::sync::oneshot::channel();
    let succeeded = tokio::spawn({
        let extensions = Api::<olmv1_api::v1::ClusterExtension>::all(s.client.clone());
        let fields = format!("metadata.name={}", s.extension);
        async move {
            use futures::StreamExt;
            use kube::runtime::WatchStreamExt;
            let config = kube::runtime::watcher::Config::default().fields(&fields);
            let mut events = std::pin::pin!(kube::runtime::watcher(extensions, config).applied_objects());
            let mut listening = Some(listening);
            while let Some(event) = events.next().await {
                let Ok(ext) = event else { continue };
                if let Some(listening) = listening.take() {
                    let _ = listening.send(());
                }
                if let Some(c) = components::condition(&ext, "Progressing")
                    && c.reason == "Succeeded"
                {
                    return c.message.clone();
                }
            }
            String::new()
        }
    });
    listened.await.unwrap();
    let records = Api::<Secret>::namespaced(s.client.clone(), components::SYSTEM_NAMESPACE);
    let record_name = format!("{}-revision", s.extension);
    let recorded = records.get(&record_name).await.unwrap();
    records
        .delete(&record_name, &DeleteParams::default())
        .await
        .unwrap();
    let finished = components::reconcile_requests(&s.extension).len();
    support::wait_for(
        "two reconciles finished after the record's deletion",
        components::INSTALL_TIMEOUT,
        || async {
            let now = components::reconcile_requests(&s.extension).len();
            if now >= finished + 2 {
                Ok(())
            } else {
                Err(format!("{} finished", now - finished))
            }
        },
    )
    .await;
    match records.get_opt(&record_name).await {
        Ok(Some(again)) if again.uid() != recorded.uid() => {}
        other => panic!(
            "the deleted revision record is not written again by the reconcile after its deletion: {:?}; API requests per reconcile: {:?}",
            other.map(|r| r.map(|r| r.uid())),
            components::reconcile_requests(&s.extension)
        ),
    }
    assert!(
        !succeeded.is_finished(),
        "a rollout that never ends was reported Succeeded once its record was deleted: {:?}",
        succeeded.await
    );
    succeeded.abort();

    // A Deployment the rollout waits for, deleted: the watch tells, and it is applied again.
    deployments.delete(&name, &DeleteParams::default()).await.unwrap();
    support::wait_for(
        "the deleted Deployment applied again",
        components::INSTALL_TIMEOUT,
        || async {
            match deployments.get_opt(&name).await {
                Ok(Some(again)) if again.uid() != applied.uid() => Ok(()),
                other => Err(format!("{:?}", other.map(|d| d.map(|d| d.uid())))),
            }
        },
    )
    .await;
    s.uninstall().await;
}
