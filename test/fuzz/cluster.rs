//! The commands that read the cluster as well as catalogs, `migrate check` and `status`, over
//! hostile content. Each case of every family is judged as the command judges a cluster and
//! shown as it shows it (through the command's meter and its one writer, text and JSON), in a
//! child process (this test binary again, [`cluster_command_child`]) measured like the other
//! commands: the cluster's reading is the command's own (for `migrate check`, lists filtered at
//! the server and pages dropped as read), the work and the output are what a catalog drives.
//!
//! `migrate check`: classic's CSVs carry their bundle's properties (the
//! `operatorframework.io/properties` annotation classic's InstallPlan writes), so a hostile
//! bundle of a catalog is also a hostile CSV of the cluster, read and weighed by the check
//! (`admin::migrate::check::check`), and the catalog is the ClusterCatalog it looks bundles up
//! in. Classic installed each of the first [`MAX_SUBSCRIPTIONS`] bundles of the case's package,
//! and the first bundle of each of the first [`MAX_SUBSCRIPTIONS`] other packages (the providers
//! of what they require), from one grpc CatalogSource that `migrate catalogs` made the case's
//! ClusterCatalog from, each in a namespace of its own with an AllNamespaces OperatorGroup.
//!
//! `status`: a ClusterExtension of the case's package with the case's installed bundle (or none),
//! summarized against the case's catalog (`admin::status::summarize`: the resolver's target and
//! the versions reachable now, on the extension's meter).

use std::{
    path::Path,
    process::{Command, ExitCode},
    sync::Arc,
};

