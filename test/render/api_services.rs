//! Owned APIServices rendered as OLM classic lays them out (`install/apiservice.go`,
//! `install/certresources.go`) and as upstream's generator (operator-controller #2885) writes
//! them: the APIService `<version>.<group>` served by `<deployment>-service`, the certificate
//! mounted where classic mounts it, the auth-delegator ClusterRoleBinding and the auth-reader
//! RoleBinding in kube-system, once per serving Deployment; and every refusal.

use olmv1::bundle::csv::ApiServiceDescription;
use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::bundle::render::generators::cert_names;
use olmv1::bundle::render::{WebhookProvider, render, render_for_watch_namespace, render_with_provider};
use serde_json::{Value, json};

use crate::common::{all, kinds_and_names, load_fixture, only, str_at};

const NS: &str = "metrics";

fn rendered(provider: WebhookProvider) -> Vec<Value> {
    render_with_provider(&load_fixture("aggregated-operator"), NS, None, provider)
        .expect("aggregated-operator renders")
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| str_at(o, "/kind") == kind && str_at(o, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:?}", kinds_and_names(objects)))
}

#[test]
fn api_services_and_their_bindings_come_after_the_services_once_per_deployment() {
    let objects = rendered(WebhookProvider::CertManager);
    let tail: Vec<String> = kinds_and_names(&objects)
        .into_iter()
        .skip_while(|k| !k.starts_with("Service/"))
        .collect();
    assert_eq!(
        tail,
        [
            "Service/metrics-server-service",
            "APIService/v1beta1.metrics.example.com",
            "ClusterRoleBinding/metrics-server-service-system:auth-delegator",
            "RoleBinding/metrics-server-service-auth-reader",
            "APIService/v1.metrics.example.com",
            "Issuer/metrics-server-service-cert-selfsigned-issuer",
            "Certificate/metrics-server-service-cert",
        ],
        "upstream's order; classic's one pair of bindings per serving Deployment"
    );
}

#[test]
fn the_api_service_is_served_by_the_deployments_service_with_its_ca_injected() {
    let objects = rendered(WebhookProvider::CertManager);
    let names = cert_names("metrics-server");
    assert_eq!(
        names.service, "metrics-server-service",
        "classic's <deployment>-service"
    );
    assert_eq!(
        names.cert, "metrics-server-service-cert",
        "classic's <service>-cert"
    );
    assert_eq!(
        named(&objects, "APIService", "v1beta1.metrics.example.com"),
        &json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.example.com",
                "annotations": {"cert-manager.io/inject-ca-from": "metrics/metrics-server-service-cert"}},
            "spec": {
                "group": "metrics.example.com", "version": "v1beta1",
                "groupPriorityMinimum": 2000, "versionPriority": 15,
                "service": {"namespace": NS, "name": "metrics-server-service", "port": 6443},
            },
        })
    );
    // Cluster-scoped: no namespace; a valid APIService.
    let typed: k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService =
        serde_json::from_value(named(&objects, "APIService", "v1.metrics.example.com").clone()).unwrap();
    assert_eq!(typed.metadata.namespace, None);
}

#[test]
fn the_service_serves_the_api_port_beside_the_webhooks() {
    let objects = rendered(WebhookProvider::CertManager);
    assert_eq!(
        only(&objects, "Service"),
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "metrics-server-service", "namespace": NS},
            "spec": {"ports": [
                {"name": "443", "port": 443, "targetPort": 9443},
                {"name": "6443", "port": 6443, "targetPort": 6443},
            ], "selector": {"app": "metrics-server"}},
        })
    );
}

#[test]
fn the_bindings_give_the_deployments_account_delegated_authentication_and_authorization() {
    let objects = rendered(WebhookProvider::CertManager);
    let subjects = json!([{"kind": "ServiceAccount", "name": "metrics-server", "namespace": NS}]);
    assert_eq!(
        named(
            &objects,
            "ClusterRoleBinding",
            "metrics-server-service-system:auth-delegator"
        ),
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "metrics-server-service-system:auth-delegator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": subjects,
        })
    );
    assert_eq!(
        named(&objects, "RoleBinding", "metrics-server-service-auth-reader"),
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "metrics-server-service-auth-reader", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                "name": "extension-apiserver-authentication-reader"},
            "subjects": subjects,
        })
    );
}

