//! Runs the data-driven resolver cases of `test/fixtures/resolve/*.yaml` (upstream's resolver,
//! successor, comparison and version tests, and the seed documentation's examples).

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use olmv1::{
    catalog::{CatalogIndex, Meta},
    resolve::{CatalogInput, InstalledBundle, ResolveRequest, resolve, successors},
};
use olmv1_api::v1::{UpgradeConstraintPolicy, conditions::LABEL_CATALOG_NAME};
use serde::Deserialize;

#[derive(Deserialize)]
struct CaseFile {
    #[serde(default)]
    fixtures: BTreeMap<String, Vec<serde_json::Value>>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    catalogs: Vec<CatalogCase>,
    request: RequestCase,
    expect: Option<Expect>,
    error: Option<String>,
    #[serde(rename = "errorContains")]
    error_contains: Option<String>,
    terminal: Option<bool>,
}

#[derive(Deserialize)]
struct CatalogCase {
    name: String,
    #[serde(default)]
    priority: i32,
    #[serde(default = "yes")]
    available: bool,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    fixture: Option<String>,
    fbc: Option<Vec<serde_json::Value>>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct RequestCase {
    package: String,
    version: Option<String>,
    #[serde(default)]
    channels: Vec<String>,
    selector: Option<LabelSelector>,
    policy: Option<String>,
    installed: Option<InstalledCase>,
}

#[derive(Deserialize)]
struct InstalledCase {
    name: String,
    version: String,
    release: Option<String>,
}

#[derive(Deserialize)]
struct Expect {
    bundle: Option<String>,
    version: Option<String>,
    catalog: Option<String>,
    image: Option<String>,
    deprecation: Option<bool>,
    successors: Option<Vec<String>>,
}

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test/fixtures/resolve")
}

fn index_of(objects: &[serde_json::Value], origin: &str) -> Arc<CatalogIndex> {
    let origin: Arc<str> = Arc::from(origin);
    let metas: Vec<Meta> = objects
        .iter()
        .enumerate()
        .map(|(i, v)| Meta::from_value(v, origin.clone(), i as u32 + 1).expect("fixture object"))
        .collect();
    Arc::new(CatalogIndex::from_metas(&metas).unwrap_or_else(|e| panic!("fixture {origin}: {e}")))
}

fn run_case(case: &Case, fixtures: &BTreeMap<String, Vec<serde_json::Value>>) -> Result<(), String> {
    let catalogs: Vec<CatalogInput> = case
        .catalogs
        .iter()
        .map(|c| {
            let objects = match (&c.fixture, &c.fbc) {
                (Some(f), _) => fixtures
                    .get(f)
                    .unwrap_or_else(|| panic!("unknown fixture {f}"))
                    .clone(),
                (None, Some(fbc)) => fbc.clone(),
                (None, None) => Vec::new(),
            };
            let mut labels = c.labels.clone();
            labels.insert(LABEL_CATALOG_NAME.to_string(), c.name.clone());
            CatalogInput {
                name: c.name.clone(),
                priority: c.priority,
                labels,
                available: c.available,
                index: index_of(&objects, &c.name),
            }
        })
        .collect();
    let r = &case.request;
    let request = ResolveRequest {
        package: r.package.clone(),
        version_range: r.version.clone(),
        channels: r.channels.clone(),
        selector: r.selector.clone(),
        upgrade_constraint_policy: match r.policy.as_deref() {
            Some("SelfCertified") => UpgradeConstraintPolicy::SelfCertified,
            _ => UpgradeConstraintPolicy::CatalogProvided,
        },
        installed: r.installed.as_ref().map(|i| InstalledBundle {
            name: i.name.clone(),
            version: i.version.clone(),
            release: i.release.clone(),
        }),
    };

    if let Some(want) = case.expect.as_ref().and_then(|e| e.successors.as_ref()) {
        let installed = request
            .installed
            .as_ref()
            .ok_or("successor cases need an installed bundle")?;
        let mut got = Vec::new();
        for c in &catalogs {
            if let Some(pkg) = c.index.package(&request.package) {
                let list = successors(pkg, installed, &request.channels).map_err(|e| e.to_string())?;
                got.extend(list.iter().map(|b| b.name.to_string()));
            }
        }
        got.sort();
        let mut want = want.clone();
        want.sort();
        return if got == want {
            Ok(())
        } else {
            Err(format!("successors {got:?}, want {want:?}"))
        };
    }

    match (resolve(&request, &catalogs), &case.expect) {
        (Ok(res), Some(e)) => {
            let mut problems = Vec::new();
            if let Some(b) = &e.bundle
                && &res.bundle.name != b
            {
                problems.push(format!("bundle {:?}, want {b:?}", res.bundle.name));
            }
            if let Some(v) = &e.version
                && &res.bundle.status_version != v
            {
                problems.push(format!("version {:?}, want {v:?}", res.bundle.status_version));
            }
            if let Some(c) = &e.catalog
                && &res.catalog != c
            {
                problems.push(format!("catalog {:?}, want {c:?}", res.catalog));
            }
            if let Some(i) = &e.image
                && &res.bundle.image != i
            {
                problems.push(format!("image {:?}, want {i:?}", res.bundle.image));
            }
            if let Some(d) = e.deprecation
                && res.deprecation.is_some() != d
            {
                problems.push(format!("deprecation {:?}, want present={d}", res.deprecation));
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("; "))
            }
        }
        (Ok(res), None) => Err(format!(
            "resolved {} {}, want an error",
            res.bundle.name, res.bundle.status_version
        )),
        (Err(err), _) => {
            let text = err.to_string();
            if case.expect.is_some() {
                return Err(format!("error {text:?}, want a bundle"));
            }
            if let Some(want) = &case.error
                && &text != want
            {
                return Err(format!("error {text:?}\n  want {want:?}"));
            }
            if let Some(want) = &case.error_contains
                && !text.contains(want.as_str())
            {
                return Err(format!("error {text:?} does not contain {want:?}"));
            }
            if case.error.is_none() && case.error_contains.is_none() {
                return Err(format!("case names no expectation; got error {text:?}"));
            }
            if let Some(t) = case.terminal
                && err.is_terminal() != t
            {
                return Err(format!("error {text:?} terminal={}, want {t}", err.is_terminal()));
            }
            Ok(())
        }
    }
}

#[test]
fn upstream_resolver_cases_and_documentation_examples() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("test/fixtures/resolve exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", fixtures_dir().display());
    let mut failures = Vec::new();
    let mut count = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable case file");
        let cases: CaseFile =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for case in &cases.cases {
            count += 1;
            if let Err(problem) = run_case(case, &cases.fixtures) {
                failures.push(format!("{}: {}: {problem}", file.display(), case.name));
            }
        }
    }
    assert!(count >= 60, "only {count} cases");
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
