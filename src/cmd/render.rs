//! `olmv1 render`: prints the manifests a registry+v1 bundle would apply, as upstream OLM v1
//! renders them, with no cluster (loaded, rendered and formatted by `admin::render`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::admin::render::{OutputFormat, RenderOptions, render_to_string};
use crate::bundle::render::WebhookProvider;
use crate::image::BundleLimitArgs;

/// Arguments of `olmv1 render`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["bundle", "catalog"])))]
pub struct RenderArgs {
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

/// Runs `olmv1 render`: exit status 0 with the objects on stdout, or 1 with one error on stderr.
pub async fn run(args: RenderArgs) -> ExitCode {
    let options = RenderOptions {
        bundle: args.bundle,
        catalog: args.catalog,
        bundle_name: args.bundle_name,
        namespace: args.namespace,
        watch_namespace: args.watch_namespace,
        config: args.config,
        webhook_provider: args.webhook_provider,
        operator_conditions: args.operator_conditions,
        output: args.output,
        cache_dir: args.cache_dir,
        insecure_registry: args.insecure_registry,
        ca_file: args.ca_file,
        auth_file: args.auth_file,
        registries_conf: args.registries_conf,
        limits: args.limits.limits(),
    };
    match render_to_string(&options).await {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            errln!("olmv1 render: {message}");
            ExitCode::from(1)
        }
    }
}
