//! Lifecycle: uninstall, drift repair, restarts of the controller and of kube-apiserver.

use std::time::Duration;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Secret, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::{
    ClusterCatalog, ClusterExtension,
    conditions::{ANNOTATION_RELEASED, FINALIZER_CLEANUP_CONTENT, LABEL_OWNER_NAME},
};
use serde_json::json;

use crate::{Scenario, components, fixtures, support, two_versions};

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::wait_for(
        &format!("{name} to be deleted"),
        components::INSTALL_TIMEOUT,
        || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".to_string()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await
}

async fn assert_everything_removed(s: &Scenario) {
    wait_gone(&Api::<ClusterExtension>::all(s.client.clone()), &s.extension).await;
    wait_gone(
        &Api::<Deployment>::namespaced(s.client.clone(), &s.namespace),
        &fixtures::deployment_name(&s.package),
    )
    .await;
    wait_gone(
        &Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace),
        &format!("{}-settings", s.package),
    )
    .await;
    // The CRD: deleted, its removal begun. The API server then deletes its instances and lifts its
    // `customresourcecleanup` finalizer with one worker for all CRDs: behind the other tests'
    // CRDs that took over 3 minutes in a full CI run, which is the API server's queue, not ours.
    let crds = Api::<CustomResourceDefinition>::all(s.client.clone());
    let crd = fixtures::crd_name(&s.package);
    support::wait_for(
        &format!("{crd} to be deleted"),
        components::INSTALL_TIMEOUT,
        || async {
            match crds.get_opt(&crd).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(c) if c.metadata.deletion_timestamp.is_some() => Ok(()),
                Some(_) => Err("still there, not being deleted".to_string()),
            }
        },
    )
    .await;
    wait_gone(
        &Api::<ServiceAccount>::namespaced(s.client.clone(), &s.namespace),
        &fixtures::deployment_name(&s.package),
    )
    .await;
    wait_gone(
        &Api::<Secret>::namespaced(s.client.clone(), components::SYSTEM_NAMESPACE),
        &format!("{}-revision", s.extension),
    )
    .await;
}

