//! `olmv1 migrate catalogs`: a ClusterCatalog for each image-backed CatalogSource, with the same
//! image, priority and poll interval, the source recorded on it. The plan is a pure function of
//! what the cluster holds; [`run`] reads, plans (for one CatalogSource, a namespace's or all) and
//! applies it.

use std::collections::BTreeMap;

use kube::{
    Api, Client, ResourceExt as _,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
};
use olmv1_api::v1::{
    AvailabilityMode, CatalogSource as V1Source, CatalogSourceType, ClusterCatalog, ClusterCatalogSpec,
    ImageSource,
};
use serde::Serialize;

use super::{
    MigrateError,
    check::{SOURCE_ANNOTATION, SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL, not_image_backed},
    classic::{CatalogSource, Kind, api_resource, key},
    read::list_classic,
};

/// The longest ClusterCatalog name: catalogd labels each catalog with its name, and a label
/// value holds at most 63 characters.
pub const MAX_CATALOG_NAME: usize = 63;

/// The longest poll interval text read: a Go duration is a few units; more is not one.
pub const MAX_DURATION_CHARS: usize = 64;

/// classic's interval when `registryPoll.interval` does not parse (it logs and uses 15m).
pub const CLASSIC_DEFAULT_POLL_MINUTES: i32 = 15;

/// What `migrate catalogs` does for one CatalogSource.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", tag = "action", content = "detail")]
pub enum Action {
    /// Creates the ClusterCatalog.
    Create,
    /// Updates the ClusterCatalog it made before (image, priority or interval changed).
    Update,
    /// A ClusterCatalog serves this image already (named in the detail).
    Served(String),
    /// Nothing is made, for this reason.
    Skip(String),
}

/// One CatalogSource's line of the plan.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CatalogPlan {
    /// `<namespace>/<name>`.
    pub catalog_source: String,
    /// The ClusterCatalog's name.
    pub cluster_catalog: String,
    /// The image, as the CatalogSource names it.
    pub image: String,
    /// The priority carried over.
    pub priority: i32,
    /// The poll interval carried over, in minutes (none for a digest, which never changes).
    pub poll_interval_minutes: Option<i32>,
    /// Notes on what was carried over.
    pub notes: Vec<String>,
    /// What is done.
    #[serde(flatten)]
    pub action: Action,
}

/// A Go duration (`1h30m`, `90s`, `1.5h`) in seconds; `None` when it is not one.
pub fn parse_go_duration(text: &str) -> Option<f64> {
    if text.is_empty() || text.len() > MAX_DURATION_CHARS {
        return None;
    }
    if text == "0" {
        return Some(0.0);
    }
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Some(total)
}

/// Whether an image reference names a digest.
fn is_digest(image: &str) -> bool {
    image.contains('@')
}

/// The plan for `sources` given the ClusterCatalogs that exist.
pub fn plan(sources: &[CatalogSource], existing: &[ClusterCatalog]) -> Vec<CatalogPlan> {
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for s in sources {
        *by_name.entry(key(&s.metadata).1).or_default() += 1;
    }
    let mut out = Vec::new();
    for s in sources {
        let (ns, name) = key(&s.metadata);
        let from = format!("{ns}/{name}");
        // A name shared by CatalogSources of two namespaces gets the namespace in front.
        let cluster_catalog = if by_name.get(&name).copied().unwrap_or(0) > 1 {
            format!("{ns}-{name}")
        } else {
            name.clone()
        };
        let image = s.spec.image.clone().unwrap_or_default();
        let mut notes = Vec::new();
        let priority = i32::try_from(s.spec.priority);
        let interval = s
            .spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.registry_poll.as_ref())
            .and_then(|p| p.interval.clone());
        let poll_interval_minutes = match (&interval, is_digest(&image)) {
            (None, _) => None,
            (Some(_), true) => {
                notes.push("the digest never changes: not polled".into());
                None
            }
            (Some(text), false) => match parse_go_duration(text) {
                Some(seconds) => {
                    let minutes = (seconds / 60.0).ceil().clamp(1.0, f64::from(i32::MAX)) as i32;
                    if f64::from(minutes) * 60.0 != seconds {
                        notes.push(format!(
                            "interval {text} rounded up to {minutes}m (ClusterCatalogs poll in minutes)"
                        ));
                    }
                    Some(minutes)
                }
                None => {
                    notes.push(format!(
                        "interval {text:?} is not a duration: classic polls every {CLASSIC_DEFAULT_POLL_MINUTES}m, so does the ClusterCatalog"
                    ));
                    Some(CLASSIC_DEFAULT_POLL_MINUTES)
                }
            },
        };
        let mut plan = CatalogPlan {
            catalog_source: from.clone(),
            cluster_catalog: cluster_catalog.clone(),
            image: image.clone(),
            priority: *priority.as_ref().unwrap_or(&0),
            poll_interval_minutes,
            notes,
            action: Action::Create,
        };
        plan.action = if let Some(why) = not_image_backed(s) {
            Action::Skip(why)
        } else if priority.is_err() {
            Action::Skip(format!(
                "priority {} is outside a ClusterCatalog's 32-bit range",
                s.spec.priority
            ))
        } else if cluster_catalog.len() > MAX_CATALOG_NAME {
            Action::Skip(format!(
                "the ClusterCatalog name {cluster_catalog} is longer than {MAX_CATALOG_NAME} characters"
            ))
        } else if let Some(same) = existing.iter().find(|c| {
            c.metadata.name.as_deref() == Some(&cluster_catalog)
                || c.annotations().get(SOURCE_ANNOTATION) == Some(&from)
        }) {
            let ours = same.annotations().get(SOURCE_ANNOTATION) == Some(&from);
            let same_name = same.metadata.name.clone().unwrap_or_default();
            if !ours {
                match same.spec.source.image.as_ref().map(|i| i.reference.as_str()) {
                    Some(i) if i == image => Action::Served(same_name),
                    _ => Action::Skip(format!(
                        "ClusterCatalog {same_name} exists with another image; rename or remove it"
                    )),
                }
            } else {
                plan.cluster_catalog = same_name;
                if body(&plan).spec == same.spec {
                    Action::Served(plan.cluster_catalog.clone())
                } else {
                    Action::Update
                }
            }
        } else if let Some(serving) = existing
            .iter()
            .find(|c| c.spec.source.image.as_ref().map(|i| i.reference.as_str()) == Some(image.as_str()))
        {
            Action::Served(serving.metadata.name.clone().unwrap_or_default())
        } else {
            Action::Create
        };
        out.push(plan);
    }
    out.sort_by(|a, b| a.catalog_source.cmp(&b.catalog_source));
    out
}

