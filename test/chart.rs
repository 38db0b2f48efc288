//! olmv1's chart (charts/olmv1) with the real `helm` (hack/build-tools.sh builds it): `helm lint
//! --strict`, the install manifest of each variant (`hack/manifest.sh`) holding exactly the objects
//! of `helm template` with that variant's values, every value landing where the chart's README
//! says, the schema refusing wrong types and unknown keys, every value documented and typed, and
//! the packaged chart carrying the crate's version and the image it is published with. The chart
//! on a cluster (helm install from an OCI registry, upgrade, uninstall) is hack/deploy-test.sh's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

const REPOSITORY: &str = "registry.example.com/olm/olmv1";
const DIGEST: &str = "sha256:4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c4f1c";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart_dir() -> PathBuf {
    repo_root().join("charts/olmv1")
}

/// `helm` of hack/versions.env, with its cache and configuration in a directory of this test
/// process rather than the user's home.
fn helm() -> Command {
    let mut command = Command::new(helm_path());
    let home = std::env::temp_dir().join(format!("olmv1-chart-test-helm-{}", std::process::id()));
    command
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    command
}

/// hack/build-tools.sh builds helm once, then prints its bin dir.
fn helm_path() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        let out = Command::new(repo_root().join("hack/build-tools.sh"))
            .output()
            .expect("hack/build-tools.sh runs");
        assert!(
            out.status.success(),
            "hack/build-tools.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let helm = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("helm");
        assert!(helm.exists(), "hack/build-tools.sh built no {}", helm.display());
        helm
    })
}

