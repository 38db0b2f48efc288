//! Rendering of small hand-written bundles: order, names, namespaces, rules, subjects,
//! annotations, webhooks and certificates; and every refusal with upstream's message.

use olmv1::bundle::csv::{
    INSTALL_MODE_ALL_NAMESPACES, INSTALL_MODE_OWN_NAMESPACE, InstallMode, WEBHOOK_CONVERSION,
};
use olmv1::bundle::registry_v1::{LoadError, RegistryV1Bundle};
use olmv1::bundle::render::generators::{RenderContext, cert_names, cluster_permissions, permissions};
use olmv1::bundle::render::names::{object_name_for_base_and_suffix, permission_object_name};
use olmv1::bundle::render::{
    RenderError, RenderOptions, render, render_for_watch_namespace, render_with_options,
};
use olmv1::catalog::Property;
use serde_json::{Value, json};

use crate::common::{all, fixture_dir, kinds_and_names, load_fixture, only, str_at};

const NS: &str = "webhook-system";
const SA: &str = "webhook-operator-controller-manager";
const CSV: &str = "webhook-operator.v0.0.1";

fn rendered_webhook_operator() -> Vec<Value> {
    render(&load_fixture("webhook-operator"), NS, None).expect("webhook-operator renders")
}

fn role_name(bundle: &RegistryV1Bundle, index: usize, promoted: bool) -> String {
    let spec = &bundle.csv.spec.install.spec;
    let mut permission = if promoted {
        spec.permissions[index].clone()
    } else {
        spec.cluster_permissions[index].clone()
    };
    if promoted {
        permission
            .rules
            .get_or_insert_with(Vec::new)
            .push(olmv1::bundle::csv::PermissionRule {
                verbs: Some(vec!["get".into(), "list".into(), "watch".into()]),
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["namespaces".into()]),
                ..Default::default()
            });
    }
    let sa = if permission.service_account_name.is_empty() {
        "default"
    } else {
        &permission.service_account_name
    };
    permission_object_name(&format!("{CSV}-{sa}"), &permission)
}

#[test]
fn loader_reads_package_csv_crds_others_and_merged_properties() {
    let bundle = load_fixture("webhook-operator");
    assert_eq!(bundle.package_name, "webhook-operator");
    assert_eq!(bundle.name(), CSV);
    assert_eq!(bundle.crds.len(), 1);
    assert_eq!(bundle.others.len(), 2);
    assert_eq!(
        bundle.properties,
        vec![
            Property {
                type_: "olm.test".into(),
                value: json!("x").into()
            },
            Property {
                type_: "olm.maxOpenShiftVersion".into(),
                value: json!("4.17").into()
            },
        ]
    );
    // Existing annotation entries first, then properties.yaml, as upstream writes them.
    assert_eq!(
        bundle.csv.annotations()["olm.properties"],
        r#"[{"type":"olm.test","value":"x"},{"type":"olm.maxOpenShiftVersion","value":"4.17"}]"#
    );
}

#[test]
fn all_namespaces_render_follows_upstream_generator_order() {
    let bundle = load_fixture("webhook-operator");
    let objects = rendered_webhook_operator();
    let cluster_role = role_name(&bundle, 0, false);
    let promoted_sa = role_name(&bundle, 0, true);
    let promoted_default = role_name(&bundle, 1, true);
    let names = cert_names("webhook-operator.controller-manager");
    assert_eq!(
        kinds_and_names(&objects),
        vec![
            format!("ServiceAccount/{SA}"),
            format!("ClusterRole/{cluster_role}"),
            format!("ClusterRoleBinding/{cluster_role}"),
            format!("ClusterRole/{promoted_sa}"),
            format!("ClusterRoleBinding/{promoted_sa}"),
            format!("ClusterRole/{promoted_default}"),
            format!("ClusterRoleBinding/{promoted_default}"),
            "CustomResourceDefinition/webhooktests.webhook.operators.coreos.io".to_string(),
            "ConfigMap/webhook-operator-config".to_string(),
            "ClusterRole/webhook-operator-metrics-reader".to_string(),
            "Deployment/webhook-operator.controller-manager".to_string(),
            "ValidatingWebhookConfiguration/vwebhooktest.kb.io".to_string(),
            "MutatingWebhookConfiguration/mwebhooktest.kb.io".to_string(),
            format!("Service/{}", names.service),
            format!(
                "Issuer/{}",
                object_name_for_base_and_suffix(&names.cert, "selfsigned-issuer")
            ),
            format!("Certificate/{}", names.cert),
        ]
    );
    for object in &objects {
        assert!(
            object
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        );
    }
}

