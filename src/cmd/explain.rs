//! `olmv1 explain [EXTENSION]`: why the resolver chose what it chose, or found nothing; and for
//! a bundle with dependencies, what it requires and the plan that satisfies it, or why none does.

use std::process::ExitCode;

use super::sources::{Output, RequestArgs, SourceArgs, colour, fail, load_request, print_json};
use crate::{
    admin::{
        dependencies::{DependencyExplanation, explain_dependencies},
        table::{Table, Tone},
        terminal::TerminalText,
    },
    resolve::explain::{CatalogVerdict, Explanation, explain},
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

/// Runs `olmv1 explain`. Exit status 0 when resolution succeeds (or, for a bundle with
/// dependencies, when they can be planned), 1 when it fails (the explanation says why), 2 on
/// bad input.
pub async fn run(args: ExplainArgs) -> ExitCode {
    let (request, inputs) = match load_request(args.extension.as_deref(), &args.request, &args.sources).await
    {
        Ok(loaded) => loaded,
        Err(e) => return fail("explain", &e),
    };
    let explanation = match explain(&request, &inputs) {
        Ok(e) => e,
        Err(e) => {
            errln!("{e}");
            return ExitCode::from(1);
        }
    };
    let dependencies = explain_dependencies(&request, &inputs);
    let planned = match &dependencies {
        Some(d) => d.plan.is_some(),
        None => explanation.chosen.is_some(),
    };
    let code = if planned {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.output == Output::Json {
        print_json(&JsonOutput {
            explanation: &explanation,
            dependencies: dependencies.as_ref(),
        });
    } else {
        let mut text = render_text(&explanation, colour());
        if let Some(d) = &dependencies {
            render_dependencies(&mut text, d, colour());
        }
        super::write_terminal(&text);
    }
    code
}

/// The dependency section: what the bundle requires, then the plan with the choice behind each
/// requirement, or the planner's explanation.
pub fn render_dependencies(out: &mut TerminalText, d: &DependencyExplanation, colour: bool) {
    out.push_str(&format!(
        "\n{} requires (the controller installs it once these are installed; --dependencies=refuse and upstream refuse it):\n",
        d.bundle
    ));
    match &d.requirements.requires_error {
        Some(e) => out.push_str(&format!("  its requirements cannot be read: {e}\n")),
        None => {
            for r in &d.requirements.requires {
                out.push_str(&format!("  {}\n", r.summary()));
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
        let mut line = format!("  {} {} {}", step.bundle, step.version, step.catalog);
        if !step.required_by.is_empty() {
            line.push_str(&format!(" (required by {})", step.required_by.join(", ")));
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
            e.package,
            c.bundle,
            c.version,
            c.catalog,
            if c.deprecated { " (deprecated)" } else { "" }
        ),
        (None, Some(message)) => format!("{}: no resolution: {message}\n", e.package),
        (None, None) => format!("{}: no resolution\n", e.package),
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
