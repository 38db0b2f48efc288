//! `olmv1 resolve`: answers what a ClusterExtension would install or upgrade to, from catalog
//! directories, JSONL files or URLs.
//!
//! Exit status: 0 resolved; 1 resolution failed (upstream's message alone on stderr); 2 bad flags,
//! unreadable ClusterExtension or catalogs.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::ExitCode,
};

use olmv1_api::v1::{
    CatalogFilter, ClusterExtension, UpgradeConstraintPolicy, conditions::LABEL_CATALOG_NAME,
};

use super::sources::parse_priorities;
use crate::{
    admin::terminal::escape_value as value,
    catalog::source::{CatalogSpec, load_catalogs},
    dependencies::{PlanError, PlanLimits, PlanRequest, plan},
    image::PullOptions,
    resolve::{CatalogInput, InstalledBundle, ResolveRequest, resolve_within},
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
    let request = match build_request(&args) {
        Ok(r) => r,
        Err(message) => return usage_error(&message),
    };
    let priorities = match parse_priorities(&args.priorities) {
        Ok(p) => p,
        Err(message) => return usage_error(&message),
    };
    let specs: Vec<CatalogSpec> = match args.catalogs.iter().map(|c| CatalogSpec::parse(c)).collect() {
        Ok(s) => s,
        Err(message) => return usage_error(&message),
    };
    for name in priorities.keys() {
        if !specs.iter().any(|s| &s.name == name) {
            return usage_error(&format!("--priority names unknown catalog {name:?}"));
        }
    }
    let loaded = match load_catalogs(&specs, &PullOptions::new(std::env::temp_dir())).await {
        Ok(l) => l,
        Err(message) => return usage_error(&message),
    };
    let inputs: Vec<CatalogInput> = loaded
        .into_iter()
        .map(|catalog| CatalogInput {
            priority: priorities.get(&catalog.name).copied().unwrap_or(0),
            labels: BTreeMap::from([(LABEL_CATALOG_NAME.to_string(), catalog.name.clone())]),
            available: true,
            name: catalog.name,
            index: catalog.index,
        })
        .collect();
    if args.with_dependencies {
        return print_plan(&request, &inputs, &args.output);
    }
    match resolve_within(&request, &inputs, &mut crate::admin::command_meter()) {
        Ok(resolution) => {
            if args.output == "json" {
                let out = serde_json::json!({
                    "bundle": {"name": resolution.bundle.name, "version": resolution.bundle.status_version},
                    "catalog": resolution.catalog,
                    "image": resolution.bundle.image,
                    "deprecated": resolution.bundle_deprecated(),
                });
                match crate::admin::terminal::to_json_line(&out) {
                    Ok(text) => outln!("{text}"),
                    Err(e) => return usage_error(&e.to_string()),
                }
            } else {
                outln!(
                    "{} {} {}",
                    value(&resolution.bundle.name),
                    value(&resolution.bundle.status_version),
                    value(&resolution.catalog)
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // One line: the resolver's message quotes catalog text.
            errln!("{}", value(&e.to_string()));
            ExitCode::from(1)
        }
    }
}

/// `--with-dependencies`: the plan, or why there is none (exit 1).
fn print_plan(request: &ResolveRequest, catalogs: &[CatalogInput], output: &str) -> ExitCode {
    let plan_request = PlanRequest {
        request,
        installed: &[],
        served_apis: &[],
        allow_changes: false,
        limits: PlanLimits {
            max_work: PlanLimits::default()
                .max_work
                .min(crate::admin::command_work_units()),
            ..PlanLimits::default()
        },
    };
    match plan(&plan_request, catalogs) {
        Ok(plan) => {
            if output == "json" {
                match crate::admin::terminal::to_json_line(&plan) {
                    Ok(text) => outln!("{text}"),
                    Err(e) => return usage_error(&e.to_string()),
                }
            } else {
                for step in &plan.plan {
                    let mut line = format!(
                        "{} {} {}",
                        value(&step.bundle),
                        value(&step.version),
                        value(&step.catalog)
                    );
                    if !step.required_by.is_empty() {
                        line.push_str(&format!(" (required by {})", value(&step.required_by.join(", "))));
                    }
                    outln!("{line}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Escaped: the explanation quotes catalog text (names, failure messages). Only the
            // conflict's explanation has lines of its own (src/dependencies escapes the values
            // it quotes); every other message is one line.
            match &e {
                PlanError::Unsatisfiable(_) => errln!("{e}"),
                _ => errln!("{}", value(&e.to_string())),
            }
            ExitCode::from(1)
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    errln!("olmv1 resolve: {message}");
    ExitCode::from(2)
}

fn build_request(args: &ResolveArgs) -> Result<ResolveRequest, String> {
    let (mut filter, mut installed) = match &args.file {
        Some(path) => read_cluster_extension(path)?,
        None => (CatalogFilter::default(), None),
    };
    if let Some(p) = &args.package {
        filter.package_name = p.clone();
    }
    if filter.package_name.is_empty() {
        return Err("--package (or -f with spec.source.catalog.packageName) is required".to_string());
    }
    if let Some(v) = &args.version {
        filter.version = Some(v.clone());
    }
    if !args.channels.is_empty() {
        filter.channels = args.channels.clone();
    }
    if let Some(p) = &args.upgrade_constraint_policy {
        filter.upgrade_constraint_policy = if p == "SelfCertified" {
            UpgradeConstraintPolicy::SelfCertified
        } else {
            UpgradeConstraintPolicy::CatalogProvided
        };
    }
    if let Some(spec) = &args.installed {
        let (name, version) = spec
            .split_once('@')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("--installed must be BUNDLE_NAME@VERSION, got {spec:?}"))?;
        installed = Some(InstalledBundle {
            name: name.to_string(),
            version: version.to_string(),
            release: None,
        });
    }
    Ok(ResolveRequest {
        package: filter.package_name,
        version_range: filter.version,
        channels: filter.channels,
        selector: filter.selector,
        upgrade_constraint_policy: filter.upgrade_constraint_policy,
        installed,
    })
}

/// Reads `spec.source.catalog` and `status.install.bundle` of a ClusterExtension YAML file.
fn read_cluster_extension(path: &Path) -> Result<(CatalogFilter, Option<InstalledBundle>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    check_is_cluster_extension(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let ext: ClusterExtension = match serde_saphyr::from_str(&text) {
        Ok(ext) => ext,
        // Upstream's current API leaves optional what ours requires (serviceAccount): then only
        // the parts resolution needs are read.
        Err(full_error) => {
            return read_catalog_parts(path, &text)
                .map_err(|_| format!("{}: not a ClusterExtension: {full_error}", path.display()));
        }
    };
    let filter = ext
        .spec
        .source
        .catalog
        .clone()
        .ok_or_else(|| format!("{}: spec.source.catalog is required", path.display()))?;
    let installed = ext
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| InstalledBundle {
            name: i.bundle.name.clone(),
            version: i.bundle.version.clone(),
            release: i.bundle.release.clone(),
        });
    Ok((filter, installed))
}

/// Refuses what the API server would: another kind or apiVersion, and fields the
/// ClusterExtension schema does not have (strict field validation).
fn check_is_cluster_extension(text: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let field = |k: &str| value.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if kind != "ClusterExtension" || api_version != "olm.operatorframework.io/v1" {
        return Err(format!(
            "kind {kind:?} of apiVersion {api_version:?} is not a ClusterExtension (olm.operatorframework.io/v1)"
        ));
    }
    let crd = olmv1_api::crd::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "ClusterExtension")
        .ok_or("the ClusterExtension CRD is missing from this build")?;
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let mut unknown = Vec::new();
    unknown_fields(&schema, &value, "", &mut unknown);
    match unknown.as_slice() {
        [] => Ok(()),
        fields => Err(format!(
            "strict decoding error: {}",
            fields
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Collects the paths of `value` that `schema` (an OpenAPI v3 schema as JSON) does not define.
fn unknown_fields(schema: &serde_json::Value, value: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::Value::Bool(true)) {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            let properties = schema.get("properties").and_then(|p| p.as_object());
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                return; // an open object (e.g. metadata)
            }
            for (key, child) in map {
                // The schema of a CRD describes spec and status; the object's header is the API's.
                if at.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(child_schema) => unknown_fields(child_schema, child, &path, out),
                    None => out.push(path),
                }
            }
        }
        serde_json::Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item_schema, item, &format!("{at}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// `spec.source.catalog` and `status.install.bundle` read from any YAML object.
fn read_catalog_parts(path: &Path, text: &str) -> Result<(CatalogFilter, Option<InstalledBundle>), String> {
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let catalog = value
        .pointer("/spec/source/catalog")
        .cloned()
        .ok_or("no spec.source.catalog")?;
    let filter: CatalogFilter = serde_json::from_value(catalog).map_err(|e| e.to_string())?;
    let installed = match value.pointer("/status/install/bundle") {
        None => None,
        Some(b) => {
            let field = |k: &str| b.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let (Some(name), Some(version)) = (field("name"), field("version")) else {
                return Err(format!(
                    "{}: status.install.bundle needs name and version",
                    path.display()
                ));
            };
            Some(InstalledBundle {
                name,
                version,
                release: field("release"),
            })
        }
    };
    Ok((filter, installed))
}
#[cfg(test)]
mod tests {
    use super::*;

    const EXTENSION: &str = "apiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata: {name: e, labels: {a: b}}\nspec:\n  namespace: ns\n  serviceAccount: {name: sa}\n  source:\n    sourceType: Catalog\n    catalog: {packageName: p, version: '>=1.0.0'}\n";

    #[test]
    fn a_cluster_extension_file_is_checked_as_strictly_as_the_api_server() {
        check_is_cluster_extension(EXTENSION).unwrap();
        let typo = EXTENSION.replace("packageName: p,", "packageName: p, vesrion: '1',");
        assert_eq!(
            check_is_cluster_extension(&typo).unwrap_err(),
            "strict decoding error: unknown field \"spec.source.catalog.vesrion\""
        );
        let extra = format!("{EXTENSION}  bogus: true\n");
        assert!(
            check_is_cluster_extension(&extra)
                .unwrap_err()
                .contains("\"spec.bogus\"")
        );
        let other_kind = EXTENSION.replace("kind: ClusterExtension", "kind: ClusterCatalog");
        assert!(check_is_cluster_extension(&other_kind).unwrap_err().contains(
            "kind \"ClusterCatalog\" of apiVersion \"olm.operatorframework.io/v1\" is not a ClusterExtension"
        ));
        let other_version = EXTENSION.replace("/v1\n", "/v2\n");
        assert!(check_is_cluster_extension(&other_version).is_err());
    }
}
