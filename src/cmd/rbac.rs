//! `olmv1 rbac`: the ServiceAccount, roles and bindings an installer needs for a package or an
//! installed extension, as YAML for `kubectl apply -f -`; `--diff` shows what an upgrade changes.
//! The flags only: the installer is computed in `admin::installer` (its rules in `admin::rbac`).

use std::process::ExitCode;

use super::sources::{fail, kube_client, label_map};
use crate::admin::installer::{self, PackageInstall, RbacFor, RbacOptions};
use crate::admin::sources::CatalogSources;
use crate::bundle::render::WebhookProvider;
use crate::controller::cluster_extension::operator_conditions::OperatorConditionsMode;

/// Arguments of `olmv1 rbac`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["extension", "package", "diff"])))]
pub struct RbacArgs {
    /// An installed ClusterExtension: the RBAC covers upgrading it to what it resolves now (with
    /// the flags' overrides) and uninstalling what it has installed.
    pub extension: Option<String>,
    /// A package to install (with --namespace).
    #[arg(long, conflicts_with = "extension")]
    pub package: Option<String>,
    /// Show what upgrading this ClusterExtension (to --version, --channel) adds to and drops from
    /// its installer's permissions.
    #[arg(long, value_name = "EXTENSION", conflicts_with_all = ["extension", "package"])]
    pub diff: Option<String>,
    /// The ClusterExtension's name, for a package (default: the package name).
    #[arg(long, requires = "package")]
    pub name: Option<String>,
    /// The install namespace, for a package.
    #[arg(long, short = 'n', requires = "package")]
    pub namespace: Option<String>,
    /// The installer's ServiceAccount name (default: `<extension>-installer`, or the extension's).
    #[arg(long)]
    pub service_account: Option<String>,
    /// A version range (Masterminds syntax).
    #[arg(long)]
    pub version: Option<String>,
    /// A channel. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Only catalogs with this label, `KEY=VALUE`. Repeatable.
    #[arg(long = "catalog-label", value_name = "KEY=VALUE", requires = "package")]
    pub catalog_labels: Vec<String>,
    /// The namespace the operator watches (SingleNamespace/OwnNamespace), for a package.
    #[arg(long, value_name = "NS", requires = "package")]
    pub watch_namespace: Option<String>,
    /// Grant `escalate`/`bind` on the bundle's own roles instead of every rule they grant.
    #[arg(long)]
    pub allow_escalate: bool,
    /// Who provides webhook serving certificates (as the controller's flag of the same name).
    #[arg(long, value_enum, default_value = "cert-manager")]
    pub webhook_provider: WebhookProvider,
    /// The controller's --operator-conditions (default: as the controller's default decides,
    /// on when the OperatorCondition CRD is served).
    #[arg(long, value_enum)]
    pub operator_conditions: Option<OperatorConditionsMode>,
    /// The controller's namespace (where it records installed revisions).
    #[arg(long, env = "OLMV1_SYSTEM_NAMESPACE", default_value = "olmv1-system")]
    pub system_namespace: String,
    #[command(flatten)]
    pub sources: CatalogSources,
}

/// Runs `olmv1 rbac`.
pub async fn run(args: RbacArgs) -> ExitCode {
    match run_inner(&args).await {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("rbac", &e),
    }
}

async fn run_inner(args: &RbacArgs) -> Result<String, String> {
    let client = kube_client().await?;
    let what = if let Some(package) = &args.package {
        let namespace = args
            .namespace
            .clone()
            .ok_or("--namespace is required with --package")?;
        RbacFor::Package(PackageInstall {
            package: package.clone(),
            name: args.name.clone(),
            namespace,
            service_account: args.service_account.clone(),
            version: args.version.clone(),
            channels: args.channels.clone(),
            catalog_labels: label_map(&args.catalog_labels)?,
            watch_namespace: args.watch_namespace.clone(),
        })
    } else if let Some(name) = &args.diff {
        RbacFor::Diff {
            name: name.clone(),
            version: args.version.clone(),
            channels: args.channels.clone(),
        }
    } else {
        RbacFor::Extension {
            name: args
                .extension
                .clone()
                .ok_or("an EXTENSION, --package or --diff is required")?,
            service_account: args.service_account.clone(),
            version: args.version.clone(),
            channels: args.channels.clone(),
        }
    };
    let options = RbacOptions {
        allow_escalate: args.allow_escalate,
        webhook_provider: args.webhook_provider,
        operator_conditions: args.operator_conditions,
        system_namespace: args.system_namespace.clone(),
    };
    installer::rbac(&client, &what, &options, &args.sources)
        .await
        .map_err(|e| e.to_string())
}
