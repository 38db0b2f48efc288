//! Dependencies on the command line, on small FBC catalogs written by each test:
//! `olmv1 resolve --with-dependencies` (the plan in text and JSON, classic's catalog priority,
//! exit 1 with the explanation when there is no plan), what `search` and `versions` say each
//! bundle requires, and the dependency reasoning of `explain`.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{self, CmdOutput, run};

/// A bundle: name `<package>.v<version>`, its extra properties (requirements, APIs).
struct Bundle {
    version: &'static str,
    properties: Vec<Value>,
}

fn bundle(version: &'static str) -> Bundle {
    Bundle {
        version,
        properties: Vec::new(),
    }
}

impl Bundle {
    fn with(mut self, type_: &str, value: Value) -> Bundle {
        self.properties.push(json!({"type": type_, "value": value}));
        self
    }

    fn needs_package(self, package: &str, range: &str) -> Bundle {
        self.with(
            "olm.package.required",
            json!({"packageName": package, "versionRange": range}),
        )
    }

    fn needs_gvk(self, group: &str, version: &str, kind: &str) -> Bundle {
        self.with(
            "olm.gvk.required",
            json!({"group": group, "version": version, "kind": kind}),
        )
    }

    fn provides_gvk(self, group: &str, version: &str, kind: &str) -> Bundle {
        self.with(
            "olm.gvk",
            json!({"group": group, "version": version, "kind": kind}),
        )
    }
}

/// Writes `dir/catalog.json`: each package with one channel `stable`, its bundles in the given
/// order, each replacing the one before (the last is the head).
fn write_catalog(dir: &Path, packages: &[(&str, Vec<Bundle>)]) {
    let mut lines = Vec::new();
    for (package, bundles) in packages {
        lines.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        let mut entries = Vec::new();
        let mut previous: Option<String> = None;
        for b in bundles {
            let name = format!("{package}.v{}", b.version);
            let mut entry = json!({"name": name});
            if let Some(p) = &previous {
                entry["replaces"] = json!(p);
            }
            entries.push(entry);
            previous = Some(name.clone());
            let mut properties =
                vec![json!({"type": "olm.package", "value": {"packageName": package, "version": b.version}})];
            properties.extend(b.properties.iter().cloned());
            lines.push(json!({
                "schema": "olm.bundle", "package": package, "name": name,
                "image": format!("example.com/{package}:v{}", b.version),
                "properties": properties,
            }));
        }
        lines
            .push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": entries}));
    }
    std::fs::create_dir_all(dir).unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
}

fn olmv1(args: &[&str]) -> CmdOutput {
    run(std::process::Command::new(support::olmv1_bin())
        .args(args)
        .env("RUST_LOG", "off"))
}

