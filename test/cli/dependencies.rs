//! Dependencies on the command line, on small FBC catalogs written by each test:
//! `olmv1 resolve --with-dependencies` (the plan in text and JSON, classic's catalog priority,
//! exit 1 with the explanation when there is no plan), what `search` and `versions` say each
//! bundle requires, the dependency reasoning of `explain`, and the verdicts of `search`,
//! `explain` and `upgrades` under `--dependencies` (`check`, the default, as the controller's:
//! a bundle with dependencies installs once they are installed; `refuse`: upstream's refusal).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{self, CmdOutput, run};

/// A bundle: name `<package>.v<version>`, its extra properties (requirements, APIs).
struct Bundle {
    version: &'static str,
    properties: Vec<Value>,
    /// Whether the catalog carries its manifests (`olm.bundle.object`), so that `search` has a
    /// renderer's verdict without pulling an image.
    manifests: bool,
}

fn bundle(version: &'static str) -> Bundle {
    Bundle {
        version,
        properties: Vec::new(),
        manifests: false,
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

    fn with_manifests(mut self) -> Bundle {
        self.manifests = true;
        self
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
            if b.manifests {
                properties.push(
                    json!({"type": "olm.bundle.object", "value": {"data": csv_object(&name, b.version)}}),
                );
            }
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

/// A ClusterServiceVersion that installs in AllNamespaces mode (one Deployment), as an
/// `olm.bundle.object`'s base64 data.
fn csv_object(name: &str, version: &str) -> String {
    use base64::Engine as _;
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "version": version,
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {"deployments": [{
                "name": "manager",
                "spec": {
                    "selector": {"matchLabels": {"app": "manager"}},
                    "template": {
                        "metadata": {"labels": {"app": "manager"}},
                        "spec": {"containers": [{"name": "manager", "image": "example.com/manager:v1"}]}
                    }
                }
            }]}}
        }
    });
    base64::engine::general_purpose::STANDARD.encode(csv.to_string())
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

