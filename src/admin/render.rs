//! `olmv1 render`'s workflow: the bundle (a directory, an image pulled, or a catalog's
//! `olm.bundle.object`s), its inline configuration, the manifests upstream OLM v1 would apply,
//! as a YAML stream or a JSON `List`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bundle::registry_v1::RegistryV1Bundle;
use crate::bundle::render::{self, WebhookProvider, render_with_options};
use crate::image::{
    BundleLimitArgs, PullOptions, RegistriesConf, RegistryConfig, RegistryOptions, pull_to_dir,
};

/// Output formats of `olmv1 render`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// A YAML stream, one document per object.
    Yaml,
    /// A `v1` `List` holding the objects.
    Json,
}

/// What to render, and how (`olmv1 render`'s flags).
#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["bundle", "catalog"])))]
pub struct RenderOptions {
    /// The bundle: an unpacked bundle directory, or an image reference to pull.
    #[arg(long, value_name = "DIR|IMAGE")]
    pub bundle: Option<String>,
    /// A file-based catalog directory holding the bundle (rendered from its `olm.bundle.object`
    /// properties); needs --bundle-name.
    #[arg(long, value_name = "DIR", requires = "bundle_name")]
    pub catalog: Option<PathBuf>,
    /// The bundle's name in the catalog, e.g. `etcdoperator.v0.9.4`.
    #[arg(long, value_name = "NAME", requires = "catalog")]
    pub bundle_name: Option<String>,
    /// The install namespace (`spec.namespace` of the ClusterExtension).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: String,
    /// The namespace to watch (SingleNamespace, or OwnNamespace when equal to --namespace);
    /// default: all namespaces.
    #[arg(long, value_name = "NS")]
    pub watch_namespace: Option<String>,
    /// Inline bundle configuration (`spec.config.inline`) as JSON, or `@FILE`.
    #[arg(long, value_name = "JSON")]
    pub config: Option<String>,
    /// Who provides webhook serving certificates: cert-manager, or OpenShift's service CA.
    #[arg(long, value_enum, default_value = "cert-manager")]
    pub webhook_provider: WebhookProvider,
    /// Also the OperatorCondition the controller keeps for the bundle (as with its
    /// --operator-conditions on): the object, its Role and RoleBinding, OPERATOR_CONDITION_NAME.
    #[arg(long)]
    pub operator_conditions: bool,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "yaml")]
    pub output: OutputFormat,
    /// Where pulled images are unpacked (default: a directory under the system cache dir).
    #[arg(long, value_name = "DIR", env = "OLMV1_IMAGE_CACHE")]
    pub cache_dir: Option<PathBuf>,
    /// A registry (`host[:port]`) that may be reached over plain HTTP; repeatable.
    #[arg(long, value_name = "HOST")]
    pub insecure_registry: Vec<String>,
    /// Extra trusted CA certificates (PEM file or directory) for registries.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// A Docker-style auth file (`{"auths": {...}}`) with registry credentials.
    #[arg(long, value_name = "PATH")]
    pub auth_file: Option<PathBuf>,
    /// containers-registries.conf(5) file: registry mirrors, remapped, blocked and insecure
    /// registries for image pulls (default: /etc/containers/registries.conf when present).
    #[arg(long, value_name = "PATH", env = "CONTAINERS_REGISTRIES_CONF")]
    pub registries_conf: Option<PathBuf>,
    /// What a bundle image or directory may hold.
    #[command(flatten)]
    pub limits: BundleLimitArgs,
}

/// Loads, renders and formats; the error is one sentence.
pub async fn render_to_string(args: &RenderOptions) -> Result<String, String> {
    let bundle = load_bundle(args).await?;
    let config = inline_config(args)?;
    let options = render::RenderOptions {
        webhook_provider: args.webhook_provider,
        operator_conditions: args.operator_conditions,
    };
    let objects =
        render_with_options(&bundle, &args.namespace, config.as_ref(), options).map_err(|e| e.to_string())?;
    format_objects(&objects, args.output)
}

async fn load_bundle(args: &RenderOptions) -> Result<RegistryV1Bundle, String> {
    if let (Some(catalog), Some(name)) = (&args.catalog, &args.bundle_name) {
        return load_from_catalog(catalog, name);
    }
    let Some(source) = &args.bundle else {
        return Err("one of --bundle or --catalog is required".to_string());
    };
    let limits = args.limits.limits();
    let path = Path::new(source);
    if path.symlink_metadata().is_ok() || source.starts_with(['/', '.']) {
        return RegistryV1Bundle::from_dir_within(path, limits.max_file_bytes)
            .map_err(|e| format!("bundle {source:?}: {e}"));
    }
    if let Err(crate::image::ImageError::InvalidReference { reason, .. }) =
        crate::image::ImageReference::parse(source)
    {
        return Err(format!(
            "bundle {source:?}: no such directory, and not an image reference either ({reason})"
        ));
    }
    let options = PullOptions {
        registry: RegistryConfig {
            registries_conf: RegistriesConf::configured(args.registries_conf.as_deref())
                .map_err(|e| e.to_string())?,
            ..RegistryOptions {
                insecure_registries: args.insecure_registry.clone(),
                ca_paths: args.ca_file.as_deref().into_iter().collect(),
                auth_file: args.auth_file.as_deref(),
            }
            .config()?
        },
        limits,
        ..PullOptions::new(cache_dir(args))
    };
    let pulled = pull_to_dir(source, &options).await.map_err(|e| e.to_string())?;
    RegistryV1Bundle::from_dir_within(&pulled.dir, limits.max_file_bytes)
        .map_err(|e| format!("bundle image {source:?}: {e}"))
}

