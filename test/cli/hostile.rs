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
//!
//! The tests after those run the binary with no cluster on catalogs they write: names and
//! messages with a newline (starting a forged plan line), CR and the format characters U+202E,
//! U+2066, U+200B and U+FEFF, whose output passes the same byte check (so no raw format
//! character) with every forged line after an escaped newline; and cells of hundreds of
//! kilobytes, shown whole.

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
    assert_json_carries(cases, olmv1);
}

/// Runs each case (what, arguments, strings its JSON must hold) with `run`: it succeeds, its JSON
/// text carries control and format characters as escapes only, and decodes to the exact strings.
fn assert_json_carries(cases: Vec<(&str, Vec<String>, Vec<String>)>, run: fn(&[String]) -> CmdOutput) {
    for (what, argv, expected) in cases {
        let out = run(&argv);
        assert_eq!(out.code, Some(0), "{what}: {}", out.stderr);
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

// ---------------------------------------------------------------------------------------------
// Newlines and Unicode format characters, and cells of hundreds of kilobytes. These run the
// binary on catalogs written here, with no cluster.

/// What every name and message of the spoofing catalog carries: a newline that would start a
/// forged plan line, a carriage return, a right-to-left override (U+202E), a first-strong
/// isolate (U+2066), a zero-width space (U+200B) and a byte order mark (U+FEFF).
const F: &str = "\nforged.v9.9.9 9.9.9 trusted\r\u{202e}\u{2066}\u{200b}\u{feff}";
/// `F` as text output shows it.
const F_SHOWN: &str = r"\x0aforged.v9.9.9 9.9.9 trusted\x0d\u202e\u2066\u200b\ufeff";

fn spoof(prefix: &str) -> String {
    format!("{prefix}{F}")
}

fn offline(args: &[String]) -> CmdOutput {
    run(std::process::Command::new(support::olmv1_bin())
        .args(args)
        .env("RUST_LOG", "off"))
}

/// Writes `dir/catalog.json` from one JSON object per line.
fn write_lines(dir: &std::path::Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
}

/// Package `spoof…` (2.0.0 replaces 1.0.0 and requires package `dep…`), package `dep…`, and
/// deprecation messages, every name and message carrying `F`.
fn write_spoof_catalog(dir: &std::path::Path) {
    let package = spoof("spoof");
    let dep = spoof("dep");
    let bundle = |pkg: &str, name: &str, version: &str, extra: Vec<Value>| {
        let mut properties =
            vec![json!({"type": "olm.package", "value": {"packageName": pkg, "version": version}})];
        properties.extend(extra);
        json!({"schema": "olm.bundle", "package": pkg, "name": name, "image": spoof("example.com/image"), "properties": properties})
    };
    write_lines(
        dir,
        &[
            json!({"schema": "olm.package", "name": package, "defaultChannel": spoof("stable")}),
            json!({"schema": "olm.channel", "package": package, "name": spoof("stable"), "entries": [
                {"name": spoof("spoof.v1.0.0")},
                {"name": spoof("spoof.v2.0.0"), "replaces": spoof("spoof.v1.0.0")},
            ]}),
            bundle(&package, &spoof("spoof.v1.0.0"), "1.0.0", vec![]),
            bundle(
                &package,
                &spoof("spoof.v2.0.0"),
                "2.0.0",
                vec![
                    json!({"type": "olm.package.required", "value": {"packageName": dep, "versionRange": ">=1.0.0"}}),
                ],
            ),
            json!({"schema": "olm.deprecations", "package": package, "entries": [
                {"reference": {"schema": "olm.package"}, "message": spoof("package")},
                {"reference": {"schema": "olm.bundle", "name": spoof("spoof.v1.0.0")}, "message": spoof("bundle")},
            ]}),
            json!({"schema": "olm.package", "name": dep, "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": dep, "name": "stable", "entries": [{"name": spoof("dep.v1.0.0")}]}),
            bundle(&dep, &spoof("dep.v1.0.0"), "1.0.0", vec![]),
        ],
    );
}

/// Fails if `text` holds a raw newline of the catalog's: every `forged` is right after the
/// escaped newline (`\x0a`, or `\n` inside a message's Go-quoted string), so no line starts
/// with it.
fn assert_not_forged(what: &str, text: &str) {
    let mut rest = text;
    while let Some(at) = rest.find("forged.v9.9.9") {
        assert!(
            rest[..at].ends_with(r"\x0a") || rest[..at].ends_with(r"\n"),
            "{what}: a catalog newline reached the output raw:\n{text}"
        );
        rest = &rest[at + 1..];
    }
}

#[test]
fn newlines_and_format_characters_in_catalog_text_are_shown_escaped() {
    let work = tempfile::tempdir().unwrap();
    write_spoof_catalog(work.path());
    let catalog = format!("{}={}", spoof("cat"), work.path().display());
    let package = spoof("spoof");
    let installed = format!("{}@1.0.0", spoof("spoof.v1.0.0"));
    let with = |cmd: &[&str], extra: &[&str]| {
        let mut a = args(cmd);
        a.extend(["--catalog".to_string(), catalog.clone()]);
        a.extend(args(extra));
        a
    };
    let request = ["--package", package.as_str(), "--installed", installed.as_str()];
    // (what, arguments, exit status, whether stdout shows the escaped form)
    let cases: Vec<(&str, Vec<String>, i32, bool)> = vec![
        ("search", with(&["search", "spoof", "--no-pull"], &[]), 0, true),
        ("versions", with(&["versions", &package], &[]), 0, true),
        ("upgrades", with(&["upgrades"], &request), 0, true),
        ("explain", with(&["explain"], &request), 0, true),
        (
            "explain, failing",
            with(&["explain", "--version", "9.0.0"], &request),
            1,
            true,
        ),
        // Plain `resolve` refuses a bundle with dependencies, as upstream does.
        ("resolve", with(&["resolve"], &request), 1, false),
        (
            "resolve, failing",
            with(&["resolve", "--version", "9.0.0"], &request),
            1,
            false,
        ),
        (
            "resolve --with-dependencies",
            with(&["resolve", "--package", &package, "--with-dependencies"], &[]),
            0,
            true,
        ),
        (
            "versions of an unknown package",
            with(&["versions", &spoof("nosuch")], &[]),
            2,
            false,
        ),
    ];
    for (what, argv, code, shows) in cases {
        let out = offline(&argv);
        assert_eq!(out.code, Some(code), "{what}: {}\n{}", out.stdout, out.stderr);
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            // Printable ASCII, newlines and tabs only: no CR, no format character.
            assert_safe(&format!("{what}: {stream}"), text.as_bytes());
            assert_not_forged(&format!("{what}: {stream}"), text);
        }
        if shows {
            assert!(
                out.stdout.contains(F_SHOWN),
                "{what}: no escaped form in\n{}",
                out.stdout
            );
        } else {
            assert!(!out.stderr.is_empty(), "{what}: a message on stderr");
        }
    }

    // JSON: the characters as escapes only, decoding to the catalog's strings.
    let json_cases: Vec<(&str, Vec<String>, Vec<String>)> = vec![
        (
            "search",
            with(&["search", "spoof", "--no-pull", "-o", "json"], &[]),
            vec![package.clone(), spoof("cat"), spoof("stable"), spoof("package")],
        ),
        (
            "versions",
            with(&["versions", &package, "-o", "json"], &[]),
            vec![
                package.clone(),
                spoof("spoof.v2.0.0"),
                spoof("package"),
                spoof("bundle"),
            ],
        ),
        (
            "upgrades",
            with(&["upgrades", "-o", "json"], &request),
            vec![package.clone(), spoof("spoof.v2.0.0"), spoof("cat")],
        ),
        (
            "explain",
            with(&["explain", "-o", "json"], &request),
            vec![package.clone(), spoof("spoof.v2.0.0"), spoof("dep.v1.0.0")],
        ),
        (
            "resolve --with-dependencies",
            with(
                &[
                    "resolve",
                    "--package",
                    &package,
                    "--with-dependencies",
                    "-o",
                    "json",
                ],
                &[],
            ),
            vec![spoof("spoof.v2.0.0"), spoof("dep.v1.0.0"), spoof("cat")],
        ),
    ];
    assert_json_carries(json_cases, offline);
}

/// `versions` of a bundle whose `replaces` is 500 KB and one with 250,000 `skips` (each made
/// `versions` run over 10 CPU seconds while wrapping was quadratic, and print megabytes when
/// every continuation line was padded): each long cell follows its row once, cut at 4,096
/// characters with how many bytes were left out, and the whole answer is a few KB.
#[test]
fn versions_shows_a_500_kb_replaces_and_250000_skips_cut_once() {
    let work = tempfile::tempdir().unwrap();
    let replaces = "r".repeat(500_000);
    let skips: Vec<String> = (0..250_000).map(|i| format!("big.v0.0.{i}")).collect();
    let bundle = |name: &str, version: &str| {
        json!({"schema": "olm.bundle", "package": "big", "name": name, "image": "example.com/big",
               "properties": [{"type": "olm.package", "value": {"packageName": "big", "version": version}}]})
    };
    write_lines(
        work.path(),
        &[
            json!({"schema": "olm.package", "name": "big", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "big", "name": "stable", "entries": [
                {"name": "big.v1.0.0", "replaces": replaces},
                {"name": "big.v2.0.0", "replaces": "big.v1.0.0", "skips": skips},
            ]}),
            bundle("big.v1.0.0", "1.0.0"),
            bundle("big.v2.0.0", "2.0.0"),
        ],
    );
    let catalog = format!("main={}", work.path().display());
    let out = offline(&args(&["versions", "big", "--catalog", &catalog]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.len() < 16 << 10, "{} bytes", out.stdout.len());
    let lines: Vec<&str> = out.stdout.lines().collect();
    let skips = skips.join(",");
    let shown = 4096;
    let replaces_line = format!(
        "  REPLACES: {}... ({} more bytes)",
        &replaces[..shown],
        replaces.len() - shown
    );
    let skips_line = format!(
        "  SKIPS: {}... ({} more bytes)",
        &skips[..shown],
        skips.len() - shown
    );
    for (row, below) in [("big.v1.0.0", &replaces_line), ("big.v2.0.0", &skips_line)] {
        let at = lines
            .iter()
            .position(|l| l.split_whitespace().nth(1) == Some(row))
            .unwrap_or_else(|| panic!("a row of {row}:\n{}", out.stdout));
        assert!(lines[at].contains("(below)"), "{}", lines[at]);
        assert_eq!(lines[at + 1], below.as_str());
    }
    assert_eq!(out.stdout.matches("more bytes)").count(), 2);

    // JSON keeps every value whole: here more than the output limit, so it is refused whole.
    let out = offline(&args(&["versions", "big", "--catalog", &catalog, "-o", "json"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{} bytes printed", out.stdout.len());
    assert!(
        out.stderr
            .contains("over the output limit of 1048576 bytes (--max-output-bytes)"),
        "{}",
        out.stderr
    );
    let out = offline(&args(&[
        "versions",
        "big",
        "--catalog",
        &catalog,
        "-o",
        "json",
        "--max-output-bytes",
        "64000000",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let entries = v[0]["channels"][0]["entries"].as_array().unwrap();
    let entry = |name: &str| entries.iter().find(|e| e["bundle"] == name).unwrap();
    assert_eq!(entry("big.v1.0.0")["replaces"], replaces.as_str());
    assert_eq!(entry("big.v2.0.0")["skips"].as_array().unwrap().len(), 250_000);
}

/// Text past `--max-output-bytes` is cut after its last whole line that fits, and the command
/// says how much it left out, with exit status 2.
#[test]
fn text_past_the_output_limit_is_cut_at_a_line_with_one_sentence() {
    let work = tempfile::tempdir().unwrap();
    let entries: Vec<Value> = (0..2_000)
        .map(|i| json!({"name": format!("many.v{i}.0.0")}))
        .collect();
    let mut lines = vec![
        json!({"schema": "olm.package", "name": "many", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "many", "name": "stable", "entries": entries}),
    ];
    lines.extend((0..2_000).map(|i| {
        json!({"schema": "olm.bundle", "package": "many", "name": format!("many.v{i}.0.0"),
               "image": "example.com/many", "properties": [{"type": "olm.package",
               "value": {"packageName": "many", "version": format!("{i}.0.0")}}]})
    }));
    write_lines(work.path(), &lines);
    let catalog = format!("main={}", work.path().display());
    let whole = offline(&args(&["versions", "many", "--catalog", &catalog]));
    assert_eq!(whole.code, Some(0), "{}", whole.stderr);
    assert!(whole.stdout.len() > 10_000);
    let out = offline(&args(&[
        "versions",
        "many",
        "--catalog",
        &catalog,
        "--max-output-bytes",
        "10000",
    ]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stdout.len() <= 10_000 && out.stdout.len() > 9_000,
        "{}",
        out.stdout.len()
    );
    assert!(out.stdout.ends_with('\n'));
    assert!(whole.stdout.starts_with(&out.stdout));
    assert_eq!(
        out.stderr.trim_end(),
        format!(
            "olmv1 versions: {} bytes of output were not printed: over the limit of 10000 bytes (--max-output-bytes)",
            whole.stdout.len() - out.stdout.len()
        )
    );
}

/// Rendering is the command's work too: `versions` whose budget (`OLMV1_WORK_UNITS`) covers
/// listing 2,000 versions but only half of rendering them, as text or as JSON, prints nothing of
/// them and refuses in one sentence naming the command and the budget (the units measured here
/// with the library's own listing and rendering, on the same catalog).
#[test]
fn rendering_past_the_command_budget_is_refused_in_one_sentence() {
    use olmv1::{
        admin::{terminal::to_json_pretty_within, versions},
        catalog::CatalogIndex,
        meter::Meter,
    };
    let work = tempfile::tempdir().unwrap();
    let entries: Vec<Value> = (1..2_000)
        .map(|i| json!({"name": format!("many.v{i}.0.0"), "replaces": format!("many.v{}.0.0", i - 1)}))
        .collect();
    let mut lines = vec![
        json!({"schema": "olm.package", "name": "many", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "many", "name": "stable", "entries": entries}),
    ];
    lines.extend((1..2_000).map(|i| {
        json!({"schema": "olm.bundle", "package": "many", "name": format!("many.v{i}.0.0"),
               "image": "example.com/many", "properties": [{"type": "olm.package",
               "value": {"packageName": "many", "version": format!("{i}.0.0")}}]})
    }));
    write_lines(work.path(), &lines);
    let index = CatalogIndex::from_dir(work.path()).unwrap();
    let package = index.package("many").unwrap();
    let mut listing = Meter::unlimited();
    let listed = vec![versions::versions("main", package, &mut listing).unwrap()];
    let mut text = Meter::unlimited();
    versions::render_text(&listed, false, &mut text).unwrap();
    let mut json = Meter::unlimited();
    to_json_pretty_within(&listed, u64::MAX, &mut json).unwrap();
    assert!(text.spent() > 100_000 && json.spent() > 100_000, "{text} {json}");
    let catalog = format!("main={}", work.path().display());
    for (output, rendering) in [("text", text.spent()), ("json", json.spent())] {
        let budget = listing.spent() + rendering / 2;
        let out = run(std::process::Command::new(support::olmv1_bin())
            .args(args(&["versions", "many", "--catalog", &catalog, "-o", output]))
            .env("RUST_LOG", "off")
            .env(olmv1::admin::WORK_UNITS_ENV, budget.to_string()));
        assert_eq!(out.code, Some(2), "{output}: {}", out.stderr);
        assert!(
            out.stdout.is_empty(),
            "{output}: {} bytes printed",
            out.stdout.len()
        );
        assert_eq!(
            out.stderr,
            format!(
                "olmv1 versions: rendering the output needs more than the budget of {budget} work units\n"
            ),
            "{output}"
        );
        // With the whole of it, the same command prints its answer.
        let budget = listing.spent() + rendering;
        let out = run(std::process::Command::new(support::olmv1_bin())
            .args(args(&["versions", "many", "--catalog", &catalog, "-o", output]))
            .env("RUST_LOG", "off")
            .env(olmv1::admin::WORK_UNITS_ENV, budget.to_string()));
        assert_eq!(out.code, Some(0), "{output}: {}", out.stderr);
        assert!(out.stdout.contains("many.v1999.0.0"), "{output}");
    }
}

/// `resolve --with-dependencies`' plan, text and JSON, is charged to the command's meter after the
/// plan's work, as the other commands' output: with the plan's work and half the rendering's the
/// command refuses in one sentence and prints nothing; with all of it, the plan.
#[test]
fn a_plan_rendered_past_the_command_budget_is_refused_in_one_sentence() {
    use std::sync::Arc;

    use olmv1::{
        admin::{
            request::RequestOverrides,
            resolve::{build_request, plan_text, plan_with_dependencies},
        },
        catalog::CatalogIndex,
        meter::Meter,
        resolve::CatalogInput,
    };
    // p0 requires p1, ..., p199 requires nothing: 200 lines of long names.
    let work = tempfile::tempdir().unwrap();
    let name = |i: usize| format!("p{i}-{}", "n".repeat(100));
    let mut lines = Vec::new();
    for i in 0..200 {
        let p = name(i);
        let mut properties =
            vec![json!({"type": "olm.package", "value": {"packageName": p, "version": "1.0.0"}})];
        if i < 199 {
            properties.push(json!({"type": "olm.package.required",
                "value": {"packageName": name(i + 1), "versionRange": ">=1.0.0"}}));
        }
        lines.push(json!({"schema": "olm.package", "name": p, "defaultChannel": "stable"}));
        lines.push(json!({"schema": "olm.channel", "package": p, "name": "stable",
            "entries": [{"name": format!("{p}.v1.0.0")}]}));
        lines.push(
            json!({"schema": "olm.bundle", "package": p, "name": format!("{p}.v1.0.0"),
            "image": "example.com/p", "properties": properties}),
        );
    }
    write_lines(work.path(), &lines);
    let inputs = [CatalogInput::new(
        "main",
        Arc::new(CatalogIndex::from_dir(work.path()).unwrap()),
    )];
    let overrides = RequestOverrides {
        package: Some(name(0)),
        ..RequestOverrides::default()
    };
    let request = build_request(None, &overrides).unwrap();
    let mut planning = Meter::unlimited();
    let plan = plan_with_dependencies(&request, &inputs, &mut planning).unwrap();
    assert_eq!(plan.plan.len(), 200);
    let catalog = format!("main={}", work.path().display());
    for output in ["text", "json"] {
        let mut rendering = Meter::unlimited();
        plan_text(&plan, output == "json", &mut rendering).unwrap();
        assert!(rendering.spent() > 20_000, "{output}: {rendering}");
        let resolve = |budget: u64| {
            run(std::process::Command::new(support::olmv1_bin())
                .args(args(&["resolve", "--package", &name(0), "--with-dependencies"]))
                .args(["--catalog", &catalog, "-o", output])
                .env("RUST_LOG", "off")
                .env(olmv1::admin::WORK_UNITS_ENV, budget.to_string()))
        };
        let budget = planning.spent() + rendering.spent() / 2;
        let out = resolve(budget);
        assert_eq!(out.code, Some(2), "{output}: {}", out.stderr);
        assert!(
            out.stdout.is_empty(),
            "{output}: {} bytes printed",
            out.stdout.len()
        );
        assert_eq!(
            out.stderr,
            format!(
                "olmv1 resolve: rendering the output needs more than the budget of {budget} work units\n"
            ),
            "{output}"
        );
        let out = resolve(planning.spent() + rendering.spent());
        assert_eq!(out.code, Some(0), "{output}: {}", out.stderr);
        assert!(out.stdout.contains(&format!("{}.v1.0.0", name(199))), "{output}");
    }
}

/// YAML output (`install --dry-run`, `render`) shows the format characters escaped inside
/// double-quoted strings, where YAML reads them back as the characters: the exact strings.
#[test]
fn yaml_output_keeps_newlines_and_format_characters_exact() {
    let work = tempfile::tempdir().unwrap();
    write_spoof_catalog(work.path());
    let catalog = format!("{}={}", spoof("cat"), work.path().display());
    let dep = spoof("dep");
    let out = offline(&args(&[
        "install",
        &dep,
        "--dry-run",
        "-n",
        "ns",
        "--service-account",
        "sa",
        "--catalog",
        &catalog,
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_safe("install --dry-run", out.stdout.as_bytes());
    assert_not_forged("install --dry-run", &out.stdout);
    assert!(out.stdout.contains(F_SHOWN), "{}", out.stdout);
    let object: Value = serde_saphyr::from_str(&out.stdout).unwrap();
    assert_eq!(object["spec"]["source"]["catalog"]["packageName"], dep.as_str());

    // A bundle whose ConfigMap carries them, in a value and in a multi-line value.
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
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile"},
                           "data": {"text": spoof("evil"), "lines": format!("one\ntwo {F}\n")}});
    std::fs::write(
        bundle.path().join("manifests/hostile.configmap.json"),
        configmap.to_string(),
    )
    .unwrap();
    let out = offline(&args(&[
        "render",
        "--bundle",
        &bundle.path().display().to_string(),
        "-n",
        "op",
        "--watch-namespace",
        "watched",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_safe("render", out.stdout.as_bytes());
    let docs: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let rendered = docs
        .into_iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the ConfigMap rendered");
    assert_eq!(rendered["data"], configmap["data"]);
}
