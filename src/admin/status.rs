//! `olmv1 status`: each extension's installed bundle, the resolver's target now, its conditions
//! and the versions it can upgrade to now ([`summarize`]), and their text form ([`render_text`]).

use kube::{Client, ResourceExt};
use olmv1_api::v1::{ClusterExtension, conditions::ConditionStatus};
use serde::Serialize;

use super::{
    cluster::{self, ClusterError},
    sources::{CatalogSources, SourcesError},
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
    upgrades::upgrades,
};
use crate::{
    meter::{Exhausted, Meter},
    resolve::{CatalogInput, DependencyMode, ResolveRequest},
};

/// Why `status` could not look.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The ClusterExtensions could not be read.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The catalogs could not be loaded.
    #[error(transparent)]
    Sources(#[from] SourcesError),
}

impl StatusError {
    /// Terminal when the cause is in what the command was given (a flag, a file); the cluster
    /// and the catalog servers may answer later.
    pub fn is_terminal(&self) -> bool {
        match self {
            StatusError::Cluster(e) => e.is_terminal(),
            StatusError::Sources(e) => !matches!(
                e,
                SourcesError::Cluster(_) | SourcesError::Catalog(_) | SourcesError::KubeClient(_)
            ),
        }
    }
}

/// The summary of `extension` (all of them when `None`) against the catalogs `sources` load,
/// resolved as `dependencies` says.
pub async fn status(
    client: &Client,
    extension: Option<&str>,
    sources: &CatalogSources,
    dependencies: DependencyMode,
) -> Result<Vec<ExtensionStatus>, StatusError> {
    let extensions = match extension {
        Some(name) => vec![cluster::cluster_extension(client, name).await?],
        None => cluster::cluster_extensions(client).await?,
    };
    let inputs: Vec<CatalogInput> = sources.load().await?.into_iter().map(|c| c.input).collect();
    Ok(extensions
        .iter()
        .map(|e| summarize(e, &inputs, dependencies))
        .collect())
}

/// One extension's summary (the JSON form).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionStatus {
    /// ClusterExtension name.
    pub name: String,
    /// The package.
    pub package: String,
    /// The install namespace.
    pub namespace: String,
    /// Installed bundle name, if any.
    pub installed_bundle: Option<String>,
    /// Installed version, if any.
    pub installed_version: Option<String>,
    /// The bundle the resolver picks now, if it picks one.
    pub target_bundle: Option<String>,
    /// Its version.
    pub target_version: Option<String>,
    /// The resolver's message when it picks nothing.
    pub target_error: Option<String>,
    /// The conditions: type, status, reason, message.
    pub conditions: Vec<ConditionSummary>,
    /// Versions reachable now (`olmv1 upgrades`), highest first.
    pub upgrades: Vec<String>,
}

