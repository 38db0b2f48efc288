//! Owns rendering: registry+v1 bundle -> the objects upstream would apply (pure).
//! May import api and bundle's loader; no I/O.
//!
//! registry+v1 bundle -> the plain Kubernetes objects upstream OLM v1 would apply.
//!
//! [`render`] is a pure function: refusals (`applier/provider.go`), configuration validation,
//! bundle validators, target namespaces (`render/render.go`) and the generators
//! (`render/registryv1/generators`) in upstream's order. Webhook and APIService certificates come
//! from cert-manager (upstream's default) or OpenShift's service CA ([`WebhookProvider`]). Owned
//! APIServices are rendered as OLM classic lays them out (upstream's generator exists but its
//! applier still refuses them: `apiServiceDefintions are not supported`). With
//! [`RenderOptions::operator_conditions`], the OperatorCondition OLM classic keeps for a bundle.

pub mod config;
pub mod generators;
pub mod names;
pub mod validators;

use std::collections::BTreeSet;

use serde_json::Value;

use crate::bundle::csv::{
    INSTALL_MODE_ALL_NAMESPACES, INSTALL_MODE_MULTI_NAMESPACE, INSTALL_MODE_OWN_NAMESPACE,
    INSTALL_MODE_SINGLE_NAMESPACE,
};
use crate::bundle::registry_v1::RegistryV1Bundle;

pub use config::{BundleConfig, DeploymentConfig};
pub use generators::WebhookProvider;

/// Why a bundle cannot be rendered. All variants are terminal: the same bundle and configuration
/// always fail the same way.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The bundle uses a feature OLM v1 does not support (`unsupported bundle: ...`).
    #[error("unsupported bundle: {0}")]
    Unsupported(String),
    /// `spec.config.inline` does not fit the bundle's configuration schema; the condition reason is
    /// `InvalidConfiguration`.
    #[error("invalid ClusterExtension configuration: invalid configuration: {0}")]
    InvalidConfiguration(String),
    /// The bundle fails a validator or a generator (upstream's messages, newline-joined).
    #[error("{0}")]
    InvalidBundle(String),
}

impl RenderError {
    /// Always true: neither a retry nor time fixes the bundle or the configuration.
    pub fn is_terminal(&self) -> bool {
        true
    }

    /// The `Progressing` condition reason for this error: `InvalidConfiguration` for a bad
    /// configuration, `Blocked` otherwise.
    pub fn reason(&self) -> &'static str {
        match self {
            RenderError::InvalidConfiguration(_) => olmv1_api::v1::conditions::REASON_INVALID_CONFIGURATION,
            _ => olmv1_api::v1::conditions::REASON_BLOCKED,
        }
    }
}

/// Renders `bundle` for installation into `install_namespace`, with the ClusterExtension's inline
/// configuration `config` (`spec.config.inline`; `None` when absent).
///
/// Returns the objects in apply order, each a JSON object with `apiVersion`, `kind` and
/// `metadata`. The default install mode is AllNamespaces when the bundle supports it;
/// SingleNamespace and OwnNamespace are chosen with `watchNamespace`. Webhook certificates come
/// from cert-manager; [`render_with_provider`] chooses.
pub fn render(
    bundle: &RegistryV1Bundle,
    install_namespace: &str,
    config: Option<&Value>,
) -> Result<Vec<Value>, RenderError> {
    render_with_provider(bundle, install_namespace, config, WebhookProvider::CertManager)
}

/// How the controller renders beyond the bundle and its configuration (its flags of the same
/// names): who provides webhook certificates, and whether each install gets an OperatorCondition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Who provides webhook serving certificates.
    pub webhook_provider: WebhookProvider,
    /// Render the OperatorCondition OLM classic keeps for a bundle (`--operator-conditions`):
    /// the object, its Role and RoleBinding, `OPERATOR_CONDITION_NAME` in every container.
    pub operator_conditions: bool,
}

/// [`render`] with webhook certificates from `webhook_provider`.
pub fn render_with_provider(
    bundle: &RegistryV1Bundle,
    install_namespace: &str,
    config: Option<&Value>,
    webhook_provider: WebhookProvider,
) -> Result<Vec<Value>, RenderError> {
    let options = RenderOptions {
        webhook_provider,
        ..RenderOptions::default()
    };
    render_with_options(bundle, install_namespace, config, options)
}