/// `app` 1.0.0 needs package blue and the EtcdCluster API; 1.1.0 needs, by compound and CEL
/// constraints, a certified blue (with a failure message) and any bundle of blue >=1.1.0 or
/// providing the API (without one); 1.2.0 has a constraint with an unknown field.
fn app_with_every_form(dir: &Path) -> String {
    let certified_blue = json!({
        "failureMessage": "app 1.1 needs a certified blue",
        "all": {"constraints": [
            {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}},
            {"cel": {"rule": "properties.exists(p, p.type == \"certified\")"}}
        ]}
    });
    let any_blue_or_api = json!({
        "any": {"constraints": [
            {"package": {"packageName": "blue", "versionRange": ">=1.1.0"}},
            {"gvk": {"group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}}
        ]}
    });
    write_catalog(
        dir,
        &[
            (
                "app",
                vec![
                    bundle("1.0.0")
                        .needs_package("blue", ">=1.0.0")
                        .needs_gvk("etcd.database.coreos.com", "v1beta2", "EtcdCluster"),
                    bundle("1.1.0")
                        .with("olm.constraint", certified_blue)
                        .with("olm.constraint", any_blue_or_api),
                    bundle("1.2.0").with(
                        "olm.constraint",
                        json!({"package": {"packageName": "blue", "versionRange": ">=1.0.0"}, "colour": "red"}),
                    ),
                ],
            ),
            ("blue", vec![bundle("1.0.0"), bundle("1.1.0").with("certified", json!(true))]),
        ],
    );
    format!("main={}", dir.display())
}

#[test]
fn versions_and_search_show_what_each_bundle_requires() {
    let work = tempfile::tempdir().unwrap();
    let main = app_with_every_form(&work.path().join("main"));

    let v = json_of(olmv1(&["versions", "app", "--catalog", &main, "-o", "json"]));
    let entries = &v[0]["channels"][0]["entries"];
    let by_bundle = |name: &str| {
        entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["bundle"] == name)
            .unwrap_or_else(|| panic!("{name} in {entries}"))
            .clone()
    };
    let v100 = by_bundle("app.v1.0.0");
    assert_eq!(
        v100["requires"],
        json!([
            {"property": "olm.package.required", "summary": "pkg blue >=1.0.0", "failureMessage": null,
             "constraint": {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}}},
            {"property": "olm.gvk.required",
             "summary": "gvk etcd.database.coreos.com/v1beta2 EtcdCluster", "failureMessage": null,
             "constraint": {"gvk": {"group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}}},
        ])
    );
    assert_eq!(v100["requiresError"], Value::Null);
    let v110 = by_bundle("app.v1.1.0");
    // A compound constraint is summarised by its failure message, or else by its short form;
    // the structured form is whole.
    assert_eq!(v110["requires"][0]["summary"], "app 1.1 needs a certified blue");
    assert_eq!(
        v110["requires"][0]["constraint"]["all"]["constraints"][1],
        json!({"cel": {"rule": "properties.exists(p, p.type == \"certified\")"}})
    );
    assert_eq!(
        v110["requires"][1]["summary"],
        "any(pkg blue >=1.1.0, gvk etcd.database.coreos.com/v1beta2 EtcdCluster)"
    );
    let v120 = by_bundle("app.v1.2.0");
    assert_eq!(v120["requires"], json!([]));
    let error = v120["requiresError"].as_str().unwrap();
    assert!(
        error.starts_with("bundle \"app.v1.2.0\" has an invalid olm.constraint dependency:")
            && error.contains("colour"),
        "{error}"
    );

    let text = olmv1(&["versions", "app", "--catalog", &main]).ok();
    let header = text.lines().nth(1).unwrap();
    assert!(header.ends_with("DEPRECATED   REQUIRES"), "{text}");
    // The last column pads nothing: its cells stay whole on their row.
    for part in [
        "-            pkg blue >=1.0.0, gvk etcd.database.coreos.com/v1beta2 EtcdCluster\n",
        "-            app 1.1 needs a certified blue, any(pkg blue >=1.1.0, gvk etcd.database.coreos.com/v1beta2 EtcdCluster)\n",
        "-            invalid: bundle \"app.v1.2.0\" has an invalid olm.constraint dependency: unknown field \"colour\"\n",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    // A package whose bundles require nothing keeps the usual columns.
    let text = olmv1(&["versions", "blue", "--catalog", &main]).ok();
    assert!(!text.contains("REQUIRES"), "{text}");

    // search: the newest bundle's requirements (app.v1.2.0, whose constraint is unreadable).
    let v = json_of(olmv1(&["search", "--catalog", &main, "--no-pull", "-o", "json"]));
    let rows = v.as_array().unwrap();
    let app = rows.iter().find(|r| r["package"] == "app").unwrap();
    assert_eq!(app["newestBundle"], "app.v1.2.0");
    assert!(app["requiresError"].as_str().unwrap().contains("colour"), "{app}");
    // The controller (`--dependencies=check`) refuses a bundle whose requirements it cannot read.
    assert!(
        app["notInstallableReason"]
            .as_str()
            .unwrap()
            .starts_with("its requirements cannot be read: bundle \"app.v1.2.0\""),
        "{app}"
    );
    let blue = rows.iter().find(|r| r["package"] == "blue").unwrap();
    assert_eq!(blue["requires"], json!([]));
    assert_eq!(blue["requiresError"], Value::Null);
    let text = olmv1(&["search", "--catalog", &main, "--no-pull"]).ok();
    assert!(text.lines().next().unwrap().ends_with("   REQUIRES"), "{text}");
    let blue_line = text.lines().find(|l| l.starts_with("blue ")).unwrap();
    assert!(blue_line.trim_end().ends_with(" -"), "{text}");

    // The first version's requirements, as search shows them for a package whose newest
    // bundle reads.
    let older = work.path().join("older");
    write_catalog(
        &older,
        &[(
            "app",
            vec![bundle("1.0.0").needs_package("blue", ">=1.0.0").needs_gvk(
                "etcd.database.coreos.com",
                "v1beta2",
                "EtcdCluster",
            )],
        )],
    );
    let older = format!("older={}", older.display());
    let text = olmv1(&["search", "app", "--catalog", &older, "--no-pull"]).ok();
    assert!(
        text.contains("pkg blue >=1.0.0, gvk etcd.database.coreos.com/v1beta2"),
        "{text}"
    );
}

#[test]
fn explain_shows_the_plan_and_why_each_requirement_is_satisfied_by_its_bundle() {
    let work = tempfile::tempdir().unwrap();
    let main = app_blue_etcd(&work.path().join("main"));
    let other_dir = work.path().join("other");
    write_catalog(&other_dir, &[("blue", vec![bundle("2.0.0")])]);
    let other = format!("other={}", other_dir.display());
    let args = [
        "explain",
        "--package",
        "app",
        "--catalog",
        &main,
        "--catalog",
        &other,
    ];

    let v = json_of(olmv1(&[&args[..], &["-o", "json"]].concat()));
    // `--dependencies=check` (the default): the bundle is chosen, as the controller chooses it.
    assert_eq!(v["chosen"]["bundle"], "app.v1.0.0");
    assert_eq!(v["error"], Value::Null);
    let app = v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bundle"] == "app.v1.0.0")
        .unwrap();
    assert_eq!(app["excludedBy"], Value::Null, "{app}");
    let d = &v["dependencies"];
    assert_eq!(d["bundle"], "app.v1.0.0");
    assert_eq!(d["requires"][0]["summary"], "pkg blue >=1.0.0");
    assert_eq!(d["error"], Value::Null);
    let plan: Vec<&str> = d["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bundle"].as_str().unwrap())
        .collect();
    assert_eq!(plan, ["blue.v1.1.0", "etcd.v0.9.4", "app.v1.0.0"]);
    // blue >=1.0.0: main's 1.1.0 and 1.0.0 and other's 2.0.0 qualify; the dependent's catalog
    // comes before a higher version elsewhere, the head first.
    assert_eq!(
        d["choices"],
        json!([
            {"dependent": "app.v1.0.0", "requirement": "pkg blue >=1.0.0", "satisfiedBy": "blue.v1.1.0",
             "catalog": "main",
             "why": "first choice of 3: catalog main (priority 0, the dependent's catalog), default channel stable, its head"},
            {"dependent": "app.v1.0.0", "requirement": "gvk etcd.database.coreos.com/v1beta2 EtcdCluster",
             "satisfiedBy": "etcd.v0.9.4", "catalog": "main",
             "why": "first choice of 1: catalog main (priority 0, the dependent's catalog), default channel stable, its head"},
        ])
    );
    // With a higher priority, the other catalog's blue comes first.
    let v = json_of(olmv1(
        &[&args[..], &["--priority", "other=5", "-o", "json"]].concat(),
    ));
    assert_eq!(
        v["dependencies"]["choices"][0]["why"],
        "first choice of 3: catalog other (priority 5), default channel stable, its head"
    );

    let out = olmv1(&args);
    assert_eq!(out.code, Some(0), "a plan exists: {}", out.stderr);
    let text = out.stdout;
    for part in [
        "app: resolves to app.v1.0.0 1.0.0 from catalog main\n",
        "app.v1.0.0 requires (it installs once these are installed):\n  pkg blue >=1.0.0\n  gvk etcd.database.coreos.com/v1beta2 EtcdCluster\n",
        "plan (olmv1 install --with-dependencies), dependencies first:\n  blue.v1.1.0 1.1.0 main (required by app.v1.0.0)\n  etcd.v0.9.4 0.9.4 main (required by app.v1.0.0)\n  app.v1.0.0 1.0.0 main\n",
        "BUNDLE       REQUIRES                                           SATISFIED BY   WHY",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }

    // `--dependencies=refuse`: upstream's refusal, its message verbatim; the requirements and
    // plan stay shown for what `check` would do.
    let refuse = [&args[..], &["--dependencies", "refuse"]].concat();
    let v = json_of_failed(olmv1(&[&refuse[..], &["-o", "json"]].concat()));
    assert_eq!(v["chosen"], Value::Null);
    assert_eq!(v["error"], upstream_refusal("app.v1.0.0", "olm.package.required"));
    let app = v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bundle"] == "app.v1.0.0")
        .unwrap();
    assert_eq!(app["excludedBy"], "unsupportedDependency");
    assert_eq!(
        app["detail"],
        "declares olm.package.required (dependencies are not supported)"
    );
    assert_eq!(v["dependencies"]["bundle"], "app.v1.0.0");
    let out = olmv1(&refuse);
    assert_eq!(out.code, Some(1), "refused: {}", out.stderr);
    for part in [
        format!("app: no resolution: {}\n", upstream_refusal("app.v1.0.0", "olm.package.required")),
        // VERDICT is the last column: its cell stays whole on its row.
        "unsupportedDependency: declares olm.package.required (dependencies are not supported)\n"
            .to_string(),
        "app.v1.0.0 requires (refused by --dependencies=refuse, as upstream does; --dependencies=check installs it once these are installed):\n".to_string(),
    ] {
        assert!(out.stdout.contains(&part), "{part:?} missing from:\n{}", out.stdout);
    }
}

/// Upstream's refusal of a bundle that declares a dependency (`--dependencies=refuse`).
fn upstream_refusal(bundle: &str, property: &str) -> String {
    format!(
        "validating bundle \"{bundle}\": bundle \"{bundle}\" has a dependency declared via property \"{property}\" which is currently not supported"
    )
}

/// `app` 1.0.0 requires nothing; 1.1.0 (replacing it) needs package `blue`; both, and blue's
/// 1.0.0, carry their manifests.
fn app_then_app_needing_blue(dir: &Path) -> String {
    write_catalog(
        dir,
        &[
            (
                "app",
                vec![
                    bundle("1.0.0").with_manifests(),
                    bundle("1.1.0").needs_package("blue", ">=1.0.0").with_manifests(),
                ],
            ),
            ("blue", vec![bundle("1.0.0").with_manifests()]),
        ],
    );
    format!("main={}", dir.display())
}

#[test]
fn search_says_a_bundle_with_dependencies_installs_once_they_are_and_refuse_refuses_it() {
    let work = tempfile::tempdir().unwrap();
    let main = app_then_app_needing_blue(&work.path().join("main"));
    let search = ["search", "--catalog", &main, "--no-pull"];
    let row = |v: &Value, package: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["package"] == package)
            .unwrap_or_else(|| panic!("{package} in {v}"))
            .clone()
    };

    // check (the default): the newest bundle installs, once what it requires is installed.
    let v = json_of(olmv1(&[&search[..], &["-o", "json"]].concat()));
    let app = row(&v, "app");
    assert_eq!(app["newestBundle"], "app.v1.1.0");
    assert_eq!(app["manifestsFrom"], "catalog");
    assert_eq!(app["installable"], true, "{app}");
    assert_eq!(app["notInstallableReason"], Value::Null);
    assert_eq!(app["requires"][0]["summary"], "pkg blue >=1.0.0");
    assert_eq!(row(&v, "blue")["installable"], true);
    let text = olmv1(&search).ok();
    let line = |text: &str, package: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{package} ")))
            .unwrap_or_else(|| panic!("{package} in:\n{text}"))
            .trim_end()
            .to_string()
    };
    let app_line = line(&text, "app");
    assert!(
        app_line.contains(" yes, once REQUIRES are installed ") && app_line.ends_with(" pkg blue >=1.0.0"),
        "{text}"
    );
    let blue_line = line(&text, "blue");
    assert!(blue_line.contains(" yes ") && blue_line.ends_with(" -"), "{text}");

    // refuse: upstream's refusal; a package without dependencies is unaffected.
    let refuse = [&search[..], &["--dependencies", "refuse"]].concat();
    let v = json_of(olmv1(&[&refuse[..], &["-o", "json"]].concat()));
    let app = row(&v, "app");
    assert_eq!(app["installable"], false);
    assert_eq!(
        app["notInstallableReason"],
        upstream_refusal("app.v1.1.0", "olm.package.required")
    );
    assert_eq!(row(&v, "blue")["installable"], true);
    let text = olmv1(&refuse).ok();
    // The reason is wider than its column: the row shows `(below)`, the reason follows it whole.
    assert!(line(&text, "app").contains(" (below) "), "{text}");
    assert!(
        text.contains(&format!(
            "\n  OLM V1: no: {}\n",
            upstream_refusal("app.v1.1.0", "olm.package.required")
        )),
        "{text}"
    );
    assert!(line(&text, "blue").contains(" yes "), "{text}");
}