/// One condition.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionSummary {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// The summary of one extension against the catalogs, resolved as `dependencies` says.
pub fn summarize(
    ext: &ClusterExtension,
    catalogs: &[CatalogInput],
    dependencies: DependencyMode,
) -> ExtensionStatus {
    let installed = cluster::installed_bundle(ext);
    let package = ext
        .spec
        .source
        .catalog
        .as_ref()
        .map(|c| c.package_name.clone())
        .unwrap_or_default();
    let (target, error, reachable) = match ResolveRequest::from_cluster_extension(ext, installed.clone()) {
        Err(e) => (None, Some(e.to_string()), Vec::new()),
        Ok(request) => {
            // Each extension's own meter: its answers are independent.
            let mut meter = super::command_meter();
            let reachable = match &request.installed {
                Some(_) => upgrades(&request, catalogs, dependencies, &mut meter)
                    .map(|u| u.reachable.into_iter().map(|t| t.version).collect())
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            match dependencies.resolve_within(&request, catalogs, &mut meter) {
                Ok(r) => (Some((r.bundle.name, r.bundle.status_version)), None, reachable),
                Err(e) => (None, Some(e.to_string()), reachable),
            }
        }
    };
    ExtensionStatus {
        name: ext.name_any(),
        package,
        namespace: ext.spec.namespace.clone(),
        installed_bundle: installed.as_ref().map(|i| i.name.clone()),
        installed_version: installed.map(|i| i.version),
        target_bundle: target.as_ref().map(|t| t.0.clone()),
        target_version: target.map(|t| t.1),
        target_error: error,
        conditions: ext
            .status
            .iter()
            .flat_map(|s| &s.conditions)
            .map(|c| ConditionSummary {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        upgrades: reachable,
    }
}

fn condition<'a>(s: &'a ExtensionStatus, type_: &str) -> Option<&'a ConditionSummary> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// The text form: one table row per extension, then the messages of failing conditions; charged
/// to the command's `meter` as it is made.
pub fn render_text(
    rows: &[ExtensionStatus],
    colour: bool,
    meter: &mut Meter,
) -> Result<TerminalText, Exhausted> {
    let mut t = Table::new(&[
        "NAME",
        "PACKAGE",
        "INSTALLED",
        "TARGET",
        "INSTALLED?",
        "PROGRESSING",
        "UPGRADES",
    ]);
    let mut notes = TerminalText::new();
    for r in rows {
        let installed_cond = condition(r, "Installed");
        let progressing = condition(r, "Progressing");
        let tone = |c: Option<&ConditionSummary>, good: &str| match c {
            Some(c) if c.status == good => Tone::Good,
            Some(_) => Tone::Bad,
            None => Tone::Plain,
        };
        let cell = |c: Option<&ConditionSummary>| {
            c.map_or("-".to_string(), |c| format!("{} ({})", c.status, c.reason))
        };
        t.toned_row(vec![
            (r.name.clone(), Tone::Plain),
            (r.package.clone(), Tone::Plain),
            (
                r.installed_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            match (&r.target_version, &r.target_error) {
                (Some(v), _) => (v.clone(), Tone::Plain),
                (None, _) => ("none".into(), Tone::Bad),
            },
            (
                cell(installed_cond),
                tone(installed_cond, ConditionStatus::True.as_str()),
            ),
            (
                cell(progressing),
                tone(progressing, ConditionStatus::True.as_str()),
            ),
            (
                if r.upgrades.is_empty() {
                    "-".into()
                } else {
                    r.upgrades.join(",")
                },
                if r.upgrades.is_empty() {
                    Tone::Plain
                } else {
                    Tone::Good
                },
            ),
        ]);
        for c in &r.conditions {
            let bad = (c.type_ == "Installed" && c.status != ConditionStatus::True.as_str())
                || (c.type_ == "Progressing" && c.reason != "Succeeded")
                || (c.type_.ends_with("Deprecated") && c.status == ConditionStatus::True.as_str());
            if bad && !c.message.is_empty() {
                // One line per condition: its message quotes catalog text (deprecation
                // messages, several joined by newlines, are shown with `\x0a` between them).
                notes.push_charged(
                    &format!("{} {}: {}\n", value(&r.name), value(&c.type_), value(&c.message)),
                    meter,
                )?;
            }
        }
        if let Some(e) = &r.target_error {
            notes.push_charged(&format!("{} resolution: {}\n", value(&r.name), value(e)), meter)?;
        }
    }
    let mut out = TerminalText::new();
    out.push_table(&t, colour, meter)?;
    if !notes.is_empty() {
        out.push_str("\n");
        out.append(&notes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extension(status: serde_json::Value) -> ClusterExtension {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1",
            "kind": "ClusterExtension",
            "metadata": {"name": "ext"},
            "spec": {
                "namespace": "ns",
                "serviceAccount": {"name": "sa"},
                "source": {"sourceType": "Catalog", "catalog": {"packageName": "pkg"}}
            },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn an_extension_no_catalog_carries_has_no_target_and_says_why() {
        let ext = extension(serde_json::json!({
            "conditions": [{
                "type": "Installed", "status": "False", "reason": "Failed",
                "message": "no bundle\nsecond line", "lastTransitionTime": "2025-01-01T00:00:00Z"
            }]
        }));
        let row = summarize(&ext, &[], DependencyMode::Check);
        assert_eq!(
            (row.name.as_str(), row.package.as_str(), row.namespace.as_str()),
            ("ext", "pkg", "ns")
        );
        assert_eq!(row.installed_version, None);
        assert_eq!(row.target_version, None);
        assert!(row.target_error.is_some());
        assert!(row.upgrades.is_empty());
        let text = render_text(&[row], false, &mut Meter::unlimited()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("none") && lines[1].contains("False (Failed)"),
            "{text}"
        );
        // Each failing condition's message on one line, its newlines escaped.
        assert!(
            lines.contains(&"ext Installed: no bundle\\x0asecond line"),
            "{text}"
        );
        assert!(lines.iter().any(|l| l.starts_with("ext resolution: ")), "{text}");
    }
}