/// Runs COMMAND: Ok(stdout) on success, Err(stderr) otherwise.
fn run(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn image_args() -> Vec<String> {
    vec![
        "--set".into(),
        format!("image.repository={REPOSITORY}"),
        "--set".into(),
        format!("image.digest={DIGEST}"),
    ]
}

/// `helm template` of the chart (CRDs included) with the image and ARGS.
fn template(args: &[&str]) -> Result<Vec<Value>, String> {
    let mut with_image: Vec<String> = image_args();
    with_image.extend(args.iter().map(|a| a.to_string()));
    template_as_given(&with_image)
}

/// `helm template` of the chart (CRDs included) with ARGS alone.
fn template_as_given(args: &[String]) -> Result<Vec<Value>, String> {
    let mut command = helm();
    command
        .args(["template", "olmv1"])
        .arg(chart_dir())
        .arg("--include-crds")
        .args(args);
    run(&mut command).map(|out| documents(&out))
}

#[track_caller]
fn rendered(args: &[&str]) -> Vec<Value> {
    template(args).unwrap_or_else(|e| panic!("helm template {args:?} failed: {e}"))
}

/// The objects of a YAML stream (documents holding only comments are skipped).
fn documents(stream: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut current = String::new();
    for line in stream.lines().chain(std::iter::once("---")) {
        if line == "---" {
            let has_content = current
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            if has_content {
                let value: Value =
                    serde_saphyr::from_str(&current).unwrap_or_else(|e| panic!("not YAML ({e}):\n{current}"));
                objects.push(value);
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    objects
}

/// VALUE with every number as a float: YAML's `1.0` and `1` are one JSON number (the committed
/// CRDs say `minimum: 1.0`, kustomize writes `1`).
fn numbers_as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The first path where A and B differ, with both values there.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (p, q) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                if let Some(d) = first_difference(p, q, &format!("{path}.{key}")) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn by_key(objects: &[Value]) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for object in objects {
        assert!(
            map.insert(key(object), object.clone()).is_none(),
            "{} rendered twice",
            key(object)
        );
    }
    map
}

#[track_caller]
fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| {
            panic!(
                "no {kind} {name} among {:?}",
                objects.iter().map(key).collect::<Vec<_>>()
            )
        })
}

fn has(objects: &[Value], kind: &str) -> bool {
    objects.iter().any(|o| o["kind"] == kind)
}

fn deployments(objects: &[Value]) -> [&Value; 2] {
    [
        find(objects, "Deployment", "olmv1-controller"),
        find(objects, "Deployment", "olmv1-catalogd"),
    ]
}

fn args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn env(deployment: &Value) -> BTreeMap<String, Value> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

/// The values each variant of hack/manifest.sh stands for (its usage and the chart README say so).
const VARIANTS: [(&str, &[&str]); 3] = [
    ("default", &[]),
    ("openshift", &["--set", "openshift.enabled=true"]),
    ("controller-identity", &["--set", "installIdentity=controller"]),
];

#[test]
fn lint_strict_passes_for_every_variant_and_every_value_set() {
    let everything = repo_root().join("test/fixtures/chart/every-value.yaml");
    let mut cases: Vec<Vec<&str>> = VARIANTS.iter().map(|(_, values)| values.to_vec()).collect();
    cases.push(vec!["-f", everything.to_str().unwrap()]);
    for values in cases {
        let out = run(helm()
            .args(["lint", "--strict"])
            .arg(chart_dir())
            .args(image_args())
            .args(&values));
        let out = out.unwrap_or_else(|e| panic!("helm lint --strict {values:?} failed:\n{e}"));
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

#[test]
fn each_manifest_variant_holds_exactly_the_objects_of_the_chart_with_its_values() {
    let image = format!("{REPOSITORY}@{DIGEST}");
    for (variant, values) in VARIANTS {
        let manifest = run(Command::new(repo_root().join("hack/manifest.sh")).args([&image, variant]))
            .unwrap_or_else(|e| panic!("hack/manifest.sh {variant} failed: {e}"));
        let from_manifest = by_key(&documents(&manifest));
        let from_chart = by_key(&rendered(values));
        assert_eq!(
            from_manifest.keys().collect::<Vec<_>>(),
            from_chart.keys().collect::<Vec<_>>(),
            "{variant}: the manifest and the chart hold different objects"
        );
        for (key, object) in &from_chart {
            let (manifest, chart) = (numbers_as_floats(&from_manifest[key]), numbers_as_floats(object));
            assert!(
                manifest == chart,
                "{variant}: {key} differs, first at {}",
                first_difference(&manifest, &chart, "").unwrap_or_default()
            );
        }
        // Pinned by digest, every image.
        for deployment in deployments(&documents(&manifest)) {
            assert_eq!(
                deployment["spec"]["template"]["spec"]["containers"][0]["image"],
                image.as_str()
            );
        }
    }
}

#[test]
fn the_default_is_least_privilege_on_kubernetes_with_cert_manager() {
    let objects = rendered(&[]);
    assert!(
        !objects.iter().any(|o| o["roleRef"]["name"] == "cluster-admin"),
        "the default manifest grants cluster-admin"
    );
    for kind in [
        "Issuer",
        "Certificate",
        "CustomResourceDefinition",
        "NetworkPolicy",
        "PodDisruptionBudget",
    ] {
        assert!(has(&objects, kind), "no {kind} by default");
    }
    for kind in ["ServiceMonitor", "PrometheusRule", "ClusterCatalog", "ConfigMap"] {
        assert!(
            !has(&objects, kind),
            "a {kind} by default (no monitoring API, no catalogs asked)"
        );
    }
    let [controller, catalogd] = deployments(&objects);
    assert!(
        args(controller)
            .iter()
            .all(|a| !a.starts_with("--global-pull-secret")
                && !a.starts_with("--install-identity")
                && !a.starts_with("--webhook-provider"))
    );
    assert!(
        args(catalogd)
            .iter()
            .all(|a| !a.starts_with("--global-pull-secret"))
    );
    assert_eq!(
        find(&objects, "Namespace", "olmv1-system")["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}

#[test]
fn the_openshift_variant_uses_the_service_ca_the_global_pull_secret_and_platform_monitoring() {
    let objects = rendered(&["--set", "openshift.enabled=true"]);
    assert!(!has(&objects, "Certificate") && !has(&objects, "Issuer"));
    assert_eq!(
        find(&objects, "ConfigMap", "olmv1-service-ca")["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
        "true"
    );
    for (service, secret) in [
        ("catalogd-service", "catalogd-service-cert"),
        ("olmv1-controller-service", "olmv1-controller-cert"),
    ] {
        assert_eq!(
            find(&objects, "Service", service)["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
            secret
        );
    }
    let [controller, catalogd] = deployments(&objects);
    for deployment in [controller, catalogd] {
        assert!(args(deployment).contains(&"--global-pull-secret=openshift-config/pull-secret".to_string()));
    }
    assert!(args(controller).contains(&"--webhook-provider=openshift-service-ca".to_string()));
    assert_eq!(
        controller["spec"]["template"]["spec"]["volumes"][1],
        json!({"name": "catalogd-ca", "configMap": {"name": "olmv1-service-ca",
            "items": [{"key": "service-ca.crt", "path": "ca.crt"}]}})
    );
    let role = find(&objects, "Role", "olmv1-global-pull-secret");
    assert_eq!(role["metadata"]["namespace"], "openshift-config");
    assert_eq!(
        find(&objects, "Namespace", "olmv1-system")["metadata"]["labels"]["openshift.io/cluster-monitoring"],
        "true"
    );
    for name in ["olmv1-controller", "olmv1-catalogd"] {
        let monitor = find(&objects, "ServiceMonitor", name);
        assert_eq!(
            monitor["spec"]["endpoints"][0]["tlsConfig"]["caFile"],
            "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt"
        );
    }
    assert_eq!(
        find(&objects, "ClusterRoleBinding", "olmv1-metrics-reader-prometheus")["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"})
    );
    // The PrometheusRule carries the alerts of the rules file, the one source of both.
    let alerts: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart_dir().join("files/olmv1-alerts.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        find(&objects, "PrometheusRule", "olmv1-alerts")["spec"]["groups"],
        alerts["groups"]
    );
    assert!(
        !has(&objects, "ClusterCatalog"),
        "the Red Hat catalogs are asked for, not a default"
    );
}

#[test]
fn the_controller_identity_variant_binds_cluster_admin_and_says_so() {
    let objects = rendered(&["--set", "installIdentity=controller"]);
    let binding = find(&objects, "ClusterRoleBinding", "olmv1-controller-cluster-admin");
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    assert_eq!(binding["subjects"][0]["name"], "olmv1-controller");
    let [controller, _] = deployments(&objects);
    assert!(args(controller).contains(&"--install-identity=controller".to_string()));
}

/// test/fixtures/chart/every-value.yaml sets every value away from its default; each one lands
/// where the chart's README says.
#[test]
fn every_value_lands_where_the_readme_says() {
    // The file sets the image itself (a tag): no --set of the image here, which would win.
    let file = repo_root().join("test/fixtures/chart/every-value.yaml");
    let objects = template_as_given(&["-f".into(), file.to_str().unwrap().into()])
        .unwrap_or_else(|e| panic!("helm template -f every-value.yaml failed: {e}"));
    let ns = "olm";
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let namespaced = !matches!(
            kind,
            "Namespace"
                | "CustomResourceDefinition"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "ClusterCatalog"
        );
        let namespace = object["metadata"]["namespace"].as_str();
        // The global pull secret's Role and binding live in the secret's namespace (below).
        if namespaced && object["metadata"]["name"] != "olmv1-global-pull-secret" {
            assert_eq!(namespace, Some(ns), "{} is not in namespace {ns}", key(object));
        }
    }
    find(&objects, "Namespace", ns);
    for subject in objects.iter().filter_map(|o| o["subjects"].as_array()).flatten() {
        if subject["name"].as_str().is_some_and(|n| n.starts_with("olmv1-")) {
            assert_eq!(subject["namespace"], ns, "{subject}");
        }
    }
    let [controller, catalogd] = deployments(&objects);
    for (deployment, component) in [(controller, "controller"), (catalogd, "catalogd")] {
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(container["image"], format!("{REPOSITORY}:v9.9.9"), "image.tag");
        assert_eq!(container["imagePullPolicy"], "Always");
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "olmv1-pull"}]));
        assert_eq!(pod["nodeSelector"], json!({"node-role.kubernetes.io/infra": ""}));
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "node-role.kubernetes.io/infra", "operator": "Exists", "effect": "NoSchedule"}])
        );
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0]["key"],
            "kubernetes.io/arch"
        );
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        let env = env(deployment);
        assert_eq!(env["HTTP_PROXY"]["value"], "http://proxy.example.com:3128");
        assert_eq!(env["HTTPS_PROXY"]["value"], "http://proxy.example.com:3128");
        assert_eq!(env["NO_PROXY"]["value"], ".svc,10.0.0.0/8");
        assert_eq!(env["RUST_LOG"]["value"], "debug");
        assert_eq!(env[&format!("{}_EXTRA", component.to_uppercase())]["value"], "1");
        let args = args(deployment);
        for arg in [
            "--global-pull-secret=olm-secrets/registry",
            "--tls-profile=custom",
            "--tls-custom-version=TLSv1.3",
            "--tls-custom-ciphers=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384",
            "--tls-custom-curves=X25519,secp384r1",
        ] {
            assert!(
                args.contains(&arg.to_string()),
                "{component}: no {arg} in {args:?}"
            );
        }
        assert_eq!(deployment["spec"]["replicas"], 2);
    }
    let controller_args = args(controller);
    for arg in [
        "--system-namespace=olm",
        "--install-identity=controller",
        "--dependencies=refuse",
        "--operator-conditions=install",
        "--webhook-provider=openshift-service-ca",
        "--concurrency=8",
    ] {
        assert!(
            controller_args.contains(&arg.to_string()),
            "no {arg} in {controller_args:?}"
        );
    }
    let install_crd = find(
        &objects,
        "ClusterRole",
        "olmv1-controller-operator-conditions-install",
    );
    assert_eq!(
        install_crd["rules"][0]["verbs"],
        json!(["create"]),
        "operatorConditions"
    );
    let binding = find(
        &objects,
        "ClusterRoleBinding",
        "olmv1-controller-operator-conditions-install",
    );
    assert_eq!(
        binding["subjects"][0]["name"], "olmv1-controller",
        "operatorConditions"
    );
    let catalogd_args = args(catalogd);
    for arg in [
        "--external-address=catalogd-service.olm.svc",
        "--leader-election-namespace=olm",
        "--selector=tier=prod",
    ] {
        assert!(
            catalogd_args.contains(&arg.to_string()),
            "no {arg} in {catalogd_args:?}"
        );
    }
    assert_eq!(
        controller["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}})
    );
    assert_eq!(
        catalogd["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "20m", "memory": "96Mi"}, "limits": {"memory": "2Gi"}})
    );
    // PodDisruptionBudgets: the controller's as a percentage, catalogd's turned off.
    assert_eq!(
        find(&objects, "PodDisruptionBudget", "olmv1-controller")["spec"]["maxUnavailable"],
        "50%"
    );
    assert!(
        !objects
            .iter()
            .any(|o| o["kind"] == "PodDisruptionBudget" && o["metadata"]["name"] == "olmv1-catalogd")
    );
    // certManager.enabled=false: no cert-manager objects; the Secrets are the admin's.
    assert!(!has(&objects, "Certificate") && !has(&objects, "Issuer"));
    // The global pull secret's Role lives in its namespace.
    assert_eq!(
        find(&objects, "Role", "olmv1-global-pull-secret")["metadata"]["namespace"],
        "olm-secrets"
    );
    // Monitoring asked for without the CRDs being known, with labels and another Prometheus.
    let monitor = find(&objects, "ServiceMonitor", "olmv1-catalogd");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus");
    assert_eq!(monitor["spec"]["namespaceSelector"]["matchNames"], json!(["olm"]));
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"],
        "catalogd-service.olm.svc"
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["ca"],
        json!({"secret": {"name": "olmv1-ca", "key": "ca.crt"}})
    );
    assert_eq!(
        find(&objects, "PrometheusRule", "olmv1-alerts")["metadata"]["labels"]["role"],
        "alert-rules"
    );
    assert_eq!(
        find(&objects, "ClusterRoleBinding", "olmv1-metrics-reader-prometheus")["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "prometheus", "namespace": "observability"})
    );
    // Catalogs: the listed one, kept by helm uninstall.
    let catalog = find(&objects, "ClusterCatalog", "operatorhubio");
    assert_eq!(
        catalog["spec"],
        json!({"priority": 5, "source": {"type": "Image", "image": {
            "ref": "quay.io/operatorhubio/catalog:latest", "pollIntervalMinutes": 10}}})
    );
    assert_eq!(
        catalog["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}

#[test]
fn the_openshift_catalogs_follow_the_version() {
    let objects = rendered(&[
        "--set",
        "openshift.enabled=true",
        "--set",
        "openshift.catalogs.enabled=true",
        "--set",
        "openshift.catalogs.version=v4.19",
    ]);
    for (name, index, priority) in [
        ("openshift-redhat-operators", "redhat-operator-index", -100),
        ("openshift-certified-operators", "certified-operator-index", -200),
        ("openshift-community-operators", "community-operator-index", -400),
    ] {
        let catalog = find(&objects, "ClusterCatalog", name);
        assert_eq!(catalog["spec"]["priority"], priority);
        assert_eq!(
            catalog["spec"]["source"]["image"],
            json!({"ref": format!("registry.redhat.io/redhat/{index}:v4.19"), "pollIntervalMinutes": 10})
        );
    }
}

#[test]
fn monitoring_objects_follow_the_cluster_api_when_auto() {
    let kinds = |objects: &[Value]| (has(objects, "ServiceMonitor"), has(objects, "PrometheusRule"));
    assert_eq!(kinds(&rendered(&[])), (false, false));
    let monitors = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"];
    let rules = ["--api-versions", "monitoring.coreos.com/v1/PrometheusRule"];
    assert_eq!(kinds(&rendered(&monitors)), (true, false));
    assert_eq!(kinds(&rendered(&rules)), (false, true));
    let both = [monitors, rules].concat();
    let objects = rendered(&both);
    assert_eq!(kinds(&objects), (true, true));
    assert_eq!(
        find(&objects, "ClusterRoleBinding", "olmv1-metrics-reader-prometheus")["subjects"][0]["namespace"],
        "monitoring"
    );
    let off = [
        both.as_slice(),
        &[
            "--set",
            "metrics.serviceMonitor.enabled=false",
            "--set",
            "metrics.prometheusRule.enabled=false",
        ],
    ]
    .concat();
    assert_eq!(kinds(&rendered(&off)), (false, false));
    let on = [
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
    ];
    assert_eq!(kinds(&rendered(&on)), (true, true));
}

#[test]
fn wrong_types_and_unknown_keys_are_refused_naming_the_value() {
    for (set, says) in [
        (
            "controller.replicas=two",
            "at '/controller/replicas': got string, want integer",
        ),
        (
            "nodeSelector=linux",
            "at '/nodeSelector': got string, want object",
        ),
        ("tolerations.key=a", "at '/tolerations': got object, want array"),
        ("installIdentity=admin", "at '/installIdentity'"),
        ("dependencies=ignore", "at '/dependencies'"),
        ("operatorConditions=always", "at '/operatorConditions'"),
        ("tls.profile=strong", "at '/tls/profile'"),
        ("image.digest=latest", "at '/image/digest'"),
        (
            "metrics.serviceMonitor.enabled=maybe",
            "at '/metrics/serviceMonitor/enabled'",
        ),
        ("globalPullSecret=pull-secret", "at '/globalPullSecret'"),
        ("catalogs[0].name=x", "at '/catalogs/0': missing property 'image'"),
        (
            "nodeSelectr.role=infra",
            "additional properties 'nodeSelectr' not allowed",
        ),
    ] {
        let err = template(&["--set", set]).expect_err(set);
        assert!(
            err.contains("values don't meet the specifications of the schema") && err.contains(says),
            "--set {set}: expected {says:?} in:\n{err}"
        );
    }
}

#[test]
fn an_install_without_an_image_says_what_to_set() {
    let err = run(helm().args(["template", "olmv1"]).arg(chart_dir())).unwrap_err();
    assert!(err.contains("image.repository is required"), "{err}");
    let err = run(helm()
        .args(["template", "olmv1"])
        .arg(chart_dir())
        .args(["--set", "image.repository=r.example/olmv1"]))
    .unwrap_err();
    assert!(
        err.contains("image.digest (preferred) or image.tag is required"),
        "{err}"
    );
}

/// The leaves of values.yaml (maps descended into; lists and empty maps are leaves).
fn leaves(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() && !prefix.ends_with("resources") => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn every_value_is_documented_in_the_readme_and_typed_in_the_schema() {
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap()).unwrap();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap())
            .unwrap();
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).unwrap();
    let mut paths = Vec::new();
    leaves("", &values, &mut paths);
    assert!(paths.len() > 30, "{paths:?}");
    for path in paths {
        assert!(
            readme.contains(&format!("`{path}`")),
            "charts/olmv1/README.md does not describe `{path}`"
        );
        let mut node = &schema;
        for part in path.split('.') {
            assert_eq!(
                node["additionalProperties"], false,
                "{path}: the schema lets unknown keys through"
            );
            node = &node["properties"][part];
            assert!(node.is_object(), "values.schema.json does not type `{path}`");
        }
        assert!(
            node.get("type").is_some() || node.get("enum").is_some(),
            "values.schema.json gives `{path}` no type"
        );
    }
}

#[test]
fn the_chart_version_is_the_crate_version() {
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap()).unwrap();
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn a_packaged_chart_carries_its_image_and_the_crate_version() {
    let out = std::env::temp_dir().join(format!("olmv1-chart-test-{}", std::process::id()));
    let image = format!("{REPOSITORY}@{DIGEST}");
    let package = run(Command::new(repo_root().join("hack/chart.sh"))
        .args(["package", "--image", &image])
        .arg(&out))
    .unwrap_or_else(|e| panic!("hack/chart.sh package failed: {e}"));
    let package = package.trim();
    assert!(
        package.ends_with(&format!("olmv1-{}.tgz", env!("CARGO_PKG_VERSION"))),
        "{package}"
    );
    let chart = run(helm().args(["show", "chart", package])).unwrap();
    assert!(
        chart.contains(&format!("appVersion: {}", env!("CARGO_PKG_VERSION"))),
        "{chart}"
    );
    // Installed with no image value, the packaged chart runs the image it was published with.
    let objects = documents(&run(helm().args(["template", "olmv1", package])).unwrap());
    for deployment in deployments(&objects) {
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            image.as_str()
        );
    }
    // Its README and NOTES go with it.
    let readme = run(helm().args(["show", "readme", package])).unwrap();
    assert!(readme.contains("## Values"));
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn notes_say_that_uninstall_keeps_crds_and_extensions() {
    let mut command = helm();
    command
        .args(["install", "olmv1", "--dry-run=client"])
        .arg(chart_dir())
        .args(image_args());
    let out = run(&mut command).unwrap_or_else(|e| panic!("helm install --dry-run failed: {e}"));
    let notes = out.split("NOTES:").nth(1).expect("helm prints NOTES");
    let notes = notes.split_whitespace().collect::<Vec<_>>().join(" ");
    for says in [
        "never deletes the CRDs",
        "the ClusterExtensions",
        "anything an extension installed",
        "helm show crds",
        "cert-manager must run in the cluster",
    ] {
        assert!(notes.contains(says), "NOTES.txt does not say {says:?}:\n{notes}");
    }
}