fn cache_dir(args: &RenderOptions) -> PathBuf {
    if let Some(dir) = &args.cache_dir {
        return dir.clone();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("olmv1").join("images")
}

/// Finds bundle `name` in the catalog directory and loads it from its `olm.bundle.object`s.
fn load_from_catalog(catalog: &Path, name: &str) -> Result<RegistryV1Bundle, String> {
    let mut found: Option<crate::catalog::Bundle> = None;
    crate::catalog::for_each_dir_meta(catalog, |meta| {
        if found.is_none() && &*meta.schema == crate::catalog::SCHEMA_BUNDLE && &*meta.name == name {
            let bundle: crate::catalog::Bundle =
                serde_json::from_slice(&meta.blob).map_err(|e| crate::catalog::CatalogError::Malformed {
                    location: meta.location(),
                    message: e.to_string(),
                })?;
            found = Some(bundle);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let bundle = found.ok_or_else(|| format!("bundle {name:?} not found in catalog {catalog:?}"))?;
    RegistryV1Bundle::from_catalog_bundle(&bundle.package, &bundle.name, &bundle.properties)
        .map_err(|e| e.to_string())
}

/// `--config` (JSON text or `@file`) with `--watch-namespace` folded in.
fn inline_config(args: &RenderOptions) -> Result<Option<Value>, String> {
    let mut config = match &args.config {
        None => None,
        Some(text) => {
            let text = match text.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|e| format!("reading --config file {file:?}: {e}"))?,
                None => text.clone(),
            };
            Some(
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| format!("--config is not valid JSON: {e}"))?,
            )
        }
    };
    if let Some(ns) = &args.watch_namespace {
        match config.get_or_insert_with(|| serde_json::json!({})) {
            Value::Object(map) => {
                map.insert("watchNamespace".to_string(), Value::String(ns.clone()));
            }
            _ => return Err("--watch-namespace needs --config to be a JSON object".to_string()),
        }
    }
    Ok(config)
}

/// A YAML stream (`---` before each object) or a JSON `List`.
pub fn format_objects(objects: &[Value], format: OutputFormat) -> Result<String, String> {
    match format {
        OutputFormat::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            crate::admin::terminal::to_json_pretty(&list)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string())
        }
        OutputFormat::Yaml => crate::admin::terminal::yaml_stream(objects).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::UnpackLimits;

    fn options() -> RenderOptions {
        RenderOptions {
            bundle: None,
            catalog: None,
            bundle_name: None,
            namespace: "ns".into(),
            watch_namespace: None,
            config: None,
            webhook_provider: WebhookProvider::default(),
            operator_conditions: false,
            output: OutputFormat::Yaml,
            cache_dir: None,
            insecure_registry: Vec::new(),
            ca_file: None,
            auth_file: None,
            registries_conf: None,
            limits: BundleLimitArgs {
                max_unpacked_bytes: UnpackLimits::BUNDLE.max_total_bytes,
                max_unpacked_entries: UnpackLimits::BUNDLE.max_entries,
                max_file_bytes: UnpackLimits::BUNDLE.max_file_bytes,
            },
        }
    }

    #[test]
    fn the_watch_namespace_is_folded_into_the_inline_configuration() {
        let config = |config: Option<&str>, watch: Option<&str>| {
            inline_config(&RenderOptions {
                config: config.map(str::to_string),
                watch_namespace: watch.map(str::to_string),
                ..options()
            })
        };
        assert_eq!(config(None, None).unwrap(), None);
        assert_eq!(
            config(Some(r#"{"a":1}"#), Some("w")).unwrap(),
            Some(serde_json::json!({"a": 1, "watchNamespace": "w"}))
        );
        assert_eq!(
            config(None, Some("w")).unwrap(),
            Some(serde_json::json!({"watchNamespace": "w"}))
        );
        assert!(
            config(Some("[1]"), Some("w"))
                .unwrap_err()
                .contains("JSON object")
        );
        assert!(
            config(Some("{"), None)
                .unwrap_err()
                .starts_with("--config is not valid JSON")
        );
    }

    #[tokio::test]
    async fn a_missing_directory_that_is_no_reference_either_says_both() {
        let err = render_to_string(&RenderOptions {
            bundle: Some("no such dir".into()),
            ..options()
        })
        .await
        .unwrap_err();
        assert!(
            err.starts_with("bundle \"no such dir\": no such directory, and not an image reference either"),
            "{err}"
        );
    }
}