use olmv1::{
    admin::{
        command_meter,
        migrate::{
            check::{CatalogView, PROPERTIES_ANNOTATION, Snapshot, check, count_not_checked},
            classic::{CatalogSource, Csv, OperatorGroup, Subscription},
            report::render_check,
        },
        not_all_checked,
        output::{self, MAX_OUTPUT_BYTES},
        status::{count_not_checked as status_not_checked, render_text, summarize},
    },
    catalog::{CatalogIndex, read_dir_metas},
    meter::Refused,
    resolve::{CatalogInput, DependencyMode},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use crate::harness::{
    Case, Measured, assert_bounded, own_work_divisor, record, run_measured_keeping, with_divided_budget,
};

/// Subscriptions of the case's package, and of other packages, in the judged cluster: classic
/// clusters have a few dozen Subscriptions, each judged on its own meters; the hostile part is
/// what each CSV carries.
pub const MAX_SUBSCRIPTIONS: usize = 8;

/// The CatalogSource's image, which the ClusterCatalog was made from.
const INDEX_IMAGE: &str = "registry.test/fuzz-index:v1";

/// `command` (`migrate check` or `status`; `output`: `text` or `json`) over the case, in a child
/// process (see the module comment).
pub fn cluster_command(case: &Case, dir: &Path, command: &str, output: &str) -> Measured {
    cluster_command_of(case, dir, command, output, None)
}

/// [`cluster_command`] with `many` Subscriptions of the case's package (`migrate check`) or
/// `many` ClusterExtensions of it (`status`), its stdout kept.
pub fn cluster_command_of(
    case: &Case,
    dir: &Path,
    command: &str,
    output: &str,
    many: Option<usize>,
) -> Measured {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"));
    child
        .args([
            "--exact",
            "cluster::cluster_command_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("OLMV1_FUZZ_CHILD_DIR", dir)
        .env("OLMV1_FUZZ_CHILD_PACKAGE", &case.package)
        .env(
            "OLMV1_FUZZ_CHILD_INSTALLED",
            case.installed.as_deref().unwrap_or(""),
        )
        .env("OLMV1_FUZZ_CHILD_COMMAND", command)
        .env("OLMV1_FUZZ_CHILD_OUTPUT", output);
    with_divided_budget(&mut child, own_work_divisor());
    let mut what = match output {
        "json" => format!("{command} -o json"),
        _ => command.to_string(),
    };
    if let Some(many) = many {
        child.env("OLMV1_FUZZ_CHILD_MANY", many.to_string());
        what = format!("{what} ({many} of the package)");
    }
    let mut m = run_measured_keeping(&what, &mut child, if many.is_some() { 1 << 20 } else { 0 });
    // The child's own test harness lines are not the command's output.
    m.output = m.output.saturating_sub(HARNESS_LINES);
    m
}

/// What libtest itself prints in the child with `-q` at least (`running 1 test`, the dot, the
/// result line): taken off the child's output, which is then the command's or a little more.
const HARNESS_LINES: u64 = 100;

/// The child of [`cluster_command`] (run only by it: ignored otherwise). Exits as the command
/// would: 2 with one sentence on stderr when its meter or the output limit refuses the output.
#[test]
#[ignore = "run by the fuzzer in a child process"]
fn cluster_command_child() {
    let var = |name: &str| std::env::var(format!("OLMV1_FUZZ_CHILD_{name}")).unwrap_or_default();
    let (dir, package, command) = (var("DIR"), var("PACKAGE"), var("COMMAND"));
    assert!(
        !dir.is_empty(),
        "run by the fuzzer: OLMV1_FUZZ_CHILD_* are not set"
    );
    let dir = Path::new(&dir);
    output::start(&command, MAX_OUTPUT_BYTES);
    let json = var("OUTPUT") == "json";
    let many: Option<usize> = var("MANY").parse().ok();
    // The command's meter over its items, as the command makes it once the cluster is read.
    let mut meter = command_meter();
    let (shown, missed, total) = match command.as_str() {
        "migrate check" => {
            let cluster = cluster_of(dir, &package, many.unwrap_or(MAX_SUBSCRIPTIONS));
            let rows = check(&cluster, None, &mut meter);
            let missed = count_not_checked(&rows);
            let shown = show(&rows, json, |meter| render_check(&rows, false, meter));
            (shown, missed, rows.len())
        }
        "status" => {
            let catalogs = [CatalogInput::new("fuzz", Arc::new(index_of(dir)))];
            let rows: Vec<_> = (0..many.unwrap_or(1))
                .map(|i| {
                    summarize(
                        &extension(&format!("fuzz{i}"), &package, &var("INSTALLED")),
                        &catalogs,
                        DependencyMode::Check,
                        &mut meter,
                    )
                })
                .collect();
            let shown = show(&rows, json, |meter| render_text(&rows, false, meter));
            (shown, status_not_checked(&rows), rows.len())
        }
        other => panic!("no such command: {other}"),
    };
    if let Err(refusal) = shown {
        output::write_stderr(&format!("olmv1 {command}: {refusal}\n"));
        std::process::exit(2);
    }
    if let Some(e) = meter.exhausted() {
        let items = if command == "status" {
            "extensions"
        } else {
            "Subscriptions"
        };
        let refusal = not_all_checked(e, items, missed, total);
        output::write_stderr(&format!("olmv1 {command}: {refusal}\n"));
        output::finish(ExitCode::SUCCESS);
        std::process::exit(2);
    }
    if output::finish(ExitCode::SUCCESS) != ExitCode::SUCCESS {
        std::process::exit(2);
    }
}

/// Writes `rows` as the command does, JSON or text, on one command meter; the refusal otherwise.
fn show<T: serde::Serialize>(
    rows: &T,
    json: bool,
    text: impl FnOnce(
        &mut olmv1::meter::Meter,
    ) -> Result<olmv1::admin::terminal::TerminalText, olmv1::meter::Exhausted>,
) -> Result<(), String> {
    let mut meter = command_meter();
    if json {
        return output::json(rows, &mut meter)
            .map(|text| output::write_stdout(&text))
            .map_err(|e| e.to_string());
    }
    text(&mut meter)
        .map(|text| output::write_terminal(&text))
        .map_err(|e| Refused::new("rendering the output", e).to_string())
}

/// The case's catalog, indexed.
fn index_of(dir: &Path) -> CatalogIndex {
    let metas = read_dir_metas(dir).expect("the generated catalog reads");
    CatalogIndex::from_metas(&metas).expect("the generated catalog indexes")
}

/// A ClusterExtension `name` of `package`, with `installed` (`BUNDLE@VERSION`, or empty for none).
fn extension(name: &str, package: &str, installed: &str) -> ClusterExtension {
    let mut status = json!({"conditions": []});
    if let Some((bundle, version)) = installed.split_once('@') {
        status["install"] = json!({"bundle": {"name": bundle, "version": version}});
    }
    from_json(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": name,
            "serviceAccount": {"name": "fuzz"},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": package}}
        },
        "status": status,
    }))
}

