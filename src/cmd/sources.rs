//! Flags shared by the admin commands: where catalogs come from (`admin::sources::CatalogSources`
//! is their flags: the cluster's ClusterCatalogs by default, or `--catalog`/`--image`), the
//! request overrides, and the output format.

use std::{collections::BTreeMap, io::IsTerminal, process::ExitCode};

use kube::Client;
use olmv1_api::v1::UpgradeConstraintPolicy;

use crate::{
    admin::{
        cluster::SourcedCatalog,
        output,
        request::{self, RequestOverrides},
        sources::{self, CatalogSources},
        terminal::TerminalText,
    },
    meter::{Exhausted, Meter, Refused},
    resolve::{CatalogInput, DependencyMode, ResolveRequest},
};

/// `--dependencies` of the admin commands that give the controller's verdict: the controller's
/// flag, with its default.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct DependencyArgs {
    /// Bundles that declare dependencies, as the controller's flag of the same name treats them:
    /// `check` installs them once their requirements are installed, `refuse` refuses them as
    /// upstream does.
    #[arg(long = "dependencies", value_enum, default_value_t)]
    pub mode: DependencyMode,
}

/// `NAME=N` flags.
pub fn parse_priorities(flags: &[String]) -> Result<BTreeMap<String, i32>, String> {
    sources::parse_priorities(flags).map_err(|e| e.to_string())
}

/// A client from KUBECONFIG or the in-cluster configuration.
pub async fn kube_client() -> Result<Client, String> {
    sources::kube_client().await.map_err(|e| e.to_string())
}

/// `KEY=VALUE` flags (`--catalog-label`).
pub fn label_map(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("--catalog-label must be KEY=VALUE, got {pair:?}"))?;
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(labels)
}

/// What to resolve, as flags: an extension of the cluster, or a package with overrides.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RequestArgs {
    /// The package (required without EXTENSION).
    #[arg(long)]
    pub package: Option<String>,

    /// The installed bundle: a version of the package (e.g. `0.5.0`), a bundle name, or
    /// `BUNDLE_NAME@VERSION`.
    #[arg(long, value_name = "VERSION|BUNDLE")]
    pub installed: Option<String>,

    /// A version range (Masterminds syntax).
    #[arg(long)]
    pub version: Option<String>,

    /// A channel. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,

    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,
}

impl From<&RequestArgs> for RequestOverrides {
    fn from(args: &RequestArgs) -> Self {
        RequestOverrides {
            package: args.package.clone(),
            installed: args.installed.clone(),
            version: args.version.clone(),
            channels: args.channels.clone(),
            upgrade_constraint_policy: upgrade_constraint_policy(args.upgrade_constraint_policy.as_deref()),
        }
    }
}

/// `--upgrade-constraint-policy` (its value parser admits the two names).
pub fn upgrade_constraint_policy(flag: Option<&str>) -> Option<UpgradeConstraintPolicy> {
    flag.map(|p| match p {
        "SelfCertified" => UpgradeConstraintPolicy::SelfCertified,
        _ => UpgradeConstraintPolicy::CatalogProvided,
    })
}

/// What `explain` and `upgrades` start from ([`request::load_request`]).
pub async fn load_request(
    extension: Option<&str>,
    flags: &RequestArgs,
    sources: &CatalogSources,
) -> Result<(ResolveRequest, Vec<CatalogInput>), String> {
    request::load_request(extension, &flags.into(), sources)
        .await
        .map_err(|e| e.to_string())
}

/// Whether colours may be used on stdout.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Prints `value` as indented JSON (no raw control character; the strings exact), charged to
/// the command's `meter` as it is made; refused, with nothing printed and one sentence naming the
/// command, when it does not fit the output limit (`--max-output-bytes`) or the meter runs out.
pub fn print_json(value: &impl serde::Serialize, meter: &mut Meter) -> ExitCode {
    match output::json(value, meter) {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&output::command(), &e.to_string()),
    }
}

/// Prints text rendered for the terminal; when the command's meter ran out while it was rendered,
/// prints nothing of it and refuses (one sentence naming the command and the budget).
pub fn print_text(text: Result<TerminalText, Exhausted>) -> ExitCode {
    match text {
        Ok(text) => {
            super::write_terminal(&text);
            ExitCode::SUCCESS
        }
        Err(e) => refuse(&output::command(), &Refused::new("rendering the output", e)),
    }
}

/// Prints `olmv1 COMMAND: MESSAGE` on stderr; exit status 2 (bad input or unreadable sources).
pub fn fail(command: &str, message: &str) -> ExitCode {
    errln!("olmv1 {command}: {message}");
    ExitCode::from(2)
}

/// Prints `olmv1 COMMAND: MESSAGE` on stderr for work refused by the command's meter (one
/// sentence naming what and the limit, its catalog text escaped); exit status 2, as for any
/// input olmv1 does not take.
pub fn refuse(command: &str, refused: &Refused) -> ExitCode {
    fail(
        command,
        &crate::admin::terminal::escape_value(&refused.to_string()),
    )
}

/// Warns on stderr about catalogs whose content could not be read.
pub fn warn_unreadable(command: &str, catalogs: &[SourcedCatalog]) {
    for c in catalogs {
        if let Some(problem) = &c.problem {
            errln!(
                "olmv1 {command}: warning: catalog {:?} skipped: {}",
                c.input.name,
                crate::admin::terminal::escape_value(problem)
            );
        }
    }
}

/// Output formats of the listing commands.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Output {
    /// Aligned tables for people.
    #[default]
    Text,
    /// JSON with the documented fields (docs/cli.md).
    Json,
}
