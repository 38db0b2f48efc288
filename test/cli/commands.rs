//! The admin commands run as the `olmv1` binary (and as the `kubectl olmv1` plugin) on fixture
//! catalogs: directories, JSONL files and a catalog image in the real registry; text and JSON
//! output; exit statuses.

use std::{path::PathBuf, process::Command};

use serde_json::{Value, json};

use crate::support::{self, CmdOutput, run};

fn fixture(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/fixtures/resolve/catalogs")
        .join(rel)
        .display()
        .to_string()
}

fn olmv1(args: &[&str]) -> CmdOutput {
    run(Command::new(support::olmv1_bin())
        .args(args)
        .env("RUST_LOG", "off"))
}

fn json_of(out: CmdOutput) -> Value {
    let text = out.ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn versions_lists_channels_edges_and_deprecations() {
    let stable = format!("stable={}", fixture("stable"));
    let v = json_of(olmv1(&[
        "versions",
        "example",
        "--catalog",
        &stable,
        "-o",
        "json",
    ]));
    assert_eq!(
        v,
        json!([{
            "package": "example", "catalog": "stable", "defaultChannel": "stable", "deprecated": null,
            "channels": [{"name": "stable", "deprecated": null, "entries": [
                {"bundle": "example.v3.0.0", "version": "3.0.0", "replaces": null,
                 "skips": ["example.v2.0.0"], "skipRange": null,
                 "deprecated": "example.v3.0.0 is deprecated, use 2.x", "requires": [], "requiresError": null},
                {"bundle": "example.v2.0.0", "version": "2.0.0", "replaces": null, "skips": [],
                 "skipRange": ">=1.0.0 <2.0.0", "deprecated": null, "requires": [], "requiresError": null},
                {"bundle": "example.v1.0.0", "version": "1.0.0", "replaces": null, "skips": [],
                 "skipRange": null, "deprecated": null, "requires": [], "requiresError": null}
            ]}]
        }])
    );
    let text = olmv1(&["versions", "example", "--catalog", &stable]).ok();
    assert!(
        text.contains("stable    example.v2.0.0   2.0.0     -          -                >=1.0.0 <2.0.0   -"),
        "{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal: {text}"
    );

    let err = olmv1(&["versions", "nosuch", "--catalog", &stable]);
    assert_eq!(err.code, Some(2));
    assert_eq!(err.err(), "olmv1 versions: no catalog has package \"nosuch\"\n");
}

#[test]
fn output_to_a_reader_that_went_away_ends_quietly() {
    let stable = format!("stable={}", fixture("stable"));
    for format in ["json", "text"] {
        // The pipe's reader is closed before the command starts: every write fails (EPIPE),
        // as with `olmv1 versions ... | head -0`.
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(support::olmv1_bin())
            .args(["versions", "example", "--catalog", &stable, "-o", format])
            .env("RUST_LOG", "off")
            .stdout(writer)
            .output()
            .expect("olmv1 runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "-o {format}: {stderr}");
        assert_eq!(stderr, "", "-o {format}: nothing on stderr, no panic");
    }
}

#[test]
fn upgrades_are_the_resolvers_answers_with_paths_to_later_versions() {
    let stable = format!("stable={}", fixture("stable"));
    let v = json_of(olmv1(&[
        "upgrades",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "-o",
        "json",
    ]));
    // 2.0.0's skipRange covers 1.0.0; 3.0.0 only skips 2.0.0, so it takes two steps.
    assert_eq!(v["installed"]["bundle"], "example.v1.0.0");
    assert_eq!(
        v["reachable"],
        json!([{"bundle": "example.v2.0.0", "version": "2.0.0", "catalog": "stable", "deprecated": false}])
    );
    assert_eq!(v["paths"][0]["target"]["bundle"], "example.v3.0.0");
    assert_eq!(v["paths"][0]["target"]["deprecated"], true);
    let steps: Vec<&str> = v["paths"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["version"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["2.0.0", "3.0.0"]);
    assert_eq!(v["unreachable"], json!([]));

    // A range that excludes 2.0.0: nothing is reachable now, 2.0.0 still has its one-step path.
    let v = json_of(olmv1(&[
        "upgrades",
        "--package",
        "example",
        "--installed",
        "example.v1.0.0",
        "--version",
        "<2.0.0",
        "--catalog",
        &stable,
        "-o",
        "json",
    ]));
    assert_eq!(v["reachable"], json!([]));
    assert_eq!(v["paths"].as_array().unwrap().len(), 2);

    let dot = olmv1(&[
        "upgrades",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "-o",
        "dot",
    ])
    .ok();
    assert!(dot.starts_with("digraph \"example\" {"), "{dot}");
    assert!(
        dot.contains("\"example.v1.0.0\" -> \"example.v2.0.0\" [style=dotted];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"example.v2.0.0\" -> \"example.v3.0.0\" [style=dashed];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"example.v1.0.0\" -> \"example.v2.0.0\" [color=forestgreen"),
        "{dot}"
    );
    let svg = olmv1(&[
        "upgrades",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "-o",
        "svg",
    ])
    .ok();
    assert!(svg.contains("<svg") && svg.contains("example.v3.0.0"), "{svg}");

    let err = olmv1(&["upgrades", "--package", "example", "--catalog", &stable]);
    assert_eq!(
        err.err(),
        "olmv1 upgrades: no installed bundle: upgrades are listed from an installed bundle\n"
    );
}

/// Catalogs prune old bundles: kubecost-operator.v3.2.2 is no longer in certified v4.16, but
/// v3.2.3 and v3.2.4 still skip it. `upgrades` and `explain` answer from it as the resolver does.
#[test]
fn upgrades_and_explain_start_from_a_bundle_the_real_certified_v4_16_catalog_pruned() {
    let catalog = format!(
        "certified={}",
        support::shared_catalogs_root()
            .join("certified-operators-v4.16")
            .display()
    );
    let request = [
        "--package",
        "kubecost-operator",
        "--installed",
        "kubecost-operator.v3.2.2@3.2.2",
        "--catalog",
        &catalog,
    ];
    let with = |command: &str, extra: &[&str]| {
        let mut args = vec![command];
        args.extend_from_slice(&request);
        args.extend_from_slice(extra);
        olmv1(&args)
    };
    // The resolver's answer, as the controller would install it.
    let resolved = with("resolve", &["-o", "json"]).ok();
    let resolved: Value = serde_json::from_str(&resolved).unwrap();
    assert_eq!(resolved["bundle"]["name"], "kubecost-operator.v3.2.4");

    let u = json_of(with("upgrades", &["-o", "json"]));
    assert_eq!(
        u["installed"],
        json!({"bundle": "kubecost-operator.v3.2.2", "version": "3.2.2", "catalog": null, "deprecated": false})
    );
    let reachable: Vec<&str> = u["reachable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["bundle"].as_str().unwrap())
        .collect();
    assert_eq!(
        reachable,
        ["kubecost-operator.v3.2.4", "kubecost-operator.v3.2.3"]
    );
    assert_eq!(u["paths"], json!([]));
    assert_eq!(u["unreachable"], json!([]));
    let text = with("upgrades", &[]).ok();
    assert!(
        text.starts_with(
            "kubecost-operator installed: kubecost-operator.v3.2.2 3.2.2 (no selected catalog carries it any more)\n"
        ),
        "{text}"
    );
    let dot = with("upgrades", &["-o", "dot"]).ok();
    assert!(
        dot.contains("\"kubecost-operator.v3.2.2\" -> \"kubecost-operator.v3.2.4\" [style=dashed];"),
        "{dot}"
    );

    let e = json_of(with("explain", &["-o", "json"]));
    assert_eq!(e["chosen"]["bundle"], "kubecost-operator.v3.2.4");
    assert_eq!(e["error"], Value::Null);
    let text = with("explain", &[]).ok();
    assert!(
        text.starts_with(
            "kubecost-operator: resolves to kubecost-operator.v3.2.4 3.2.4 from catalog certified"
        ),
        "{text}"
    );
}

#[test]
fn explain_names_the_first_rule_that_excluded_each_bundle() {
    let stable = format!("stable={}", fixture("stable"));
    let extra = format!("extra={}", fixture("extra.jsonl"));
    let v = json_of(olmv1(&[
        "explain",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "-o",
        "json",
    ]));
    assert_eq!(v["chosen"]["bundle"], "example.v2.0.0");
    let verdicts: Vec<(String, Value)> = v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["bundle"].as_str().unwrap().to_string(), b["excludedBy"].clone()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("example.v1.0.0".to_string(), json!("lowerVersion")),
            ("example.v2.0.0".to_string(), Value::Null),
            ("example.v3.0.0".to_string(), json!("notSuccessor")),
        ]
    );

    // Two catalogs of the same priority tie: resolution fails with upstream's message, exit 1.
    let out = olmv1(&[
        "explain",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "--catalog",
        &extra,
        "-o",
        "json",
    ]);
    assert_eq!(out.code, Some(1));
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        v["error"],
        "error upgrading from currently installed version \"1.0.0\": found bundles for package \"example\" \
         in multiple catalogs with the same priority [extra stable]"
    );
    let tied: Vec<&str> = v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["excludedBy"] == "tiedCatalogs")
        .map(|b| b["bundle"].as_str().unwrap())
        .collect();
    assert_eq!(tied, ["example.v2.1.0", "example.v2.0.0"]);

    // A higher priority wins; the other catalog's best bundle says so.
    let v = json_of(olmv1(&[
        "explain",
        "--package",
        "example",
        "--installed",
        "1.0.0",
        "--catalog",
        &stable,
        "--catalog",
        &extra,
        "--priority",
        "extra=1",
        "-o",
        "json",
    ]));
    assert_eq!(
        v["chosen"],
        json!({"bundle": "example.v2.1.0", "version": "2.1.0", "catalog": "extra", "deprecated": false})
    );
    let loser = v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bundle"] == "example.v2.0.0")
        .unwrap();
    assert_eq!(loser["excludedBy"], "otherCatalog");
    assert_eq!(loser["detail"], "catalog extra has a higher priority");

    // The text form: one line of verdict, the catalogs, then the bundles.
    let text = olmv1(&[
        "explain",
        "--package",
        "example",
        "--channel",
        "nosuch",
        "--catalog",
        &stable,
    ]);
    assert_eq!(text.code, Some(1));
    assert!(
        text.stdout.starts_with(
            "example: no resolution: no bundles found for package \"example\" in channels [nosuch]\n"
        ),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("example.v1.0.0   1.0.0     channel: not in channels [nosuch]"),
        "{}",
        text.stdout
    );
}

