//! `olmv1 install|upgrade|uninstall`: write ClusterExtensions as an admin would. `--dry-run`
//! prints the object and what the controller's resolver would install, and writes nothing.

use std::process::ExitCode;

use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use super::sources::{SourceArgs, fail, kube_client};
use crate::{
    admin::cluster::{self, check_readable},
    resolve::{ResolveRequest, resolve},
};

/// The field manager of the command line's server-side applies.
pub const FIELD_MANAGER: &str = "olmv1-cli";

/// Arguments of `olmv1 install`.
#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// The package to install.
    pub package: String,
    /// The ClusterExtension's name (default: the package name).
    #[arg(long)]
    pub name: Option<String>,
    /// The namespace the extension is installed into.
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// The ServiceAccount (in that namespace) the bundle is installed as.
    #[arg(long)]
    pub service_account: String,
    /// A version range (Masterminds syntax).
    #[arg(long)]
    pub version: Option<String>,
    /// A channel. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,
    /// Only catalogs with this label, `KEY=VALUE` (`spec.source.catalog.selector.matchLabels`).
    /// Repeatable.
    #[arg(long = "catalog-label", value_name = "KEY=VALUE")]
    pub catalog_labels: Vec<String>,
    /// Print the ClusterExtension and what would be installed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// Arguments of `olmv1 upgrade`.
#[derive(clap::Args, Debug)]
pub struct UpgradeArgs {
    /// The ClusterExtension.
    pub extension: String,
    /// The new version range (e.g. an exact version from `olmv1 upgrades`).
    #[arg(long)]
    pub version: Option<String>,
    /// The channels, replacing the current ones. Repeatable.
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Whether upgrades must follow catalog edges.
    #[arg(long, value_parser = ["CatalogProvided", "SelfCertified"])]
    pub upgrade_constraint_policy: Option<String>,
    /// Print the changed ClusterExtension and what would be installed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// Arguments of `olmv1 uninstall`.
#[derive(clap::Args, Debug)]
pub struct UninstallArgs {
    /// The ClusterExtension.
    pub extension: String,
    /// Print what would be removed; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The ClusterExtension `olmv1 install` writes.
pub fn extension_object(args: &InstallArgs) -> Result<Value, String> {
    let mut catalog = json!({"packageName": args.package});
    if !args.catalog_labels.is_empty() {
        let mut labels = serde_json::Map::new();
        for pair in &args.catalog_labels {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("--catalog-label must be KEY=VALUE, got {pair:?}"))?;
            labels.insert(k.to_string(), json!(v));
        }
        catalog["selector"] = json!({"matchLabels": labels});
    }
    if let Some(v) = &args.version {
        catalog["version"] = json!(v);
    }
    if !args.channels.is_empty() {
        catalog["channels"] = json!(args.channels);
    }
    if let Some(p) = &args.upgrade_constraint_policy {
        catalog["upgradeConstraintPolicy"] = json!(p);
    }
    Ok(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": args.name.as_deref().unwrap_or(&args.package)},
        "spec": {
            "namespace": args.namespace,
            "serviceAccount": {"name": args.service_account},
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    }))
}

/// Runs `olmv1 install`.
pub async fn install(args: InstallArgs) -> ExitCode {
    let object = match extension_object(&args) {
        Ok(o) => o,
        Err(e) => return fail("install", &e),
    };
    write_or_show("install", object, None, args.dry_run, &args.sources).await
}