#[test]
fn permission_names_are_unique_names_within_63_characters() {
    let bundle = load_fixture("webhook-operator");
    let name = role_name(&bundle, 0, false);
    assert!(name.len() <= 64, "{name}");
    // base "<csv>-<sa>" cut so that base + hash fits the budget, then "-<hash>".
    let (base, hash) = name.rsplit_once('-').expect("has a hash suffix");
    assert!(format!("{CSV}-{SA}").starts_with(base), "{name}");
    assert!(
        hash.len() >= 40 && hash.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{hash}"
    );
    // Different rules, different names; same rules, same name.
    assert_ne!(role_name(&bundle, 0, true), role_name(&bundle, 1, true));
    assert_eq!(
        role_name(&bundle, 1, true),
        role_name(&load_fixture("webhook-operator"), 1, true)
    );
}

#[test]
fn all_namespaces_promotes_permissions_with_a_namespaces_rule_and_binds_install_namespace_sa() {
    let objects = rendered_webhook_operator();
    assert!(all(&objects, "Role").is_empty() && all(&objects, "RoleBinding").is_empty());
    let roles = all(&objects, "ClusterRole");
    // The cluster permission keeps its single rule.
    assert_eq!(roles[0]["rules"].as_array().map(Vec::len), Some(1));
    // Promoted permissions end with get/list/watch on namespaces.
    for promoted in &roles[1..3] {
        let rules = promoted["rules"].as_array().expect("rules");
        assert_eq!(
            rules.last(),
            Some(&json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}))
        );
    }
    let bindings = all(&objects, "ClusterRoleBinding");
    assert_eq!(
        bindings[0]["subjects"],
        json!([{"kind": "ServiceAccount", "namespace": NS, "name": SA}])
    );
    assert_eq!(
        bindings[2]["subjects"],
        json!([{"kind": "ServiceAccount", "namespace": NS, "name": "default"}])
    );
    assert_eq!(
        bindings[0]["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": str_at(roles[0], "/metadata/name")})
    );
    // The `default` service account is never generated.
    assert_eq!(all(&objects, "ServiceAccount").len(), 1);
    assert_eq!(
        str_at(only(&objects, "ServiceAccount"), "/metadata/namespace"),
        NS
    );
}

