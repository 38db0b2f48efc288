//! The `webhook-operator` binary as its image runs it (hack/test-operator.sh publishes this very
//! build, so `cargo test --workspace --no-run` is what compiles it for the e2e tests): the
//! behaviours the bundles rely on before any cluster is involved.

use std::process::Command;

fn operator(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_webhook-operator"))
        .args(args)
        .env_remove("BUNDLE_VERSION")
        .env_remove("POD_NAME")
        .output()
        .expect("webhook-operator runs")
}

/// The broken bundle of the upgrade tests (0.3.0 passes `--fail-at-start`): exits 1 at once,
/// saying so with its bundle version, and opens no port.
#[test]
fn fail_at_start_exits_one_naming_its_bundle() {
    let out = operator(&["--fail-at-start", "--bundle-version", "0.3.0"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("webhook-operator: started with --fail-at-start (bundle 0.3.0): exiting with status 1"),
        "{stderr}"
    );
}

/// Webhook mode without the certificate OLM mounts: one sentence naming what is missing, exit 1
/// (the pod then crash-loops visibly instead of serving plain HTTP to the API server).
#[test]
fn the_webhook_mode_without_its_certificate_exits_one_naming_it() {
    let dir = std::env::temp_dir().join(format!("webhook-operator-no-certs-{}", std::process::id()));
    let out = operator(&[
        "--cert-dir",
        dir.to_str().unwrap(),
        "--probe-bind-address",
        "127.0.0.1:0",
        "--webhook-bind-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("webhook-operator: serving certificate:") && stderr.contains(dir.to_str().unwrap()),
        "{stderr}"
    );
}

/// An unknown mode is refused by the flag parser with the modes it has (exit 2, clap's usage
/// error), so a CSV with a typo fails at start rather than serving the default.
#[test]
fn an_unknown_mode_is_refused_with_the_modes_there_are() {
    let out = operator(&["--mode", "gadgets"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'gadgets' for '--mode <MODE>'")
            && stderr.contains("webhooks")
            && stderr.contains("aggregated-api"),
        "{stderr}"
    );
}

/// The aggregated API server with its certificate and a cluster it cannot reach yet: it builds
/// its Kubernetes client (TLS included: the binary names its crypto provider, which the
/// workspace's one build, with two providers compiled in, needs) and keeps retrying the
/// request-header settings instead of exiting.
#[test]
fn the_aggregated_api_server_waits_for_a_cluster_it_cannot_reach_yet() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("webhook-operator-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=gadgets",
        ])
        .arg("-keyout")
        .arg(dir.join("apiserver.key"))
        .arg("-out")
        .arg(dir.join("apiserver.crt"))
        .output()
        .expect("openssl runs (hack/install-deps.sh installs it)");
    assert!(status.status.success(), "{status:?}");
    // Port 9 (discard) on loopback: refused at once.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
         clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u}}]\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_webhook-operator"))
        .args(["--mode", "aggregated-api", "--probe-bind-address", "127.0.0.1:0"])
        .args(["--api-bind-address", "127.0.0.1:0", "--api-cert-dir"])
        .arg(&dir)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("webhook-operator starts");
    let stderr = child.stderr.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut said = Vec::new();
    let waiting = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) if line.contains("request-header settings not read yet; retrying") => break true,
            Ok(line) => said.push(line),
            Err(_) => break false,
        }
    };
    let exited = child.try_wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        waiting && exited.is_none(),
        "expected it to keep retrying, exited: {exited:?}; it said:\n{}",
        said.join("\n")
    );
}
