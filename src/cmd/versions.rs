//! `olmv1 versions PACKAGE`: every channel with its bundles, edges and deprecations.

use std::process::ExitCode;

use super::sources::{Output, colour, fail, print_json, print_text, refuse, warn_unreadable};
use crate::admin::sources::CatalogSources;
use crate::admin::{
    command_meter,
    versions::{PackageVersions, render_text, versions},
};

/// Arguments of `olmv1 versions`.
#[derive(clap::Args, Debug)]
pub struct VersionsArgs {
    /// The package.
    pub package: String,
    #[command(flatten)]
    pub sources: CatalogSources,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Runs `olmv1 versions`.
pub async fn run(args: VersionsArgs) -> ExitCode {
    let catalogs = match args.sources.load().await {
        Ok(c) => c,
        Err(e) => return fail("versions", &e.to_string()),
    };
    warn_unreadable("versions", &catalogs);
    let mut meter = command_meter();
    let mut found: Vec<PackageVersions> = Vec::new();
    for c in &catalogs {
        let Some(package) = c.input.index.package(&args.package) else {
            continue;
        };
        match versions(&c.input.name, package, &mut meter) {
            Ok(v) => found.push(v),
            Err(e) => return refuse("versions", &e),
        }
    }
    if found.is_empty() {
        return fail("versions", &format!("no catalog has package {:?}", args.package));
    }
    if args.output == Output::Json {
        return print_json(&found, &mut meter);
    }
    print_text(render_text(&found, colour(), &mut meter))
}