#[test]
fn upgrades_lists_a_successor_with_dependencies_and_what_it_requires_unless_refused() {
    let work = tempfile::tempdir().unwrap();
    let main = app_then_app_needing_blue(&work.path().join("main"));
    let upgrades = [
        "upgrades",
        "--package",
        "app",
        "--installed",
        "1.0.0",
        "--catalog",
        &main,
    ];

    let v = json_of(olmv1(&[&upgrades[..], &["-o", "json"]].concat()));
    assert_eq!(
        v["reachable"],
        json!([{"bundle": "app.v1.1.0", "version": "1.1.0", "catalog": "main", "deprecated": false,
                "requires": ["pkg blue >=1.0.0"]}])
    );
    assert_eq!(v["unreachable"], json!([]));
    let text = olmv1(&upgrades).ok();
    assert!(
        text.contains("reachable now (requires pkg blue >=1.0.0)"),
        "{text}"
    );

    let refuse = [&upgrades[..], &["--dependencies", "refuse"]].concat();
    let v = json_of(olmv1(&[&refuse[..], &["-o", "json"]].concat()));
    assert_eq!(v["reachable"], json!([]));
    assert_eq!(v["unreachable"][0]["bundle"], "app.v1.1.0");
    assert_eq!(
        v["unreachable"][0]["message"],
        upstream_refusal("app.v1.1.0", "olm.package.required")
    );
    let text = olmv1(&refuse).ok();
    assert!(text.contains("unreachable: validating bundle"), "{text}");
}

