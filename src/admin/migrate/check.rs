//! `olmv1 migrate check`: whether each Subscription of OLM classic can be taken over by olmv1 in
//! place, and if not, every reason with what to do. Pure: the cluster is read by `read.rs`.

use std::{collections::BTreeMap, fmt, sync::Arc};

use serde::Serialize;
use serde_json::{Value, json};

use super::classic::{CatalogSource, Csv, InstallPlan, OperatorCondition, OperatorGroup, Subscription, key};
use crate::{
    admin::not_checked,
    catalog::{CatalogIndex, PROPERTY_PACKAGE, Property},
    dependencies::{
        BundleFacts, CHECK_DURATION, CHECK_WORK_UNITS, Constraint, PROPERTY_GVK, Requirement, requirements_of,
    },
    meter::{Exhausted, Meter},
};

/// The annotation a converted ClusterExtension carries: `<namespace>/<subscription>`.
pub const MIGRATED_FROM_ANNOTATION: &str = "olmv1.operatorframework.io/migrated-from-subscription";

/// Label of a ClusterCatalog `migrate catalogs` made: the namespace of its CatalogSource.
pub const SOURCE_NAMESPACE_LABEL: &str = "olmv1.operatorframework.io/catalogsource-namespace";
/// Label: its name.
pub const SOURCE_NAME_LABEL: &str = "olmv1.operatorframework.io/catalogsource-name";
/// Annotation: `<namespace>/<name>` of the CatalogSource (labels cannot hold the `/`).
pub const SOURCE_ANNOTATION: &str = "olmv1.operatorframework.io/catalogsource";

/// CSV annotation holding the bundle's properties, as classic's InstallPlan writes it.
pub const PROPERTIES_ANNOTATION: &str = "operatorframework.io/properties";

/// `Subscription.spec.config` keys that `deploymentConfig` carries (the rest it cannot).
pub const CARRIED_CONFIG_KEYS: [&str; 9] = [
    "env",
    "envFrom",
    "volumes",
    "volumeMounts",
    "tolerations",
    "resources",
    "nodeSelector",
    "affinity",
    "annotations",
];

/// What a migration can do with one Subscription.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `convert` takes it over.
    Eligible,
    /// Something must change first (the reasons say what).
    Blocked,
    /// Already converted: a ClusterExtension records it, the Subscription is gone.
    Migrated,
    /// Both the Subscription and a ClusterExtension of the same package exist.
    Conflict,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Eligible => "Eligible",
            Verdict::Blocked => "Blocked",
            Verdict::Migrated => "Migrated",
            Verdict::Conflict => "Conflict",
        })
    }
}

/// Whether converting restarts the operator's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodRestart {
    /// olmv1 renders every pod template as it runs now.
    No,
    /// A template differs: one rolling update, for this reason.
    Rolling(String),
    /// Not known, for this reason (e.g. the bundle could not be read).
    Unknown(String),
}

impl fmt::Display for PodRestart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodRestart::No => f.write_str("no"),
            PodRestart::Rolling(why) => write!(f, "one rolling update: {why}"),
            PodRestart::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

impl Serialize for PodRestart {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One reason, and what to do about it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    /// A stable code, e.g. `CSVNotSucceeded`.
    pub code: &'static str,
    /// Whether it blocks the migration (else it is a note).
    pub blocking: bool,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub fix: String,
}

impl Reason {
    fn block(code: &'static str, message: String, fix: impl Into<String>) -> Reason {
        Reason {
            code,
            blocking: true,
            message,
            fix: fix.into(),
        }
    }

    fn note(code: &'static str, message: String, fix: impl Into<String>) -> Reason {
        Reason {
            code,
            blocking: false,
            message,
            fix: fix.into(),
        }
    }
}

/// One row of `olmv1 migrate check`.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckRow {
    /// The Subscription's namespace.
    pub namespace: String,
    /// The Subscription.
    pub subscription: String,
    /// The package.
    pub package: String,
    /// The installed CSV.
    #[serde(rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// Its version.
    pub version: Option<String>,
    /// The CatalogSource, `<namespace>/<name>`.
    pub catalog_source: Option<String>,
    /// The ClusterCatalog serving the CatalogSource's image, if any.
    pub cluster_catalog: Option<String>,
    /// The ClusterExtension that took it over or competes with it.
    pub extension: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Whether converting restarts pods.
    pub pods_restart: PodRestart,
    /// Subscriptions (`<namespace>/<name>`) to convert first: they provide its dependencies.
    pub after: Vec<String>,
    /// Every reason, blocking ones first.
    pub reasons: Vec<Reason>,
}

/// A ClusterCatalog as the check sees it.
#[derive(Clone, Debug, Default)]
pub struct CatalogView {
    /// Name.
    pub name: String,
    /// `spec.source.image.ref`.
    pub image: Option<String>,
    /// `status.resolvedSource.image.ref` (a digest).
    pub resolved: Option<String>,
    /// The CatalogSource it was made from (`migrate catalogs`' annotation), `<ns>/<name>`.
    pub from_catalog_source: Option<String>,
    /// Its content; `None` when it could not be read.
    pub index: Option<Arc<CatalogIndex>>,
    /// Why the content could not be read.
    pub problem: Option<String>,
}

/// A ClusterExtension as the check sees it.
#[derive(Clone, Debug, Default)]
pub struct ExtensionView {
    /// Name.
    pub name: String,
    /// `spec.source.catalog.packageName`.
    pub package: String,
    /// `spec.namespace`.
    pub namespace: String,
    /// [`MIGRATED_FROM_ANNOTATION`].
    pub migrated_from: Option<String>,
    /// Installed bundle and version.
    pub installed: Option<(String, String)>,
    /// Its installed bundle's properties (from the catalogs; `olm.package` alone when no
    /// catalog has the bundle): what a Subscription's dependencies are evaluated against.
    pub properties: Vec<Property>,
}

/// Everything the check reads.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Every Subscription of the cluster (duplicates and dependencies need all of them).
    pub subscriptions: Vec<Subscription>,
    /// The CSVs of the Subscriptions' namespaces.
    pub csvs: Vec<Csv>,
    /// The InstallPlans of those namespaces.
    pub install_plans: Vec<InstallPlan>,
    /// The OperatorGroups of those namespaces.
    pub operator_groups: Vec<OperatorGroup>,
    /// Every CatalogSource.
    pub catalog_sources: Vec<CatalogSource>,
    /// The OperatorConditions of those namespaces.
    pub operator_conditions: Vec<OperatorCondition>,
    /// Whether the OperatorCondition CRD is served: the controller then keeps OperatorConditions
    /// by default, and convert renders them.
    pub operator_conditions_served: bool,
    /// The ClusterCatalogs.
    pub catalogs: Vec<CatalogView>,
    /// The ClusterExtensions.
    pub extensions: Vec<ExtensionView>,
    /// Pod restarts computed by rendering, by (namespace, subscription).
    pub restarts: BTreeMap<(String, String), PodRestart>,
    /// The serving certificates the rendered bundle's cert-manager Certificates take over, by
    /// (namespace, subscription).
    pub certificates: BTreeMap<(String, String), Vec<CertificateVerdict>>,
}

/// Whether cert-manager keeps a serving certificate classic issued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateVerdict {
    /// The Deployment it serves.
    pub deployment: String,
    /// The Secret, `<namespace>/<name>`.
    pub secret: String,
    /// Why cert-manager replaces it; `None` when it keeps it.
    pub replaced: Option<String>,
}

