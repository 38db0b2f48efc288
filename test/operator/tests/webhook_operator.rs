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
        stderr.contains("webhook-operator: started with --fail-at-start (bundle 0.3.0): exiting with status 1"),
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
