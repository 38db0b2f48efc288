//! `olmv1 search [TEXT]`: packages across catalogs (see `admin::search`).

use std::process::ExitCode;

use super::sources::{Output, SourceArgs, colour, fail, print_json, warn_unreadable};
use crate::admin::{
    search::{PackageSummary, search},
    table::{Table, Tone},
};

/// Arguments of `olmv1 search`.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Text to look for in package names (case-insensitive); all packages when absent.
    pub text: Option<String>,
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Runs `olmv1 search`.
pub async fn run(args: SearchArgs) -> ExitCode {
    let catalogs = match args.sources.load().await {
        Ok(c) => c,
        Err(e) => return fail("search", &e),
    };
    warn_unreadable("search", &catalogs);
    let text = args.text.unwrap_or_default();
    let mut rows: Vec<PackageSummary> = Vec::new();
    for c in &catalogs {
        let Some(content) = &c.content else { continue };
        match search(&c.input, content, &text) {
            Ok(found) => rows.extend(found),
            Err(e) => return fail("search", &format!("catalog {:?}: {e}", c.input.name)),
        }
    }
    rows.sort_by(|a, b| a.package.cmp(&b.package).then_with(|| a.catalog.cmp(&b.catalog)));
    if args.output == Output::Json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        eprintln!("no package matches {text:?}");
        return ExitCode::SUCCESS;
    }
    print!("{}", table(&rows).render(colour()));
    ExitCode::SUCCESS
}

fn table(rows: &[PackageSummary]) -> Table {
    let mut t = Table::new(&[
        "PACKAGE",
        "CATALOG",
        "CHANNEL",
        "NEWEST",
        "MODES",
        "WEBHOOKS",
        "MAX OCP",
        "DEPRECATED",
        "OLM V1",
    ]);
    for r in rows {
        let modes: Vec<&str> = r
            .install_modes
            .iter()
            .map(|m| match m.as_str() {
                "AllNamespaces" => "All",
                "SingleNamespace" => "Single",
                "OwnNamespace" => "Own",
                "MultiNamespace" => "Multi",
                other => other,
            })
            .collect();
        let deprecated = match (&r.deprecated, r.deprecated_entries) {
            (Some(_), _) => ("package".to_string(), Tone::Warn),
            (None, 0) => ("-".to_string(), Tone::Plain),
            (None, n) => (format!("{n} entries"), Tone::Warn),
        };
        let verdict = match &r.not_installable_reason {
            None => ("yes".to_string(), Tone::Good),
            Some(reason) => (format!("no: {}", first_line(reason)), Tone::Bad),
        };
        t.toned_row(vec![
            (r.package.clone(), Tone::Plain),
            (r.catalog.clone(), Tone::Plain),
            (
                r.default_channel.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                r.newest_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                if modes.is_empty() {
                    "-".into()
                } else {
                    modes.join(",")
                },
                Tone::Plain,
            ),
            (if r.webhooks { "yes".into() } else { "-".into() }, Tone::Plain),
            (
                r.max_openshift_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            deprecated,
            verdict,
        ]);
    }
    t
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 70 {
        format!("{}...", line.chars().take(67).collect::<String>())
    } else {
        line.to_string()
    }
}