/// Runs `olmv1 upgrade`.
pub async fn upgrade(args: UpgradeArgs) -> ExitCode {
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("upgrade", &e),
    };
    let current = match cluster::cluster_extension(&client, &args.extension).await {
        Ok(e) => e,
        Err(e) => return fail("upgrade", &e.to_string()),
    };
    let Some(filter) = current.spec.source.catalog.clone() else {
        return fail(
            "upgrade",
            &format!("ClusterExtension {:?} has no spec.source.catalog", args.extension),
        );
    };
    let mut catalog = match serde_json::to_value(&filter) {
        Ok(v) => v,
        Err(e) => return fail("upgrade", &e.to_string()),
    };
    if let Some(v) = &args.version {
        catalog["version"] = json!(v);
    }
    if !args.channels.is_empty() {
        catalog["channels"] = json!(args.channels);
    }
    if let Some(p) = &args.upgrade_constraint_policy {
        catalog["upgradeConstraintPolicy"] = json!(p);
    }
    let mut object = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": args.extension},
        "spec": {
            "namespace": current.spec.namespace,
            "source": {"sourceType": "Catalog", "catalog": catalog}
        }
    });
    if let Some(account) = &current.spec.service_account {
        object["spec"]["serviceAccount"] = json!(account);
    }
    let installed = cluster::installed_bundle(&current);
    write_or_show("upgrade", object, installed, args.dry_run, &args.sources).await
}

async fn write_or_show(
    command: &str,
    object: Value,
    installed: Option<crate::resolve::InstalledBundle>,
    dry_run: bool,
    sources: &SourceArgs,
) -> ExitCode {
    let ext: ClusterExtension = match serde_json::from_value(object.clone()) {
        Ok(e) => e,
        Err(e) => return fail(command, &format!("invalid ClusterExtension: {e}")),
    };
    let name = ext.metadata.name.clone().unwrap_or_default();
    if dry_run {
        match serde_saphyr::to_string(&object) {
            Ok(yaml) => out!("{yaml}"),
            Err(e) => return fail(command, &e.to_string()),
        }
        let request = match ResolveRequest::from_cluster_extension(&ext, installed) {
            Ok(r) => r,
            Err(e) => return fail(command, &e.to_string()),
        };
        let catalogs = match sources.load().await {
            Ok(c) => c,
            Err(e) => return fail(command, &e),
        };
        let selector = match crate::resolve::CatalogSelector::new(request.selector.as_ref()) {
            Ok(s) => s,
            Err(e) => return fail(command, &e),
        };
        if let Err(e) = check_readable(&catalogs, |c| selector.matches(&c.labels)) {
            return fail(command, &e.to_string());
        }
        let inputs: Vec<_> = catalogs.into_iter().map(|c| c.input).collect();
        return match resolve(&request, &inputs) {
            Ok(r) => {
                outln!(
                    "# dry run: would install {} {} from catalog {}",
                    r.bundle.name,
                    r.bundle.status_version,
                    r.catalog
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                outln!("# dry run: resolution fails: {e}");
                ExitCode::from(1)
            }
        };
    }
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail(command, &e),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match Api::<ClusterExtension>::all(client)
        .patch(&name, &params, &Patch::Apply(&object))
        .await
    {
        Ok(_) => {
            outln!("clusterextension/{name} applied");
            ExitCode::SUCCESS
        }
        Err(e) => fail(command, &format!("applying ClusterExtension {name:?}: {e}")),
    }
}

/// Runs `olmv1 uninstall`.
pub async fn uninstall(args: UninstallArgs) -> ExitCode {
    let client = match kube_client().await {
        Ok(c) => c,
        Err(e) => return fail("uninstall", &e),
    };
    let current = match cluster::cluster_extension(&client, &args.extension).await {
        Ok(e) => e,
        Err(e) => return fail("uninstall", &e.to_string()),
    };
    let installed = cluster::installed_bundle(&current)
        .map(|b| format!("{} {}", b.name, b.version))
        .unwrap_or_else(|| "nothing installed".into());
    if args.dry_run {
        outln!(
            "# dry run: would delete clusterextension/{} ({installed}) and the objects it installed in namespace {}",
            args.extension,
            current.spec.namespace
        );
        return ExitCode::SUCCESS;
    }
    match Api::<ClusterExtension>::all(client)
        .delete(&args.extension, &DeleteParams::default())
        .await
    {
        Ok(_) => {
            outln!("clusterextension/{} deleted ({installed})", args.extension);
            ExitCode::SUCCESS
        }
        Err(e) => fail(
            "uninstall",
            &format!("deleting ClusterExtension {:?}: {e}", args.extension),
        ),
    }
}