#[test]
fn deployment_gets_annotations_revision_limit_and_cert_volumes() {
    let objects = rendered_webhook_operator();
    let dep = only(&objects, "Deployment");
    assert_eq!(str_at(dep, "/metadata/namespace"), NS);
    assert_eq!(
        dep["metadata"]["labels"],
        json!({"control-plane": "controller-manager"})
    );
    assert_eq!(dep["spec"]["revisionHistoryLimit"], json!(1));
    let annotations = &dep["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["capabilities"],
        json!("Overridden"),
        "template annotations win over the CSV's"
    );
    assert_eq!(annotations["olm.targetNamespaces"], json!(""));
    assert_eq!(annotations["olm.operatorNamespace"], json!(NS));
    assert!(str_at(annotations, "/olm.properties").contains("olm.maxOpenShiftVersion"));

    let secret = cert_names("webhook-operator.controller-manager").cert;
    assert_eq!(secret, "webhook-operator-controller-manager-service-cert");
    let volumes = &dep["spec"]["template"]["spec"]["volumes"];
    assert_eq!(
        volumes,
        &json!([
            {"name": "data", "emptyDir": {}},
            {"name": "webhook-cert", "secret": {"secretName": secret, "items": [
                {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}},
            {"name": "apiservice-cert", "secret": {"secretName": secret, "items": [
                {"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}},
        ])
    );
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"],
        json!([
            {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
            {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"},
        ])
    );
}

#[test]
fn other_manifests_are_moved_into_the_install_namespace_when_namespaced() {
    let objects = rendered_webhook_operator();
    assert_eq!(str_at(only(&objects, "ConfigMap"), "/metadata/namespace"), NS);
    let metrics = objects
        .iter()
        .find(|o| str_at(o, "/metadata/name") == "webhook-operator-metrics-reader");
    assert!(metrics.is_some_and(|m| m["metadata"].get("namespace").is_none()));
}

#[test]
fn conversion_webhook_crd_points_at_the_webhook_service_with_ca_injection() {
    let objects = rendered_webhook_operator();
    let crd = only(&objects, "CustomResourceDefinition");
    let names = cert_names("webhook-operator.controller-manager");
    assert_eq!(
        crd["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": NS, "name": names.service, "path": "/convert", "port": 8443}},
            "conversionReviewVersions": ["v1", "v1beta1"],
        }})
    );
    assert_eq!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        json!(format!("{NS}/{}", names.cert))
    );
}

#[test]
fn admission_webhooks_services_and_certificates_match_upstream() {
    let objects = rendered_webhook_operator();
    let names = cert_names("webhook-operator.controller-manager");
    let inject = json!(format!("{NS}/{}", names.cert));
    let vwc = only(&objects, "ValidatingWebhookConfiguration");
    assert_eq!(
        vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        inject
    );
    assert!(vwc["metadata"].get("namespace").is_none());
    let webhook = &vwc["webhooks"][0];
    assert_eq!(webhook["name"], json!("vwebhooktest.kb.io"));
    assert_eq!(
        webhook["clientConfig"],
        json!({"service": {"namespace": NS, "name": names.service,
            "path": "/validate-webhook-operators-coreos-io-v1-webhooktest", "port": 443}})
    );
    assert!(
        webhook.get("namespaceSelector").is_none(),
        "no selector when watching all namespaces"
    );
    assert_eq!(webhook["sideEffects"], json!("None"));

    let mwc = only(&objects, "MutatingWebhookConfiguration");
    assert_eq!(mwc["metadata"]["name"], json!("mwebhooktest.kb.io"));
    assert_eq!(mwc["webhooks"][0]["reinvocationPolicy"], json!("IfNeeded"));

    let service = only(&objects, "Service");
    assert_eq!(service["metadata"]["namespace"], json!(NS));
    assert_eq!(
        service["spec"],
        json!({"ports": [
            {"name": "443", "port": 443, "targetPort": 9443},
            {"name": "8443", "port": 8443, "targetPort": 9443},
        ], "selector": {"control-plane": "controller-manager"}})
    );

    let issuer = only(&objects, "Issuer");
    assert_eq!(issuer["spec"], json!({"selfSigned": {}}));
    let cert = only(&objects, "Certificate");
    let host = format!("{}.{NS}", names.service);
    assert_eq!(
        cert["spec"],
        json!({
            "secretName": names.cert, "commonName": host, "usages": ["server auth"],
            "dnsNames": [host.clone(), format!("{host}.svc"), format!("{host}.svc.cluster.local")],
            "issuerRef": {"name": str_at(issuer, "/metadata/name")},
            "duration": "17520h0m0s", "renewBefore": "24h0m0s",
        })
    );
}

/// The webhook operator without its conversion webhook, supporting AllNamespaces and OwnNamespace.
fn own_namespace_webhook_bundle() -> RegistryV1Bundle {
    let mut bundle = load_fixture("webhook-operator");
    bundle
        .csv
        .spec
        .webhookdefinitions
        .retain(|w| w.type_ != WEBHOOK_CONVERSION);
    bundle.csv.spec.install_modes = vec![
        InstallMode {
            type_: INSTALL_MODE_OWN_NAMESPACE.into(),
            supported: true,
        },
        InstallMode {
            type_: INSTALL_MODE_ALL_NAMESPACES.into(),
            supported: true,
        },
    ];
    bundle
}

#[test]
fn own_namespace_renders_roles_in_the_install_namespace_and_scopes_webhooks() {
    let bundle = own_namespace_webhook_bundle();
    let objects = render_for_watch_namespace(&bundle, NS, Some(NS)).expect("renders for OwnNamespace");
    let roles = all(&objects, "Role");
    assert_eq!(roles.len(), 2);
    for role in &roles {
        assert_eq!(str_at(role, "/metadata/namespace"), NS);
        assert!(
            !role["rules"].to_string().contains("namespaces"),
            "no promotion outside AllNamespaces"
        );
    }
    let bindings = all(&objects, "RoleBinding");
    assert_eq!(
        bindings[1]["subjects"],
        json!([{"kind": "ServiceAccount", "namespace": NS, "name": "default"}])
    );
    assert_eq!(bindings[1]["roleRef"]["kind"], json!("Role"));
    // Only the clusterPermission stays cluster-wide.
    assert_eq!(
        all(&objects, "ClusterRole").len(),
        2,
        "{:?}",
        kinds_and_names(&objects)
    );
    let dep = only(&objects, "Deployment");
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
        json!(NS)
    );
    let selector = &only(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["namespaceSelector"];
    assert_eq!(
        selector,
        &json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NS]}]})
    );
    // Roles come from the same permission as the AllNamespaces ClusterRoles, without the extra rule:
    let ctx = RenderContext {
        bundle: &bundle,
        install_namespace: NS,
        target_namespaces: vec![NS.to_string()],
        deployment_config: None,
        webhook_provider: Default::default(),
        operator_conditions: false,
    };
    assert_eq!(permissions(&ctx).len(), 4);
    assert_eq!(cluster_permissions(&ctx).len(), 2);
}

