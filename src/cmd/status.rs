//! `olmv1 status [EXTENSION]`: every extension's installed bundle, the resolver's target now,
//! its conditions and the versions it can upgrade to now (computed and shown by `admin::status`).

use std::process::ExitCode;

use super::sources::{DependencyArgs, Output, colour, fail, kube_client, print_json, print_text};
use crate::admin::{
    command_meter, not_all_checked,
    sources::CatalogSources,
    status::{count_not_checked, render_text, status},
};

/// Arguments of `olmv1 status`.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// One ClusterExtension; all of them when absent.
    pub extension: Option<String>,
    #[command(flatten)]
    pub sources: CatalogSources,
    #[command(flatten)]
    pub dependencies: DependencyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Runs `olmv1 status`.
pub async fn run(args: StatusArgs) -> ExitCode {
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("status", &e),
    };
    let (rows, checked) = match status(
        &client,
        args.extension.as_deref(),
        &args.sources,
        args.dependencies.mode,
    )
    .await
    {
        Ok(rows) => rows,
        Err(e) => return fail("status", &e.to_string()),
    };
    // Each extension's answer had a part of the command's meter; what the command prints has
    // one more, so that the rows the first did not reach are shown.
    let mut meter = command_meter();
    let printed = if args.output == Output::Json {
        print_json(&rows, &mut meter)
    } else {
        print_text(render_text(&rows, colour(), &mut meter))
    };
    match checked.exhausted() {
        Some(e) if printed == ExitCode::SUCCESS => fail(
            "status",
            &not_all_checked(e, "extensions", count_not_checked(&rows), rows.len()),
        ),
        _ => printed,
    }
}
