//! The real node (`OLMV1_NODE=kwok+real hack/local-up.sh`, docs/local-control-plane.md "The real
//! node"): kubelet runs real containers from an image in the local registry, a pod reaches the API
//! server through the `kubernetes` Service with its ServiceAccount's token, and a Service's
//! ClusterIP answers from the host's network namespace, the one kube-apiserver calls webhooks
//! from.
//!
//! Without a real node in the environment these tests return early with a note, unless
//! `OLMV1_E2E_REAL_NODE=1` (hack/test.sh), which makes them fail.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;

/// Pulling the kubectl image (~18 MB compressed) and starting a container on 2 busy cores.
const POD_TIMEOUT: Duration = Duration::from_secs(180);
/// kube-proxy writes a new Service's rules within its sync period (1 s) once the endpoints exist;
/// a loaded machine is slower.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(60);
/// One HTTP exchange with the Service; the answer is a few hundred bytes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of an answer read back: `/version` is under 1 KiB.
const MAX_ANSWER: u64 = 64 * 1024;

/// The real node's name, or None (with a note) when the environment has none and none is
/// required.
pub(crate) fn real_node() -> Option<String> {
    let env = support::env();
    match (&env.real_node, support::real_node_required()) {
        (Some(node), _) => Some(node.clone()),
        (None, true) => panic!(
            "{}=1 but the environment ({}) has no real node: start it with OLMV1_NODE=kwok+real hack/local-up.sh",
            support::REAL_NODE_REQUIRED_VAR,
            env.dir.display()
        ),
        (None, false) => {
            eprintln!(
                "note: no real node in this environment (OLMV1_NODE=kwok+real hack/local-up.sh starts one); \
                 set {}=1 to make this a failure",
                support::REAL_NODE_REQUIRED_VAR
            );
            None
        }
    }
}

/// The environment's kubectl (static, `CGO_ENABLED=0`) as the only file of an image in the local
/// registry, pushed once per test process by `olmv1 image push`.
fn kubectl_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let env = support::env();
        let dir = env.dir.join("e2e-kubectl-image");
        std::fs::create_dir_all(&dir).expect("create the image dir");
        std::fs::copy(&env.kubectl, dir.join("kubectl")).expect("copy kubectl");
        let reference = format!("{}/e2e/kubectl:{}", env.registry, env.kube_version);
        let mut push = env.command(support::olmv1_bin());
        push.args(["image", "push", "--entrypoint", "/kubectl"])
            .arg(&dir)
            .arg(&reference);
        support::run(&mut push).ok();
        reference
    })
}

/// Runs on the real node whatever the taint: its label as nodeSelector, the taint tolerated.
fn on_real_node(node: &str) -> serde_json::Value {
    json!({
        "nodeSelector": {support::REAL_NODE_LABEL: "true", "kubernetes.io/hostname": node},
        "tolerations": [{"key": support::REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
    })
}

/// A fresh namespace whose `default` ServiceAccount exists (the ServiceAccount admission plugin,
/// on with a real node, refuses pods until the controller-manager has made it).
async fn namespace_with_default_account(client: &kube::Client, prefix: &str) -> String {
    let namespace = support::fresh_namespace(client, prefix).await;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &namespace);
    support::wait_for("the default ServiceAccount", support::DEFAULT_TIMEOUT, || {
        let accounts = accounts.clone();
        async move { accounts.get("default").await.map(|_| ()) }
    })
    .await;
    namespace
}

/// What a pod's containers say about themselves, for failure messages.
fn container_states(pod: &Pod) -> String {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    format!(
        "phase {phase:?}, containers {:?}",
        statuses.iter().map(|c| (&c.name, &c.state)).collect::<Vec<_>>()
    )
}

#[tokio::test]
async fn the_real_node_is_ready_with_containerd_and_the_control_planes_kubelet() {
    let Some(name) = real_node() else { return };
    let env = support::env();
    let nodes = Api::<Node>::all(support::client().await);
    let node = support::wait_for("the real node Ready", support::DEFAULT_TIMEOUT, || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let node = nodes.get(&name).await.map_err(|e| e.to_string())?;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone());
            if ready.as_deref() == Some("True") {
                Ok(node)
            } else {
                Err(format!("Ready is {ready:?}"))
            }
        }
    })
    .await;
    let info = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.clone())
        .expect("nodeInfo");
    assert_eq!(
        info.kubelet_version, env.kube_version,
        "kubelet built at the control plane's version"
    );
    assert!(
        info.container_runtime_version.starts_with("containerd://"),
        "a real runtime: {}",
        info.container_runtime_version
    );
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(support::REAL_NODE_LABEL).map(String::as_str),
        Some("true")
    );
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tainted = taints.iter().any(|t| {
        t.key == support::REAL_NODE_TAINT && t.effect == "NoSchedule" && t.value.as_deref() == Some("true")
    });
    // Beside kwok the real node only takes pods that ask for it; alone it takes every pod.
    assert_eq!(tainted, env.kwok_node.is_some(), "taints: {taints:?}");
}

