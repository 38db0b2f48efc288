//! `olmv1 explain [EXTENSION]`: why the resolver chose what it chose, or found nothing; and for
//! a bundle with dependencies, what it requires and the plan that satisfies it, or why none does.
//! `--dependencies` is the controller's flag: with `check` (the default) such a bundle is chosen
//! and installs once its requirements are; with `refuse`, upstream's refusal. For an EXTENSION of
//! the cluster, the plan keeps what the cluster's ClusterExtensions installed and counts the APIs
//! it serves, as the controller's check does.

use std::process::ExitCode;

use super::sources::{
    DependencyArgs, Output, RequestArgs, SourceArgs, colour, fail, kube_client, load_request, print_json,
};
use crate::{
    admin::{
        dependencies::{DependencyExplanation, chosen_requirements, explain_dependencies},
        install::{installed_extensions, served_apis_of},
        table::{Table, Tone},
        terminal::{TerminalText, escape_value as value},
    },
    dependencies::{Gvk, InstalledExtension},
    resolve::{
        CatalogInput, DependencyMode,
        explain::{CatalogVerdict, Explanation, explain},
    },
};

/// Arguments of `olmv1 explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// A ClusterExtension of the cluster; or give `--package` (and `--installed`, ...).
    pub extension: Option<String>,
    #[command(flatten)]
    pub request: RequestArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub dependencies: DependencyArgs,
    /// The controller's namespace, where it records what each extension installed (an
    /// EXTENSION's plan keeps what is installed).
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// `-o json`: the resolver's explanation and, for a bundle with dependencies, their reasoning.
#[derive(serde::Serialize)]
struct JsonOutput<'a> {
    #[serde(flatten)]
    explanation: &'a Explanation,
    dependencies: Option<&'a DependencyExplanation>,
}

/// Runs `olmv1 explain`. Exit status 0 when resolution succeeds (and, for a bundle with
/// dependencies under `--dependencies=check`, when they can be planned), 1 when it fails (the
/// explanation says why), 2 on bad input.
pub async fn run(args: ExplainArgs) -> ExitCode {
    let (request, inputs) = match load_request(args.extension.as_deref(), &args.request, &args.sources).await
    {
        Ok(loaded) => loaded,
        Err(e) => return fail("explain", &e),
    };
    let mode = args.dependencies.mode;
    let explanation = match explain(&request, &inputs, mode) {
        Ok(e) => e,
        Err(e) => {
            // One line: the resolver's message quotes catalog text.
            errln!("{}", value(&e.to_string()));
            return ExitCode::from(1);
        }
    };
    // Only a bundle with dependencies needs what the cluster installed and serves.
    let (installed, served) = match &args.extension {
        Some(name) if chosen_requirements(&request, &inputs).is_some() => {
            match in_cluster(name, &args.system_namespace, &inputs).await {
                Ok(found) => found,
                Err(e) => return fail("explain", &e),
            }
        }
        _ => (Vec::new(), Vec::new()),
    };
    let dependencies = explain_dependencies(&request, &inputs, &installed, &served);
    let planned = match (&dependencies, mode) {
        (Some(d), DependencyMode::Check) => d.plan.is_some(),
        _ => explanation.chosen.is_some(),
    };
    let code = if planned {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.output == Output::Json {
        print_json(
            "explain",
            &JsonOutput {
                explanation: &explanation,
                dependencies: dependencies.as_ref(),
            },
        );
    } else {
        let mut text = render_text(&explanation, colour());
        if let Some(d) = &dependencies {
            render_dependencies(&mut text, d, mode, colour());
        }
        super::write_terminal(&text);
    }
    code
}

/// What the cluster's other ClusterExtensions installed (and `extension`'s own bundle), and the
/// APIs it serves: what the controller's check counts as present.
async fn in_cluster(
    extension: &str,
    system_namespace: &str,
    catalogs: &[CatalogInput],
) -> Result<(Vec<InstalledExtension>, Vec<Gvk>), String> {
    let client = kube_client().await?;
    let (others, own) = installed_extensions(&client, Some(extension), system_namespace, catalogs)
        .await
        .map_err(|e| format!("reading what is installed to plan dependencies: {e}"))?;
    let served = served_apis_of(&client).await.map_err(|e| e.to_string())?;
    Ok((others.into_iter().chain(own).collect(), served))
}

/// The dependency section: what the bundle requires, then the plan with the choice behind each
/// requirement, or the planner's explanation.
pub fn render_dependencies(
    out: &mut TerminalText,
    d: &DependencyExplanation,
    mode: DependencyMode,
    colour: bool,
) {
    let verdict = match mode {
        DependencyMode::Check => "it installs once these are installed",
        DependencyMode::Refuse => {
            "refused by --dependencies=refuse, as upstream does; --dependencies=check installs it once these are installed"
        }
    };
    out.push_str(&format!("\n{} requires ({verdict}):\n", value(&d.bundle)));
    match &d.requirements.requires_error {
        Some(e) => out.push_str(&format!("  its requirements cannot be read: {}\n", value(e))),
        None => {
            for r in &d.requirements.requires {
                out.push_str(&format!("  {}\n", value(&r.summary())));
            }
        }
    }
    let Some(plan) = &d.plan else {
        out.push_str(&format!(
            "\nno plan: {}\n",
            d.error.as_deref().unwrap_or("unknown")
        ));
        return;
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
        out.push_str(&format!("{line}\n"));
    }
    if d.choices.is_empty() {
        return;
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
    out.push_table(&t, colour);
}

/// The text form: the verdict, the catalogs, then every bundle with its first excluding rule.
pub fn render_text(e: &Explanation, colour: bool) -> TerminalText {
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
    out.push_table(&t, colour);
    if e.bundles.is_empty() {
        return out;
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
    out.push_table(&t, colour);
    out
}
