//! High availability: two leader-elected replicas of the controller and of catalogd. Only the
//! leader writes (counted per replica in the API server's audit log, which `hack/local-up.sh`
//! enables); a leader killed with SIGKILL is replaced; a leader paused (SIGSTOP) past its lease
//! writes nothing once another took over, and exits non-zero when it resumes; a leader stopped
//! with SIGTERM releases its Lease, which another replica takes at its next retry.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::Api;
use olmv1_api::v1::ClusterCatalog;
use serde_json::json;

use crate::{
    Scenario,
    components::{self, AuditLog, AuditWrite, Replica, SYSTEM_NAMESPACE},
    support, two_versions,
};

const CONTROLLER_LEASE: &str = "olmv1-controller";
const CATALOGD_LEASE: &str = "catalogd-operator-lock";
/// Far above the 15 s lease plus a 2 s retry (`components::SHORT_LEASE`): a deadline for a
/// loaded machine, not a target.
const FAILOVER_DEADLINE: Duration = Duration::from_secs(90);
/// A lease far longer than [`FAILOVER_DEADLINE`]: a replica that takes over from its holder within
/// the deadline does so because the holder released it.
const LONG_LEASE: [u64; 3] = [600, 500, 2];

async fn lease(client: &kube::Client, name: &str) -> Option<Lease> {
    Api::<Lease>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .get_opt(name)
        .await
        .unwrap()
}

/// Waits until `holder` holds Lease `name`; returns when it took it (its `acquireTime`).
async fn wait_holder(client: &kube::Client, name: &str, holder: &str, replicas: &[&Replica]) -> Timestamp {
    support::wait_for(
        &format!("{holder} to hold the Lease {name}"),
        FAILOVER_DEADLINE,
        || async {
            let spec = lease(client, name).await.and_then(|l| l.spec).unwrap_or_default();
            match spec.holder_identity.as_deref() {
                Some(h) if h == holder => Ok(spec.acquire_time.unwrap().0),
                other => Err(format!(
                    "held by {other:?}; logs:\n{}",
                    replicas
                        .iter()
                        .map(|r| r.log())
                        .collect::<Vec<_>>()
                        .join("\n---\n")
                )),
            }
        },
    )
    .await
}

/// Waits until catalogd replica `replica` serves `catalog` (its base URL in the status).
async fn wait_served_by(client: &kube::Client, catalog: &str, replica: &Replica) {
    let api = Api::<ClusterCatalog>::all(client.clone());
    support::wait_for(
        &format!("ClusterCatalog {catalog} served by {}", replica.name),
        FAILOVER_DEADLINE,
        || async {
            let status = api.get(catalog).await.unwrap().status.unwrap_or_default();
            let base = status.urls.map(|u| u.base).unwrap_or_default();
            let serving = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Serving" && c.status == "True");
            if serving && base.contains(&replica.address) {
                Ok(())
            } else {
                Err(format!(
                    "base {base:?}, {:?}\n{}",
                    status.conditions,
                    replica.log()
                ))
            }
        },
    )
    .await
}