#[tokio::test]
async fn a_pod_on_the_real_node_reaches_the_api_server_through_the_kubernetes_service() {
    let Some(node) = real_node() else { return };
    let client = support::client().await;
    let image = tokio::task::spawn_blocking(kubectl_image).await.unwrap();
    let namespace = namespace_with_default_account(&client, "real-node-pod").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let mut spec = on_real_node(&node);
    spec["restartPolicy"] = json!("Never");
    // In-cluster kubectl: KUBERNETES_SERVICE_HOST (the Service's ClusterIP), the projected
    // token and the CA of kube-root-ca.crt; /readyz proves the path, whoami the token.
    spec["containers"] = json!([
        {"name": "readyz", "image": image, "args": ["get", "--raw", "/readyz"]},
        {"name": "whoami", "image": image, "args": ["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]},
    ]);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "in-cluster-kubectl"},
        "spec": spec,
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let done = support::wait_for("the kubectl pod Succeeded", POD_TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("in-cluster-kubectl").await.map_err(|e| e.to_string())?;
            match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => Ok(pod),
                Some("Failed") => panic!("the kubectl pod failed: {}", container_states(&pod)),
                _ => Err(container_states(&pod)),
            }
        }
    })
    .await;
    let status = done.status.as_ref().unwrap();
    assert_eq!(
        status.host_ip.as_deref(),
        support::env().vars.get("OLMV1_REAL_NODE_IP").map(String::as_str)
    );
    let pod_ip = status.pod_ip.clone().expect("a pod IP");
    let pod_cidr = &support::env().vars["OLMV1_POD_CIDR"];
    let prefix = pod_cidr.trim_end_matches("0/24");
    assert!(
        pod_ip.starts_with(prefix),
        "pod IP {pod_ip} from the bridge's range {pod_cidr}"
    );
    // The kubelet serves the logs (kube-apiserver -> kubelet on the node IP).
    let logs = |container: &'static str| {
        let pods = pods.clone();
        async move {
            pods.logs(
                "in-cluster-kubectl",
                &kube::api::LogParams {
                    container: Some(container.into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("logs of {container}: {e}"))
        }
    };
    assert_eq!(logs("readyz").await.trim(), "ok");
    assert_eq!(
        logs("whoami").await.trim(),
        format!("system:serviceaccount:{namespace}:default"),
        "the ServiceAccount's token authenticated the pod"
    );
}