#[test]
fn single_namespace_needs_a_different_watch_namespace() {
    let bundle = load_fixture("single-namespace-operator");
    assert_eq!(
        render(&bundle, "op-ns", None).unwrap_err().to_string(),
        "invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing"
    );
    let err = render_for_watch_namespace(&bundle, "op-ns", Some("op-ns")).unwrap_err();
    assert!(matches!(err, RenderError::InvalidConfiguration(_)));
    assert_eq!(err.reason(), "InvalidConfiguration");
    assert!(
        err.to_string()
            .contains("must be different from \"op-ns\" (the install namespace)"),
        "{err}"
    );

    let objects = render_for_watch_namespace(&bundle, "op-ns", Some("watched")).expect("renders");
    assert_eq!(
        kinds_and_names(&objects)[..1],
        ["ServiceAccount/single-sa".to_string()],
        "service account first"
    );
    let role = only(&objects, "Role");
    assert_eq!(str_at(role, "/metadata/namespace"), "watched");
    let binding = only(&objects, "RoleBinding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "namespace": "op-ns", "name": "single-sa"}])
    );
    let dep = only(&objects, "Deployment");
    assert_eq!(str_at(dep, "/metadata/namespace"), "op-ns");
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
        json!("watched")
    );
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["olm.operatorNamespace"],
        json!("op-ns")
    );
}

