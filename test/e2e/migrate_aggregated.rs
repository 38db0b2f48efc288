//! An operator that serves an aggregated API (the test operator's gadget-operator 0.1.0, on the
//! real node) as classic leaves it (`classic.rs`: its Service, its serving certificate signed by a
//! CA of classic's own, the authentication bindings, the APIService with that CA), converted in
//! place by `olmv1 migrate convert` and handed back by `rollback`: the pod, the certificate and
//! the APIService's CA stay as they were (cert-manager keeps classic's certificate), `kubectl get`
//! is answered by the same pod throughout, and discovery never fails. The pod is kept because
//! olmv1 lays the certificate volumes and mounts into such a bundle's Deployment in classic's
//! order, and `migrate check` says so before anything is converted (`no` restart).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use olmv1_api::v1::ClusterExtension;
use serde_json::Value;

use crate::{
    aggregated_api::{DiscoveryWatch, GadgetsTurn},
    classic::{self, Classic, ImageBundle},
    components::{self, olmv1},
    migrate::{check_row, migrate_catalogs, workload},
    node, support, webhook_operator,
};

const PACKAGE: &str = "gadget-operator";
const API_SERVICE: &str = "v1alpha1.gadgets.test.olmv1.dev";
const SECRET: &str = "gadget-operator-server-service-cert";

/// The pod that answers `kubectl get` of the gadgets, once the API server's discovery has the
/// group (it follows an APIService turning Available by a moment).
async fn served_by() -> Value {
    support::wait_for("the gadgets served", components::INSTALL_TIMEOUT, || async {
        let out = support::kubectl(&["get", "gadgets.v1alpha1.gadgets.test.olmv1.dev", "-o", "json"]);
        if out.code != Some(0) {
            return Err(out.stderr);
        }
        let list: Value = serde_json::from_str(&out.stdout).map_err(|e| e.to_string())?;
        Ok(list["items"][0]["status"]["servedBy"].clone())
    })
    .await
}

fn certificates() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    )
}

/// What cert-manager did in `ns`, for a failure message: the Certificate and its requests, the
/// namespace's events and the controller's latest log lines.
fn cert_manager_story(ns: &str) -> String {
    let run = |args: &[&str]| {
        let out = support::kubectl(args);
        format!("$ kubectl {}\n{}{}", args.join(" "), out.stdout, out.stderr)
    };
    [
        run(&["get", "certificates,certificaterequests", "-n", ns, "-o", "yaml"]),
        run(&["get", "events", "-n", ns, "--sort-by=.lastTimestamp"]),
        run(&["logs", "-n", "cert-manager", "deploy/cert-manager", "--tail=100"]),
    ]
    .join("\n")
}

