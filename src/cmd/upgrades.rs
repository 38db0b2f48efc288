//! `olmv1 upgrades [EXTENSION]`: versions reachable now and the shortest path to the later ones
//! (see `admin::upgrades`), as a table, JSON, Graphviz `dot` or SVG.

use std::process::ExitCode;

use super::sources::{DependencyArgs, RequestArgs, SourceArgs, colour, fail, load_request, print_json};
use crate::admin::{
    graph::{dot_to_svg, upgrade_dot},
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
    upgrades::{UPGRADES_WORK_UNITS, Upgrades, upgrades},
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
    pub sources: SourceArgs,
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
    let answer = match upgrades(&request, &inputs, args.dependencies.mode) {
        Ok(u) => u,
        Err(e) => return fail("upgrades", &e.to_string()),
    };
    match args.output {
        UpgradesOutput::Json => print_json("upgrades", &answer),
        UpgradesOutput::Text => {
            super::write_terminal(&render_text(&answer, colour()));
            ExitCode::SUCCESS
        }
        UpgradesOutput::Dot | UpgradesOutput::Svg => {
            // The installed bundle's catalog; when none carries it any more, the catalog of
            // the first version reachable now, else the first with the package.
            let catalog = answer
                .installed
                .catalog
                .as_ref()
                .or(answer.reachable.first().map(|t| &t.catalog));
            let Some(package) = inputs
                .iter()
                .filter(|c| catalog.is_none_or(|name| c.name == *name))
                .find_map(|c| c.index.package(&request.package))
            else {
                return fail("upgrades", "no selected catalog has the package");
            };
            let (_, room) = super::output_room();
            let dot = match upgrade_dot(package, &request.channels, &answer, UPGRADES_WORK_UNITS, room) {
                Ok(dot) => dot,
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

/// The text form: the installed bundle, then one table of reachable, stepped and unreachable
/// versions.
pub fn render_text(u: &Upgrades, colour: bool) -> TerminalText {
    let mut out = TerminalText::new();
    out.push_str(&format!(
        "{} installed: {} {} ({})\n",
        value(&u.package),
        value(&u.installed.bundle),
        value(&u.installed.version),
        match &u.installed.catalog {
            Some(c) => format!("catalog {}", value(c)),
            None => "no selected catalog carries it any more".to_string(),
        }
    ));
    let mut t = Table::new(&["VERSION", "BUNDLE", "CATALOG", "HOW"]);
    let deprecated = |d: bool| if d { " (deprecated)" } else { "" };
    // `--dependencies=check`: the version installs once what it requires is installed.
    let requires = |r: &[String]| match r {
        [] => String::new(),
        r => format!(" (requires {})", r.join(", ")),
    };
    for r in &u.reachable {
        t.toned_row(vec![
            (r.version.clone(), Tone::Good),
            (r.bundle.clone(), Tone::Plain),
            (r.catalog.clone(), Tone::Plain),
            (
                format!(
                    "reachable now{}{}",
                    deprecated(r.deprecated),
                    requires(&r.requires)
                ),
                Tone::Good,
            ),
        ]);
    }
    for p in &u.paths {
        let steps: Vec<&str> = p.steps.iter().map(|s| s.version.as_str()).collect();
        t.toned_row(vec![
            (p.target.version.clone(), Tone::Plain),
            (p.target.bundle.clone(), Tone::Plain),
            (p.target.catalog.clone(), Tone::Plain),
            (
                format!(
                    "{} step(s): {}{}{}",
                    steps.len(),
                    steps.join(" -> "),
                    deprecated(p.target.deprecated),
                    requires(&p.target.requires)
                ),
                Tone::Warn,
            ),
        ]);
    }
    for x in &u.unreachable {
        t.toned_row(vec![
            (x.version.clone(), Tone::Plain),
            (x.bundle.clone(), Tone::Plain),
            (x.catalog.clone(), Tone::Plain),
            (format!("unreachable: {}", x.message), Tone::Bad),
        ]);
    }
    if t.is_empty() {
        out.push_str("no other version is reachable and none is later\n");
    } else {
        out.push_table(&t, colour);
    }
    out
}
