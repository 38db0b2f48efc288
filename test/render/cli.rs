//! `olmv1 render` as a user runs it: from a directory, a catalog, and an image in a real
//! docker-registry; YAML and JSON output; one clear error and exit status 1.

use std::process::{Command, Output};

use olmv1::image::{PushOptions, RegistryConfig, push_dir};
use serde_json::Value;

use crate::common::{fixture_dir, kinds_and_names, load_fixture};
use crate::support::{RegistryOptions, olmv1_bin, start_registry};

fn olmv1_render(args: &[&str]) -> Output {
    Command::new(olmv1_bin())
        .arg("render")
        .args(args)
        .output()
        .expect("run olmv1 render")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "olmv1 render failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn expected_objects() -> Vec<Value> {
    olmv1::bundle::render::render(&load_fixture("webhook-operator"), "ns1", None).expect("renders")
}

#[test]
fn renders_a_bundle_directory_as_a_yaml_stream() {
    let dir = fixture_dir("webhook-operator");
    let out = stdout(&olmv1_render(&[
        "--bundle",
        dir.to_str().expect("utf-8 path"),
        "--namespace",
        "ns1",
    ]));
    assert!(
        out.starts_with("---\napiVersion: v1\nkind: ServiceAccount\n"),
        "{out}"
    );
    let objects: Vec<Value> = serde_saphyr::from_multiple(&out).expect("YAML stream parses");
    assert_eq!(objects, expected_objects());
}

#[test]
fn renders_json_as_a_list() {
    let dir = fixture_dir("webhook-operator");
    let out = stdout(&olmv1_render(&[
        "--bundle",
        dir.to_str().expect("utf-8 path"),
        "-n",
        "ns1",
        "-o",
        "json",
    ]));
    let list: Value = serde_json::from_str(&out).expect("JSON parses");
    assert_eq!(list["kind"], "List");
    assert_eq!(
        list["items"].as_array().cloned().unwrap_or_default(),
        expected_objects()
    );
}

#[test]
fn renders_a_catalog_bundle_from_its_bundle_objects() {
    let catalog = crate::real_data::catalogs_root().join("community-operators-v4.16/kube-green");
    let out = stdout(&olmv1_render(&[
        "--catalog",
        catalog.to_str().expect("utf-8 path"),
        "--bundle-name",
        "kube-green.v0.7.1",
        "--namespace",
        crate::real_data::INSTALL_NS,
    ]));
    let snapshot = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/render/community-operators-v4.16__kube-green.v0.7.1.yaml");
    let expected = std::fs::read_to_string(&snapshot).expect("kube-green snapshot exists");
    assert!(out == expected, "CLI output differs from {snapshot:?}");
}

#[test]
fn watch_namespace_selects_single_namespace_mode() {
    let dir = fixture_dir("single-namespace-operator");
    let dir = dir.to_str().expect("utf-8 path");
    let out = stdout(&olmv1_render(&[
        "--bundle",
        dir,
        "-n",
        "op",
        "--watch-namespace",
        "watched",
        "-o",
        "json",
    ]));
    let list: Value = serde_json::from_str(&out).expect("JSON parses");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let role = items.iter().find(|o| o["kind"] == "Role").expect("a Role");
    assert_eq!(role["metadata"]["namespace"], "watched");

    let refused = olmv1_render(&["--bundle", dir, "-n", "op"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "olmv1 render: invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing\n"
    );
}

#[test]
fn errors_are_one_line_with_exit_status_1() {
    let catalog = crate::real_data::catalogs_root().join("community-operators-v4.16/kube-green");
    let missing = olmv1_render(&[
        "--catalog",
        catalog.to_str().expect("utf-8 path"),
        "--bundle-name",
        "kube-green.v9.9.9",
        "-n",
        "x",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.starts_with("olmv1 render: bundle \"kube-green.v9.9.9\" not found in catalog"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);

    let bad_config = olmv1_render(&[
        "--bundle",
        fixture_dir("webhook-operator").to_str().expect("utf-8 path"),
        "-n",
        "x",
        "--config",
        "{\"unknownField\": 1}",
    ]);
    assert_eq!(bad_config.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad_config.stderr),
        "olmv1 render: invalid ClusterExtension configuration: invalid configuration: unknown field \"unknownField\"\n"
    );

    let not_a_bundle = olmv1_render(&["--bundle", "127.0.0.1:1/none/such:v1", "-n", "x"]);
    assert_eq!(not_a_bundle.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&not_a_bundle.stderr);
    assert!(
        stderr.starts_with("olmv1 render: ") && stderr.contains("127.0.0.1:1"),
        "{stderr}"
    );

    // A missing directory is named as such, not taken for an image reference.
    for missing in ["./no-such-bundle", "/no/such/bundle", "no-such-bundle"] {
        let output = olmv1_render(&["--bundle", missing, "-n", "x"]);
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("does not exist") || stderr.contains("no such directory"),
            "{missing}: {stderr}"
        );
        assert!(!stderr.contains("error parsing image reference"), "{stderr}");
    }

    // --max-file-bytes bounds every file read from the bundle (its CSV is 3,635 bytes).
    let dir = fixture_dir("webhook-operator");
    let dir = dir.to_str().unwrap();
    let over = olmv1_render(&["--bundle", dir, "-n", "x", "--max-file-bytes", "1000"]);
    assert_eq!(over.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&over.stderr),
        format!(
            "olmv1 render: bundle {dir:?}: \"manifests/webhook-operator.clusterserviceversion.yaml\" in the \
             bundle is over the limit of 1000 bytes per file\n"
        )
    );
    stdout(&olmv1_render(&[
        "--bundle",
        dir,
        "-n",
        "x",
        "--max-file-bytes",
        "4000",
    ]));
}