/// The bundle properties of an installed CSV, as its [`PROPERTIES_ANNOTATION`] holds them
/// (`{"properties":[...]}` or a bare array), with what classic's resolver knew of it added when
/// the annotation lacks it: `olm.package` (the Subscription's package, the CSV's version) and an
/// `olm.gvk` per owned CRD. Unreadable text is an `Err` saying why.
pub fn csv_properties(csv: &Csv, package: &str) -> Result<Vec<Property>, String> {
    let mut properties: Vec<Property> = match csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROPERTIES_ANNOTATION))
    {
        None => Vec::new(),
        Some(text) => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| format!("annotation {PROPERTIES_ANNOTATION}: {e}"))?;
            let list = match value {
                Value::Array(a) => a,
                Value::Object(mut o) => match o.remove("properties") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            list.into_iter()
                .map(|p| {
                    #[derive(serde::Deserialize)]
                    struct Raw {
                        #[serde(rename = "type")]
                        type_: String,
                        value: Value,
                    }
                    let raw: Raw = serde_json::from_value(p)
                        .map_err(|e| format!("annotation {PROPERTIES_ANNOTATION}: {e}"))?;
                    Ok(Property::new(&raw.type_, raw.value.into()))
                })
                .collect::<Result<_, String>>()?
        }
    };
    if !properties.iter().any(|p| &*p.type_ == PROPERTY_PACKAGE) {
        let version = csv.spec.version.clone().unwrap_or_default();
        properties.push(Property::new(
            PROPERTY_PACKAGE,
            json!({"packageName": package, "version": version}).into(),
        ));
    }
    if !properties.iter().any(|p| &*p.type_ == PROPERTY_GVK) {
        for d in &csv.spec.customresourcedefinitions.owned {
            let group = d.name.split_once('.').map(|(_, g)| g).unwrap_or_default();
            properties.push(Property::new(
                PROPERTY_GVK,
                json!({"group": group, "version": d.version, "kind": d.kind}).into(),
            ));
        }
    }
    Ok(properties)
}

/// A CSV's dependencies, read as olmv1's dependency check reads a bundle's (every form, within
/// its limits); `Err` says why they cannot be.
pub fn csv_requirements(
    csv: &Csv,
    package: &str,
    meter: &mut Meter,
) -> Result<(Vec<Property>, Vec<Requirement>), String> {
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    let properties = csv_properties(csv, package)?;
    let requirements = requirements_of(name, &properties, meter).map_err(|e| e.to_string())?;
    Ok((properties, requirements))
}

/// What a requirement asks for, in a reason: a package or API as such, a CEL or compound
/// constraint by its author's words when given.
fn requirement_text(r: &Requirement) -> String {
    match r.constraint {
        Constraint::Package { .. } | Constraint::Gvk(_) => r.constraint.to_string(),
        _ => r.summary(),
    }
}

/// The namespaces an OperatorGroup targets: `status.namespaces` when classic has written it,
/// else `spec.targetNamespaces`; empty or `[""]` means all namespaces.
pub fn target_namespaces(og: &OperatorGroup) -> Vec<String> {
    let mut targets = if og.status.namespaces.is_empty() {
        og.spec.target_namespaces.clone()
    } else {
        og.status.namespaces.clone()
    };
    targets.retain(|t| !t.is_empty());
    targets.sort();
    targets.dedup();
    targets
}

/// The ClusterCatalog that serves `source`'s image: made from it by `migrate catalogs`, or
/// pointing at the same reference (as written or as resolved).
pub fn serving_catalog<'a>(source: &CatalogSource, catalogs: &'a [CatalogView]) -> Option<&'a CatalogView> {
    let (ns, name) = key(&source.metadata);
    let from = format!("{ns}/{name}");
    let image = source.spec.image.as_deref()?;
    catalogs
        .iter()
        .find(|c| c.from_catalog_source.as_deref() == Some(&from) && c.image.as_deref() == Some(image))
        .or_else(|| {
            catalogs
                .iter()
                .find(|c| c.image.as_deref() == Some(image) || c.resolved.as_deref() == Some(image))
        })
}

/// Why a CatalogSource is not one olmv1 can serve (not grpc with an image), if so.
pub fn not_image_backed(source: &CatalogSource) -> Option<String> {
    let spec = &source.spec;
    let (ns, name) = key(&source.metadata);
    match (
        spec.source_type.as_deref(),
        &spec.image,
        &spec.address,
        &spec.config_map,
    ) {
        (Some("grpc"), Some(image), _, _) if !image.is_empty() => None,
        (Some("grpc"), _, Some(address), _) => Some(format!(
            "CatalogSource {ns}/{name} is served from the address {address:?}, not from an image"
        )),
        (t, _, _, Some(cm)) => Some(format!(
            "CatalogSource {ns}/{name} is of type {:?} backed by ConfigMap {cm:?}, not by an image",
            t.unwrap_or_default()
        )),
        (t, ..) => Some(format!(
            "CatalogSource {ns}/{name} of type {:?} has no image",
            t.unwrap_or_default()
        )),
    }
}

/// The codes of the reasons of a Subscription the command's meter did not reach (its CSV's
/// dependencies not read, or not weighed).
pub const NOT_CHECKED_CODES: [&str; 2] = ["NotChecked", "DependencyNotChecked"];

/// How many rows the command's meter did not reach ([`NOT_CHECKED_CODES`]).
pub fn count_not_checked(rows: &[CheckRow]) -> usize {
    rows.iter()
        .filter(|r| r.reasons.iter().any(|r| NOT_CHECKED_CODES.contains(&r.code)))
        .count()
}

/// What the Subscriptions are called in a [`not_checked`] sentence.
const SUBSCRIPTIONS: &str = "Subscriptions";

/// The rows for `scope` (`None`: every Subscription; `Some((ns, None))`: a namespace;
/// `Some((ns, Some(name)))`: one Subscription), plus a `Migrated` row for each converted
/// Subscription in scope. Each Subscription's CSV dependencies are read, then weighed, each on a
/// part of the command's `meter` with the controller's check budget
/// ([`CHECK_WORK_UNITS`] within [`CHECK_DURATION`]); once `meter` has run out
/// ([`Meter::exhausted`]), the rest are not, and their rows say so ([`NOT_CHECKED_CODES`]).
pub fn check(snapshot: &Snapshot, scope: Option<(&str, Option<&str>)>, meter: &mut Meter) -> Vec<CheckRow> {
    let in_scope = |ns: &str, name: &str| match scope {
        None => true,
        Some((s_ns, None)) => s_ns == ns,
        Some((s_ns, Some(s_name))) => s_ns == ns && s_name == name,
    };
    // Every Subscription is judged (dependencies and duplicates span namespaces); rows are kept
    // for those in scope. Those in scope are read and weighed first, so that costly CSVs in other
    // namespaces cannot spend the command's budget before the ones asked about.
    let subscriptions = &snapshot.subscriptions;
    let asked = |i: &usize| {
        let (ns, name) = key(&subscriptions[*i].metadata);
        in_scope(&ns, &name)
    };
    let (mut order, others): (Vec<usize>, Vec<usize>) = (0..subscriptions.len()).partition(asked);
    order.extend(others);
    let mut read: Vec<Option<CsvRead>> = (0..subscriptions.len()).map(|_| None).collect();
    for &i in &order {
        read[i] = Some(read_csv(snapshot, &subscriptions[i], meter));
    }
    let read: Vec<CsvRead> = read
        .into_iter()
        .map(|r| r.expect("every index is in the order"))
        .collect();
    let mut rows: Vec<CheckRow> = snapshot
        .subscriptions
        .iter()
        .zip(&read)
        .map(|(s, read)| judge(snapshot, s, read))
        .collect();
    settle_dependencies(snapshot, &mut rows, &read, &order, meter);
    rows.retain(|r| in_scope(&r.namespace, &r.subscription));
    for e in &snapshot.extensions {
        let Some((ns, sub)) = e.migrated_from.as_deref().and_then(|m| m.split_once('/')) else {
            continue;
        };
        let still_there = snapshot
            .subscriptions
            .iter()
            .any(|s| key(&s.metadata) == (ns.to_string(), sub.to_string()));
        if still_there || !in_scope(ns, sub) {
            continue;
        }
        rows.push(CheckRow {
            namespace: ns.into(),
            subscription: sub.into(),
            package: e.package.clone(),
            installed_csv: e.installed.as_ref().map(|i| i.0.clone()),
            version: e.installed.as_ref().map(|i| i.1.clone()),
            catalog_source: None,
            cluster_catalog: None,
            extension: Some(e.name.clone()),
            verdict: Verdict::Migrated,
            pods_restart: PodRestart::No,
            after: Vec::new(),
            reasons: Vec::new(),
        });
    }
    rows.sort_by(|a, b| (&a.namespace, &a.subscription).cmp(&(&b.namespace, &b.subscription)));
    rows
}