#[tokio::test]
async fn a_service_cluster_ip_on_the_real_node_answers_from_the_hosts_network_namespace() {
    let Some(node) = real_node() else { return };
    let client = support::client().await;
    let image = tokio::task::spawn_blocking(kubectl_image).await.unwrap();
    let namespace = namespace_with_default_account(&client, "real-node-svc").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let mut spec = on_real_node(&node);
    // A real HTTP server in the pod: `kubectl proxy`, which forwards to the API server
    // in-cluster, so the answer also proves the pod's way back to it.
    spec["containers"] = json!([{
        "name": "proxy",
        "image": image,
        "args": ["proxy", "--address=0.0.0.0", "--port=8001", "--accept-hosts=.*"],
        "ports": [{"containerPort": 8001}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8001}, "periodSeconds": 1},
    }]);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "proxy", "labels": {"app": "proxy"}},
        "spec": spec,
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let services = Api::<Service>::namespaced(client.clone(), &namespace);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "proxy"},
        "spec": {"selector": {"app": "proxy"}, "ports": [{"port": 80, "targetPort": 8001}]},
    }))
    .unwrap();
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("create the Service");
    let cluster_ip = service.spec.and_then(|s| s.cluster_ip).expect("a ClusterIP");
    support::wait_for("the proxy pod Ready", POD_TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("proxy").await.map_err(|e| e.to_string())?;
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                Ok(())
            } else {
                Err(container_states(&pod))
            }
        }
    })
    .await;
    // From this process, in the host's network namespace like kube-apiserver: the ClusterIP is
    // routed to the node's namespace, where kube-proxy's rules send it to the pod.
    let answer = support::wait_for("the Service's ClusterIP answering", SERVICE_TIMEOUT, || {
        let cluster_ip = cluster_ip.clone();
        async move { http_get(&cluster_ip, 80, "/version").await }
    })
    .await;
    let kube_version = &support::env().kube_version;
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("\"gitVersion\": \"{kube_version}\"")),
        "the API server's /version through the pod: {answer}"
    );

    // From another pod on the same bridge (the answer comes back through kube-proxy's
    // masquerade, not straight over the bridge), as an operator's pod calls a Service.
    let mut spec = on_real_node(&node);
    spec["restartPolicy"] = json!("Never");
    spec["containers"] = json!([{
        "name": "client",
        "image": image,
        "args": [format!("--server=http://{cluster_ip}"), "get", "--raw", "/version"],
    }]);
    let client_pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": "client"}, "spec": spec})).unwrap();
    pods.create(&PostParams::default(), &client_pod)
        .await
        .expect("create the client pod");
    support::wait_for("the client pod Succeeded", POD_TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("client").await.map_err(|e| e.to_string())?;
            match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => Ok(()),
                Some("Failed") => panic!("the client pod failed: {}", container_states(&pod)),
                _ => Err(container_states(&pod)),
            }
        }
    })
    .await;
    let logs = pods
        .logs("client", &Default::default())
        .await
        .expect("the client's logs");
    assert!(
        logs.contains(&format!("\"gitVersion\": \"{kube_version}\"")),
        "/version through the Service from a pod: {logs}"
    );
}

#[tokio::test]
async fn an_image_behind_a_pull_secret_runs_on_the_real_node_and_not_without_it() {
    let Some(node) = real_node() else { return };
    let env = support::env();
    let client = support::client().await;
    let (registry, user, password) = support::auth_registry();
    // A tag of its own: containerd must fetch this manifest (authenticated) whatever it holds.
    let reference = format!("{registry}/{}:v1", support::fresh_name("e2e-kubectl"));
    let dir = env.dir.join("e2e-kubectl-image");
    tokio::task::spawn_blocking(kubectl_image).await.unwrap();
    let mut push = env.command(support::olmv1_bin());
    push.args([
        "image",
        "push",
        "--entrypoint",
        "/kubectl",
        "--username",
        &user,
        "--password-stdin",
    ])
    .arg(&dir)
    .arg(&reference);
    let stdin = format!("{password}\n");
    let pushed = tokio::task::spawn_blocking(move || support::run_with_stdin(&mut push, &stdin));
    pushed.await.unwrap().ok();
    let namespace = namespace_with_default_account(&client, "real-node-pull").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let pod_with = |name: &str, secret: Option<&str>| -> Pod {
        let mut spec = on_real_node(&node);
        spec["restartPolicy"] = json!("Never");
        spec["containers"] =
            json!([{"name": "kubectl", "image": reference, "args": ["version", "--client"]}]);
        if let Some(secret) = secret {
            spec["imagePullSecrets"] = json!([{"name": secret}]);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };

    // Without credentials the registry refuses the pull (through the node's hosts.toml mirror).
    pods.create(&PostParams::default(), &pod_with("without", None))
        .await
        .unwrap();
    support::wait_for("the pull refused", POD_TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("without").await.map_err(|e| e.to_string())?;
            let waiting = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone());
            match waiting.as_deref() {
                Some("ErrImagePull" | "ImagePullBackOff") => Ok(()),
                _ => Err(container_states(&pod)),
            }
        }
    })
    .await;

    let auth = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    };
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "pull"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json!({"auths": {registry.clone(): {"auth": auth}}}).to_string()},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod_with("with", Some("pull")))
        .await
        .unwrap();
    support::wait_for("the pod with the pull secret Succeeded", POD_TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("with").await.map_err(|e| e.to_string())?;
            match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => Ok(()),
                Some("Failed") => panic!("the pod failed: {}", container_states(&pod)),
                _ => Err(container_states(&pod)),
            }
        }
    })
    .await;
}

/// `GET PATH` over plain HTTP/1.0 to IP:PORT; the whole answer (status line, headers, body).
async fn http_get(ip: &str, port: u16, path: &str) -> Result<String, String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((ip, port))
            .await
            .map_err(|e| format!("connect {ip}:{port}: {e}"))?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        stream
            .take(MAX_ANSWER)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer from {ip}:{port} within {REQUEST_TIMEOUT:?}"))?
}
