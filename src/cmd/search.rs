//! `olmv1 search [TEXT]`: packages across catalogs (see `admin::search`).

use std::process::ExitCode;

use super::print_report;
use super::sources::{DependencyArgs, Output, colour, fail, print_json, print_text, refuse, warn_unreadable};
use crate::admin::sources::CatalogSources;
use crate::admin::{
    command_meter,
    search::{SearchError, search_catalogs, table},
    terminal::TerminalText,
};

/// Arguments of `olmv1 search`.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Text to look for in package names (case-insensitive); all packages when absent.
    pub text: Option<String>,
    #[command(flatten)]
    pub sources: CatalogSources,
    #[command(flatten)]
    pub dependencies: DependencyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
    /// Do not pull bundle images when a catalog carries no manifests (install modes and the
    /// verdict are then unknown).
    #[arg(long)]
    pub no_pull: bool,
}

/// Runs `olmv1 search`.
pub async fn run(args: SearchArgs) -> ExitCode {
    let catalogs = match args.sources.load().await {
        Ok(c) => c,
        Err(e) => return fail("search", &e.to_string()),
    };
    warn_unreadable("search", &catalogs);
    let text = args.text.unwrap_or_default();
    let pull = (!args.no_pull).then(|| args.sources.pull_options());
    let mut meter = command_meter();
    let rows = match search_catalogs(
        &catalogs,
        &text,
        args.dependencies.mode,
        pull.as_ref(),
        &mut meter,
        &mut print_report("search"),
    )
    .await
    {
        Ok(rows) => rows,
        Err(SearchError::Refused(e)) => return refuse("search", &e),
        Err(e) => return fail("search", &e.to_string()),
    };
    if args.output == Output::Json {
        return print_json(&rows, &mut meter);
    }
    if rows.is_empty() {
        errln!("no package matches {text:?}");
        return ExitCode::SUCCESS;
    }
    let mut text = TerminalText::new();
    print_text(
        text.push_table(&table(&rows), colour(), &mut meter)
            .map(|()| text),
    )
}
