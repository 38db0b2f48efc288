//! An operator that serves an aggregated API (the test operator's gadget-operator 0.1.0, on the
//! real node) as classic leaves it (`classic.rs`: its Service, its serving certificate signed by a
//! CA of classic's own, the authentication bindings, the APIService with that CA), judged by
//! `olmv1 migrate check`: eligible, cert-manager keeps classic's certificate, and the one rolling
//! update its conversion makes is named (the certificate volumes in upstream's order). Converting
//! it in place without that rollout is not done yet: the apply would have to keep the live order.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::Value;

use crate::{
    aggregated_api::GadgetsTurn,
    classic::{self, Classic, ImageBundle},
    components,
    migrate::{check_row, migrate_catalogs},
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

#[tokio::test]
async fn a_classic_aggregated_api_server_is_eligible_and_its_one_rolling_update_named() {
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
    // olmv1 renders the certificate volumes as upstream does (webhook-cert, then apiservice-cert),
    // classic the other way round: the apply lays them out anew, so the pods roll once, and check
    // says so before anything is converted.
    let restart = row["podsRestart"].as_str().unwrap_or_default();
    assert!(
        restart.starts_with("one rolling update:")
            && restart.contains(
                "volumes is in the order webhook-cert, apiservice-cert (now apiservice-cert, webhook-cert)"
            ),
        "{row:#}"
    );
    assert!(
        row["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["code"] != "CertificateReplaced"),
        "cert-manager keeps classic's certificate: {row:#}"
    );
    // Judging changed nothing: the same pod serves with classic's certificate and CA.
    assert_eq!(served_by().await, pod);
    let api = api_services.get(API_SERVICE).await.unwrap();
    assert_eq!(api.spec.as_ref().unwrap().ca_bundle.as_ref(), Some(&classic_ca));
    let secret = secrets.get(SECRET).await.unwrap();
    assert_eq!(secret.data.as_ref().unwrap()["tls.crt"], classic_cert);

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
        "figures: footprint laid down in {laid_down:?}; the test {:?}",
        started.elapsed()
    );
}
