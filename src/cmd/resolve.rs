//! `olmv1 resolve`: answers what a ClusterExtension would install or upgrade to, from catalog
//! directories, JSONL files or URLs (the request and catalogs: `admin::resolve`).
//!
//! Exit status: 0 resolved; 1 resolution failed (upstream's message alone on stderr); 2 bad flags,
//! unreadable ClusterExtension or catalogs.

use std::{path::PathBuf, process::ExitCode};

use super::sources::upgrade_constraint_policy;
use crate::{
    admin::{
        command_meter,
        request::RequestOverrides,
        resolve::{build_request, load_inputs, plan_text, plan_with_dependencies, resolution_text},
        terminal::escape_value as value,
    },
    dependencies::PlanError,
    resolve::resolve_within,
};

/// Arguments of `olmv1 resolve`.
#[derive(clap::Args, Debug)]
pub struct ResolveArgs {
    /// A catalog: `[NAME=]DIR|FILE|URL` (FBC directory, JSONL file, or catalogd base URL whose
    /// `/api/v1/all` is fetched). The name defaults to the directory name, the file name without
    /// its extension, or the last path segment of the URL. Repeatable.
    #[arg(long = "catalog", value_name = "[NAME=]DIR|FILE|URL", required = true)]
    pub catalogs: Vec<String>,

    /// A ClusterExtension YAML file supplying package, version, channels, selector, policy and
    /// (from its status) the installed bundle. Other flags override it.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Option<PathBuf>,

    /// The package to resolve (required without -f).
    #[arg(long)]
    pub package: Option<String>,

    /// A version range (Masterminds syntax, e.g. ">=1.11, <1.13", "1.11.x", "~1.12").
    #[arg(long)]
    pub version: Option<String>,

    /// A channel to resolve from. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,

    /// The installed bundle, as `BUNDLE_NAME@VERSION`.
    #[arg(long, value_name = "BUNDLE_NAME@VERSION")]
    pub installed: Option<String>,

    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,

    /// A catalog priority, `NAME=N` (default 0). Repeatable.
    #[arg(long = "priority", value_name = "NAME=N")]
    pub priorities: Vec<String>,

    /// Output format.
    #[arg(short = 'o', long = "output", default_value = "text", value_parser = ["text", "json"])]
    pub output: String,

    /// Plan the package with its dependencies (OLM classic's rules, one bundle per package):
    /// one line per bundle, dependencies first; `-o json` gives `{"plan": [{package, bundle,
    /// version, catalog, requiredBy}]}`. No plan: exit 1 with the requirements that conflict.
    #[arg(long)]
    pub with_dependencies: bool,
}

/// Runs `olmv1 resolve`.
pub async fn run(args: ResolveArgs) -> ExitCode {
    let overrides = RequestOverrides {
        package: args.package.clone(),
        installed: args.installed.clone(),
        version: args.version.clone(),
        channels: args.channels.clone(),
        upgrade_constraint_policy: upgrade_constraint_policy(args.upgrade_constraint_policy.as_deref()),
    };
    let request = match build_request(args.file.as_deref(), &overrides) {
        Ok(r) => r,
        Err(message) => return usage_error(&message),
    };
    let inputs = match load_inputs(&args.catalogs, &args.priorities).await {
        Ok(inputs) => inputs,
        Err(message) => return usage_error(&message),
    };
    let json = args.output == "json";
    // One meter for the command's work over the catalogs and for its output.
    let mut meter = command_meter();
    let text = if args.with_dependencies {
        match plan_with_dependencies(&request, &inputs, &mut meter) {
            Ok(plan) => plan_text(&plan, json, &mut meter),
            Err(e) => {
                // Escaped: the explanation quotes catalog text (names, failure messages). Only the
                // conflict's explanation has lines of its own (src/dependencies escapes the values
                // it quotes); every other message is one line.
                match &e {
                    PlanError::Unsatisfiable(_) => errln!("{e}"),
                    _ => errln!("{}", value(&e.to_string())),
                }
                return ExitCode::from(1);
            }
        }
    } else {
        match resolve_within(&request, &inputs, &mut meter) {
            Ok(resolution) => resolution_text(&resolution, json, &mut meter),
            Err(e) => {
                // One line: the resolver's message quotes catalog text.
                errln!("{}", value(&e.to_string()));
                return ExitCode::from(1);
            }
        }
    };
    match text {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(&e.to_string()),
    }
}

fn usage_error(message: &str) -> ExitCode {
    errln!("olmv1 resolve: {message}");
    ExitCode::from(2)
}