#[tokio::test]
async fn deleting_the_extension_removes_everything_it_installed() {
    let s = Scenario::new("delete", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    Api::<ClusterExtension>::all(s.client.clone())
        .delete(&s.extension, &DeleteParams::default())
        .await
        .unwrap();
    assert_everything_removed(&s).await;
}

#[tokio::test]
async fn deleting_the_extension_completes_when_its_service_account_is_gone() {
    let s = Scenario::new("delnosa", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    Api::<ServiceAccount>::namespaced(s.client.clone(), &s.namespace)
        .delete("installer", &DeleteParams::default())
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(s.client.clone())
        .delete(&format!("{}-installer", s.namespace), &DeleteParams::default())
        .await
        .unwrap();
    Api::<ClusterExtension>::all(s.client.clone())
        .delete(&s.extension, &DeleteParams::default())
        .await
        .unwrap();
    // The finalizer does not hang; garbage collection removes what the account cannot.
    assert_everything_removed(&s).await;
}

#[tokio::test]
async fn a_released_extension_is_let_go_and_deleting_it_keeps_its_content() {
    let s = Scenario::new("released", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let extensions = Api::<ClusterExtension>::all(s.client.clone());
    let audit = components::AuditLog::open();
    let since = audit.end();
    let release = json!({"metadata": {"annotations": {ANNOTATION_RELEASED: "the e2e test"}}});
    extensions
        .patch(&s.extension, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    // The controller lets go in a reconcile of its own: its finalizer off, nothing uninstalled.
    support::wait_for(
        "the controller to take its finalizer off",
        components::INSTALL_TIMEOUT,
        || async {
            let ext = extensions.get(&s.extension).await.map_err(|e| e.to_string())?;
            match ext.metadata.finalizers.unwrap_or_default() {
                f if f.iter().any(|f| f == FINALIZER_CLEANUP_CONTENT) => Err(format!("finalizers {f:?}")),
                _ => Ok(()),
            }
        },
    )
    .await;
    // Deleted with Orphan propagation, as `migrate rollback` does: the garbage collector takes
    // the owner references off, and everything stays.
    extensions
        .delete(&s.extension, &DeleteParams::orphan())
        .await
        .unwrap();
    wait_gone(&extensions, &s.extension).await;
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let deployment = fixtures::deployment_name(&s.package);
    support::wait_for(
        "the garbage collector to orphan the operator's Deployment",
        components::INSTALL_TIMEOUT,
        || async {
            let d = deployments.get(&deployment).await.map_err(|e| e.to_string())?;
            match d.metadata.owner_references.unwrap_or_default() {
                refs if refs.is_empty() => Ok(()),
                refs => Err(format!("owner references {refs:?}")),
            }
        },
    )
    .await;
    let crd = Api::<CustomResourceDefinition>::all(s.client.clone())
        .get(&fixtures::crd_name(&s.package))
        .await
        .unwrap();
    assert!(
        crd.metadata.deletion_timestamp.is_none(),
        "the CRD is being deleted"
    );
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .get(&format!("{}-settings", s.package))
        .await
        .unwrap();
    // A reconcile under way when the release came stops at its next object (one or two writes
    // may already be on their way; the audit of a full CI run showed two). The finalizer comes
    // off in the next reconcile, after it: from then on nothing of the extension is written.
    let writes = audit.writes_of(since, &s.namespace, &[&s.package, &s.extension]);
    let let_go = writes
        .iter()
        .filter(|w| {
            w.resource == "clusterextensions" && w.verb == "patch" && w.user.ends_with(":olmv1-controller")
        })
        .map(|w| w.received)
        .max()
        .expect("the controller's write taking its finalizer off");
    let written: Vec<String> = writes
        .iter()
        .filter(|w| w.received > let_go && w.resource != "clusterextensions")
        .map(|w| {
            format!(
                "{} {} {:?}/{:?} by {} at {}",
                w.verb, w.resource, w.namespace, w.name, w.user, w.received
            )
        })
        .collect();
    assert_eq!(
        written,
        Vec::<String>::new(),
        "written after the controller let go at {let_go}"
    );
}

#[tokio::test]
async fn drift_on_an_applied_object_is_repaired() {
    let s = Scenario::new("drift", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    s.scale_operator_and_wait_restored(3).await;
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let name = fixtures::deployment_name(&s.package);

    // Deleted (its last state, as the watch reports it, looks like the ready one): applied
    // again, a new object.
    let uid = deployments.get(&name).await.unwrap().metadata.uid;
    deployments.delete(&name, &DeleteParams::default()).await.unwrap();
    support::wait_for(
        "the deleted Deployment to be applied again",
        components::INSTALL_TIMEOUT,
        || async {
            match deployments.get_opt(&name).await.map_err(|e| e.to_string())? {
                Some(d) if d.metadata.uid != uid => Ok(()),
                Some(_) => Err("the deleted one is still there".to_string()),
                None => Err("not there".to_string()),
            }
        },
    )
    .await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn drift_on_unwatched_kinds_is_found_by_the_drift_check_and_nothing_else_is_applied() {
    let s = Scenario::new("driftcheck", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    // The ready mark keeps the objects of unwatched kinds as the apply left them.
    support::wait_for(
        "the ready mark's applied objects in the revision record",
        components::INSTALL_TIMEOUT,
        || async {
            let record = s.record().await;
            let kinds: Vec<String> = record["ready"]["applied"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            // (Installed for all namespaces, the bundle's permissions are cluster roles too.)
            let all = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap"];
            if all.iter().all(|k| kinds.iter().any(|have| have == k)) {
                Ok(())
            } else {
                Err(format!("record: {record}"))
            }
        },
    )
    .await;

    // Nothing changed: once the install's own last reconciles (queued by its applies' watch
    // events) are done, a drift check period passes with no write of the extension; two more
    // checks (ClusterRoles listed by the controller, the ConfigMap read as the installer) come and
    // go, and nothing of it is written: no apply, no record. A check that took an unchanged
    // extension for drifted would apply it every period, and this would never settle.
    let audit = components::AuditLog::open();
    let installer = format!("system:serviceaccount:{}:installer", s.namespace);
    let record = format!("{}-revision", s.extension);
    let ours = |since: u64| -> Vec<components::AuditWrite> {
        audit
            .writes_since(since)
            .into_values()
            .flatten()
            .filter(|w| w.user == installer || w.name.as_deref() == Some(record.as_str()))
            .collect()
    };
    let settle = std::time::Instant::now() + components::INSTALL_TIMEOUT;
    loop {
        let before = audit.end();
        let (checks, _) = components::drift_counts().await;
        components::wait_drift_checks(checks, 1).await;
        let written = ours(before);
        if written.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < settle,
            "the extension is still written every drift check: {written:?}"
        );
    }
    let before = audit.end();
    let (checks, _) = components::drift_counts().await;
    components::wait_drift_checks(checks, 2).await;
    let written = ours(before);
    assert!(
        written.is_empty(),
        "an unchanged extension was written: {written:?}"
    );

    // A ClusterRole's rules edited (a kind the controller lists) and the ConfigMap deleted (one it
    // reads as the installer): the next check finds both, and the extension is applied again.
    let by_owner = kube::api::ListParams::default().labels(&format!("{LABEL_OWNER_NAME}={}", s.extension));
    let roles = Api::<ClusterRole>::all(s.client.clone());
    let role = roles.list(&by_owner).await.unwrap().items.remove(0);
    let role_name = role.metadata.name.clone().unwrap();
    let rules = role.rules.clone();
    roles
        .patch(
            &role_name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
            ),
        )
        .await
        .unwrap();
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let config_map = config_maps.list(&by_owner).await.unwrap().items.remove(0);
    let config_map_name = config_map.metadata.name.clone().unwrap();
    config_maps
        .delete(&config_map_name, &DeleteParams::default())
        .await
        .unwrap();
    let (_, drifted) = components::drift_counts().await;
    support::wait_for(
        "the ClusterRole's rules restored and the ConfigMap applied again",
        components::INSTALL_TIMEOUT,
        || async {
            let now = roles.get(&role_name).await.map_err(|e| e.to_string())?.rules;
            let back = config_maps
                .get_opt(&config_map_name)
                .await
                .map_err(|e| e.to_string())?;
            match (now == rules, back) {
                (true, Some(back)) if back.metadata.uid != config_map.metadata.uid => Ok(()),
                (restored, back) => Err(format!("rules restored: {restored}, ConfigMap: {back:?}")),
            }
        },
    )
    .await;
    assert!(
        components::drift_counts().await.1 > drifted,
        "the drift check found the change"
    );
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn a_controller_restarted_in_the_middle_of_an_install_converges() {
    let s = Scenario::new("restart", two_versions).await;
    s.apply_extension(json!({})).await;
    // Restart as soon as the controller has begun (the finalizer is its first write).
    let api = Api::<ClusterExtension>::all(s.client.clone());
    support::wait_for(
        "the controller to pick the extension up",
        components::INSTALL_TIMEOUT,
        || async {
            let ext = api.get(&s.extension).await.map_err(|e| e.to_string())?;
            if ext.metadata.finalizers.unwrap_or_default().is_empty() {
                Err("no finalizer yet")
            } else {
                Ok(())
            }
            .map_err(str::to_string)
        },
    )
    .await;
    components::restart_controller();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn a_restarted_controller_re_verifies_an_installed_extension_without_writing() {
    let s = Scenario::new("reverify", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    // The install ends by marking, in the revision record, what it found ready.
    support::wait_for(
        "the ready mark in the revision record",
        components::INSTALL_TIMEOUT,
        || async {
            let record = s.record().await;
            let watched = record["ready"]["watched"].as_array().cloned().unwrap_or_default();
            let deployment = fixtures::deployment_name(&s.package);
            if watched
                .iter()
                .any(|w| w["kind"] == "Deployment" && w["name"] == deployment.as_str())
            {
                Ok(())
            } else {
                Err(format!("record: {record}"))
            }
        },
    )
    .await;
    // And publishes its Installed event after the status write: the install's last write, which
    // on a loaded machine can reach the API server after the checks above.
    support::wait_for(
        "the install's Installed event",
        components::INSTALL_TIMEOUT,
        || async {
            let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(s.client.clone(), "default")
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            events
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("Installed")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(s.extension.as_str())
                })
                .then_some(())
                .ok_or_else(|| "no Installed event yet".to_string())
        },
    )
    .await;
    let record_before = s.record().await;

    let audit = components::AuditLog::open();
    let before = audit.end();
    let stopped = components::restart_controller();
    // The new process has looked at the extension once its metric names the installed bundle
    // (set after the status write, if there is one).
    let installed = format!(
        "olmv1_clusterextension_installed_bundle{{extension=\"{}\",bundle=\"{}\"}} 1",
        s.extension,
        fixtures::bundle_name(&s.package, "1.0.0")
    );
    support::wait_for(
        "the restarted controller to reconcile the extension",
        components::INSTALL_TIMEOUT,
        || async {
            let metrics = components::scrape_metrics("controller").await?;
            if metrics.contains(&installed) {
                Ok(())
            } else {
                Err(format!("no {installed}"))
            }
        },
    )
    .await;

    // Nothing of this extension was written by the new process: no apply, no token for its
    // service account, no record, no status. (A write of the old one still under way when it
    // was killed is received before it exited.)
    let ours: Vec<_> = audit
        .writes_of(before, &s.namespace, &[&s.package, &s.extension])
        .into_iter()
        .filter(|w| w.received > stopped)
        .map(|w| {
            format!(
                "{} {} {:?}/{:?} by {} at {}",
                w.verb, w.resource, w.namespace, w.name, w.user, w.received
            )
        })
        .collect();
    assert!(ours.is_empty(), "writes after the restart: {ours:?}");
    assert_eq!(
        s.record().await,
        record_before,
        "the revision record is unchanged"
    );
    let ext = Api::<ClusterExtension>::all(s.client.clone())
        .get(&s.extension)
        .await
        .unwrap();
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
}

#[tokio::test]
async fn a_kube_apiserver_restart_is_survived() {
    let s = Scenario::new_exclusive("apirestart", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    components::restart_api_server(&s.cluster).await;
    // Reconnected watches and clients keep working: an upgrade asked for after the restart lands.
    let client = support::client().await;
    let body = components::extension(
        &s.extension,
        &s.namespace,
        &s.package,
        json!({"version": "1.1.0"}),
    );
    support::wait_for_every(
        "the API server to accept writes",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let (client, body) = (client.clone(), body.clone());
            async move {
                Api::<ClusterExtension>::all(client)
                    .patch(
                        body["metadata"]["name"].as_str().unwrap(),
                        &PatchParams::apply("e2e").force(),
                        &Patch::Apply(&body),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        },
    )
    .await;
    // Watches reconnect, each with its own backoff (up to 30 s between attempts; the restarted
    // server refuses them until its RBAC caches fill). With one backoff over all of them (kube's
    // Controller default) this took over 5 minutes under load; now seconds. The deadline is a
    // bound, not the expectation.
    components::wait_installed_within(&client, &s.extension, "1.1.0", Duration::from_secs(300)).await;
    // cert-manager's caches missed what was written while its watches backed off: the tests
    // after this one must not meet them.
    components::restart_cert_manager().await;
}

#[tokio::test]
async fn the_components_serve_health_readiness_and_metrics() {
    let s = Scenario::new("operations", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    // The probes answer anyone, in plain HTTP, on their own port (another test may be
    // restarting the controller: wait for it).
    for role in ["catalogd", "controller"] {
        for path in ["/healthz", "/readyz"] {
            let url = format!("http://{}{path}", components::operations(role).probes);
            support::wait_for(
                &format!("{role} {path} to answer 200"),
                components::INSTALL_TIMEOUT,
                || async {
                    match reqwest::get(&url).await.map(|r| r.status()) {
                        Ok(status) if status == 200 => Ok(()),
                        other => Err(format!("{other:?}")),
                    }
                },
            )
            .await;
        }
    }
    let catalogd = support::wait_for("catalogd /metrics", components::INSTALL_TIMEOUT, || {
        components::scrape_metrics("catalogd")
    })
    .await;
    assert!(
        catalogd.contains("olmv1_clustercatalog_reconcile_total"),
        "{catalogd}"
    );
    let controller = support::wait_for("controller /metrics", components::INSTALL_TIMEOUT, || {
        components::scrape_metrics("controller")
    })
    .await;
    assert!(
        controller.contains("olmv1_clusterextension_reconcile_total"),
        "{controller}"
    );
    assert!(controller.contains("olmv1_clusterextension_reconcile_duration_seconds_bucket"));
    let installed = format!(
        "olmv1_clusterextension_installed_bundle{{extension=\"{}\",bundle=\"{}\"}} 1",
        s.extension,
        fixtures::bundle_name(&s.package, "1.1.0")
    );
    assert!(controller.contains(&installed), "{installed} in {controller}");
    assert!(controller.contains("olmv1_upgradeable_blocking_extensions"));
}

#[tokio::test]
async fn a_controller_killed_in_the_middle_of_an_upgrade_converges_with_nothing_orphaned() {
    let s = Scenario::new("killupgrade", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // kill -9 as soon as the API server has recorded the upgrade's first write of bundle content
    // (the service account's apply in the install namespace or of the CRD).
    let audit = components::AuditLog::open();
    let before = audit.end();
    s.apply_extension(json!({"version": "1.1.0"})).await;
    support::wait_for_every(
        "the controller to begin applying 1.1.0",
        components::INSTALL_TIMEOUT,
        Duration::from_millis(5),
        || async {
            let writes = audit.writes_since(before);
            let applying = writes.get("controller").is_some_and(|w| {
                w.iter().any(|w| {
                    w.verb == "patch"
                        && (w.namespace.as_deref() == Some(s.namespace.as_str())
                            || w.resource == "customresourcedefinitions")
                })
            });
            if applying { Ok(()) } else { Err("no apply yet") }
        },
    )
    .await;
    components::restart_controller();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    // The record names the new revision and exactly the objects that carry the owner label.
    let record = s.record().await;
    assert_eq!(record["bundleVersion"], "1.1.0");
    assert_eq!(record["revision"], 2, "one upgrade, one new revision");
    let mut recorded: Vec<(String, String)> = record["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    recorded.sort();
    let selector = format!("{LABEL_OWNER_NAME}={}", s.extension);
    let mut labelled = Vec::new();
    for (kinds, scope) in [
        (
            "deployments,configmaps,secrets,services,serviceaccounts,roles,rolebindings,operatorconditions.operators.coreos.com",
            vec!["-n", s.namespace.as_str()],
        ),
        (
            "customresourcedefinitions,clusterroles,clusterrolebindings",
            vec![],
        ),
    ] {
        let mut args = vec!["get", kinds, "-l", selector.as_str(), "-o", "json"];
        args.extend(scope);
        let out = support::kubectl(&args).ok();
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        for item in list["items"].as_array().unwrap() {
            labelled.push((
                item["kind"].as_str().unwrap().to_string(),
                item["metadata"]["name"].as_str().unwrap().to_string(),
            ));
        }
    }
    labelled.sort();
    assert_eq!(
        labelled, recorded,
        "every applied object is recorded, none orphaned"
    );
}

#[tokio::test]
async fn a_reconcile_with_nothing_changed_makes_at_most_three_api_requests_and_no_write() {
    // Alone: another test restarting the shared controller makes its next reconcile of every
    // extension re-verify by reads (more requests), and other tests' catalogs and pull secrets
    // start reconciles that would be counted as this test's.
    let s = Scenario::new_exclusive("noop", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    // An annotation changes nothing the controller acts on, but its watch event starts a
    // reconcile. The first rounds may still carry the install's own late events.
    let api = Api::<ClusterExtension>::all(s.client.clone());
    let mut costs = Vec::new();
    for round in 0..3 {
        let seen = components::reconcile_requests(&s.extension).len();
        let touched = api
            .patch(
                &s.extension,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"olmv1.test/touch": round.to_string()}}})),
            )
            .await
            .unwrap();
        let cost = support::wait_for(
            "a reconcile after the annotation",
            components::INSTALL_TIMEOUT,
            || async {
                let all = components::reconcile_requests(&s.extension);
                all.get(seen)
                    .copied()
                    .ok_or(format!("{} reconciles logged", all.len()))
            },
        )
        .await;
        costs.push(cost);
        let now = api.get(&s.extension).await.unwrap();
        if round == 2 {
            assert_eq!(
                now.metadata.resource_version, touched.metadata.resource_version,
                "the controller wrote to the extension (status or finalizer) with nothing changed"
            );
        }
    }
    println!("API requests of the reconciles after an annotation: {costs:?}");
    assert!(
        *costs.last().unwrap() <= 3,
        "a no-op reconcile made {costs:?} API requests:\n{}",
        components::log_tail("controller")
    );
}

/// `<prefix>_reconcile_failures_total{error="FinalizerFailed"}` of `role`'s `/metrics`: failures
/// to add or remove a finalizer, and nothing else (0 before the first). The category, not the
/// total: tests running alongside make other extensions and catalogs fail on purpose.
async fn finalizer_failures(role: &str, prefix: &str) -> f64 {
    let name = format!("{prefix}_reconcile_failures_total");
    components::scrape(role)
        .await
        .iter()
        .filter(|s| s.name == name && s.labels.get("error").map(String::as_str) == Some("FinalizerFailed"))
        .map(|s| s.value)
        .sum()
}

/// The WARN and ERROR lines of `role`'s log after its first `since` bytes that name `object`.
fn warnings_naming(role: &str, since: usize, object: &str) -> Vec<String> {
    let log = components::log(role);
    log.get(since..)
        .unwrap_or_default()
        .lines()
        .filter(|l| (l.contains(" WARN ") || l.contains(" ERROR ")) && l.contains(object))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn an_uninstall_is_no_failed_reconcile() {
    let s = Scenario::new("quietdel", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let failures_before = finalizer_failures("controller", "olmv1_clusterextension").await;
    let since = components::log("controller").len();
    s.uninstall().await;
    assert_everything_removed(&s).await;
    // Reconciles of one extension run one at a time, in the order they were asked for: once a
    // Deployment labelled as the deleted extension's is seen to find it gone, every reconcile
    // the uninstall queued (its objects' deletions) has ended.
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace);
    let sentinel: Deployment = serde_json::from_value(json!({
        "metadata": {
            "name": "sentinel",
            "labels": olmv1::apply::ownership::owner_labels(&s.extension),
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "sentinel"}},
            "template": {
                "metadata": {"labels": {"app": "sentinel"}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/none:1"}]}
            }
        }
    }))
    .unwrap();
    deployments
        .create(&kube::api::PostParams::default(), &sentinel)
        .await
        .unwrap();
    let gone_line = format!("extension={}", s.extension);
    support::wait_for(
        "the controller to find the extension gone",
        components::INSTALL_TIMEOUT,
        || async {
            let log = components::log("controller");
            let seen = log
                .get(since..)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains("ClusterExtension no longer exists") && l.ends_with(&gone_line));
            if seen { Ok(()) } else { Err("not yet") }
        },
    )
    .await;
    deployments
        .delete("sentinel", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        warnings_naming("controller", since, &s.extension),
        Vec::<String>::new(),
        "a normal uninstall logged a failure"
    );
    let failures_after = finalizer_failures("controller", "olmv1_clusterextension").await;
    assert!(
        failures_after <= failures_before,
        "a normal uninstall counted a failed reconcile: FinalizerFailed {failures_before} -> {failures_after}"
    );
}

#[tokio::test]
async fn deleting_a_catalog_is_no_failed_reconcile() {
    let s = Scenario::new("quietcat", two_versions).await;
    let failures_before = finalizer_failures("catalogd", "olmv1_clustercatalog").await;
    let since = components::log("catalogd").len();
    let catalogs = Api::<ClusterCatalog>::all(s.client.clone());
    catalogs
        .delete(&s.catalog, &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&catalogs, &s.catalog).await;
    // The deletion's reconcile logs that it dropped the content, then removes the finalizer.
    let dropped = format!("catalog={}", s.catalog);
    support::wait_for(
        "catalogd to drop the deleted catalog",
        components::INSTALL_TIMEOUT,
        || async {
            let log = components::log("catalogd");
            let seen = log
                .get(since..)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains("ClusterCatalog deleted") && l.ends_with(&dropped));
            if seen { Ok(()) } else { Err("not yet") }
        },
    )
    .await;
    assert_eq!(
        warnings_naming("catalogd", since, &s.catalog),
        Vec::<String>::new(),
        "deleting a catalog logged a failure"
    );
    let failures_after = finalizer_failures("catalogd", "olmv1_clustercatalog").await;
    assert!(
        failures_after <= failures_before,
        "deleting a catalog counted a failed reconcile: FinalizerFailed {failures_before} -> {failures_after}"
    );
}

/// The finalizer step both reconcilers run, on ConfigMaps no controller looks at, each time with
/// a copy older than the API server's (as a reconcile queued behind the one that changed it
/// gets): a change already made is success, and one made meanwhile is made again.
#[tokio::test]
async fn the_finalizer_step_takes_already_done_as_done() {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use kube::runtime::{controller::Action, finalizer::Event};
    use olmv1::controller::finalizer;

    const OURS: &str = "olmv1.test/ours";
    const OTHER: &str = "olmv1.test/other";
    let client = support::client().await;
    let ns = support::fresh_namespace(&client, "finalizer").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let create = |name: &'static str, finalizers: &'static [&'static str]| {
        let api = api.clone();
        async move {
            let object: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": name, "finalizers": finalizers}}))
                    .unwrap();
            api.create(&kube::api::PostParams::default(), &object)
                .await
                .unwrap()
        }
    };
    let set = |name: &'static str, finalizers: &'static [&'static str]| {
        let api = api.clone();
        async move {
            let patch = json!({"metadata": {"finalizers": finalizers}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    // The object as a reconcile sees it once its deletion began.
    let deleting = |name: &'static str| {
        let api = api.clone();
        async move {
            api.delete(name, &DeleteParams::default()).await.unwrap();
            api.get(name).await.unwrap()
        }
    };
    let cleanups = Arc::new(AtomicUsize::new(0));
    let step = |object: ConfigMap| {
        let (api, cleanups) = (api.clone(), cleanups.clone());
        async move {
            finalizer::finalizer(&api, OURS, Arc::new(object), |event| async move {
                if let Event::Cleanup(_) = event {
                    cleanups.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, std::io::Error>(Action::await_change())
            })
            .await
        }
    };

    // Gone: the finalizer was removed and the object deleted since the copy was taken (404).
    create("gone", &[OURS]).await;
    let stale = deleting("gone").await;
    set("gone", &[]).await;
    assert!(api.get_opt("gone").await.unwrap().is_none());
    step(stale)
        .await
        .expect("removing the finalizer of a deleted object");
    assert_eq!(cleanups.load(Ordering::SeqCst), 1, "the cleanup ran");

    // Already removed, another finalizer keeping the object: the patch's test fails (422).
    create("removed", &[OURS, OTHER]).await;
    let stale = deleting("removed").await;
    set("removed", &[OTHER]).await;
    step(stale).await.expect("removing a finalizer already removed");
    let now = api.get("removed").await.unwrap();
    assert_eq!(
        now.metadata.finalizers,
        Some(vec![OTHER.to_string()]),
        "the other one is kept"
    );
    set("removed", &[]).await;

    // Moved: another finalizer before ours went meanwhile; ours is removed where it is now.
    create("moved", &[OTHER, OURS]).await;
    let stale = deleting("moved").await;
    set("moved", &[OURS]).await;
    step(stale).await.expect("removing a finalizer that moved");
    assert!(
        api.get_opt("moved").await.unwrap().is_none(),
        "deleted once ours went"
    );

    // Already added (the copy predates the reconcile that added it): no second copy of it.
    let stale = create("added", &[]).await;
    set("added", &[OURS]).await;
    step(stale).await.expect("adding a finalizer already there");
    let now = api.get("added").await.unwrap();
    assert_eq!(now.metadata.finalizers, Some(vec![OURS.to_string()]));
    set("added", &[]).await;

    // Deleted before the finalizer could be added (404), and then removed from a live object.
    let stale = create("never", &[]).await;
    api.delete("never", &DeleteParams::default()).await.unwrap();
    step(stale.clone())
        .await
        .expect("adding a finalizer to a deleted object");
    finalizer::remove(&api, &stale, OURS)
        .await
        .expect("removing a finalizer from a deleted object");
}