fn json_of(out: CmdOutput) -> Value {
    let text = out.ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `app` needs package `blue >=1.0.0` and the EtcdCluster API, which `etcd` provides.
fn app_blue_etcd(dir: &Path) -> String {
    write_catalog(
        dir,
        &[
            (
                "app",
                vec![bundle("1.0.0").needs_package("blue", ">=1.0.0").needs_gvk(
                    "etcd.database.coreos.com",
                    "v1beta2",
                    "EtcdCluster",
                )],
            ),
            ("blue", vec![bundle("0.9.0"), bundle("1.0.0"), bundle("1.1.0")]),
            (
                "etcd",
                vec![bundle("0.9.4").provides_gvk("etcd.database.coreos.com", "v1beta2", "EtcdCluster")],
            ),
        ],
    );
    format!("main={}", dir.display())
}

#[test]
fn resolve_with_dependencies_prints_the_plan_dependencies_first() {
    let work = tempfile::tempdir().unwrap();
    let main = app_blue_etcd(&work.path().join("main"));
    let base = [
        "resolve",
        "--catalog",
        &main,
        "--package",
        "app",
        "--with-dependencies",
    ];

    // Text: one line per bundle, dependencies before what needs them, the requested one last;
    // blue's head (1.1.0) is preferred among the bundles in range.
    let text = olmv1(&base).ok();
    assert_eq!(
        text,
        "blue.v1.1.0 1.1.0 main (required by app.v1.0.0)\n\
         etcd.v0.9.4 0.9.4 main (required by app.v1.0.0)\n\
         app.v1.0.0 1.0.0 main\n"
    );

    let v = json_of(olmv1(&[&base[..], &["-o", "json"]].concat()));
    assert_eq!(
        v["plan"],
        json!([
            {"package": "blue", "bundle": "blue.v1.1.0", "version": "1.1.0", "catalog": "main",
             "requiredBy": ["app.v1.0.0"]},
            {"package": "etcd", "bundle": "etcd.v0.9.4", "version": "0.9.4", "catalog": "main",
             "requiredBy": ["app.v1.0.0"]},
            {"package": "app", "bundle": "app.v1.0.0", "version": "1.0.0", "catalog": "main",
             "requiredBy": []},
        ])
    );

    // The requested package's own flags still apply: a range nothing matches is the
    // resolver's message, exit 1.
    let out = olmv1(&[&base[..], &["--version", ">=2.0.0"]].concat());
    assert_eq!(out.code, Some(1));
    assert_eq!(
        out.err(),
        "no bundles found for package \"app\" matching version \">=2.0.0\"\n"
    );
}

#[test]
fn resolve_with_dependencies_names_what_is_missing() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("main");
    write_catalog(
        &dir,
        &[
            ("app", vec![bundle("1.0.0").needs_package("blue", ">=2.0.0")]),
            ("blue", vec![bundle("1.0.0")]),
            (
                "db",
                vec![bundle("1.0.0").needs_gvk("etcd.database.coreos.com", "v1beta2", "EtcdCluster")],
            ),
        ],
    );
    let main = format!("main={}", dir.display());

    let out = olmv1(&[
        "resolve",
        "--catalog",
        &main,
        "--package",
        "app",
        "--with-dependencies",
    ]);
    assert_eq!(out.code, Some(1));
    assert_eq!(out.stdout, "", "no plan printed");
    let err = out.err();
    assert!(
        err.starts_with("no set of bundles satisfies every requirement:\n"),
        "{err}"
    );
    assert!(
        err.contains("app.v1.0.0 (catalog main) would require")
            && err.contains("package blue >=2.0.0 (no catalog has a bundle of it in that range)"),
        "{err}"
    );

    let out = olmv1(&[
        "resolve",
        "--catalog",
        &main,
        "--package",
        "db",
        "--with-dependencies",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, Some(1));
    assert_eq!(out.stdout, "", "no JSON plan either");
    let err = out.err();
    assert!(
        err.contains(
            "API EtcdCluster (etcd.database.coreos.com/v1beta2) (no bundle in the catalogs provides it)"
        ),
        "{err}"
    );
}

#[test]
fn resolve_with_dependencies_explains_a_conflicting_chain_with_its_failure_message() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("main");
    // app needs blue >=1.1.0 and red; red accepts only blue <1.1.0, in the author's words (with
    // a terminal escape, which must reach the terminal escaped).
    write_catalog(
        &dir,
        &[
            (
                "app",
                vec![
                    bundle("1.0.0")
                        .needs_package("blue", ">=1.1.0")
                        .needs_package("red", ">=1.0.0"),
                ],
            ),
            ("blue", vec![bundle("1.0.0"), bundle("1.1.0")]),
            (
                "red",
                vec![bundle("1.0.0").with(
                    "olm.constraint",
                    json!({
                        "failureMessage": "red works only with blue 1.0\u{1b}]0;x\u{7}",
                        "package": {"packageName": "blue", "versionRange": "<1.1.0"}
                    }),
                )],
            ),
        ],
    );
    let main = format!("main={}", dir.display());
    let out = olmv1(&[
        "resolve",
        "--catalog",
        &main,
        "--package",
        "app",
        "--with-dependencies",
    ]);
    assert_eq!(out.code, Some(1));
    let err = out.err();
    // The chain: app needs blue >=1.1.0 and red; red needs blue <1.1.0 (the failure message).
    for part in [
        "app.v1.0.0 (catalog main) would require",
        "blue >=1.1.0",
        "red.v1.0.0 (catalog main) would require",
        r"blue <1.1.0 [red works only with blue 1.0\x1b]0;x\x07]",
        "blue.v1.0.0 (catalog main), which conflicts with the versions reported above",
    ] {
        assert!(err.contains(part), "{part:?} missing from:\n{err}");
    }
    assert!(!err.contains('\x1b'), "the escape is shown escaped: {err:?}");
}

#[test]
fn resolve_with_dependencies_prefers_catalogs_by_priority_then_the_dependents_catalog() {
    let work = tempfile::tempdir().unwrap();
    let main_dir = work.path().join("main");
    let other_dir = work.path().join("other");
    write_catalog(
        &main_dir,
        &[
            ("app", vec![bundle("1.0.0").needs_package("blue", ">=1.0.0")]),
            ("blue", vec![bundle("1.0.0")]),
        ],
    );
    // A newer blue in another catalog.
    write_catalog(&other_dir, &[("blue", vec![bundle("1.0.0"), bundle("2.0.0")])]);
    let main = format!("main={}", main_dir.display());
    let other = format!("other={}", other_dir.display());
    let plan_of = |extra: &[&str]| -> Vec<(String, String)> {
        let args = [
            &[
                "resolve",
                "--catalog",
                &main,
                "--catalog",
                &other,
                "--package",
                "app",
            ][..],
            &["--with-dependencies", "-o", "json"],
            extra,
        ]
        .concat();
        json_of(olmv1(&args))["plan"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["bundle"].as_str().unwrap().to_string(),
                    p["catalog"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let pair = |b: &str, c: &str| (b.to_string(), c.to_string());

    // Equal priorities: the dependent's own catalog wins over a higher version elsewhere.
    assert_eq!(
        plan_of(&[]),
        [pair("blue.v1.0.0", "main"), pair("app.v1.0.0", "main")]
    );
    // A higher priority comes first.
    assert_eq!(
        plan_of(&["--priority", "other=10"]),
        [pair("blue.v2.0.0", "other"), pair("app.v1.0.0", "main")]
    );
    // ... and a lower one changes nothing.
    assert_eq!(
        plan_of(&["--priority", "other=-1"]),
        [pair("blue.v1.0.0", "main"), pair("app.v1.0.0", "main")]
    );
}
