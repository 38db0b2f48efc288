//! `olmv1 explain`: why the resolver chose what it chose, or found nothing; and for a bundle with
//! dependencies, what it requires and the plan that satisfies it, or why none does. For an
//! extension of the cluster, the plan keeps what the cluster's ClusterExtensions installed and
//! counts the APIs it serves, as the controller's check does.

use kube::Client;

use super::{
    dependencies::{DependencyExplanation, chosen_requirements, explain_dependencies},
    install::{InstallError, installed_extensions, served_apis_of},
    sources::{SourcesError, kube_client},
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
};
use crate::{
    dependencies::{Gvk, InstalledExtension},
    meter::{Exhausted, Meter, Refused},
    resolve::{
        CatalogInput, DependencyMode, ResolveError, ResolveRequest,
        explain::{CatalogVerdict, Explanation, explain},
    },
};

/// Why `explain` has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The request cannot be resolved at all (the resolver's message, which quotes catalog text).
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// No client for the cluster.
    #[error(transparent)]
    Client(#[from] SourcesError),
    /// What the cluster installed, or the APIs it serves, could not be read.
    #[error("reading what is installed to plan dependencies: {0}")]
    Installed(#[source] InstallError),
    /// The APIs the cluster serves could not be read.
    #[error(transparent)]
    Served(InstallError),
    /// The command's meter ran out (one sentence naming what and the limit).
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl ExplainError {
    /// Terminal when the request itself is wrong or costs more than the command may spend; the
    /// cluster may answer later.
    pub fn is_terminal(&self) -> bool {
        matches!(self, ExplainError::Resolve(_) | ExplainError::Refused(_))
    }
}

/// What `explain` found: the resolver's explanation and, for a bundle with dependencies, their
/// reasoning (the `-o json` form).
#[derive(Debug, serde::Serialize)]
pub struct ExplainReport {
    /// The resolver's explanation.
    #[serde(flatten)]
    pub explanation: Explanation,
    /// For a bundle with dependencies: what it requires and the plan.
    pub dependencies: Option<DependencyExplanation>,
}

impl ExplainReport {
    /// Whether the answer is something to install: under `--dependencies=check`, a bundle with
    /// dependencies counts once they can be planned.
    pub fn planned(&self, mode: DependencyMode) -> bool {
        match (&self.dependencies, mode) {
            (Some(d), DependencyMode::Check) => d.plan.is_some(),
            _ => self.explanation.chosen.is_some(),
        }
    }

    /// The text form: the verdict, the catalogs, every bundle with its first excluding rule,
    /// then the dependency section; charged to the command's `meter` as it is made.
    pub fn render_text(
        &self,
        mode: DependencyMode,
        colour: bool,
        meter: &mut Meter,
    ) -> Result<TerminalText, Exhausted> {
        let mut text = render_explanation(&self.explanation, colour, meter)?;
        if let Some(d) = &self.dependencies {
            render_dependencies(&mut text, d, mode, colour, meter)?;
        }
        Ok(text)
    }
}

/// Explains `request` against `inputs` as `mode` says. For `extension` of the cluster whose
/// bundle has dependencies, the plan keeps what the cluster installed (recorded in
/// `system_namespace`) and counts the APIs it serves. Within the command's `meter`: the
/// explanation, the requirements read and the plan are charged to it.
pub async fn explain_request(
    request: &ResolveRequest,
    inputs: &[CatalogInput],
    mode: DependencyMode,
    extension: Option<&str>,
    system_namespace: &str,
    meter: &mut Meter,
) -> Result<ExplainReport, ExplainError> {
    let explanation = explain(request, inputs, mode, meter)?;
    // Only a bundle with dependencies needs what the cluster installed and serves.
    let chosen = chosen_requirements(request, inputs, meter)?.is_some();
    let (installed, served) = match extension {
        Some(name) if chosen => in_cluster(&kube_client().await?, name, system_namespace, inputs).await?,
        _ => (Vec::new(), Vec::new()),
    };
    let dependencies = explain_dependencies(request, inputs, &installed, &served, meter)?;
    Ok(ExplainReport {
        explanation,
        dependencies,
    })
}

/// What the cluster's other ClusterExtensions installed (and `extension`'s own bundle), and the
/// APIs it serves: what the controller's check counts as present.
async fn in_cluster(
    client: &Client,
    extension: &str,
    system_namespace: &str,
    catalogs: &[CatalogInput],
) -> Result<(Vec<InstalledExtension>, Vec<Gvk>), ExplainError> {
    let (others, own) = installed_extensions(client, Some(extension), system_namespace, catalogs)
        .await
        .map_err(ExplainError::Installed)?;
    let served = served_apis_of(client).await.map_err(ExplainError::Served)?;
    Ok((others.into_iter().chain(own).collect(), served))
}

/// The dependency section: what the bundle requires, then the plan with the choice behind each
/// requirement, or the planner's explanation.
fn render_dependencies(
    out: &mut TerminalText,
    d: &DependencyExplanation,
    mode: DependencyMode,
    colour: bool,
    meter: &mut Meter,
) -> Result<(), Exhausted> {
    let verdict = match mode {
        DependencyMode::Check => "it installs once these are installed",
        DependencyMode::Refuse => {
            "refused by --dependencies=refuse, as upstream does; --dependencies=check installs it once these are installed"
        }
    };
    out.push_str(&format!("\n{} requires ({verdict}):\n", value(&d.bundle)));
    match &d.requirements.requires_error {
        Some(e) => out.push_charged(
            &format!("  its requirements cannot be read: {}\n", value(e)),
            meter,
        )?,
        None => {
            for r in &d.requirements.requires {
                out.push_charged(&format!("  {}\n", value(&r.summary())), meter)?;
            }
        }
    }
    let Some(plan) = &d.plan else {
        out.push_charged(
            &format!("\nno plan: {}\n", d.error.as_deref().unwrap_or("unknown")),
            meter,
        )?;
        return Ok(());
    };
    out.push_str("\nplan (olmv1 install --with-dependencies), dependencies first:\n");
    for step in plan {
        let mut line = format!(
            "  {} {} {}",
            value(&step.bundle),
            value(&step.version),
            value(&step.catalog)
        );
        if !step.required_by.is_empty() {
            line.push_str(&format!(" (required by {})", value(&step.required_by.join(", "))));
        }
        out.push_charged(&format!("{line}\n"), meter)?;
    }
    if d.choices.is_empty() {
        return Ok(());
    }
    out.push_str("\n");
    let mut t = Table::new(&["BUNDLE", "REQUIRES", "SATISFIED BY", "WHY"]);
    for c in &d.choices {
        t.toned_row(vec![
            (c.dependent.clone(), Tone::Plain),
            (c.requirement.clone(), Tone::Plain),
            (c.satisfied_by.clone(), Tone::Good),
            (c.why.clone(), Tone::Plain),
        ]);
    }
    out.push_table(&t, colour, meter)
}

/// The text form: the verdict, the catalogs, then every bundle with its first excluding rule.
fn render_explanation(e: &Explanation, colour: bool, meter: &mut Meter) -> Result<TerminalText, Exhausted> {
    let mut out = TerminalText::new();
    out.push_str(&match (&e.chosen, &e.error) {
        (Some(c), _) => format!(
            "{}: resolves to {} {} from catalog {}{}\n",
            value(&e.package),
            value(&c.bundle),
            value(&c.version),
            value(&c.catalog),
            if c.deprecated { " (deprecated)" } else { "" }
        ),
        (None, Some(message)) => format!("{}: no resolution: {}\n", value(&e.package), value(message)),
        (None, None) => format!("{}: no resolution\n", value(&e.package)),
    });
    out.push_str("\n");
    let mut t = Table::new(&["CATALOG", "PRIORITY", "CONSULTED", "CANDIDATE"]);
    for c in &e.catalogs {
        let verdict = match c.verdict {
            CatalogVerdict::Considered => ("yes".to_string(), Tone::Good),
            CatalogVerdict::NoPackage => ("yes, no such package".to_string(), Tone::Plain),
            CatalogVerdict::Unavailable => ("no: unavailable".to_string(), Tone::Warn),
            CatalogVerdict::NotSelected => ("no: selector does not match".to_string(), Tone::Warn),
        };
        t.toned_row(vec![
            (c.name.clone(), Tone::Plain),
            (c.priority.to_string(), Tone::Plain),
            verdict,
            (c.candidate.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
        ]);
    }
    out.push_table(&t, colour, meter)?;
    if e.bundles.is_empty() {
        return Ok(out);
    }
    out.push_str("\n");
    let mut t = Table::new(&["CATALOG", "BUNDLE", "VERSION", "VERDICT"]);
    for b in &e.bundles {
        let verdict = match &b.excluded_by {
            None => ("chosen".to_string(), Tone::Good),
            Some(rule) => {
                let name = serde_json::to_value(rule)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let text = if b.detail.is_empty() {
                    name
                } else {
                    format!("{name}: {}", b.detail)
                };
                (text, Tone::Warn)
            }
        };
        t.toned_row(vec![
            (b.catalog.clone(), Tone::Plain),
            (b.bundle.clone(), Tone::Plain),
            (b.version.clone().unwrap_or_else(|| "?".into()), Tone::Plain),
            verdict,
        ]);
    }
    out.push_table(&t, colour, meter)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::explain::{BundleExplanation, CatalogExplanation, ChosenBundle, Exclusion};

    fn report(chosen: bool) -> ExplainReport {
        ExplainReport {
            explanation: Explanation {
                package: "pkg".into(),
                catalogs: vec![CatalogExplanation {
                    name: "cat".into(),
                    priority: 0,
                    verdict: CatalogVerdict::Considered,
                    candidate: Some("pkg.v2.0.0".into()),
                }],
                bundles: vec![BundleExplanation {
                    catalog: "cat".into(),
                    bundle: "pkg.v2.0.0".into(),
                    version: Some("2.0.0".into()),
                    deprecated: false,
                    excluded_by: (!chosen).then_some(Exclusion::VersionRange),
                    detail: if chosen {
                        String::new()
                    } else {
                        "not in <2.0.0".into()
                    },
                }],
                chosen: chosen.then(|| ChosenBundle {
                    bundle: "pkg.v2.0.0".into(),
                    version: "2.0.0".into(),
                    catalog: "cat".into(),
                    deprecated: false,
                }),
                error: (!chosen).then(|| "no bundles found".into()),
            },
            dependencies: None,
        }
    }

    #[test]
    fn the_verdict_comes_first_then_the_catalogs_then_every_bundle() {
        let chosen = report(true);
        assert!(chosen.planned(DependencyMode::Check));
        let text = chosen
            .render_text(DependencyMode::Check, false, &mut Meter::unlimited())
            .unwrap();
        assert!(
            text.starts_with("pkg: resolves to pkg.v2.0.0 2.0.0 from catalog cat\n"),
            "{text}"
        );
        assert!(text.contains("CATALOG") && text.contains("chosen"), "{text}");
        let refused = report(false);
        assert!(!refused.planned(DependencyMode::Refuse));
        let text = refused
            .render_text(DependencyMode::Refuse, false, &mut Meter::unlimited())
            .unwrap();
        assert!(
            text.starts_with("pkg: no resolution: no bundles found\n"),
            "{text}"
        );
        assert!(text.contains(": not in <2.0.0"), "{text}");
    }
}
