//! The two webhook certificate providers on every real bundle of `../shared/catalogs/*-v4.16` that
//! declares webhooks: OpenShift's service CA renders exactly what cert-manager renders except
//! upstream's provider-specific parts (annotations on webhook configurations, conversion CRDs and
//! webhook Services; no Issuer or Certificate). One bundle is pinned as a snapshot.

use std::collections::BTreeSet;

use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::bundle::render::generators::{
    INJECT_CA_ANNOTATION, SERVICE_CA_INJECT_CABUNDLE_ANNOTATION, SERVICE_CA_SERVING_CERT_ANNOTATION,
    cert_names,
};
use olmv1::bundle::render::{WebhookProvider, render_with_provider};
use serde_json::{Value, json};

use crate::real_data::{INSTALL_NS, check_snapshot, real_bundles};
use crate::support::Snapshots;

/// Bundles with webhooks that render for AllNamespaces, and how many of them convert CRDs (pinned:
/// the catalogs are fixed data).
const EXPECTED_WEBHOOK_BUNDLES: (usize, usize) = (75, 4);

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn annotations(object: &Value) -> Value {
    object["metadata"]["annotations"].clone()
}

/// `object` with one annotation removed (and the map dropped when it empties), to compare the rest.
fn without_annotation(object: &Value, key: &str) -> Value {
    let mut object = object.clone();
    if let Some(map) = object["metadata"]["annotations"].as_object_mut() {
        map.remove(key);
        if map.is_empty() {
            object["metadata"].as_object_mut().unwrap().remove("annotations");
        }
    }
    object
}

/// `object` without its annotations, to compare the rest.
fn without_annotations(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("annotations");
    }
    object
}

#[test]
fn service_ca_renders_upstreams_annotations_and_no_cert_manager_objects_on_every_webhook_bundle() {
    render_webhook_bundles_with_both_providers(Snapshots::Compare);
}