/// Waits for a resumed leader that lost its lease to exit, and returns its exit status.
async fn wait_exit(replica: &mut Replica) -> std::process::ExitStatus {
    let name = replica.name.clone();
    let deadline = Instant::now() + FAILOVER_DEADLINE;
    loop {
        if let Some(status) = replica.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{name} still runs after losing its lease:\n{}",
            replica.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn summary(writes: &BTreeMap<String, Vec<AuditWrite>>) -> String {
    writes
        .iter()
        .map(|(name, w)| {
            let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
            for write in w {
                *kinds
                    .entry(format!("{} {}", write.verb, write.resource))
                    .or_default() += 1;
            }
            format!("{name}: {kinds:?}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn only_the_leader_writes_and_a_killed_or_paused_leader_is_replaced() {
    let s = Scenario::new_exclusive("ha", two_versions).await;
    let _shared = components::stop_shared_components(&s.cluster);
    let audit = AuditLog::open();
    let start = audit.end();

    // Two replicas of each; the first one started leads.
    let catalogd_a = Replica::start("catalogd", "catalogd-a");
    wait_holder(&s.client, CATALOGD_LEASE, "catalogd-a", &[&catalogd_a]).await;
    let mut catalogd_b = Replica::start("catalogd", "catalogd-b");
    let controller_a = Replica::start("controller", "controller-a");
    wait_holder(&s.client, CONTROLLER_LEASE, "controller-a", &[&controller_a]).await;
    let mut controller_b = Replica::start("controller", "controller-b");

    wait_served_by(&s.client, &s.catalog, &catalogd_a).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    let writes = audit.writes_since(start);
    let wrote = |name: &str, resource: &str| {
        writes
            .get(name)
            .is_some_and(|w| w.iter().any(|w| w.resource == resource))
    };
    assert!(
        wrote("controller-a", "clusterextensions/status") && wrote("catalogd-a", "clustercatalogs/status"),
        "the leaders reconcile:\n{}",
        summary(&writes)
    );
    for follower in ["controller-b", "catalogd-b"] {
        assert!(
            !writes.contains_key(follower),
            "{follower} wrote while another replica led:\n{}",
            summary(&writes)
        );
    }

    // kill -9 of both leaders: the followers take over and an upgrade goes through them.
    let killed = Instant::now();
    let mut controller_a = controller_a;
    let mut catalogd_a = catalogd_a;
    controller_a.signal("KILL");
    catalogd_a.signal("KILL");
    wait_holder(&s.client, CONTROLLER_LEASE, "controller-b", &[&controller_b]).await;
    let controller_failover = killed.elapsed();
    wait_holder(&s.client, CATALOGD_LEASE, "catalogd-b", &[&catalogd_b]).await;
    let catalogd_failover = killed.elapsed();
    println!(
        "failover after kill -9 of the leader: controller {:.1} s, catalogd {:.1} s",
        controller_failover.as_secs_f64(),
        catalogd_failover.as_secs_f64()
    );
    controller_a.child.wait().unwrap();
    catalogd_a.child.wait().unwrap();
    wait_served_by(&s.client, &s.catalog, &catalogd_b).await;
    s.apply_extension(json!({"version": "1.1.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    // SIGSTOP of both leaders for longer than the lease: new replicas take over, and a change
    // made meanwhile is theirs to reconcile. These hold a long lease (for the graceful stop below).
    let mut controller_c = Replica::start_with_lease("controller", "controller-c", LONG_LEASE);
    let mut catalogd_c = Replica::start_with_lease("catalogd", "catalogd-c", LONG_LEASE);
    let paused = Instant::now();
    controller_b.signal("STOP");
    catalogd_b.signal("STOP");
    let controller_taken = wait_holder(&s.client, CONTROLLER_LEASE, "controller-c", &[&controller_c]).await;
    let controller_takeover = paused.elapsed();
    let catalogd_taken = wait_holder(&s.client, CATALOGD_LEASE, "catalogd-c", &[&catalogd_c]).await;
    let catalogd_takeover = paused.elapsed();
    println!(
        "takeover from a paused leader: controller {:.1} s, catalogd {:.1} s",
        controller_takeover.as_secs_f64(),
        catalogd_takeover.as_secs_f64()
    );
    let before_resume = audit.end();
    s.roll_back_to("1.0.0").await;
    wait_served_by(&s.client, &s.catalog, &catalogd_c).await;
    // Resumed, the old leaders find their lease gone: they write nothing and exit non-zero.
    controller_b.signal("CONT");
    catalogd_b.signal("CONT");
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    for (replica, lost) in [(&mut controller_b, "controller"), (&mut catalogd_b, "catalogd")] {
        let status = wait_exit(replica).await;
        assert!(
            !status.success(),
            "the paused {lost} leader exits non-zero: {status}\n{}",
            replica.log()
        );
        assert!(
            replica.log().contains("exiting so another replica can lead"),
            "{}",
            replica.log()
        );
    }
    let writes = audit.writes_since(start);
    for (old, taken) in [("controller-b", controller_taken), ("catalogd-b", catalogd_taken)] {
        let late: Vec<&AuditWrite> = writes
            .get(old)
            .map(|w| w.iter().filter(|w| w.received >= taken).collect())
            .unwrap_or_default();
        assert!(
            late.is_empty(),
            "{old} wrote after another replica took its lease at {taken}: {late:?}"
        );
    }
    assert!(
        audit.writes_since(before_resume).contains_key("controller-c"),
        "the new leader reconciled the change made while the old one was paused:\n{}",
        summary(&audit.writes_since(before_resume))
    );

    // SIGTERM of the leaders, whose lease lasts 600 s: they finish, release the Lease and exit 0;
    // the replicas started now take it at their next retry, long before it would have run out.
    let controller_d = Replica::start("controller", "controller-d");
    let catalogd_d = Replica::start("catalogd", "catalogd-d");
    let stopped = Instant::now();
    controller_c.signal("TERM");
    catalogd_c.signal("TERM");
    wait_holder(
        &s.client,
        CONTROLLER_LEASE,
        "controller-d",
        &[&controller_d, &controller_c],
    )
    .await;
    let controller_handover = stopped.elapsed();
    wait_holder(
        &s.client,
        CATALOGD_LEASE,
        "catalogd-d",
        &[&catalogd_d, &catalogd_c],
    )
    .await;
    let catalogd_handover = stopped.elapsed();
    println!(
        "takeover after SIGTERM of a leader holding a 600 s lease: controller {:.1} s, catalogd {:.1} s",
        controller_handover.as_secs_f64(),
        catalogd_handover.as_secs_f64()
    );
    for replica in [&mut controller_c, &mut catalogd_c] {
        let status = wait_exit(replica).await;
        assert!(
            status.success() && replica.log().contains("released the Lease"),
            "{} stopped with SIGTERM releases its Lease and exits 0: {status}\n{}",
            replica.name,
            replica.log()
        );
    }
}