/// [`render`] as `options` say.
pub fn render_with_options(
    bundle: &RegistryV1Bundle,
    install_namespace: &str,
    config: Option<&Value>,
    options: RenderOptions,
) -> Result<Vec<Value>, RenderError> {
    let csv = &bundle.csv;
    if ![
        INSTALL_MODE_ALL_NAMESPACES,
        INSTALL_MODE_SINGLE_NAMESPACE,
        INSTALL_MODE_OWN_NAMESPACE,
    ]
    .iter()
    .any(|m| csv.supports(m))
    {
        return Err(RenderError::Unsupported(
            "bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes"
                .to_string(),
        ));
    }
    let bundle_config = config::parse_bundle_config(config, csv, install_namespace)
        .map_err(RenderError::InvalidConfiguration)?;

    let errors = validators::validate(bundle);
    if !errors.is_empty() {
        return Err(RenderError::InvalidBundle(errors.join("\n")));
    }

    let target_namespaces = match &bundle_config.watch_namespace {
        Some(ns) => vec![ns.clone()],
        None if csv.supports(INSTALL_MODE_ALL_NAMESPACES) => vec![String::new()],
        None => Vec::new(),
    };
    if let Err(e) = validate_target_namespaces(bundle, install_namespace, &target_namespaces) {
        return Err(RenderError::InvalidBundle(format!(
            "invalid option(s): invalid target namespaces [{}]: {e}",
            target_namespaces.join(" ")
        )));
    }

    let context = generators::RenderContext {
        bundle,
        install_namespace,
        target_namespaces,
        deployment_config: bundle_config.deployment_config.as_ref(),
        webhook_provider: options.webhook_provider,
        operator_conditions: options.operator_conditions,
    };
    generators::generate(&context).map_err(RenderError::InvalidBundle)
}

/// [`render`] with the watch namespace given directly: `None` for the bundle's default
/// (AllNamespaces), or the namespace to watch (the install namespace for OwnNamespace).
pub fn render_for_watch_namespace(
    bundle: &RegistryV1Bundle,
    install_namespace: &str,
    watch_namespace: Option<&str>,
) -> Result<Vec<Value>, RenderError> {
    let config = watch_namespace.map(|ns| serde_json::json!({ "watchNamespace": ns }));
    render(bundle, install_namespace, config.as_ref())
}

/// Upstream's `validateTargetNamespaces`.
fn validate_target_namespaces(
    bundle: &RegistryV1Bundle,
    install_namespace: &str,
    targets: &[String],
) -> Result<(), String> {
    let csv = &bundle.csv;
    let modes = validators::supported_modes_text(bundle);
    let set: BTreeSet<&str> = targets.iter().map(String::as_str).collect();
    match set.len() {
        0 => {
            return Err(if csv.supports(INSTALL_MODE_MULTI_NAMESPACE) {
                "at least one target namespace must be specified".to_string()
            } else {
                "exactly one target namespace must be specified".to_string()
            });
        }
        1 if set.contains("") => {
            if csv.supports(INSTALL_MODE_ALL_NAMESPACES) {
                return Ok(());
            }
            return Err(format!(
                "supported install modes {modes} do not support targeting all namespaces"
            ));
        }
        1 => {
            if targets[0] == install_namespace {
                if !csv.supports(INSTALL_MODE_OWN_NAMESPACE) {
                    return Err(format!(
                        "supported install modes {modes} do not support targeting own namespace"
                    ));
                }
                return Ok(());
            }
            if csv.supports(INSTALL_MODE_SINGLE_NAMESPACE) {
                return Ok(());
            }
        }
        _ => {
            if !csv.supports(INSTALL_MODE_OWN_NAMESPACE) && set.contains(install_namespace) {
                return Err(format!(
                    "supported install modes {modes} do not support targeting own namespace"
                ));
            }
            if csv.supports(INSTALL_MODE_MULTI_NAMESPACE) && !set.contains("") {
                return Ok(());
            }
        }
    }
    Err(format!(
        "supported install modes {modes} do not support target namespaces [{}]",
        targets.join(" ")
    ))
}