#[tokio::test]
async fn renders_a_bundle_image_pulled_from_a_registry() {
    let registry = start_registry(&RegistryOptions::default());
    let reference = format!("{}/bundles/webhook-operator:v0.0.1", registry.host_port);
    let options = PushOptions {
        registry: RegistryConfig::default(),
        labels: Default::default(),
        prefix: "/".into(),
        ..Default::default()
    };
    push_dir(&fixture_dir("webhook-operator"), &reference, &options)
        .await
        .expect("push the fixture bundle");
    let cache = tempfile::tempdir().expect("tempdir");
    let output = tokio::task::spawn_blocking({
        let cache = cache.path().to_path_buf();
        move || {
            olmv1_render(&[
                "--bundle",
                &reference,
                "-n",
                "ns1",
                "--cache-dir",
                cache.to_str().expect("utf-8 path"),
            ])
        }
    })
    .await
    .expect("join");
    let objects: Vec<Value> = serde_saphyr::from_multiple(&stdout(&output)).expect("YAML stream parses");
    assert_eq!(kinds_and_names(&objects), kinds_and_names(&expected_objects()));
    assert_eq!(objects, expected_objects());
}

#[tokio::test]
async fn renders_a_bundle_image_through_a_registries_conf_mirror_from_the_flag_or_the_environment() {
    let mirror = start_registry(&RegistryOptions::default());
    push_dir(
        &fixture_dir("webhook-operator"),
        &format!("{}/copies/webhook-operator:v0.0.1", mirror.host_port),
        &PushOptions {
            prefix: "/".into(),
            ..Default::default()
        },
    )
    .await
    .expect("push the fixture bundle to the mirror");
    let work = tempfile::tempdir().expect("tempdir");
    let conf = work.path().join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nprefix = \"bundles.registry.invalid\"\nlocation = \"bundles.registry.invalid\"\n\n\
             [[registry.mirror]]\nlocation = \"{}/copies\"\n\n\
             [[registry]]\nlocation = \"blocked.registry.invalid\"\nblocked = true\n",
            mirror.host_port
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap().to_string();
    let cache = work.path().join("cache");
    let cache = cache.to_str().unwrap().to_string();
    let render = move |reference: &str, flag: bool| {
        let mut command = Command::new(olmv1_bin());
        command
            .args([
                "render",
                "--bundle",
                reference,
                "-n",
                "ns1",
                "--cache-dir",
                &cache,
            ])
            .env_remove("CONTAINERS_REGISTRIES_CONF");
        if flag {
            command.args(["--registries-conf", &conf]);
        } else {
            command.env("CONTAINERS_REGISTRIES_CONF", &conf);
        }
        command.output().expect("run olmv1 render")
    };
    let output = tokio::task::spawn_blocking({
        let render = render.clone();
        move || {
            (
                render("bundles.registry.invalid/webhook-operator:v0.0.1", true),
                render("bundles.registry.invalid/webhook-operator:v0.0.1", false),
                render("blocked.registry.invalid/webhook-operator:v0.0.1", true),
            )
        }
    })
    .await
    .expect("join");
    for through in [&output.0, &output.1] {
        let objects: Vec<Value> = serde_saphyr::from_multiple(&stdout(through)).expect("YAML stream parses");
        assert_eq!(objects, expected_objects());
    }
    assert_eq!(output.2.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.2.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "olmv1 render: image blocked.registry.invalid/webhook-operator:v0.0.1: registry \
             blocked.registry.invalid is blocked in {}",
            work.path().join("registries.conf").display()
        )
    );
}

#[test]
fn the_webhook_provider_flag_renders_the_service_ca_objects() {
    let dir = fixture_dir("webhook-operator");
    let dir = dir.to_str().expect("utf-8 path");
    let out = stdout(&olmv1_render(&[
        "--bundle",
        dir,
        "-n",
        "ns1",
        "--webhook-provider",
        "openshift-service-ca",
    ]));
    let objects: Vec<Value> = serde_saphyr::from_multiple(&out).expect("YAML stream parses");
    let expected = olmv1::bundle::render::render_with_provider(
        &load_fixture("webhook-operator"),
        "ns1",
        None,
        olmv1::bundle::render::WebhookProvider::OpenshiftServiceCa,
    )
    .expect("renders");
    assert_eq!(objects, expected);
    assert!(
        out.contains("service.beta.openshift.io/inject-cabundle: \"true\""),
        "{out}"
    );
    assert!(
        out.contains("service.beta.openshift.io/serving-cert-secret-name: "),
        "{out}"
    );
    assert!(!out.contains("cert-manager.io"), "{out}");

    let refused = olmv1_render(&["--bundle", dir, "-n", "ns1", "--webhook-provider", "vault"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cert-manager") && stderr.contains("openshift-service-ca"),
        "{stderr}"
    );
}