/// The ClusterCatalog of a plan line.
pub fn body(plan: &CatalogPlan) -> ClusterCatalog {
    let (ns, name) = plan.catalog_source.split_once('/').unwrap_or_default();
    let mut catalog = ClusterCatalog::new(
        &plan.cluster_catalog,
        ClusterCatalogSpec {
            source: V1Source {
                source_type: CatalogSourceType::Image,
                image: Some(ImageSource {
                    reference: plan.image.clone(),
                    poll_interval_minutes: plan.poll_interval_minutes,
                }),
            },
            priority: plan.priority,
            availability_mode: AvailabilityMode::Available,
        },
    );
    catalog.metadata.labels = Some(BTreeMap::from([
        (SOURCE_NAMESPACE_LABEL.to_string(), ns.to_string()),
        (SOURCE_NAME_LABEL.to_string(), name.to_string()),
    ]));
    catalog.metadata.annotations = Some(BTreeMap::from([(
        SOURCE_ANNOTATION.to_string(),
        plan.catalog_source.clone(),
    )]));
    catalog
}

/// Which CatalogSources `migrate catalogs` acts on.
#[derive(Clone, Copy, Debug, Default)]
pub enum Scope<'a> {
    /// Every namespace's.
    #[default]
    All,
    /// One namespace's.
    Namespace(&'a str),
    /// One CatalogSource: namespace and name.
    One(&'a str, &'a str),
}

impl Scope<'_> {
    fn holds(&self, line: &CatalogPlan) -> bool {
        let (ns, name) = line.catalog_source.split_once('/').unwrap_or_default();
        match *self {
            Scope::All => true,
            Scope::Namespace(n) => ns == n,
            Scope::One(n, s) => ns == n && name == s,
        }
    }
}

/// What `migrate catalogs` did: the plan for the scope and the writes that failed.
#[derive(Debug, Default)]
pub struct CatalogsOutcome {
    /// One line per CatalogSource in scope.
    pub lines: Vec<CatalogPlan>,
    /// One sentence per failed write (the others were still made).
    pub failures: Vec<String>,
}