#[test]
fn deployment_config_customises_every_container() {
    let bundle = load_fixture("single-namespace-operator");
    let config = json!({
        "watchNamespace": "watched",
        "deploymentConfig": {
            "env": [{"name": "HTTP_PROXY", "value": "http://proxy"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "annotations": {"example.com/a": "b"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
    });
    let objects = render(&bundle, "op-ns", Some(&config)).expect("renders");
    let dep = only(&objects, "Deployment");
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["env"],
        json!([{"name": "HTTP_PROXY", "value": "http://proxy"}])
    );
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["tolerations"], json!([{"key": "k", "operator": "Exists"}]));
    assert_eq!(dep["metadata"]["annotations"], json!({"example.com/a": "b"}));
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["example.com/a"],
        json!("b")
    );
}

fn refusal(mutate: impl FnOnce(&mut RegistryV1Bundle)) -> String {
    let mut bundle = load_fixture("webhook-operator");
    mutate(&mut bundle);
    let err = render(&bundle, NS, None).expect_err("refused");
    assert!(err.is_terminal());
    err.to_string()
}

#[test]
fn unsupported_bundles_are_refused_with_upstream_messages() {
    assert_eq!(
        refusal(|b| b.csv.spec.install_modes = vec![InstallMode {
            type_: "MultiNamespace".into(),
            supported: true
        }]),
        "unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes"
    );
    assert_eq!(
        refusal(|b| b
            .others
            .push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))),
        "unsupported resource \"p\" with kind \"Pod\""
    );
    assert_eq!(
        refusal(|b| b.csv.spec.install_modes.push(InstallMode {
            type_: "OwnNamespace".into(),
            supported: true
        })),
        "bundle contains conversion webhook \"cwebhooktest.kb.io\" and supports install modes [AllNamespaces OwnNamespace] \
         - conversion webhooks are only supported for bundles that only support AllNamespaces install mode"
    );
    assert_eq!(refusal(|b| b.package_name.clear()), "package name is empty");
    assert_eq!(
        refusal(|b| b.csv.spec.webhookdefinitions[0].deployment_name = "missing".into()),
        "webhook of type 'ValidatingAdmissionWebhook' with name 'vwebhooktest.kb.io' references non-existent deployment 'missing'"
    );
    assert_eq!(
        refusal(
            |b| b.csv.spec.webhookdefinitions[0].rules.as_mut().expect("rules")[0].api_groups =
                Some(vec!["*".into()])
        ),
        "webhook \"vwebhooktest.kb.io\" contains forbidden rule: admission webhook rules cannot reference API group \"*\""
    );
    // Upstream validates the untrimmed generateName, so a trailing '-' is refused before the
    // generator would trim it.
    let trailing = refusal(|b| b.csv.spec.webhookdefinitions[1].generate_name = "mwebhooktest.kb.io-".into());
    assert!(
        trailing.starts_with("webhook of type 'MutatingAdmissionWebhook' has invalid name 'mwebhooktest.kb.io-': a lowercase RFC 1123"),
        "{trailing}"
    );
    let dup = refusal(|b| {
        let d = b.csv.spec.install.spec.deployments[0].clone();
        b.csv.spec.install.spec.deployments.push(d);
    });
    assert_eq!(
        dup,
        "cluster service version contains duplicate strategy deployment spec 'webhook-operator.controller-manager'"
    );
    let bad_name = refusal(|b| b.csv.spec.install.spec.deployments[0].name = "Bad_Name".into());
    assert!(bad_name.starts_with("invalid cluster service version strategy deployment name 'Bad_Name': a lowercase RFC 1123 subdomain"), "{bad_name}");
    let preserve = refusal(|b| b.crds[0]["spec"]["preserveUnknownFields"] = json!(true));
    assert_eq!(
        preserve,
        "custom resource definition 'webhooktests.webhook.operators.coreos.io' must have .spec.preserveUnknownFields \
         set to false to let API Server call webhook to do the conversion"
    );
    let long = refusal(|b| {
        // 56 + "service" is not cut by upstream's arithmetic and yields a 64-character name.
        let name = "d".repeat(56);
        b.csv.spec.install.spec.deployments[0].name = name.clone();
        for w in &mut b.csv.spec.webhookdefinitions {
            w.deployment_name = name.clone();
        }
    });
    assert_eq!(
        long,
        format!(
            "webhook service name \"{0}-service\" for deployment \"{0}\" is longer than 63 characters",
            "d".repeat(56)
        )
    );
}

#[test]
fn missing_owned_crd_is_the_only_error_when_crds_are_absent() {
    let mut bundle = load_fixture("webhook-operator");
    bundle.crds.clear();
    let err = render(&bundle, NS, None).expect_err("refused").to_string();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "cluster service definition references owned custom resource definition 'webhooktests.webhook.operators.coreos.io' not found in bundle"
        ]
    );
}

#[test]
fn loader_refuses_bad_layouts_with_upstream_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("metadata")).expect("mkdir");
    std::fs::create_dir_all(root.join("manifests/sub")).expect("mkdir");
    std::fs::write(
        root.join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n",
    )
    .expect("write");
    let err = RegistryV1Bundle::from_dir(root).expect_err("subdirectory refused");
    assert_eq!(
        err.to_string(),
        "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"manifests/sub\""
    );
    std::fs::remove_dir(root.join("manifests/sub")).expect("rmdir");
    std::fs::write(
        root.join("manifests/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    )
    .expect("write");
    let err = RegistryV1Bundle::from_dir(root).expect_err("no CSV refused");
    assert_eq!(
        err,
        LoadError::Invalid("no ClusterServiceVersion found in \"manifests\"".into())
    );
    std::fs::write(root.join("manifests/bad.yaml"), "kind: [unclosed\n").expect("write");
    let err = RegistryV1Bundle::from_dir(root)
        .expect_err("bad YAML refused")
        .to_string();
    assert!(
        err.starts_with("error parsing objects in \"manifests/bad.yaml\": "),
        "{err}"
    );
    let missing = RegistryV1Bundle::from_dir(&fixture_dir("does-not-exist")).expect_err("missing dir");
    assert!(missing.to_string().contains("does not exist"), "{missing}");
}

#[test]
fn catalog_bundle_objects_load_like_the_image() {
    use base64::Engine as _;
    let image = load_fixture("webhook-operator");
    let mut properties = vec![
        Property {
            type_: "olm.package".into(),
            value: json!({"packageName": "webhook-operator", "version": "0.0.1"}).into(),
        },
        Property {
            type_: "olm.maxOpenShiftVersion".into(),
            value: json!("4.17").into(),
        },
    ];
    let dir = fixture_dir("webhook-operator").join("manifests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("read")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for object in olmv1::bundle::registry_v1::parse_manifest_stream(&text).expect("parse") {
            let data = base64::engine::general_purpose::STANDARD.encode(object.to_string());
            properties.push(Property {
                type_: "olm.bundle.object".into(),
                value: json!({"data": data}).into(),
            });
        }
    }
    let from_catalog =
        RegistryV1Bundle::from_catalog_bundle("webhook-operator", CSV, &properties).expect("loads");
    assert_eq!(from_catalog.properties, image.properties);
    assert_eq!(render(&from_catalog, NS, None), render(&image, NS, None));

    let err = RegistryV1Bundle::from_catalog_bundle("p", "p.v1", &properties[..2]).expect_err("no objects");
    assert_eq!(
        err.to_string(),
        "bundle \"p.v1\" has no olm.bundle.object properties to render from"
    );
    let bad = [Property {
        type_: "olm.bundle.object".into(),
        value: json!({"data": "%%%"}).into(),
    }];
    let err = RegistryV1Bundle::from_catalog_bundle("p", "p.v1", &bad)
        .expect_err("bad base64")
        .to_string();
    assert!(
        err.starts_with("bundle \"p.v1\" olm.bundle.object #0: invalid base64"),
        "{err}"
    );
}