/// A Subscription's installed CSV.
fn installed_csv<'s>(snapshot: &'s Snapshot, sub: &Subscription) -> Option<&'s Csv> {
    let (ns, _) = key(&sub.metadata);
    let installed = sub.status.installed_csv.clone().filter(|c| !c.is_empty())?;
    snapshot
        .csvs
        .iter()
        .find(|x| key(&x.metadata) == (ns.clone(), installed.clone()))
}

/// A Subscription's installed CSV read for its dependencies: name, properties, requirements.
type ReadCsv = (String, Vec<Property>, Vec<Requirement>);

/// What reading a Subscription's installed CSV for its dependencies gave.
enum CsvRead {
    /// There is no installed CSV (the row says why).
    Missing,
    /// Its dependencies cannot be read: why.
    Unreadable(String),
    /// Read.
    Read(ReadCsv),
    /// The command's meter ran out first: the sentence ([`not_checked`]).
    NotChecked(String),
}

/// The controller's check budget for one Subscription's CSV, out of what the command has left.
fn item_meter(command: &Meter) -> Meter {
    command.part(CHECK_WORK_UNITS, CHECK_DURATION)
}

/// Reads `sub`'s installed CSV for its dependencies, on a part of the command's meter.
fn read_csv(snapshot: &Snapshot, sub: &Subscription, command: &mut Meter) -> CsvRead {
    let Some(csv) = installed_csv(snapshot, sub) else {
        return CsvRead::Missing;
    };
    if let Some(e) = command.exhausted() {
        return CsvRead::NotChecked(not_checked(e, SUBSCRIPTIONS, false));
    }
    let mut meter = item_meter(command);
    let read = csv_requirements(csv, &sub.spec.name, &mut meter);
    command.absorb(&meter);
    match (command.exhausted(), read) {
        (Some(e), _) => CsvRead::NotChecked(not_checked(e, SUBSCRIPTIONS, true)),
        (None, Ok((properties, requirements))) => CsvRead::Read((
            csv.metadata.name.clone().unwrap_or_default(),
            properties,
            requirements,
        )),
        (None, Err(why)) => CsvRead::Unreadable(why),
    }
}

