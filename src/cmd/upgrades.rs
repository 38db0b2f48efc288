//! `olmv1 upgrades [EXTENSION]`: versions reachable now and the shortest path to the later ones
//! (see `admin::upgrades`), as a table, JSON, Graphviz `dot` or SVG.

use std::process::ExitCode;

use super::sources::{
    DependencyArgs, RequestArgs, colour, fail, load_request, print_json, print_text, refuse,
};
use crate::admin::sources::CatalogSources;
use crate::admin::{
    command_meter,
    graph::{GraphError, dot_to_svg, upgrade_graph},
    output,
    upgrades::{UpgradesError, render_text, upgrades},
};

/// Output formats of `olmv1 upgrades`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpgradesOutput {
    /// Aligned tables.
    #[default]
    Text,
    /// JSON (docs/cli.md).
    Json,
    /// Graphviz source of the upgrade graph.
    Dot,
    /// The graph drawn by Graphviz `dot` (must be installed).
    Svg,
}

/// Arguments of `olmv1 upgrades`.
#[derive(clap::Args, Debug)]
pub struct UpgradesArgs {
    /// A ClusterExtension of the cluster (its channels, range, selector, policy and installed
    /// bundle); or give `--package` and `--installed`.
    pub extension: Option<String>,
    #[command(flatten)]
    pub request: RequestArgs,
    #[command(flatten)]
    pub sources: CatalogSources,
    #[command(flatten)]
    pub dependencies: DependencyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: UpgradesOutput,
}

/// Runs `olmv1 upgrades`.
pub async fn run(args: UpgradesArgs) -> ExitCode {
    let (request, inputs) = match load_request(args.extension.as_deref(), &args.request, &args.sources).await
    {
        Ok(loaded) => loaded,
        Err(e) => return fail("upgrades", &e),
    };
    let mut meter = command_meter();
    let answer = match upgrades(&request, &inputs, args.dependencies.mode, &mut meter) {
        Ok(u) => u,
        Err(UpgradesError::Refused(e)) => return refuse("upgrades", &e),
        Err(e) => return fail("upgrades", &e.to_string()),
    };
    match args.output {
        UpgradesOutput::Json => print_json(&answer, &mut meter),
        UpgradesOutput::Text => print_text(render_text(&answer, colour(), &mut meter)),
        UpgradesOutput::Dot | UpgradesOutput::Svg => {
            let dot = match upgrade_graph(&request, &inputs, &answer, output::room(), &mut meter) {
                Ok(Some(dot)) => dot,
                Ok(None) => return fail("upgrades", "no selected catalog has the package"),
                Err(GraphError::Refused(e)) => return refuse("upgrades", &e),
                Err(e) => return fail("upgrades", &e.to_string()),
            };
            if args.output == UpgradesOutput::Dot {
                out!("{dot}");
                return ExitCode::SUCCESS;
            }
            match dot_to_svg(&dot) {
                Ok(svg) => {
                    out!("{svg}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail("upgrades", &e),
            }
        }
    }
}
