//! Catalog, bundle and cluster text never reaches the admin's terminal raw: every text-printing
//! command run on `test/fixtures/cli/hostile` (ESC, BEL, CSI, OSC, the C1 characters U+009B and
//! U+0085, DEL and CR in every name field) prints the escaped form and no control character,
//! and its JSON output decodes to the original strings.
//!
//! What is checked, on stdout and stderr of every run:
//! - bytes: every byte is printable ASCII (0x20-0x7E), `\n` or `\t`. The fixture is ASCII apart
//!   from its control characters, so this excludes every byte below 0x20 but `\n`/`\t`, 0x7F,
//!   and the 0x80-0x9F bytes (C1 characters are two bytes in UTF-8, 0xC2 0x80-0x9F, so any
//!   C1 character left raw fails here too);
//! - characters: no character of Unicode category Cc (U+0000-U+001F, U+007F-U+009F) but `\n` and
//!   `\t`, a check that holds whatever the rest of the output's encoding.

use std::path::PathBuf;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use crate::support::{self, CmdOutput, run};

/// The control characters of every name field of the fixture.
const H: &str = "\x1b]0;PWNED\x07\x1b[31mRED\u{9b}2J\u{85}\x7f\r";
/// `H` as the output shows it.
const H_SHOWN: &str = r"\x1b]0;PWNED\x07\x1b[31mRED\u009b2J\u0085\x7f\x0d";

fn name(prefix: &str) -> String {
    format!("{prefix}{H}")
}

fn catalog_flag() -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test/fixtures/cli/hostile");
    format!("{}={}", name("cat"), dir.display())
}

fn olmv1(args: &[String]) -> CmdOutput {
    run(support::env()
        .command(support::olmv1_bin())
        .args(args)
        .env("RUST_LOG", "off"))
}