#[tokio::test]
async fn a_classic_aggregated_api_server_is_converted_in_place_and_rolled_back() {
    let Some(_node) = node::real_node() else {
        return;
    };
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let _turn = GadgetsTurn::take().await;
    let client = support::client().await;
    let catalog_image = webhook_operator::published().await.to_string();
    let bundle = ImageBundle::read(&catalog_image, PACKAGE, "0.1.0").await;
    let subscription = support::fresh_name("gadgets");
    let started = std::time::Instant::now();
    // Manual: a Subscription at 0.1.0 while 0.2.0 is in its channel is one waiting for approval
    // (an Automatic one would have upgraded), and the extension stays pinned at 0.1.0.
    let mut spec = Classic::published(PACKAGE, "0.1.0", bundle).subscription(&subscription);
    spec.approval = "Manual".into();
    let install = classic::lay_down(&client, &spec).await;
    let laid_down = started.elapsed();
    let ns = install.namespace.clone();

    // Classic's footprint serves: the APIService Available with classic's CA, answered by the pod.
    let api_services = Api::<APIService>::all(client.clone());
    let classic_api = api_services.get(API_SERVICE).await.unwrap();
    let classic_ca = classic_api.spec.as_ref().unwrap().ca_bundle.clone().unwrap();
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    let classic_secret = secrets.get(SECRET).await.unwrap();
    let classic_cert = classic_secret.data.as_ref().unwrap()["tls.crt"].clone();
    let pod = served_by().await;
    assert!(
        pod.as_str()
            .is_some_and(|p| p.starts_with("gadget-operator-server-")),
        "{pod}"
    );

    migrate_catalogs(&client, &install).await;
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    // Nothing of the pod template differs, the certificate volumes' order included.
    assert_eq!(row["podsRestart"], "no", "{row:#}");
    assert!(
        row["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["code"] != "CertificateReplaced"),
        "cert-manager keeps classic's certificate: {row:#}"
    );

    // Converted in place, discovery checked all along.
    let before = workload(&client, &install).await;
    let discovery = DiscoveryWatch::start();
    let t0 = std::time::Instant::now();
    let out = olmv1(&["migrate", "convert", &subscription, "-n", &ns, "--yes"]).ok();
    let converted_in = t0.elapsed();
    for adopted in [
        format!("#   APIService {API_SERVICE}"),
        format!("#   Service {ns}/gadget-operator-server-service"),
        format!("#   Secret {ns}/{SECRET}"),
        "#   ClusterRoleBinding gadget-operator-server-service-system:auth-delegator".to_string(),
        "#   RoleBinding kube-system/gadget-operator-server-service-auth-reader".to_string(),
    ] {
        assert!(out.contains(&adopted), "adopted: {adopted}\n{out}");
    }
    assert!(out.contains("# pods restart: no"), "{out}");
    assert!(out.contains("stays pinned at 0.1.0"), "{out}");
    assert!(!out.contains("# certificate replaced"), "{out}");
    components::wait_installed(&client, &subscription, "0.1.0").await;
    let convert_checks = discovery.assert_healthy("convert").await;
    assert_eq!(
        workload(&client, &install).await,
        before,
        "the pods, ReplicaSets and Deployment as they were"
    );
    assert_eq!(served_by().await, pod, "the same pod answers");
    let secret = secrets.get(SECRET).await.unwrap();
    let data = secret.data.as_ref().unwrap();
    assert!(
        data["tls.crt"] == classic_cert,
        "classic's certificate kept, but cert-manager issued another:\n{}",
        cert_manager_story(&ns)
    );
    assert_eq!(
        data["ca.crt"], data["olmCAKey"],
        "its CA where cert-manager's injector reads it"
    );
    let certificate: DynamicObject = Api::namespaced_with(client.clone(), &ns, &certificates())
        .get(SECRET)
        .await
        .unwrap();
    let ready = certificate.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(
        ready,
        "cert-manager took classic's certificate as issued: {:#}",
        certificate.data["status"]
    );
    let api = api_services.get(API_SERVICE).await.unwrap();
    assert_eq!(api.spec.as_ref().unwrap().ca_bundle.as_ref(), Some(&classic_ca));
    let labels = api.metadata.labels.clone().unwrap();
    assert_eq!(labels["olm.operatorframework.io/owner-name"], subscription);
    assert!(!labels.contains_key("olm.owner"), "{labels:?}");
    assert_eq!(check_row(&install)["verdict"], "Migrated");

    // Handed back: the extension gone without uninstalling, the APIService classic's again (its
    // labels), olmv1's Certificate and Issuer gone, the pod still serving.
    let discovery = DiscoveryWatch::start();
    let out = olmv1(&["migrate", "rollback", &subscription, "--yes"]).ok();
    assert!(
        out.contains(&format!(
            "1 APIServices labelled as CSV {ns}/{}'s again",
            install.csv
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("Certificate {ns}/{SECRET} deleted")),
        "{out}"
    );
    assert!(
        Api::<ClusterExtension>::all(client.clone())
            .get_opt(&subscription)
            .await
            .unwrap()
            .is_none()
    );
    let recreated: DynamicObject = Api::namespaced_with(client.clone(), &ns, &classic::subscriptions())
        .get(&subscription)
        .await
        .unwrap();
    assert_eq!(recreated.data["spec"]["startingCSV"], install.csv.as_str());
    assert_eq!(recreated.data["spec"]["installPlanApproval"], "Manual");
    let api = api_services.get(API_SERVICE).await.unwrap();
    let labels = api.metadata.labels.clone().unwrap();
    assert_eq!(labels["olm.owner"], install.csv);
    assert_eq!(labels["olm.owner.namespace"], ns);
    assert!(
        !labels.contains_key("olm.operatorframework.io/owner-name"),
        "{labels:?}"
    );
    classic::wait_api_service_available(&client, API_SERVICE).await;
    assert_eq!(served_by().await, pod);
    let rollback_checks = discovery.assert_healthy("rollback").await;
    assert_eq!(workload(&client, &install).await, before);

    // Nothing reconciles classic's objects here: the APIService goes first, then its server, so
    // that the next holder of the gadgets' turn finds the name free and discovery stays whole.
    api_services
        .delete(API_SERVICE, &DeleteParams::default())
        .await
        .unwrap();
    support::kubectl(&[
        "delete",
        "deployment",
        "-n",
        &ns,
        &install.deployment,
        "--wait=false",
    ])
    .ok();
    eprintln!(
        "figures: footprint laid down in {laid_down:?}, convert {converted_in:?}, discovery checked \
         {convert_checks}+{rollback_checks} times without a failure; the test {:?}",
        started.elapsed()
    );
}