/// The row of one Subscription, its CSV's dependencies read (`read`) but not yet weighed.
fn judge(snapshot: &Snapshot, sub: &Subscription, read: &CsvRead) -> CheckRow {
    let (ns, name) = key(&sub.metadata);
    let package = sub.spec.name.clone();
    let mut reasons = Vec::new();
    let installed = sub.status.installed_csv.clone().filter(|c| !c.is_empty());
    let csv = installed_csv(snapshot, sub);
    let version = csv.and_then(|c| c.spec.version.clone());

    // The CSV.
    match (&installed, csv) {
        (None, _) => reasons.push(Reason::block(
            "NoInstalledCSV",
            "the Subscription has no installed CSV (status.installedCSV is empty)".into(),
            "wait until classic has installed the operator, or delete the Subscription",
        )),
        (Some(c), None) => reasons.push(Reason::block(
            "CSVNotFound",
            format!("the installed CSV {c} is not in namespace {ns}"),
            "let classic reinstall it (it recreates a missing CSV), then check again",
        )),
        (Some(c), Some(csv)) if csv.status.phase.as_deref() != Some("Succeeded") => {
            reasons.push(Reason::block(
                "CSVNotSucceeded",
                format!(
                    "CSV {c} is {} ({}): {}",
                    csv.status.phase.as_deref().unwrap_or("without a phase"),
                    csv.status.reason.as_deref().unwrap_or_default(),
                    csv.status.message.as_deref().unwrap_or_default()
                ),
                "fix the operator until classic reports it Succeeded: only a running install is taken over",
            ))
        }
        _ => {}
    }

    // An upgrade in flight, or waiting for approval.
    let plan = sub.status.install_plan_ref.as_ref().and_then(|r| {
        snapshot
            .install_plans
            .iter()
            .find(|ip| key(&ip.metadata) == (r.namespace.clone().unwrap_or(ns.clone()), r.name.clone()))
    });
    let current = sub.status.current_csv.clone().filter(|c| !c.is_empty());
    let waiting = plan.filter(|ip| ip.status.phase.as_deref() == Some("RequiresApproval"));
    if let Some(ip) = waiting {
        reasons.push(Reason::block(
            "UpgradeWaitingForApproval",
            format!(
                "InstallPlan {} waits for approval to install {}",
                ip.metadata.name.as_deref().unwrap_or_default(),
                ip.spec.csv_names.join(", ")
            ),
            "approve it and let the upgrade finish, or delete it; then check again",
        ));
    } else if (current.is_some() && current != installed)
        || sub.status.state.as_deref() == Some("UpgradePending")
    {
        reasons.push(Reason::block(
            "UpgradeInFlight",
            format!(
                "an upgrade from {} to {} is in flight (state {})",
                installed.as_deref().unwrap_or("nothing"),
                current.as_deref().unwrap_or("?"),
                sub.status.state.as_deref().unwrap_or_default()
            ),
            "wait until the Subscription is AtLatestKnown",
        ));
    }

    // The catalog.
    let source = snapshot
        .catalog_sources
        .iter()
        .find(|c| key(&c.metadata) == (sub.spec.source_namespace.clone(), sub.spec.source.clone()));
    let catalog_source = Some(format!("{}/{}", sub.spec.source_namespace, sub.spec.source));
    let mut serving = None;
    match source {
        None => reasons.push(Reason::block(
            "CatalogSourceNotFound",
            format!(
                "CatalogSource {}/{} does not exist",
                sub.spec.source_namespace, sub.spec.source
            ),
            "recreate it, or point the Subscription at the CatalogSource it came from",
        )),
        Some(source) => match not_image_backed(source) {
            Some(why) => reasons.push(Reason::block(
                "CatalogSourceNotImage",
                why,
                "publish the catalog as an image (opm) and point a grpc CatalogSource at it: olmv1 reads catalogs from images only",
            )),
            None => {
                serving = serving_catalog(source, &snapshot.catalogs);
                if serving.is_none() {
                    reasons.push(Reason::block(
                        "NoClusterCatalog",
                        format!(
                            "no ClusterCatalog serves the image {} of CatalogSource {}/{}",
                            source.spec.image.as_deref().unwrap_or_default(),
                            sub.spec.source_namespace,
                            sub.spec.source
                        ),
                        "run `olmv1 migrate catalogs`",
                    ));
                }
            }
        },
    }
    // The installed bundle in a catalog (olmv1 installs from catalogs only).
    if let Some(cat) = serving.filter(|c| c.index.is_none()) {
        reasons.push(Reason::block(
            "CatalogUnreadable",
            format!(
                "the content of ClusterCatalog {} could not be read{}",
                cat.name,
                cat.problem.as_ref().map(|p| format!(": {p}")).unwrap_or_default()
            ),
            "wait until the ClusterCatalog is Serving, then check again",
        ));
    } else if let Some(c) = &installed {
        let found = snapshot.catalogs.iter().any(|cat| {
            cat.index
                .as_ref()
                .and_then(|i| i.package(&package))
                .is_some_and(|p| p.bundles.iter().any(|b| *b.name == **c))
        });
        let unread: Vec<String> = snapshot
            .catalogs
            .iter()
            .filter_map(|c| {
                c.problem
                    .as_ref()
                    .map(|p| format!("ClusterCatalog {}: {p}", c.name))
            })
            .collect();
        // Without a ClusterCatalog for the source, NoClusterCatalog says what to do first.
        if !found && serving.is_some() {
            let mut message = format!(
                "the installed bundle {c} ({package} {}) is in no ClusterCatalog{}",
                version.as_deref().unwrap_or("?"),
                match serving {
                    Some(cat) => format!(
                        ": the image {} of ClusterCatalog {} no longer carries it (pruned)",
                        cat.image.as_deref().unwrap_or_default(),
                        cat.name
                    ),
                    None => String::new(),
                }
            );
            if !unread.is_empty() {
                message.push_str(&format!(" (unread: {})", unread.join("; ")));
            }
            reasons.push(Reason::block(
                "BundleNotInCatalog",
                message,
                format!(
                    "add a ClusterCatalog whose image still carries {c} (an older tag or digest of the catalog image), or let classic upgrade to a bundle the catalog carries first"
                ),
            ));
        }
    }

    // The OperatorGroup.
    let groups: Vec<&OperatorGroup> = snapshot
        .operator_groups
        .iter()
        .filter(|og| og.metadata.namespace.as_deref() == Some(&ns))
        .collect();
    match groups.as_slice() {
        [] => reasons.push(Reason::block(
            "NoOperatorGroup",
            format!("namespace {ns} has no OperatorGroup"),
            "create the OperatorGroup the operator was installed with",
        )),
        [og] => {
            let targets = target_namespaces(og);
            let og_name = og.metadata.name.as_deref().unwrap_or_default();
            if og.spec.selector.is_some() && og.spec.target_namespaces.is_empty() {
                reasons.push(Reason::block(
                    "OperatorGroupSelector",
                    format!("OperatorGroup {og_name} selects its namespaces by label"),
                    "name the target namespace (spec.targetNamespaces) or none: olmv1 watches one namespace or all",
                ));
            } else if targets.len() > 1 {
                reasons.push(Reason::block(
                    "MultiNamespace",
                    format!(
                        "OperatorGroup {og_name} targets {} namespaces ({}): olmv1 installs an operator for one namespace, its own, or all",
                        targets.len(),
                        targets.join(", ")
                    ),
                    "change the OperatorGroup to one target namespace or to all namespaces (classic then rolls the operator), or keep it on classic",
                ));
            }
            if let Some(sa) = &og.spec.service_account_name {
                reasons.push(Reason::note(
                    "OperatorGroupServiceAccount",
                    format!("OperatorGroup {og_name} installs as ServiceAccount {sa}"),
                    "convert uses it as the ClusterExtension's installer, after the permission preflight",
                ));
            }
        }
        more => reasons.push(Reason::block(
            "MultipleOperatorGroups",
            format!(
                "namespace {ns} has {} OperatorGroups ({}): classic itself refuses to resolve there",
                more.len(),
                more.iter()
                    .map(|og| og.metadata.name.clone().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "delete all but the one the operator was installed with",
        )),
    }

    // Subscription.spec.config fields deploymentConfig cannot carry.
    for k in sub.spec.config.iter().flat_map(|c| c.keys()) {
        if !CARRIED_CONFIG_KEYS.contains(&k.as_str()) {
            reasons.push(Reason::block(
                "ConfigNotCarried",
                format!("Subscription.spec.config.{k} has no counterpart in olmv1's deploymentConfig"),
                if k == "selector" {
                    "remove spec.config.selector from the Subscription: classic never reads it, so nothing changes".to_string()
                } else {
                    format!("remove spec.config.{k} from the Subscription")
                },
            ));
        }
    }

    // Serving certificates cert-manager replaces instead of keeping.
    for c in snapshot
        .certificates
        .get(&key(&sub.metadata))
        .into_iter()
        .flatten()
    {
        if let Some(why) = &c.replaced {
            reasons.push(Reason::note(
                "CertificateReplaced",
                format!(
                    "the serving certificate of Deployment {} in Secret {} cannot be kept: {why}; cert-manager issues a new one into it while the pod runs",
                    c.deployment, c.secret
                ),
                format!(
                    "nothing, if the operator reloads its certificate files (the kubelet updates them within a minute); otherwise, once converted: kubectl rollout restart deployment/{} -n {}",
                    c.deployment, ns
                ),
            ));
        }
    }

    if let Some(csv) = csv {
        // OperatorCondition Upgradeable=False.
        let condition = snapshot
            .operator_conditions
            .iter()
            .find(|oc| key(&oc.metadata) == key(&csv.metadata));
        if let Some(oc) = condition {
            let not_upgradeable = oc
                .status
                .conditions
                .iter()
                .chain(&oc.spec.conditions)
                .find(|c| c.type_ == "Upgradeable" && c.status == "False");
            // Not blocking: convert keeps the OperatorCondition, and the controller holds
            // upgrades while it says so, as classic does.
            if let Some(c) = not_upgradeable {
                reasons.push(Reason::note(
                    "NotUpgradeable",
                    format!(
                        "the operator says Upgradeable=False ({}): {}",
                        c.reason, c.message
                    ),
                    "nothing: convert keeps its OperatorCondition and olmv1 holds upgrades until it says Upgradeable=True (unless the controller runs with --operator-conditions=off)",
                ));
            }
        }
        let csv_name = csv.metadata.name.as_deref().unwrap_or_default();
        match read {
            CsvRead::Unreadable(e) => reasons.push(Reason::block(
                "UnreadableProperties",
                format!("CSV {csv_name}: {e}"),
                "fix the CSV's annotation so the dependencies can be read",
            )),
            CsvRead::NotChecked(why) => reasons.push(Reason::block(
                NOT_CHECKED_CODES[0],
                format!("CSV {csv_name}: {why}"),
                NOT_CHECKED_FIX,
            )),
            CsvRead::Missing | CsvRead::Read(_) => {}
        }
    }

    // Two Subscriptions for one package.
    let others: Vec<String> = snapshot
        .subscriptions
        .iter()
        .filter(|o| o.spec.name == package && key(&o.metadata) != (ns.clone(), name.clone()))
        .map(|o| {
            let (a, b) = key(&o.metadata);
            format!("{a}/{b}")
        })
        .collect();
    if !others.is_empty() {
        reasons.push(Reason::block(
            "DuplicatePackage",
            format!(
                "package {package} is also subscribed by {}: olmv1 installs a package once per cluster",
                others.join(", ")
            ),
            "keep one Subscription of the package and move the others' users to it",
        ));
    }

    // A ClusterExtension already installs it.
    let rival = snapshot
        .extensions
        .iter()
        .find(|e| e.migrated_from.as_deref() == Some(&format!("{ns}/{name}")) || e.package == package);
    let verdict = if let Some(e) = rival {
        reasons.insert(
            0,
            Reason::block(
                "ExtensionExists",
                if e.migrated_from.as_deref() == Some(&format!("{ns}/{name}")) {
                    format!(
                        "ClusterExtension {} was converted from this Subscription, which still exists",
                        e.name
                    )
                } else {
                    format!("ClusterExtension {} installs package {package} too", e.name)
                },
                if e.migrated_from.is_some() {
                    "run `olmv1 migrate convert` again to finish, or `olmv1 migrate rollback` to go back"
                } else {
                    "remove one of the two: they would own the same objects"
                },
            ),
        );
        Verdict::Conflict
    } else if reasons.iter().any(|r| r.blocking) {
        Verdict::Blocked
    } else {
        Verdict::Eligible
    };
    let pods_restart = match snapshot.restarts.get(&(ns.clone(), name.clone())) {
        Some(r) => r.clone(),
        None => PodRestart::Unknown("not rendered".into()),
    };
    CheckRow {
        namespace: ns,
        subscription: name,
        package,
        installed_csv: installed,
        version,
        catalog_source,
        cluster_catalog: serving.map(|c| c.name.clone()),
        extension: rival.map(|e| e.name.clone()),
        verdict,
        pods_restart,
        after: Vec::new(),
        reasons,
    }
}

/// What to do about a Subscription the command's meter did not reach.
const NOT_CHECKED_FIX: &str = "make the CSVs' dependencies cheaper to weigh (fewer or cheaper CEL rules), or raise the command's budget (OLMV1_WORK_UNITS)";

/// The weighing of one Subscription's CSV dependencies.
enum Needs {
    /// Who satisfies each requirement (none: nothing to weigh).
    Weighed(Vec<Providers>),
    /// Its own check budget ran out.
    OverBudget(Exhausted),
    /// The command's meter ran out first: the sentence ([`not_checked`]).
    NotChecked(String),
}

/// Who satisfies one requirement of a Subscription's CSV, found once (verdicts change between
/// passes, providers do not).
struct Providers {
    requirement: String,
    /// The first ClusterExtension whose installed bundle satisfies it.
    extension: Option<usize>,
    /// The other Subscriptions whose installed CSV satisfies it, in the rows' order.
    rows: Vec<usize>,
}

/// Every requirement of row `i`'s CSV with who satisfies it, each evaluation charged to
/// `budget` before it runs (catalog and CSV text are untrusted).
fn providers(
    requirements: &[Requirement],
    i: usize,
    extensions: &[BundleFacts<'_>],
    rows: &[Option<BundleFacts<'_>>],
    meter: &mut Meter,
) -> Result<Vec<Providers>, Exhausted> {
    let mut out = Vec::new();
    for r in requirements {
        let mut extension = None;
        for (e, facts) in extensions.iter().enumerate() {
            r.charge(facts, meter)?;
            if r.satisfied_by(facts) {
                extension = Some(e);
                break;
            }
        }
        let mut by_rows = Vec::new();
        if extension.is_none() {
            for (j, facts) in rows.iter().enumerate() {
                let Some(facts) = facts.as_ref().filter(|_| j != i) else {
                    continue;
                };
                r.charge(facts, meter)?;
                if r.satisfied_by(facts) {
                    by_rows.push(j);
                }
            }
        }
        out.push(Providers {
            requirement: requirement_text(r),
            extension,
            rows: by_rows,
        });
    }
    Ok(out)
}

/// Each row's verdict once dependencies are settled: an eligible row is blocked when a
/// requirement of its CSV is over budget, not checked, met by nobody, or met only by rows that are
/// not eligible; blocking a row can block those that need it, and so on. Verdicts only ever go
/// from eligible to blocked, so a worklist reaches the same verdicts as passes repeated until
/// nothing changes, in time linear in the providers found (each was a charged evaluation), where
/// passes took up to one per row, each over every provider of every row.
fn settled_verdicts(base: &[Verdict], needs: &[Needs]) -> Vec<Verdict> {
    let mut verdicts = base.to_vec();
    // For each requirement met by rows only: how many of its providers are still eligible.
    let mut eligible_providers: Vec<Vec<usize>> = vec![Vec::new(); needs.len()];
    // For each row, the (row, requirement) pairs it provides for.
    let mut dependents: Vec<Vec<(usize, usize)>> = vec![Vec::new(); needs.len()];
    let mut newly_blocked = Vec::new();
    for (i, need) in needs.iter().enumerate() {
        if verdicts[i] != Verdict::Eligible {
            continue;
        }
        let blocked = match need {
            Needs::OverBudget(_) | Needs::NotChecked(_) => true,
            Needs::Weighed(providers) => {
                let mut blocked = false;
                for (k, p) in providers.iter().enumerate() {
                    let count = if p.extension.is_some() {
                        usize::MAX
                    } else {
                        p.rows.iter().filter(|&&j| base[j] == Verdict::Eligible).count()
                    };
                    eligible_providers[i].push(count);
                    if p.extension.is_none() {
                        for &j in &p.rows {
                            dependents[j].push((i, k));
                        }
                    }
                    blocked |= count == 0;
                }
                blocked
            }
        };
        if blocked {
            verdicts[i] = Verdict::Blocked;
            newly_blocked.push(i);
        }
    }
    while let Some(j) = newly_blocked.pop() {
        for &(i, k) in &dependents[j] {
            if verdicts[i] != Verdict::Eligible {
                continue;
            }
            let count = &mut eligible_providers[i][k];
            *count -= 1;
            if *count == 0 {
                verdicts[i] = Verdict::Blocked;
                newly_blocked.push(i);
            }
        }
    }
    verdicts
}

/// Weighs each Subscription's dependencies as olmv1's dependency check will (every form, version
/// ranges and CEL included, within [`CHECK_WORK_UNITS`] per Subscription, out of the `command` meter): met by a
/// ClusterExtension, or by a Subscription that is itself eligible (converted first, in the same
/// run), else blocking. A Subscription blocked for its own dependencies blocks those that need it
/// ([`settled_verdicts`]); the reasons are then written once, from the settled verdicts.
fn settle_dependencies(
    snapshot: &Snapshot,
    rows: &mut [CheckRow],
    read: &[CsvRead],
    order: &[usize],
    command: &mut Meter,
) {
    let read: Vec<Option<&ReadCsv>> = read
        .iter()
        .map(|r| match r {
            CsvRead::Read(read) => Some(read),
            _ => None,
        })
        .collect();
    let row_facts: Vec<Option<BundleFacts<'_>>> = read
        .iter()
        .zip(rows.iter())
        .map(|(r, row)| {
            r.as_ref()
                .map(|(name, properties, _)| BundleFacts::new(name, &row.package, properties))
        })
        .collect();
    let extension_facts: Vec<BundleFacts<'_>> = snapshot
        .extensions
        .iter()
        .map(|e| {
            let bundle = e.installed.as_ref().map_or(e.name.as_str(), |(b, _)| b.as_str());
            BundleFacts::new(bundle, &e.package, &e.properties)
        })
        .collect();
    // Weighed in `order` (the rows asked about first), kept by index.
    let mut needs: Vec<Option<Needs>> = (0..read.len()).map(|_| None).collect();
    for &i in order {
        needs[i] = Some(match read[i] {
            Some((_, _, requirements)) if !requirements.is_empty() => {
                if let Some(e) = command.exhausted() {
                    Needs::NotChecked(not_checked(e, SUBSCRIPTIONS, false))
                } else {
                    let mut meter = item_meter(command);
                    let weighed = providers(requirements, i, &extension_facts, &row_facts, &mut meter);
                    command.absorb(&meter);
                    match (command.exhausted(), weighed) {
                        (Some(e), _) => Needs::NotChecked(not_checked(e, SUBSCRIPTIONS, true)),
                        (None, Ok(needs)) => Needs::Weighed(needs),
                        (None, Err(over)) => Needs::OverBudget(over),
                    }
                }
            }
            _ => Needs::Weighed(Vec::new()),
        });
    }
    let needs: Vec<Needs> = needs
        .into_iter()
        .map(|n| n.expect("every index is in the order"))
        .collect();
    let base: Vec<Verdict> = rows.iter().map(|r| r.verdict).collect();
    let verdicts = settled_verdicts(&base, &needs);
    for (i, needs) in needs.iter().enumerate() {
        let mut reasons = Vec::new();
        let mut after = Vec::new();
        let csv_name = read[i].map_or("", |r| r.0.as_str());
        match needs {
            Needs::OverBudget(over) => reasons.push(Reason::block(
                "DependencyCheckOverBudget",
                format!("checking the dependencies of CSV {csv_name} {over}"),
                "simplify the bundle's dependencies (fewer or cheaper CEL rules)",
            )),
            Needs::NotChecked(why) => reasons.push(Reason::block(
                NOT_CHECKED_CODES[1],
                format!("the dependencies of CSV {csv_name}: {why}"),
                NOT_CHECKED_FIX,
            )),
            Needs::Weighed(needs) if needs.is_empty() => continue,
            Needs::Weighed(needs) => {
                for need in needs {
                    let req = &need.requirement;
                    if let Some(e) = need.extension {
                        reasons.push(Reason::note(
                            "DependencyInstalled",
                            format!(
                                "requires {req}: installed by olmv1 (ClusterExtension {})",
                                snapshot.extensions[e].name
                            ),
                            "nothing to do",
                        ));
                        continue;
                    }
                    let name = |j: usize| format!("{}/{}", rows[j].namespace, rows[j].subscription);
                    let eligible = need.rows.iter().find(|&&j| verdicts[j] == Verdict::Eligible);
                    match (eligible, need.rows.first()) {
                        (Some(&j), _) => {
                            let other = name(j);
                            reasons.push(Reason::note(
                                "DependencyMigratesFirst",
                                format!("requires {req}: provided by Subscription {other}, which is eligible"),
                                format!("convert {other} first, or both with `olmv1 migrate convert --all` (it orders them)"),
                            ));
                            after.push(other);
                        }
                        (None, Some(&j)) => {
                            let other = name(j);
                            reasons.push(Reason::block(
                                "DependencyBlocked",
                                format!(
                                    "requires {req}: provided by Subscription {other}, which is {}",
                                    verdicts[j]
                                ),
                                format!("make {other} eligible first (see its reasons)"),
                            ));
                        }
                        (None, None) => reasons.push(Reason::block(
                            "DependencyUnmet",
                            format!("requires {req}, which neither olmv1 nor a Subscription provides"),
                            "install the dependency with olmv1 first",
                        )),
                    }
                }
            }
        }
        let row = &mut rows[i];
        row.reasons.retain(|r| !r.code.starts_with("Dependency"));
        row.reasons.extend(reasons);
        row.after = after;
        let verdict = if base[i] != Verdict::Eligible {
            base[i]
        } else if row.reasons.iter().any(|r| r.blocking) {
            Verdict::Blocked
        } else {
            Verdict::Eligible
        };
        debug_assert_eq!(
            verdict, verdicts[i],
            "row {i}: the reasons agree with the settled verdict"
        );
        row.verdict = verdict;
    }
    for row in rows.iter_mut() {
        // Blocking reasons first, each group in the order found.
        row.reasons.sort_by_key(|r| !r.blocking);
    }
}

/// Where `rendered` (what olmv1 renders: a pod template) differs from `live` (what runs): each
/// field olmv1 sets must hold the same value in the live object; fields only the live object
/// has (classic's own annotations, its injected env) stay as they are. Lists of named items
/// (containers, env, volumes, ports) are matched by name, and the order of the names both have
/// must be the same; other lists are compared whole.
/// `path` names the top; at most `limit` differences are returned.
pub fn differences(rendered: &Value, live: &Value, path: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(rendered, live, path, limit, &mut out);
    out
}

fn diff_into(rendered: &Value, live: &Value, path: &str, limit: usize, out: &mut Vec<String>) {
    if out.len() >= limit {
        return;
    }
    match (rendered, live) {
        (Value::Object(r), Value::Object(l)) => {
            for (k, rv) in r {
                let p = format!("{path}.{k}");
                match l.get(k) {
                    Some(lv) => diff_into(rv, lv, &p, limit, out),
                    None if is_empty(rv) => {}
                    None => out.push(format!("{p} is {} (not set now)", short(rv))),
                }
                if out.len() >= limit {
                    return;
                }
            }
        }
        (Value::Array(r), Value::Array(l)) if !r.is_empty() && r.iter().all(|v| v.get("name").is_some()) => {
            // A server-side apply lays the items out in the rendered order, and the Deployment
            // controller hashes the template as laid out: a new order alone rolls the pods.
            let rendered_order: Vec<&Value> = r
                .iter()
                .filter_map(|rv| rv.get("name"))
                .filter(|n| l.iter().any(|lv| lv.get("name") == Some(*n)))
                .collect();
            let live_order: Vec<&Value> = l
                .iter()
                .filter_map(|lv| lv.get("name"))
                .filter(|n| rendered_order.contains(n))
                .collect();
            if rendered_order != live_order {
                let names = |order: &[&Value]| {
                    order
                        .iter()
                        .map(|n| n.as_str().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                out.push(format!(
                    "{path} is in the order {} (now {})",
                    names(&rendered_order),
                    names(&live_order)
                ));
                if out.len() >= limit {
                    return;
                }
            }
            for rv in r {
                let name = rv["name"].as_str().unwrap_or_default();
                let p = format!("{path}[{name}]");
                match l.iter().find(|lv| lv.get("name") == rv.get("name")) {
                    Some(lv) => diff_into(rv, lv, &p, limit, out),
                    None => out.push(format!("{p} is added")),
                }
                if out.len() >= limit {
                    return;
                }
            }
        }
        (r, l) if r == l || (is_empty(r) && is_empty(l)) => {}
        (r, l) => out.push(format!("{path} is {} (now {})", short(r), short(l))),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The widest value quoted in a difference, in characters: a reason stays one readable line.
const MAX_SHOWN_VALUE_CHARS: usize = 80;

fn short(v: &Value) -> String {
    let text = match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if text.chars().count() > MAX_SHOWN_VALUE_CHARS {
        let cut: String = text.chars().take(MAX_SHOWN_VALUE_CHARS).collect();
        format!("{cut}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sub(ns: &str, name: &str, package: &str, csv: &str) -> Subscription {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": {"source": "cs", "sourceNamespace": "olm", "name": package},
            "status": {"installedCSV": csv, "currentCSV": csv, "state": "AtLatestKnown"}
        }))
        .unwrap()
    }

    fn csv(ns: &str, name: &str, properties: Value) -> Csv {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name,
                "annotations": {PROPERTIES_ANNOTATION: properties.to_string()}},
            "spec": {"version": "1.0.0"},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded"}
        }))
        .unwrap()
    }

    fn og(ns: &str) -> OperatorGroup {
        serde_json::from_value(
            json!({"metadata": {"namespace": ns, "name": "og"}, "status": {"namespaces": [""]}}),
        )
        .unwrap()
    }

    /// `a` needs package `b`, `b` needs package `c`; all three installed by classic, `c` alone
    /// in a ClusterCatalog-less world except for `NoClusterCatalog`, which the test removes.
    fn chain() -> Snapshot {
        let needs = |p: &str| json!({"properties": [{"type": "olm.package.required", "value": {"packageName": p, "versionRange": ">=1.0.0"}}]});
        let source: CatalogSource = serde_json::from_value(json!({
            "metadata": {"namespace": "olm", "name": "cs"},
            "spec": {"sourceType": "grpc", "image": "example.com/index:v1"}
        }))
        .unwrap();
        Snapshot {
            subscriptions: vec![
                sub("a", "a", "a", "a.v1"),
                sub("b", "b", "b", "b.v1"),
                sub("c", "c", "c", "c.v1"),
            ],
            csvs: vec![
                csv("a", "a.v1", needs("b")),
                csv("b", "b.v1", needs("c")),
                csv("c", "c.v1", json!({"properties": []})),
            ],
            operator_groups: vec![og("a"), og("b"), og("c")],
            catalog_sources: vec![source],
            catalogs: vec![CatalogView {
                name: "index".into(),
                image: Some("example.com/index:v1".into()),
                index: Some(Arc::new(index(&["a", "b", "c"]))),
                ..CatalogView::default()
            }],
            ..Snapshot::default()
        }
    }

    /// A catalog with bundle `<p>.v1` 1.0.0 of each package `p`.
    fn index(packages: &[&str]) -> CatalogIndex {
        let mut lines = Vec::new();
        for p in packages {
            lines.push(json!({"schema": "olm.package", "name": p}).to_string());
            lines.push(json!({"schema": "olm.bundle", "name": format!("{p}.v1"), "package": p, "image": "example.com/b@sha256:00",
                "properties": [{"type": "olm.package", "value": {"packageName": p, "version": "1.0.0"}}]}).to_string());
        }
        CatalogIndex::from_jsonl(lines.join("\n").into(), "test", 1 << 20).unwrap()
    }

    #[test]
    fn an_unreadable_or_pruned_catalog_blocks_with_its_cause() {
        let mut s = chain();
        s.catalogs[0].index = Some(Arc::new(index(&["a", "b"])));
        let rows = check(&s, Some(("c", None)), &mut Meter::unlimited());
        assert_eq!(rows[0].reasons[0].code, "BundleNotInCatalog");
        assert_eq!(
            rows[0].reasons[0].message,
            "the installed bundle c.v1 (c 1.0.0) is in no ClusterCatalog: the image example.com/index:v1 of ClusterCatalog index no longer carries it (pruned)"
        );
        s.catalogs[0].index = None;
        s.catalogs[0].problem = Some("not served yet".into());
        let rows = check(&s, Some(("c", None)), &mut Meter::unlimited());
        assert_eq!(
            rows[0].reasons[0].message,
            "the content of ClusterCatalog index could not be read: not served yet"
        );
    }

    #[test]
    fn dependencies_are_eligible_in_order_and_a_blocked_one_blocks_the_chain() {
        let mut s = chain();
        s.restarts.insert(("a".into(), "a".into()), PodRestart::No);
        let rows = check(&s, None, &mut Meter::unlimited());
        let verdicts: Vec<_> = rows
            .iter()
            .map(|r| (r.subscription.as_str(), r.verdict))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("a", Verdict::Eligible),
                ("b", Verdict::Eligible),
                ("c", Verdict::Eligible)
            ]
        );
        assert_eq!(rows[0].after, ["b/b"]);
        assert_eq!(rows[1].after, ["c/c"]);
        assert_eq!(rows[0].pods_restart.to_string(), "no");
        assert_eq!(rows[1].pods_restart.to_string(), "unknown: not rendered");

        // c fails: b is blocked by it, and a by b, one pass each.
        s.csvs[2].status.phase = Some("Failed".into());
        let rows = check(&s, None, &mut Meter::unlimited());
        assert_eq!(rows[2].verdict, Verdict::Blocked);
        assert_eq!(rows[1].verdict, Verdict::Blocked);
        assert_eq!(rows[0].verdict, Verdict::Blocked);
        assert_eq!(
            rows[0].reasons[0].message,
            "requires package b >=1.0.0: provided by Subscription b/b, which is Blocked"
        );

        // An olmv1 extension of c meets b's need; b is then judged alone.
        s.csvs[2].status.phase = Some("Succeeded".into());
        s.subscriptions.pop();
        s.extensions.push(ExtensionView {
            name: "c".into(),
            package: "c".into(),
            installed: Some(("c.v1".into(), "1.0.0".into())),
            properties: vec![Property::new(
                PROPERTY_PACKAGE,
                json!({"packageName": "c", "version": "1.0.0"}).into(),
            )],
            ..ExtensionView::default()
        });
        let rows = check(&s, Some(("b", None)), &mut Meter::unlimited());
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].verdict, Verdict::Eligible);
        assert_eq!(rows[0].reasons[0].code, "DependencyInstalled");
    }

    #[test]
    fn settled_verdicts_block_through_chains_but_not_past_an_eligible_provider() {
        let needs = |rows: &[usize]| Providers {
            requirement: String::new(),
            extension: None,
            rows: rows.to_vec(),
        };
        let e = Verdict::Eligible;
        // 0 and 1 need each other (a cycle stays eligible); 2 needs 3 or 4, 3 is blocked and 4
        // eligible (2 stays eligible); 5 needs 6, which needs 7, which is blocked (both blocked);
        // 8 needs 9, whose own check is over budget: 8 is blocked through it.
        let base = [e, e, e, Verdict::Blocked, e, e, e, Verdict::Blocked, e, e];
        let all = vec![
            Needs::Weighed(vec![needs(&[1])]),
            Needs::Weighed(vec![needs(&[0])]),
            Needs::Weighed(vec![needs(&[3, 4])]),
            Needs::Weighed(Vec::new()),
            Needs::Weighed(Vec::new()),
            Needs::Weighed(vec![needs(&[6])]),
            Needs::Weighed(vec![needs(&[7])]),
            Needs::Weighed(Vec::new()),
            Needs::Weighed(vec![needs(&[9])]),
            Needs::OverBudget(Exhausted::Work { limit: 1 }),
        ];
        let b = Verdict::Blocked;
        assert_eq!(settled_verdicts(&base, &all), [e, e, e, b, e, b, b, b, b, b]);
        // A chain of 5,000, its last blocked: every row blocked, each blocking the one before it
        // once (passes repeated until nothing changed took one per row, 5,000 x 5,000 steps).
        let n = 5_000;
        let mut base = vec![e; n];
        base[n - 1] = Verdict::Blocked;
        let chain: Vec<Needs> = (0..n)
            .map(|i| {
                Needs::Weighed(if i + 1 < n {
                    vec![needs(&[i + 1])]
                } else {
                    Vec::new()
                })
            })
            .collect();
        assert!(settled_verdicts(&base, &chain).iter().all(|v| *v == b));
    }

    #[test]
    fn a_converted_subscription_is_migrated_and_one_still_there_is_a_conflict() {
        let mut s = chain();
        s.extensions.push(ExtensionView {
            name: "c-ext".into(),
            package: "c".into(),
            migrated_from: Some("c/c".into()),
            installed: Some(("c.v1".into(), "1.0.0".into())),
            ..ExtensionView::default()
        });
        let rows = check(&s, Some(("c", None)), &mut Meter::unlimited());
        assert_eq!(rows[0].verdict, Verdict::Conflict);
        assert_eq!(rows[0].extension.as_deref(), Some("c-ext"));
        assert_eq!(
            rows[0].reasons[0].message,
            "ClusterExtension c-ext was converted from this Subscription, which still exists"
        );
        s.subscriptions.pop();
        let rows = check(&s, Some(("c", Some("c"))), &mut Meter::unlimited());
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].verdict, Verdict::Migrated);
        assert_eq!(rows[0].version.as_deref(), Some("1.0.0"));
        // Out of scope, it is not listed.
        assert!(check(&s, Some(("a", Some("c"))), &mut Meter::unlimited()).is_empty());
    }

    #[test]
    fn pod_templates_differ_only_where_olmv1_renders_another_value() {
        let rendered = json!({"metadata": {"annotations": {"olm.targetNamespaces": ""}},
            "spec": {"containers": [{"name": "m", "image": "a:1", "env": [{"name": "X", "value": "1"}]}]}});
        // classic's extra annotation and injected env are not differences.
        let live = json!({"metadata": {"annotations": {"olm.targetNamespaces": "", "olm.operatorGroup": "og"}},
            "spec": {"containers": [{"name": "m", "image": "a:1", "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "X", "value": "1"}, {"name": "OPERATOR_CONDITION_NAME", "value": "c"}]}]}});
        assert!(differences(&rendered, &live, "t", 3).is_empty());
        let mut changed = live.clone();
        changed["spec"]["containers"][0]["image"] = json!("a:2");
        changed["spec"]["containers"][0]["env"][0]["value"] = json!("2");
        assert_eq!(
            differences(&rendered, &changed, "t", 3),
            [
                "t.spec.containers[m].env[X].value is \"1\" (now \"2\")",
                "t.spec.containers[m].image is \"a:1\" (now \"a:2\")"
            ]
        );
        assert_eq!(differences(&rendered, &changed, "t", 1).len(), 1);
        let mut missing = live;
        missing["spec"]["containers"][0]["env"] = json!([]);
        assert_eq!(
            differences(&rendered, &missing, "t", 3),
            ["t.spec.containers[m].env[X] is added"]
        );
    }

    #[test]
    fn named_items_in_another_order_are_a_difference() {
        // For a webhook-only bundle olmv1 mounts webhook-cert before apiservice-cert, as upstream
        // does; classic the other way round.
        let rendered = json!({"spec": {"volumes": [{"name": "webhook-cert"}, {"name": "apiservice-cert"}]}});
        let live = json!({"spec": {"volumes": [{"name": "extra"}, {"name": "apiservice-cert"}, {"name": "webhook-cert"}]}});
        assert_eq!(
            differences(&rendered, &live, "t", 3),
            [
                "t.spec.volumes is in the order webhook-cert, apiservice-cert (now apiservice-cert, webhook-cert)"
            ]
        );
        let same = json!({"spec": {"volumes": [{"name": "webhook-cert"}, {"name": "extra"}, {"name": "apiservice-cert"}]}});
        assert!(differences(&rendered, &same, "t", 3).is_empty());
    }

    #[test]
    fn csv_properties_read_both_shapes_and_add_what_classic_knew() {
        let gvk = json!({"type": "olm.gvk.required", "value": {"group": "g", "version": "v1", "kind": "K"}});
        let wrapped = csv("n", "x", json!({"properties": [gvk.clone()]}));
        let bare = csv("n", "x", json!([gvk]));
        let (properties, requirements) = csv_requirements(&wrapped, "p", &mut Meter::unlimited()).unwrap();
        assert_eq!(requirements.len(), 1);
        assert_eq!(requirement_text(&requirements[0]), "API K (g/v1)");
        // olm.package from the Subscription's package and the CSV's version.
        let facts = BundleFacts::new("x", "p", &properties);
        assert_eq!(facts.version, Some(semver::Version::new(1, 0, 0)));
        let (_, again) = csv_requirements(&bare, "p", &mut Meter::unlimited()).unwrap();
        assert_eq!(again.len(), 1);
        let mut broken = wrapped;
        broken
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(PROPERTIES_ANNOTATION.into(), "{".into());
        assert!(csv_requirements(&broken, "p", &mut Meter::unlimited()).is_err());
    }

    #[test]
    fn subscriptions_past_the_commands_budget_are_not_checked_and_say_so() {
        let s = chain();
        let mut whole = Meter::unlimited();
        let all = check(&s, None, &mut whole);
        assert_eq!(whole.exhausted(), None);
        let not_checked = |rows: &[CheckRow]| -> Vec<(String, &'static str, String)> {
            rows.iter()
                .flat_map(|r| r.reasons.iter().map(move |reason| (r, reason)))
                .filter(|(_, reason)| NOT_CHECKED_CODES.contains(&reason.code))
                .map(|(r, reason)| (r.subscription.clone(), reason.code, reason.message.clone()))
                .collect()
        };
        assert!(not_checked(&all).is_empty());
        // One unit: the first CSV's reading runs out of it, the others are not read.
        let mut meter = Meter::new(1);
        let rows = check(&s, None, &mut meter);
        assert_eq!(meter.exhausted(), Some(Exhausted::Work { limit: 1 }));
        let spent =
            "not checked: the command's budget of 1 work units was spent on the Subscriptions before it";
        assert_eq!(
            not_checked(&rows),
            [
                (
                    "a".to_string(),
                    "NotChecked",
                    "CSV a.v1: not checked: the command's budget of 1 work units ran out during its check"
                        .to_string()
                ),
                ("b".to_string(), "NotChecked", format!("CSV b.v1: {spent}")),
                ("c".to_string(), "NotChecked", format!("CSV c.v1: {spent}")),
            ]
        );
        assert!(rows.iter().all(|r| r.verdict == Verdict::Blocked));
        // One unit short of the whole: the last weighing (b's) runs out; a, which needs b, is
        // blocked by it, and c, which needs nothing, is judged as before.
        let mut meter = Meter::new(whole.spent() - 1);
        let rows = check(&s, None, &mut meter);
        assert_eq!(
            meter.exhausted(),
            Some(Exhausted::Work {
                limit: whole.spent() - 1
            })
        );
        assert_eq!(
            not_checked(&rows),
            [(
                "b".to_string(),
                "DependencyNotChecked",
                format!(
                    "the dependencies of CSV b.v1: not checked: the command's budget of {} work units ran out during its check",
                    whole.spent() - 1
                )
            )]
        );
        assert_eq!(rows[1].verdict, Verdict::Blocked);
        assert_eq!(
            rows[0].reasons[0].message,
            "requires package b >=1.0.0: provided by Subscription b/b, which is Blocked"
        );
        assert_eq!(rows[2], all[2]);
        // Scoped, the rows asked about are read and weighed first: a budget that covers c alone
        // checks c, whatever the Subscriptions before it in the cluster would cost.
        let mut alone = Meter::unlimited();
        read_csv(&s, &s.subscriptions[2], &mut alone);
        let mut meter = Meter::new(alone.spent());
        let rows = check(&s, Some(("c", None)), &mut meter);
        assert!(meter.exhausted().is_some(), "a's and b's CSVs were not read");
        assert_eq!(rows, [all[2].clone()]);
        // Each CSV keeps its own budget within the command's: the controller's check's.
        let mut meter = Meter::new(u64::MAX);
        check(&s, None, &mut meter);
        assert_eq!(meter.spent(), whole.spent());
    }

    #[test]
    fn ranges_and_constraints_are_judged_as_olmv1_checks_them() {
        let mut s = chain();
        s.restarts.insert(("a".into(), "a".into()), PodRestart::No);
        // b at 1.0.0 does not meet a range of >=2.0.0: nothing provides it.
        s.csvs[0] = csv(
            "a",
            "a.v1",
            json!({"properties": [{"type": "olm.package.required",
            "value": {"packageName": "b", "versionRange": ">=2.0.0"}}]}),
        );
        let rows = check(&s, Some(("a", None)), &mut Meter::unlimited());
        assert_eq!(rows[0].verdict, Verdict::Blocked);
        assert_eq!(
            rows[0].reasons[0].message,
            "requires package b >=2.0.0, which neither olmv1 nor a Subscription provides"
        );
        // An olm.constraint: any of (c, a CEL rule on b's version); b's CSV meets it.
        let rule = "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'b')";
        s.csvs[0] = csv(
            "a",
            "a.v1",
            json!({"properties": [{"type": "olm.constraint", "value": {
            "failureMessage": "needs b or c",
            "any": {"constraints": [{"package": {"packageName": "zzz", "versionRange": ">=1.0.0"}},
                {"cel": {"rule": rule}}]}}}]}),
        );
        let rows = check(&s, Some(("a", None)), &mut Meter::unlimited());
        assert_eq!(rows[0].verdict, Verdict::Eligible, "{:?}", rows[0].reasons);
        assert_eq!(
            rows[0].reasons[0].message,
            "requires needs b or c: provided by Subscription b/b, which is eligible"
        );
        assert_eq!(rows[0].after, ["b/b"]);
        // A rule that does not compile makes the CSV's dependencies unreadable.
        s.csvs[0] = csv(
            "a",
            "a.v1",
            json!({"properties": [{"type": "olm.constraint", "value": {
            "cel": {"rule": "properties.exists(p,"}}}]}),
        );
        let rows = check(&s, Some(("a", None)), &mut Meter::unlimited());
        assert_eq!(rows[0].verdict, Verdict::Blocked);
        assert_eq!(rows[0].reasons[0].code, "UnreadableProperties");
    }
}