/// Renders every real webhook bundle with both providers; the pinned one is compared (or written).
pub fn render_webhook_bundles_with_both_providers(snapshots: Snapshots) {
    let mut webhook_bundles = 0;
    let mut conversion_bundles = 0;
    let mut pinned = false;
    for b in real_bundles() {
        let id = format!("{}/{}", b.catalog, b.name);
        let bundle = RegistryV1Bundle::from_catalog_bundle(&b.package, &b.name, &b.properties)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        let webhooks = &bundle.csv.spec.webhookdefinitions;
        if webhooks.is_empty() {
            continue;
        }
        let render = |provider| render_with_provider(&bundle, INSTALL_NS, None, provider);
        let cert_manager = render(WebhookProvider::CertManager);
        let service_ca = render(WebhookProvider::OpenshiftServiceCa);
        let (cert_manager, service_ca) = match (cert_manager, service_ca) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                assert_eq!(a, b, "{id}: both providers refuse the bundle the same way");
                continue;
            }
            (a, b) => panic!("{id}: one provider renders, the other not: {a:?} / {b:?}"),
        };
        webhook_bundles += 1;

        let webhook_deployments: BTreeSet<&str> =
            webhooks.iter().map(|w| w.deployment_name.as_str()).collect();
        let services: BTreeSet<String> = webhook_deployments
            .iter()
            .map(|d| cert_names(d).service)
            .collect();
        let certs: BTreeSet<String> = webhook_deployments.iter().map(|d| cert_names(d).cert).collect();

        // cert-manager: an Issuer and a Certificate per webhook deployment; the service CA: none.
        let cert_manager_kinds: Vec<&str> = cert_manager
            .iter()
            .filter(|o| o["apiVersion"] == json!("cert-manager.io/v1"))
            .map(kind)
            .collect();
        assert_eq!(cert_manager_kinds.len(), 2 * webhook_deployments.len(), "{id}");
        assert!(
            service_ca
                .iter()
                .all(|o| o["apiVersion"] != json!("cert-manager.io/v1")),
            "{id}: no cert-manager objects with the service CA"
        );
        let cert_manager: Vec<&Value> = cert_manager
            .iter()
            .filter(|o| o["apiVersion"] != json!("cert-manager.io/v1"))
            .collect();
        assert_eq!(
            cert_manager.len(),
            service_ca.len(),
            "{id}: same objects otherwise"
        );

        let mut converts = false;
        for (cm, sca) in cert_manager.iter().zip(&service_ca) {
            let name = sca["metadata"]["name"].as_str().unwrap_or_default();
            let what = format!("{id}: {} {name}", kind(sca));
            match kind(sca) {
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                    assert_eq!(
                        annotations(sca),
                        json!({SERVICE_CA_INJECT_CABUNDLE_ANNOTATION: "true"}),
                        "{what}"
                    );
                    let injected_from = annotations(cm)[INJECT_CA_ANNOTATION].as_str().map(str::to_string);
                    let from = injected_from.unwrap_or_else(|| panic!("{what}: cert-manager injection"));
                    let (ns, cert) = from.split_once('/').expect("namespace/name");
                    assert!(ns == INSTALL_NS && certs.contains(cert), "{what}: {from}");
                    assert_eq!(
                        without_annotation(sca, SERVICE_CA_INJECT_CABUNDLE_ANNOTATION),
                        without_annotation(cm, INJECT_CA_ANNOTATION),
                        "{what}"
                    );
                }
                "CustomResourceDefinition" if sca["spec"]["conversion"]["strategy"] == json!("Webhook") => {
                    converts = true;
                    // The bundle's own annotations stay (some CRDs already carry cert-manager's);
                    // each provider adds its own on top, as upstream merges them.
                    let original = bundle
                        .crds
                        .iter()
                        .find(|c| c["metadata"]["name"] == json!(name))
                        .map(annotations)
                        .unwrap_or_default();
                    let with = |key: &str, value: Value| {
                        let mut map = original.as_object().cloned().unwrap_or_default();
                        map.insert(key.to_string(), value);
                        Value::Object(map)
                    };
                    assert_eq!(
                        annotations(sca),
                        with(SERVICE_CA_INJECT_CABUNDLE_ANNOTATION, json!("true")),
                        "{what}"
                    );
                    let cert = cert_names(
                        &webhooks
                            .iter()
                            .find(|w| w.conversion_crds.iter().any(|c| c == name))
                            .unwrap()
                            .deployment_name,
                    )
                    .cert;
                    assert_eq!(
                        annotations(cm),
                        with(INJECT_CA_ANNOTATION, json!(format!("{INSTALL_NS}/{cert}"))),
                        "{what}"
                    );
                    assert_eq!(without_annotations(sca), without_annotations(cm), "{what}");
                }
                "Service" if services.contains(name) => {
                    let secret = annotations(sca)[SERVICE_CA_SERVING_CERT_ANNOTATION].clone();
                    assert_eq!(secret, json!(format!("{name}-cert")), "{what}");
                    assert_eq!(
                        without_annotation(sca, SERVICE_CA_SERVING_CERT_ANNOTATION),
                        **cm,
                        "{what}"
                    );
                }
                "Deployment" if webhook_deployments.contains(name) => {
                    // The serving certificate's Secret is what the deployment mounts.
                    let secret_names: BTreeSet<&str> = sca["spec"]["template"]["spec"]["volumes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v["secret"]["secretName"].as_str())
                        .collect();
                    assert!(
                        secret_names.contains(cert_names(name).cert.as_str()),
                        "{what}: mounts {secret_names:?}"
                    );
                    assert_eq!(sca, *cm, "{what}");
                }
                _ => assert_eq!(sca, *cm, "{what}: provider-independent"),
            }
        }
        if converts {
            conversion_bundles += 1;
        }
        if id == "certified-operators-v4.16/hulft.v10.3.0" {
            check_snapshot(snapshots, &format!("{id}.openshift-service-ca"), &service_ca);
            pinned = true;
        }
    }
    assert!(pinned, "the snapshot bundle hulft.v10.3.0 renders with webhooks");
    assert_eq!(
        (webhook_bundles, conversion_bundles),
        EXPECTED_WEBHOOK_BUNDLES,
        "webhook bundles (all / with conversion) rendered with both providers"
    );
}