#[test]
fn explain_names_the_candidates_other_requirements_excluded_and_why_there_is_no_plan() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("main");
    // app needs blue and red; red needs blue <1.1.0, so blue's head is passed over.
    write_catalog(
        &dir,
        &[
            (
                "app",
                vec![
                    bundle("1.0.0")
                        .needs_package("blue", ">=1.0.0")
                        .needs_package("red", ">=1.0.0"),
                ],
            ),
            ("blue", vec![bundle("1.0.0"), bundle("1.1.0")]),
            ("red", vec![bundle("1.0.0").needs_package("blue", "<1.1.0")]),
            (
                "lonely",
                vec![bundle("1.0.0").needs_package("nowhere", ">=1.0.0")],
            ),
        ],
    );
    let main = format!("main={}", dir.display());
    let v = json_of(olmv1(&[
        "explain",
        "--package",
        "app",
        "--catalog",
        &main,
        "-o",
        "json",
    ]));
    let choices = v["dependencies"]["choices"].as_array().unwrap();
    let blue_for_app = choices
        .iter()
        .find(|c| c["dependent"] == "app.v1.0.0" && c["requirement"] == "pkg blue >=1.0.0")
        .unwrap();
    assert_eq!(blue_for_app["satisfiedBy"], "blue.v1.0.0");
    assert_eq!(
        blue_for_app["why"],
        "choice 2 of 2: catalog main (priority 0, the dependent's catalog), default channel stable, \
         1 below its head; preferred to it but excluded by other requirements: blue.v1.1.0"
    );
    let blue_for_red = choices.iter().find(|c| c["dependent"] == "red.v1.0.0").unwrap();
    assert_eq!(blue_for_red["satisfiedBy"], "blue.v1.0.0");

    let out = olmv1(&["explain", "--package", "lonely", "--catalog", &main]);
    assert_eq!(out.code, Some(1));
    let text = out.stdout;
    assert!(text.contains("lonely.v1.0.0 requires"), "{text}");
    assert!(
        text.contains("no plan: no set of bundles satisfies every requirement:")
            && text.contains("package nowhere >=1.0.0 (no catalog has a bundle of it in that range)"),
        "{text}"
    );
    let v = json_of_failed(olmv1(&[
        "explain",
        "--package",
        "lonely",
        "--catalog",
        &main,
        "-o",
        "json",
    ]));
    assert_eq!(v["dependencies"]["plan"], Value::Null);
    assert!(
        v["dependencies"]["error"]
            .as_str()
            .unwrap()
            .contains("package nowhere >=1.0.0"),
        "{v}"
    );
}

/// The JSON a command printed while exiting 1.
fn json_of_failed(out: CmdOutput) -> Value {
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout))
}