/// The cluster `migrate check` judges (see the module comment), with up to `many` Subscriptions
/// of `package` ([`MAX_SUBSCRIPTIONS`] in every family's runs).
fn cluster_of(dir: &Path, package: &str, many: usize) -> Snapshot {
    let text = std::fs::read_to_string(dir.join("catalog.json")).expect("the case's catalog");
    let mut bundles: Vec<(String, String, Value)> = Vec::new();
    for line in text.lines() {
        let Ok(object) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if object["schema"] != "olm.bundle" {
            continue;
        }
        let (Some(p), Some(name)) = (object["package"].as_str(), object["name"].as_str()) else {
            continue;
        };
        let mine = p == package;
        let taken = bundles.iter().filter(|b| (b.0 == package) == mine).count();
        let first_of_package = !bundles.iter().any(|b| b.0 == p);
        let most = if mine { many } else { MAX_SUBSCRIPTIONS };
        if taken < most && (mine || first_of_package) {
            bundles.push((p.to_string(), name.to_string(), object["properties"].clone()));
        }
    }
    drop(text);
    let index = Arc::new(index_of(dir));
    let version = |properties: &Value| {
        properties
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["type"] == "olm.package")
            .and_then(|p| p["value"]["version"].as_str())
            .unwrap_or("1.0.0")
            .to_string()
    };
    let mut snapshot = Snapshot {
        catalog_sources: vec![from_json::<CatalogSource>(json!({
            "metadata": {"namespace": "olm", "name": "fuzz"},
            "spec": {"sourceType": "grpc", "image": INDEX_IMAGE}
        }))],
        catalogs: vec![CatalogView {
            name: "fuzz".into(),
            image: Some(INDEX_IMAGE.into()),
            from_catalog_source: Some("olm/fuzz".into()),
            index: Some(index),
            ..CatalogView::default()
        }],
        ..Snapshot::default()
    };
    for (i, (package, name, properties)) in bundles.into_iter().enumerate() {
        let ns = format!("ns{i}");
        snapshot.subscriptions.push(from_json::<Subscription>(json!({
            "metadata": {"namespace": ns, "name": package},
            "spec": {"source": "fuzz", "sourceNamespace": "olm", "name": package},
            "status": {"installedCSV": name, "currentCSV": name, "state": "AtLatestKnown"}
        })));
        snapshot.csvs.push(from_json::<Csv>(json!({
            "metadata": {"namespace": ns, "name": name, "annotations": {
                PROPERTIES_ANNOTATION: json!({"properties": properties}).to_string()}},
            "spec": {"version": version(&properties)},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded"}
        })));
        snapshot.operator_groups.push(from_json::<OperatorGroup>(json!({
            "metadata": {"namespace": ns, "name": "og"}, "status": {"namespaces": [""]}
        })));
    }
    snapshot
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a classic object")
}

/// Subscriptions and ClusterExtensions of the package in each of a catalog's bundles.
const MANY: usize = 48;

/// Many Subscriptions (`migrate check`) and many ClusterExtensions (`status`) of one package, on
/// the costly CSVs of the classic CSVs family (each requiring every other package by name and
/// API, with rules near the cost limit): each item has its own budget, and the command's one
/// meter over them all holds the command to the fuzzer's bounds (CPU, RSS, output) where the
/// items' budgets together would not. The rows it did not reach say so in one sentence each, and
/// the command's refusal is one sentence.
#[test]
fn many_subscriptions_and_extensions_are_held_to_the_commands_budget() {
    let case = crate::families::classic_csvs(MANY, 12, 800, 3);
    let kept = tempfile::Builder::new()
        .prefix("olmv1-fuzz-many-")
        .tempdir()
        .expect("a temporary directory");
    let dir = kept.path().join("catalog");
    std::fs::create_dir(&dir).unwrap();
    let text = case.text();
    println!("fuzz: many of a package: a catalog of {} KB", text.len() / 1000);
    std::fs::write(dir.join("catalog.json"), text).unwrap();
    let case = Case {
        lines: Vec::new(),
        ..case
    };
    for command in ["migrate check", "status"] {
        for output in ["text", "json"] {
            let m = cluster_command_of(&case, &dir, command, output, Some(MANY));
            record("many of a package", &m);
            assert_bounded("many of a package", &case, &m, kept.path());
            // Every row the command's meter did not reach: one sentence naming its budget.
            let rows: Vec<&str> = m.stdout.lines().filter(|l| l.contains("not checked: ")).collect();
            for line in &rows {
                let sentence = line.split("not checked: ").nth(1).unwrap_or_default();
                assert!(
                    sentence.starts_with("the command's budget of ")
                        || sentence.starts_with("the command's time limit of "),
                    "{command} -o {output}: {line}"
                );
                let end = [
                    "was spent on the Subscriptions before it",
                    "was spent on the extensions before it",
                    "ran out during its check",
                ];
                assert!(
                    end.iter()
                        .any(|e| sentence.trim_end_matches(['"', ',']).ends_with(e)),
                    "{command} -o {output}: {line}"
                );
            }
            // The command's budget does not reach every CSV (48 of them at 20,000,000 units
            // each): the command refuses in one sentence (one line: `assert_bounded`).
            if command == "migrate check" {
                assert!(!rows.is_empty(), "{command} -o {output}: every row was checked");
            }
            if rows.is_empty() {
                assert_eq!(m.code, Some(0), "{command} -o {output}: {}", m.stderr);
                continue;
            }
            assert_eq!(m.code, Some(2), "{command} -o {output}: {}", m.stderr);
            assert!(
                m.stderr.starts_with(&format!("olmv1 {command}: checking the "))
                    && (m.stderr.contains(" of them were not checked")
                        || m.stderr.contains(" 1 of them was not checked")),
                "{command} -o {output}: {}",
                m.stderr
            );
        }
    }
}
