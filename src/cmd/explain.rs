//! `olmv1 explain [EXTENSION]`: why the resolver chose what it chose, or found nothing; and for
//! a bundle with dependencies, what it requires and the plan that satisfies it, or why none does.
//! `--dependencies` is the controller's flag: with `check` (the default) such a bundle is chosen
//! and installs once its requirements are; with `refuse`, upstream's refusal. For an EXTENSION of
//! the cluster, the plan keeps what the cluster's ClusterExtensions installed and counts the APIs
//! it serves, as the controller's check does.

use std::process::ExitCode;

use super::sources::{
    DependencyArgs, Output, RequestArgs, colour, fail, load_request, print_json, print_text, refuse,
};
use crate::admin::sources::CatalogSources;
use crate::admin::{
    command_meter,
    explain::{ExplainError, explain_request},
    terminal::escape_value as value,
};

/// Arguments of `olmv1 explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// A ClusterExtension of the cluster; or give `--package` (and `--installed`, ...).
    pub extension: Option<String>,
    #[command(flatten)]
    pub request: RequestArgs,
    #[command(flatten)]
    pub sources: CatalogSources,
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
    let mut meter = command_meter();
    let report = match explain_request(
        &request,
        &inputs,
        mode,
        args.extension.as_deref(),
        &args.system_namespace,
        &mut meter,
    )
    .await
    {
        Ok(report) => report,
        Err(ExplainError::Resolve(e)) => {
            // One line: the resolver's message quotes catalog text.
            errln!("{}", value(&e.to_string()));
            return ExitCode::from(1);
        }
        Err(ExplainError::Refused(e)) => return refuse("explain", &e),
        Err(e) => return fail("explain", &e.to_string()),
    };
    let code = if report.planned(mode) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let printed = if args.output == Output::Json {
        print_json(&report, &mut meter)
    } else {
        print_text(report.render_text(mode, colour(), &mut meter))
    };
    if printed != ExitCode::SUCCESS {
        return printed;
    }
    code
}