/// Fails unless `text` holds only printable ASCII, newlines and tabs (see the module comment).
fn assert_safe(what: &str, text: &[u8]) {
    let shown = String::from_utf8_lossy(text);
    if let Some(b) = text
        .iter()
        .find(|&&b| !(b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b)))
    {
        panic!("{what}: byte {b:#04x} in the output:\n{shown:?}");
    }
    let text = std::str::from_utf8(text).unwrap_or_else(|e| panic!("{what}: not UTF-8 ({e})"));
    if let Some(c) = text.chars().find(|&c| c.is_control() && c != '\n' && c != '\t') {
        panic!("{what}: control character {:?} in the output:\n{text:?}", c);
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Every string leaf of a JSON value.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(m) => m.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[test]
fn every_text_printing_command_shows_catalog_control_characters_escaped() {
    let catalog = catalog_flag();
    let package = name("evil");
    let installed = format!("{}@1.0.0", name("evil.v1.0.0"));
    let common = |cmd: &[&str]| {
        let mut a = args(cmd);
        a.extend(["--catalog".to_string(), catalog.clone()]);
        a
    };
    // (what, arguments, exit status, whether stdout must show the escaped form)
    let cases: Vec<(&str, Vec<String>, i32, bool)> = vec![
        ("search", common(&["search", "evil", "--no-pull"]), 0, true),
        ("versions", common(&["versions", &package]), 0, true),
        (
            "upgrades",
            common(&["upgrades", "--package", &package, "--installed", &installed]),
            0,
            true,
        ),
        (
            "upgrades -o dot",
            common(&[
                "upgrades",
                "--package",
                &package,
                "--installed",
                &installed,
                "-o",
                "dot",
            ]),
            0,
            false,
        ),
        (
            "explain",
            common(&["explain", "--package", &package, "--installed", &installed]),
            0,
            true,
        ),
        (
            "explain, failing",
            common(&[
                "explain",
                "--package",
                &package,
                "--installed",
                &installed,
                "--version",
                "9.0.0",
            ]),
            1,
            true,
        ),
        (
            "resolve",
            common(&["resolve", "--package", &package, "--installed", &installed]),
            0,
            true,
        ),
        (
            "resolve, failing (the message on stderr)",
            common(&[
                "resolve",
                "--package",
                &package,
                "--installed",
                &installed,
                "--version",
                "9.0.0",
            ]),
            1,
            false,
        ),
        (
            "install --dry-run",
            common(&[
                "install",
                &package,
                "--dry-run",
                "-n",
                "ns",
                "--service-account",
                "sa",
            ]),
            0,
            true,
        ),
        (
            "versions of an unknown package (the message on stderr)",
            common(&["versions", &name("nosuch")]),
            2,
            false,
        ),
    ];
    for (what, argv, code, shows) in cases {
        let out = olmv1(&argv);
        assert_eq!(out.code, Some(code), "{what}: {}\n{}", out.stdout, out.stderr);
        assert_safe(&format!("{what}: stdout"), out.stdout.as_bytes());
        assert_safe(&format!("{what}: stderr"), out.stderr.as_bytes());
        if shows {
            assert!(
                out.stdout.contains(H_SHOWN),
                "{what}: no escaped form in\n{}",
                out.stdout
            );
        }
        if code != 0 && !shows {
            assert!(!out.stderr.is_empty(), "{what}: a message on stderr");
        }
    }
}

#[test]
fn json_output_keeps_the_exact_strings() {
    let catalog = catalog_flag();
    let package = name("evil");
    let installed = format!("{}@1.0.0", name("evil.v1.0.0"));
    let common = |cmd: &[&str]| {
        let mut a = args(cmd);
        a.extend([
            "--catalog".to_string(),
            catalog.clone(),
            "-o".into(),
            "json".into(),
        ]);
        a
    };
    let bundle = |v: u32| name(&format!("evil.v{v}.0.0"));
    let cases: Vec<(&str, Vec<String>, Vec<String>)> = vec![
        (
            "search",
            common(&["search", "evil", "--no-pull"]),
            vec![package.clone(), name("cat"), name("stable"), name("package")],
        ),
        (
            "versions",
            common(&["versions", &package]),
            vec![
                package.clone(),
                name("stable"),
                bundle(1),
                bundle(2),
                bundle(3),
                name("gone.v0.1.0"),
                name("package"),
                name("channel"),
                name("bundle"),
            ],
        ),
        (
            "upgrades",
            common(&["upgrades", "--package", &package, "--installed", &installed]),
            vec![package.clone(), bundle(1), bundle(2), bundle(3), name("cat")],
        ),
        (
            "explain",
            common(&["explain", "--package", &package, "--installed", &installed]),
            vec![package.clone(), bundle(2), name("cat")],
        ),
        (
            "resolve",
            common(&["resolve", "--package", &package, "--installed", &installed]),
            vec![bundle(2), name("cat"), name("quay.io/evil/bundle:v2")],
        ),
    ];
    for (what, argv, expected) in cases {
        let out = olmv1(&argv);
        assert_eq!(out.code, Some(0), "{what}: {}", out.stderr);
        // The JSON text carries the characters as escapes only.
        assert_safe(&format!("{what}: JSON"), out.stdout.as_bytes());
        let value: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", out.stdout));
        let mut found = Vec::new();
        strings(&value, &mut found);
        for s in &expected {
            assert!(found.contains(s), "{what}: {s:?} not among {found:?}");
        }
    }
}

/// `install --dry-run` and `render` print YAML (and `render -o json`): it escapes the characters
/// and parses back to the exact strings.
#[test]
fn yaml_and_render_output_escape_and_keep_the_exact_strings() {
    let package = name("evil");
    let out = olmv1(&args(&[
        "install",
        &package,
        "--dry-run",
        "-n",
        "ns",
        "--service-account",
        "sa",
        "--catalog",
        &catalog_flag(),
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_safe("install --dry-run", out.stdout.as_bytes());
    let object: Value = serde_saphyr::from_str(&out.stdout).unwrap();
    assert_eq!(
        object["spec"]["source"]["catalog"]["packageName"],
        package.as_str()
    );
    assert_eq!(object["metadata"]["name"], package.as_str());

    // A bundle whose ConfigMap carries the characters (YAML double-quoted escapes).
    let bundle = tempfile::tempdir().unwrap();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test/fixtures/bundles/single-namespace-operator");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir(bundle.path().join(sub)).unwrap();
        for entry in std::fs::read_dir(fixture.join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), bundle.path().join(sub).join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(
        bundle.path().join("manifests/hostile.configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile\ndata:\n  \
         text: \"evil\\e]0;PWNED\\a\\e[31mRED\\x9b2J\\x85\\x7f\\r\"\n",
    )
    .unwrap();
    let dir = bundle.path().display().to_string();
    let render = |format: &str| {
        olmv1(&args(&[
            "render",
            "--bundle",
            &dir,
            "-n",
            "op",
            "--watch-namespace",
            "watched",
            "-o",
            format,
        ]))
    };
    let yaml = render("yaml");
    assert_eq!(yaml.code, Some(0), "{}", yaml.stderr);
    assert_safe("render -o yaml", yaml.stdout.as_bytes());
    let configmap = |objects: Vec<Value>| {
        objects
            .into_iter()
            .find(|o| o["kind"] == "ConfigMap")
            .unwrap_or_else(|| panic!("no ConfigMap rendered"))
    };
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml.stdout).unwrap();
    assert_eq!(configmap(docs)["data"]["text"], package.as_str());
    let json_out = render("json");
    assert_eq!(json_out.code, Some(0), "{}", json_out.stderr);
    assert_safe("render -o json", json_out.stdout.as_bytes());
    let list: Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert_eq!(
        configmap(list["items"].as_array().unwrap().clone())["data"]["text"],
        package.as_str()
    );
}

#[tokio::test]
async fn status_shows_cluster_messages_escaped() {
    let client = support::client().await;
    let api: Api<ClusterExtension> = Api::all(client);
    let extension = support::fresh_name("hostile");
    let object: ClusterExtension = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": extension},
        "spec": {
            "namespace": "hostile",
            "serviceAccount": {"name": "installer"},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": "evil"}}
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    // The controller copies catalog text (deprecation messages, resolution errors) into
    // condition messages; no controller runs here, so the test writes them.
    let now = "2026-01-01T00:00:00Z";
    let status = json!({"status": {
        "conditions": [
            {"type": "Installed", "status": "False", "reason": "Failed", "message": name("installing"),
             "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "Retrying", "message": name("retrying"),
             "lastTransitionTime": now},
            {"type": "BundleDeprecated", "status": "True", "reason": "Deprecated", "message": name("bundle"),
             "lastTransitionTime": now}
        ],
        "install": {"bundle": {"name": "evil.v1.0.0", "version": "1.0.0"}}
    }});
    api.patch_status(&extension, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    let catalog = catalog_flag();
    let text = olmv1(&args(&["status", &extension, "--catalog", &catalog]));
    let json_out = olmv1(&args(&[
        "status",
        &extension,
        "--catalog",
        &catalog,
        "-o",
        "json",
    ]));
    api.delete(&extension, &DeleteParams::default()).await.unwrap();

    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert_safe("status: stdout", text.stdout.as_bytes());
    assert_safe("status: stderr", text.stderr.as_bytes());
    for message in ["installing", "retrying", "bundle"] {
        assert!(
            text.stdout.contains(&format!("{message}{H_SHOWN}")),
            "status: {message}: no escaped form in\n{}",
            text.stdout
        );
    }
    assert_eq!(json_out.code, Some(0), "{}", json_out.stderr);
    assert_safe("status -o json", json_out.stdout.as_bytes());
    let value: Value = serde_json::from_str(&json_out.stdout).unwrap();
    let mut found = Vec::new();
    strings(&value, &mut found);
    for message in ["installing", "retrying", "bundle"] {
        assert!(found.contains(&name(message)), "{message}: {found:?}");
    }
}
