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
/// resolved as `dependencies` says, each extension on a part of the command's meter (made once
/// the catalogs are loaded: [`super::command_meter`]), which is returned with them: when it ran
/// out ([`Meter::exhausted`]), the rows it did not reach say so.
pub async fn status(
    client: &Client,
    extension: Option<&str>,
    sources: &CatalogSources,
    dependencies: DependencyMode,
) -> Result<(Vec<ExtensionStatus>, Meter), StatusError> {
    let extensions = match extension {
        Some(name) => vec![cluster::cluster_extension(client, name).await?],
        None => cluster::cluster_extensions(client).await?,
    };
    let inputs: Vec<CatalogInput> = sources.load().await?.into_iter().map(|c| c.input).collect();
    let mut meter = super::command_meter();
    let rows = extensions
        .iter()
        .map(|e| summarize(e, &inputs, dependencies, &mut meter))
        .collect();
    Ok((rows, meter))
}

/// How many extensions [`summarize`] did not check: the command's meter ran out first.
pub fn count_not_checked(rows: &[ExtensionStatus]) -> usize {
    rows.iter().filter(|r| r.not_checked.is_some()).count()
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
    /// Why the upgrades could not be listed (their own budget ran out, or the catalogs could not
    /// answer); absent when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrades_error: Option<String>,
    /// Why the target and upgrades were not looked for, when the command's budget ran out
    /// first (one sentence naming it); absent when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
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

/// The summary of one extension against the catalogs, resolved as `dependencies` says. Its
/// answers are independent of the other extensions', so each has a budget of its own
/// ([`super::command_work_units`]), taken out of the command's `meter` ([`Meter::part`]): once
/// that has run out, an extension is not checked, and says so.
pub fn summarize(
    ext: &ClusterExtension,
    catalogs: &[CatalogInput],
    dependencies: DependencyMode,
    command: &mut Meter,
) -> ExtensionStatus {
    let installed = cluster::installed_bundle(ext);
    let package = ext
        .spec
        .source
        .catalog
        .as_ref()
        .map(|c| c.package_name.clone())
        .unwrap_or_default();
    let mut not_checked = command
        .exhausted()
        .map(|e| super::not_checked(e, "extensions", false));
    let mut upgrades_error = None;
    let (target, error, reachable) = match ResolveRequest::from_cluster_extension(ext, installed.clone()) {
        Err(e) => (None, Some(e.to_string()), Vec::new()),
        Ok(_) if not_checked.is_some() => (None, None, Vec::new()),
        Ok(request) => {
            let mut meter = command.part(super::command_work_units(), super::COMMAND_DURATION);
            let reachable = match &request.installed {
                Some(_) => match upgrades(&request, catalogs, dependencies, &mut meter) {
                    Ok(u) => u.reachable.into_iter().map(|t| t.version).collect(),
                    Err(e) => {
                        upgrades_error = Some(e.to_string());
                        Vec::new()
                    }
                },
                None => Vec::new(),
            };
            let target = dependencies.resolve_within(&request, catalogs, &mut meter);
            command.absorb(&meter);
            match (command.exhausted(), target) {
                (Some(e), _) => {
                    not_checked = Some(super::not_checked(e, "extensions", true));
                    upgrades_error = None;
                    (None, None, Vec::new())
                }
                (None, Ok(r)) => (Some((r.bundle.name, r.bundle.status_version)), None, reachable),
                (None, Err(e)) => (None, Some(e.to_string()), reachable),
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
        upgrades_error,
        not_checked,
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
            match (&r.target_version, &r.not_checked) {
                (Some(v), _) => (v.clone(), Tone::Plain),
                (None, Some(_)) => ("not checked".into(), Tone::Bad),
                (None, None) => ("none".into(), Tone::Bad),
            },
            (
                cell(installed_cond),
                tone(installed_cond, ConditionStatus::True.as_str()),
            ),
            (
                cell(progressing),
                tone(progressing, ConditionStatus::True.as_str()),
            ),
            match (r.upgrades.is_empty(), &r.upgrades_error) {
                (_, Some(_)) => ("unknown".into(), Tone::Bad),
                (true, None) => ("-".into(), Tone::Plain),
                (false, None) => (r.upgrades.join(","), Tone::Good),
            },
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
        if let Some(e) = &r.upgrades_error {
            notes.push_charged(&format!("{} upgrades: {}\n", value(&r.name), value(e)), meter)?;
        }
        if let Some(why) = &r.not_checked {
            notes.push_charged(&format!("{}: {why}\n", value(&r.name)), meter)?;
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

    /// Package `pkg`: ten bundles in a replaces chain.
    fn catalog() -> Vec<CatalogInput> {
        let entries: Vec<serde_json::Value> = (0..10)
            .map(|i| match i {
                0 => serde_json::json!({"name": "pkg.v1.0.0"}),
                _ => serde_json::json!({"name": format!("pkg.v1.0.{i}"), "replaces": format!("pkg.v1.0.{}", i - 1)}),
            })
            .collect();
        let mut lines = vec![
            serde_json::json!({"schema": "olm.package", "name": "pkg", "defaultChannel": "stable"}),
            serde_json::json!({"schema": "olm.channel", "package": "pkg", "name": "stable", "entries": entries}),
        ];
        lines.extend((0..10).map(|i| {
            serde_json::json!({"schema": "olm.bundle", "package": "pkg", "name": format!("pkg.v1.0.{i}"), "image": "i",
                "properties": [{"type": "olm.package", "value": {"packageName": "pkg", "version": format!("1.0.{i}")}}]})
        }));
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let index =
            crate::catalog::CatalogIndex::from_jsonl(text.join("\n").into(), "test", 1 << 20).unwrap();
        vec![CatalogInput::new("c", std::sync::Arc::new(index))]
    }

    #[test]
    fn extensions_past_the_commands_budget_are_not_checked_and_say_so() {
        let catalogs = catalog();
        let ext = extension(serde_json::json!({
            "install": {"bundle": {"name": "pkg.v1.0.0", "version": "1.0.0"}}, "conditions": []
        }));
        let mut one = Meter::unlimited();
        let checked = summarize(&ext, &catalogs, DependencyMode::Check, &mut one);
        assert_eq!(checked.target_version.as_deref(), Some("1.0.1"));
        assert!(!checked.upgrades.is_empty());
        assert_eq!(checked.not_checked, None);
        // Two and a half extensions' work: two are checked, the third runs out during its
        // check, the others are not started.
        let budget = one.spent() * 5 / 2;
        let mut command = Meter::new(budget);
        let rows: Vec<ExtensionStatus> = (0..5)
            .map(|_| summarize(&ext, &catalogs, DependencyMode::Check, &mut command))
            .collect();
        assert_eq!(command.exhausted(), Some(Exhausted::Work { limit: budget }));
        for row in &rows[..2] {
            assert_eq!(
                (&row.target_version, &row.upgrades, &row.not_checked),
                (&checked.target_version, &checked.upgrades, &None)
            );
        }
        let during =
            format!("not checked: the command's budget of {budget} work units ran out during its check");
        let before = format!(
            "not checked: the command's budget of {budget} work units was spent on the extensions before it"
        );
        assert_eq!(rows[2].not_checked.as_deref(), Some(during.as_str()));
        for row in &rows[2..] {
            assert_eq!((&row.target_version, &row.target_error), (&None, &None));
            assert!(row.upgrades.is_empty());
        }
        for row in &rows[3..] {
            assert_eq!(row.not_checked.as_deref(), Some(before.as_str()));
        }
        assert_eq!(count_not_checked(&rows), 3);
        assert_eq!(
            crate::admin::not_all_checked(command.exhausted().unwrap(), "extensions", 3, 5),
            format!(
                "checking the 5 extensions needs more than the budget of {budget} work units: 3 of them were not checked"
            )
        );
        // Text: TARGET says so, and a note says why; JSON: notChecked, only where it is so.
        let text = render_text(&rows, false, &mut Meter::unlimited()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains(" 1.0.1 ") && lines[3].contains(" not checked "),
            "{text}"
        );
        assert!(lines.contains(&format!("ext: {during}").as_str()), "{text}");
        assert_eq!(
            lines.iter().filter(|l| l.ends_with("before it")).count(),
            2,
            "{text}"
        );
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(json[0].get("notChecked"), None);
        assert_eq!(json[4]["notChecked"], before.as_str());
    }

    #[test]
    fn upgrades_that_could_not_be_listed_are_unknown_and_say_why() {
        let catalogs = catalog();
        let ext = extension(serde_json::json!({
            "install": {"bundle": {"name": "pkg.v1.0.0", "version": "1.0.0"}}, "conditions": []
        }));
        let mut row = summarize(&ext, &catalogs, DependencyMode::Check, &mut Meter::unlimited());
        assert_eq!(row.upgrades_error, None);
        let why = "listing the upgrades of package \"pkg\" needs more than the budget of 5 work units";
        row.upgrades = Vec::new();
        row.upgrades_error = Some(why.to_string());
        let text = render_text(std::slice::from_ref(&row), false, &mut Meter::unlimited()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].trim_end().ends_with(" unknown"), "{text}");
        assert!(lines.contains(&format!("ext upgrades: {why}").as_str()), "{text}");
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["upgradesError"], why);
        assert_eq!(json["upgrades"], serde_json::json!([]));
    }

    #[test]
    fn an_extension_no_catalog_carries_has_no_target_and_says_why() {
        let ext = extension(serde_json::json!({
            "conditions": [{
                "type": "Installed", "status": "False", "reason": "Failed",
                "message": "no bundle\nsecond line", "lastTransitionTime": "2025-01-01T00:00:00Z"
            }]
        }));
        let row = summarize(&ext, &[], DependencyMode::Check, &mut Meter::unlimited());
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