#[test]
fn search_describes_packages_of_a_directory_and_a_catalog_image() {
    // A real package, with its manifests in olm.bundle.object properties.
    let catalog = support::shared_catalogs_root().join("community-operators-v4.16");
    let v = json_of(olmv1(&[
        "search",
        "kube-green",
        "--catalog",
        catalog.to_str().unwrap(),
        "-o",
        "json",
    ]));
    let row = &v.as_array().unwrap()[0];
    assert_eq!(row["package"], "kube-green");
    assert_eq!(row["defaultChannel"], "alpha");
    assert_eq!(row["installable"], true, "{row}");
    assert!(
        row["installModes"]
            .as_array()
            .unwrap()
            .contains(&json!("AllNamespaces")),
        "{row}"
    );
    assert_eq!(
        row["webhooks"], true,
        "kube-green ships a validating webhook: {row}"
    );

    // The same catalog content as an image in the real registry.
    let registry = support::registry();
    let work = tempfile::tempdir().unwrap();
    let configs = work.path().join("configs");
    std::fs::create_dir_all(&configs).unwrap();
    let stable = PathBuf::from(fixture("stable"));
    std::fs::copy(stable.join("example/catalog.yaml"), configs.join("catalog.yaml")).unwrap();
    let reference = format!("{registry}/cli/search-catalog:v1");
    let push = olmv1(&[
        "image",
        "push",
        work.path().to_str().unwrap(),
        &reference,
        "--label",
        "operators.operatorframework.io.index.configs.v1=/configs",
    ]);
    push.ok();
    let cache = tempfile::tempdir().unwrap();
    let v = json_of(olmv1(&[
        "search",
        "--image",
        &reference,
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--no-pull",
        "-o",
        "json",
    ]));
    let row = &v.as_array().unwrap()[0];
    assert_eq!(row["catalog"], "search-catalog");
    assert_eq!(row["newestVersion"], "2.0.0", "3.0.0 is deprecated: {row}");
    assert_eq!(row["newestImage"], "quay.io/example/example-bundle:v2.0.0");
    // The fixture catalog carries no manifests and --no-pull keeps the bundle image unread:
    // the verdict is unknown, never a guess.
    assert_eq!(row["manifestsFrom"], "none");
    assert_eq!(row["installable"], false);
    let text = olmv1(&[
        "search",
        "--image",
        &reference,
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--no-pull",
    ])
    .ok();
    assert!(text.contains("unknown (manifests not read)"), "{text}");
}

#[test]
fn works_as_a_kubectl_plugin_through_a_link_on_path() {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(support::olmv1_bin(), bin.path().join("kubectl-olmv1")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let stable = format!("stable={}", fixture("stable"));
    let kubectl = &support::env().kubectl;
    let out = run(Command::new(kubectl)
        .args(["olmv1", "versions", "example", "--catalog", &stable, "-o", "json"])
        .env("PATH", &path));
    let v: Value = serde_json::from_str(&out.ok()).unwrap();
    assert_eq!(v[0]["package"], "example");
    let help = run(Command::new(kubectl).args(["olmv1", "--help"]).env("PATH", &path)).ok();
    assert!(
        help.contains("Usage: kubectl olmv1 [OPTIONS] <COMMAND>"),
        "{help}"
    );
}