/// With `--operator-conditions`, the OperatorCondition classic keeps for the CSV (its name, the
/// Deployments, the ServiceAccounts of clusterPermissions then permissions), before the
/// Deployments; a Role granting get/update/patch on exactly that object, bound to those accounts;
/// `OPERATOR_CONDITION_NAME` after the configured env in every container. Without it, none.
#[test]
fn the_operator_condition_is_rendered_as_classic_keeps_it_when_asked() {
    let bundle = load_fixture("webhook-operator");
    let config = json!({"deploymentConfig": {"env": [{"name": "FROM_CONFIG", "value": "1"}]}});
    let options = RenderOptions {
        operator_conditions: true,
        ..RenderOptions::default()
    };
    let objects = render_with_options(&bundle, NS, Some(&config), options).expect("renders");
    let names = kinds_and_names(&objects);
    let at = |what: &str| {
        names
            .iter()
            .position(|n| n == what)
            .unwrap_or_else(|| panic!("{what} in {names:?}"))
    };
    let condition = format!("OperatorCondition/{CSV}");
    assert!(
        at(&condition) < at("Deployment/webhook-operator.controller-manager"),
        "{names:?}"
    );
    let oc = only(&objects, "OperatorCondition");
    assert_eq!(
        oc,
        &json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": CSV, "namespace": NS},
            "spec": {"deployments": ["webhook-operator.controller-manager"], "serviceAccounts": [SA, SA]}})
    );
    // Named after the package: the same across upgrades.
    let role_name = "webhook-operator-operator-condition";
    let role = all(&objects, "Role")
        .into_iter()
        .find(|r| r["metadata"]["name"] == role_name)
        .expect("the OperatorCondition's Role");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions"],
            "resourceNames": [CSV], "verbs": ["get", "update", "patch"]}])
    );
    let binding = all(&objects, "RoleBinding")
        .into_iter()
        .find(|r| r["metadata"]["name"] == role_name)
        .expect("the OperatorCondition's RoleBinding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": SA, "namespace": NS}])
    );
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name})
    );
    let dep = only(&objects, "Deployment");
    for container in dep["spec"]["template"]["spec"]["containers"].as_array().unwrap() {
        let env: Vec<(&str, &str)> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["value"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            env[env.len() - 2..],
            [("FROM_CONFIG", "1"), ("OPERATOR_CONDITION_NAME", CSV)],
            "{container}"
        );
    }
    // Off (upstream's render): nothing of it.
    let plain = render_with_options(&bundle, NS, Some(&config), RenderOptions::default()).unwrap();
    assert!(all(&plain, "OperatorCondition").is_empty());
    assert!(
        !serde_json::to_string(&plain)
            .unwrap()
            .contains("OPERATOR_CONDITION_NAME")
    );
    assert_eq!(plain.len() + 3, objects.len());
}