/// Reads the CatalogSources and ClusterCatalogs, plans and (unless `dry_run`) applies: creates or
/// updates each ClusterCatalog and, with `delete_source`, deletes each CatalogSource a
/// ClusterCatalog serves. The plan is made over every CatalogSource, so that a ClusterCatalog's
/// name is the same whatever the scope (a name shared by two namespaces is prefixed).
pub async fn run(
    client: &Client,
    scope: Scope<'_>,
    dry_run: bool,
    delete_source: bool,
) -> Result<CatalogsOutcome, MigrateError> {
    let sources: Vec<CatalogSource> = list_classic(client, Kind::CatalogSource).await?;
    let catalogs = Api::<ClusterCatalog>::all(client.clone());
    let existing = catalogs
        .list(&ListParams::default())
        .await
        .map_err(|source| MigrateError::Api {
            what: "listing ClusterCatalogs".into(),
            source,
        })?
        .items;
    let lines: Vec<CatalogPlan> = plan(&sources, &existing)
        .into_iter()
        .filter(|l| scope.holds(l))
        .collect();
    let mut failures = Vec::new();
    if dry_run {
        return Ok(CatalogsOutcome { lines, failures });
    }
    for line in &lines {
        if matches!(line.action, Action::Create | Action::Update) {
            let apply = PatchParams::apply("olmv1-migrate").force();
            if let Err(e) = catalogs
                .patch(&line.cluster_catalog, &apply, &Patch::Apply(&body(line)))
                .await
            {
                failures.push(format!("ClusterCatalog {}: {e}", line.cluster_catalog));
                continue;
            }
        }
        if delete_source && !matches!(line.action, Action::Skip(_)) {
            let (ns, name) = line.catalog_source.split_once('/').unwrap_or_default();
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &api_resource(Kind::CatalogSource));
            match api.delete(name, &DeleteParams::default()).await {
                // Already gone (deleted meanwhile): what was asked is done.
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => failures.push(format!("deleting CatalogSource {}: {e}", line.catalog_source)),
            }
        }
    }
    Ok(CatalogsOutcome { lines, failures })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn source(ns: &str, name: &str, spec: serde_json::Value) -> CatalogSource {
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec})).unwrap()
    }

    #[test]
    fn go_durations_parse_as_go_reads_them() {
        assert_eq!(parse_go_duration("10m"), Some(600.0));
        assert_eq!(parse_go_duration("1h30m"), Some(5400.0));
        assert_eq!(parse_go_duration("1.5h"), Some(5400.0));
        assert_eq!(parse_go_duration("45s"), Some(45.0));
        assert_eq!(parse_go_duration("0"), Some(0.0));
        for bad in ["", "10", "m", "10x", "-", &"1m".repeat(40)] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_plan_carries_image_priority_and_interval_and_refuses_what_it_cannot() {
        let sources = [
            source(
                "olm",
                "ops",
                json!({"sourceType": "grpc", "image": "example.com/i:v1", "priority": -100,
                "updateStrategy": {"registryPoll": {"interval": "45s"}}}),
            ),
            source(
                "a",
                "dup",
                json!({"sourceType": "grpc", "image": "example.com/d@sha256:0123456789abcdef0123456789abcdef",
                "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
            ),
            source(
                "b",
                "dup",
                json!({"sourceType": "grpc", "image": "example.com/e:v1", "priority": 1_i64 << 40}),
            ),
            source("c", "cm", json!({"sourceType": "configmap", "configMap": "x"})),
        ];
        let plan = plan(&sources, &[]);
        let by: BTreeMap<&str, &CatalogPlan> = plan.iter().map(|p| (p.catalog_source.as_str(), p)).collect();
        let ops = by["olm/ops"];
        assert_eq!(
            (
                ops.cluster_catalog.as_str(),
                ops.priority,
                ops.poll_interval_minutes
            ),
            ("ops", -100, Some(1))
        );
        assert_eq!(ops.action, Action::Create);
        assert_eq!(
            ops.notes,
            ["interval 45s rounded up to 1m (ClusterCatalogs poll in minutes)"]
        );
        let digest = by["a/dup"];
        assert_eq!(
            (digest.cluster_catalog.as_str(), digest.poll_interval_minutes),
            ("a-dup", None)
        );
        assert_eq!(
            by["b/dup"].action,
            Action::Skip(format!(
                "priority {} is outside a ClusterCatalog's 32-bit range",
                1_i64 << 40
            ))
        );
        assert_eq!(
            by["c/cm"].action,
            Action::Skip(
                "CatalogSource c/cm is of type \"configmap\" backed by ConfigMap \"x\", not by an image"
                    .into()
            )
        );

        // Made once: the same spec is served, a changed one updated; a stranger's is left alone.
        let made = body(ops);
        assert_eq!(
            super::plan(&sources[..1], std::slice::from_ref(&made))[0].action,
            Action::Served("ops".into())
        );
        let mut old = made.clone();
        old.spec.priority = 5;
        assert_eq!(super::plan(&sources[..1], &[old])[0].action, Action::Update);
        let mut stranger = made;
        stranger.metadata.annotations = None;
        stranger.spec.source.image.as_mut().unwrap().reference = "example.com/other:v1".into();
        assert_eq!(
            super::plan(&sources[..1], &[stranger])[0].action,
            Action::Skip("ClusterCatalog ops exists with another image; rename or remove it".into())
        );
    }

    #[test]
    fn a_scope_holds_its_namespace_or_its_one_source() {
        let sources = [
            source(
                "a",
                "dup",
                json!({"sourceType": "grpc", "image": "example.com/a:v1"}),
            ),
            source(
                "b",
                "dup",
                json!({"sourceType": "grpc", "image": "example.com/b:v1"}),
            ),
            source(
                "b",
                "ops",
                json!({"sourceType": "grpc", "image": "example.com/o:v1"}),
            ),
        ];
        let plan = plan(&sources, &[]);
        let held = |scope: Scope| -> Vec<&str> {
            plan.iter()
                .filter(|l| scope.holds(l))
                .map(|l| l.cluster_catalog.as_str())
                .collect()
        };
        assert_eq!(held(Scope::All), ["a-dup", "b-dup", "ops"]);
        assert_eq!(held(Scope::Namespace("b")), ["b-dup", "ops"]);
        // Named as in the whole cluster's plan: "dup" is in two namespaces.
        assert_eq!(held(Scope::One("b", "dup")), ["b-dup"]);
        assert!(held(Scope::One("c", "dup")).is_empty());
    }
}