fn cert_volume(name: &str, crt: &str, key: &str) -> Value {
    json!({"name": name, "secret": {"secretName": "metrics-server-service-cert", "items": [
        {"key": "tls.crt", "path": crt}, {"key": "tls.key", "path": key}]}})
}

fn apiservice_cert() -> Value {
    cert_volume("apiservice-cert", "apiserver.crt", "apiserver.key")
}

fn webhook_cert() -> Value {
    cert_volume("webhook-cert", "tls.crt", "tls.key")
}

fn pod_spec<'a>(objects: &'a [Value], deployment: &str) -> &'a Value {
    &named(objects, "Deployment", deployment)["spec"]["template"]["spec"]
}

#[test]
fn only_the_serving_deployment_mounts_the_certificate_where_and_in_the_order_classic_mounts_it() {
    // Classic's order (apiservice-cert, then webhook-cert), not upstream's webhook order: the
    // Deployment controller hashes the template as laid out, so converting a classic install
    // keeps its pods only when the order is the same.
    let objects = rendered(WebhookProvider::CertManager);
    let server = pod_spec(&objects, "metrics-server");
    assert_eq!(server["volumes"], json!([apiservice_cert(), webhook_cert()]));
    assert_eq!(
        server["containers"][0]["volumeMounts"],
        json!([
            {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"},
            {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
        ])
    );
    assert!(pod_spec(&objects, "controller").get("volumes").is_none());
}

#[test]
fn the_certificate_volumes_are_laid_in_as_classic_lays_them_in() {
    // The bundle's own volumes and mounts first; a certificate volume it already has is replaced
    // where it is, a mount of the same name kept as it is, one at a certificate path replaced
    // where it is; then the deployment configuration's, as classic applies the Subscription's
    // config after the certificate.
    let mut bundle = load_fixture("aggregated-operator");
    let deployment = bundle
        .csv
        .spec
        .install
        .spec
        .deployments
        .iter_mut()
        .find(|d| d.name == "metrics-server")
        .unwrap();
    let pod = deployment.spec.template.spec.as_mut().unwrap();
    pod.volumes = Some(
        serde_json::from_value(json!([
            {"name": "data", "emptyDir": {}},
            {"name": "webhook-cert", "emptyDir": {}},
            {"name": "old-certs", "emptyDir": {}},
        ]))
        .unwrap(),
    );
    pod.containers[0].volume_mounts = Some(
        serde_json::from_value(json!([
            {"name": "webhook-cert", "mountPath": "/certs"},
            {"name": "old-certs", "mountPath": "/apiserver.local.config/certificates"},
            {"name": "data", "mountPath": "/data"},
        ]))
        .unwrap(),
    );
    let config = json!({"deploymentConfig": {
        "volumes": [{"name": "extra", "emptyDir": {}}],
        "volumeMounts": [{"name": "extra", "mountPath": "/extra"}],
    }});
    let objects = render_with_provider(&bundle, NS, Some(&config), WebhookProvider::CertManager).unwrap();
    let server = pod_spec(&objects, "metrics-server");
    assert_eq!(
        server["volumes"],
        json!([
            {"name": "data", "emptyDir": {}},
            webhook_cert(),
            {"name": "old-certs", "emptyDir": {}},
            apiservice_cert(),
            {"name": "extra", "emptyDir": {}},
        ])
    );
    assert_eq!(
        server["containers"][0]["volumeMounts"],
        json!([
            {"name": "webhook-cert", "mountPath": "/certs"},
            {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"},
            {"name": "data", "mountPath": "/data"},
            {"name": "extra", "mountPath": "/extra"},
        ])
    );
}

#[test]
fn a_deployment_serving_an_api_gets_classics_key_type_from_cert_manager() {
    let objects = rendered(WebhookProvider::CertManager);
    let host = "metrics-server-service.metrics";
    assert_eq!(
        only(&objects, "Certificate")["spec"],
        json!({
            "secretName": "metrics-server-service-cert", "commonName": host, "usages": ["server auth"],
            "dnsNames": [host, format!("{host}.svc"), format!("{host}.svc.cluster.local")],
            "issuerRef": {"name": "metrics-server-service-cert-selfsigned-issuer"},
            "duration": "17520h0m0s", "renewBefore": "24h0m0s",
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        })
    );
}

#[test]
fn with_the_service_ca_the_api_service_asks_for_its_ca_bundle() {
    let objects = rendered(WebhookProvider::OpenshiftServiceCa);
    assert!(all(&objects, "Certificate").is_empty() && all(&objects, "Issuer").is_empty());
    for name in ["v1beta1.metrics.example.com", "v1.metrics.example.com"] {
        assert_eq!(
            named(&objects, "APIService", name)["metadata"]["annotations"],
            json!({"service.beta.openshift.io/inject-cabundle": "true"})
        );
    }
    assert_eq!(
        only(&objects, "Service")["metadata"]["annotations"],
        json!({"service.beta.openshift.io/serving-cert-secret-name": "metrics-server-service-cert"})
    );
}

#[test]
fn own_namespace_renders_the_same_api_services() {
    let all_ns = rendered(WebhookProvider::CertManager);
    let own = render_for_watch_namespace(&load_fixture("aggregated-operator"), NS, Some(NS)).unwrap();
    for kind in ["APIService", "ClusterRoleBinding"] {
        let pick = |objects: &[Value]| -> Vec<Value> {
            all(objects, kind)
                .into_iter()
                .filter(|o| str_at(o, "/metadata/name").contains("metrics"))
                .cloned()
                .collect()
        };
        assert_eq!(pick(&all_ns), pick(&own), "{kind}");
    }
}

fn refusal(mutate: impl FnOnce(&mut RegistryV1Bundle)) -> String {
    let mut bundle = load_fixture("aggregated-operator");
    mutate(&mut bundle);
    let err = render(&bundle, NS, None).expect_err("refused");
    assert!(err.is_terminal());
    err.to_string()
}

fn owned(bundle: &mut RegistryV1Bundle) -> &mut Vec<ApiServiceDescription> {
    &mut bundle.csv.spec.apiservicedefinitions.owned
}

#[test]
fn an_api_service_naming_no_deployment_of_the_bundle_is_refused_in_one_sentence() {
    assert_eq!(
        refusal(|b| owned(b)[0].deployment_name = "gone".into()),
        "owned apiservice \"v1beta1.metrics.example.com\" references deployment \"gone\" which does not exist in the CSV install spec"
    );
    assert_eq!(
        refusal(|b| owned(b)[1].deployment_name.clear()),
        "owned apiservice \"v1.metrics.example.com\" names no deployment: deploymentName must name a deployment of the CSV install spec"
    );
    assert_eq!(
        refusal(|b| {
            let again = owned(b)[0].clone();
            owned(b).push(again);
        }),
        "owned apiservice \"v1beta1.metrics.example.com\" is listed more than once"
    );
    assert_eq!(
        refusal(|b| owned(b)[0].version = "V1".into()),
        "owned apiservice \"V1.metrics.example.com\" is not a valid APIService: version must be a DNS-1123 label and group a DNS-1123 subdomain"
    );
}

#[test]
fn the_api_service_port_defaults_to_443() {
    let mut bundle = load_fixture("aggregated-operator");
    for api in owned(&mut bundle) {
        api.container_port = 0;
    }
    let objects = render(&bundle, NS, None).unwrap();
    assert_eq!(
        named(&objects, "APIService", "v1.metrics.example.com")["spec"]["service"]["port"],
        json!(443)
    );
}
