//! The identity bundle content is read and written with, chosen here and nowhere else: a
//! ClusterExtension's service account (the default, least privilege), or the controller's own
//! when the admin chose upstream v1.11's model (`--install-identity controller`). In the
//! default mode an extension without `spec.serviceAccount` is not installed at all.
//!
//! Tokens come from the TokenRequest API, are cached per service account and renewed when less
//! than a tenth of their lifetime is left, as upstream's token getter did. A client built here
//! carries only the bearer token: none of the controller's own credentials.
//!
//! Every service account's client sends its requests over one connection pool to the API server
//! (TLS without a client certificate; the identity is the bearer token each request carries):
//! a pool per service account kept an idle TLS connection, with its buffers, per extension.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use hyper_util::{
    client::legacy::{Client as ConnectionPool, connect::HttpConnector},
    rt::TokioExecutor,
};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::ResourceExt;
use kube::{
    Api, Client, Config,
    api::PostParams,
    client::{Body, ConfigExt, retry::RetryPolicy},
    config::AuthInfo,
};
use olmv1_api::v1::ClusterExtension;
use tokio::sync::RwLock;
use tower::{BoxError, ServiceBuilder, retry::RetryLayer};

use super::preflight::ServiceAccountRef;
use crate::{go_format::go_quote, leader::Leadership};

/// How long a requested token lives.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// The ServiceAccount (and role and binding) name of the installer `olmv1 install` creates for
/// extension `extension`.
pub fn installer_name(extension: &str) -> String {
    format!("{extension}-installer")
}

/// Errors getting a client that acts as a service account.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The service account does not exist (or its namespace does not): upstream v1.10's text.
    #[error(
        "operation cannot proceed due to the following validation error(s): service account {} not found in namespace {}",
        go_quote(.name),
        go_quote(.namespace)
    )]
    ServiceAccountNotFound { namespace: String, name: String },
    /// The extension names no service account and the controller installs only as one.
    #[error(
        "ClusterExtension {extension:?} is not installed because it sets no spec.serviceAccount: \
         apply the installer that \"olmv1 rbac {extension}\" prints and set spec.serviceAccount.name \
         to it (\"olmv1 install\" does both), or run the controller with --install-identity controller \
         to install with its own identity as upstream does"
    )]
    NoServiceAccount { extension: String },
    /// The TokenRequest failed for another reason.
    #[error("failed to get a token for service account {namespace}/{name}: {source}")]
    TokenRequest {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The TokenRequest answer carried no token: never fall back to an anonymous client.
    #[error("the TokenRequest for service account {namespace}/{name} returned no token")]
    EmptyToken { namespace: String, name: String },
    /// A client could not be built from the token.
    #[error("failed to build a client for service account {namespace}/{name}: {source}")]
    Client {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl IdentityError {
    /// An extension naming no service account waits for its spec to change. A missing service
    /// account needs the admin to act too, but is retried: the admin may create it at any time
    /// and nothing else would bring the extension back.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::NoServiceAccount { .. })
    }
}

/// Whose identity writes bundle content (`olmv1 controller --install-identity`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InstallIdentity {
    /// Each extension's spec.serviceAccount; an extension without one is not installed.
    #[default]
    ServiceAccount,
    /// The controller's own identity, as upstream v1.11: spec.serviceAccount is ignored.
    Controller,
}

/// Who writes one extension's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installer {
    /// The extension's service account.
    ServiceAccount(ServiceAccountRef),
    /// The controller itself; `ignored` is the spec.serviceAccount.name it does not use.
    Controller { ignored: Option<String> },
}

impl InstallIdentity {
    /// Who installs `ext` in this mode, or why nothing may be installed.
    pub fn installer_of(self, ext: &ClusterExtension) -> Result<Installer, IdentityError> {
        match (self, ext.spec.service_account_name()) {
            (Self::ServiceAccount, Some(name)) => Ok(Installer::ServiceAccount(ServiceAccountRef::new(
                ext.spec.namespace.as_str(),
                name,
            ))),
            (Self::ServiceAccount, None) => Err(IdentityError::NoServiceAccount {
                extension: ext.name_any(),
            }),
            (Self::Controller, ignored) => Ok(Installer::Controller {
                ignored: ignored.map(str::to_string),
            }),
        }
    }
}

impl Installer {
    /// The account the permission preflight reviews before an apply. None for the controller:
    /// upstream's model grants it everything a bundle may hold (the controller-identity install
    /// manifest), and it has no preflight either.
    pub fn reviewed_account(&self) -> Option<&ServiceAccountRef> {
        match self {
            Self::ServiceAccount(account) => Some(account),
            Self::Controller { .. } => None,
        }
    }

    /// Names the installer in a fingerprint of what was applied: a change of installer is a
    /// change of what a full apply depends on. (Not a valid ServiceAccount name for the
    /// controller, so it never equals one.)
    pub fn fingerprint_part(&self) -> &str {
        match self {
            Self::ServiceAccount(account) => &account.name,
            Self::Controller { .. } => "(controller)",
        }
    }
}

/// Clients for installers: each service account's, and the controller's own in upstream's model.
#[derive(Clone)]
pub struct InstallerClients {
    /// The mode the admin chose.
    pub identity: InstallIdentity,
    /// The controller's own client (only handed out in [`InstallIdentity::Controller`]).
    controller: Client,
    service_accounts: ServiceAccountClients,
}

impl InstallerClients {
    /// Installs with `identity`: the controller's own client is `controller`.
    pub fn new(
        identity: InstallIdentity,
        controller: Client,
        service_accounts: ServiceAccountClients,
    ) -> Self {
        Self {
            identity,
            controller,
            service_accounts,
        }
    }

    /// Who installs `ext` (see [`InstallIdentity::installer_of`]).
    pub fn installer_of(&self, ext: &ClusterExtension) -> Result<Installer, IdentityError> {
        self.identity.installer_of(ext)
    }

    /// A client acting as `installer`.
    pub async fn client_for(&self, installer: &Installer) -> Result<Client, IdentityError> {
        match installer {
            Installer::ServiceAccount(account) => {
                self.service_accounts
                    .client_for(&account.namespace, &account.name)
                    .await
            }
            Installer::Controller { .. } => Ok(self.controller.clone()),
        }
    }

    /// Forgets what is kept for `installer` (its extension is gone).
    pub async fn forget(&self, installer: &Installer) {
        if let Installer::ServiceAccount(account) = installer {
            self.service_accounts
                .forget(&account.namespace, &account.name)
                .await;
        }
    }
}

struct CachedToken {
    client: Client,
    renew_at: Instant,
}

/// The connections every service account's client shares.
type SharedConnections =
    ConnectionPool<hyper_timeout::TimeoutConnector<hyper_rustls::HttpsConnector<HttpConnector>>, Body>;

/// Hands out clients that act as `system:serviceaccount:<namespace>:<name>`.
#[derive(Clone)]
pub struct ServiceAccountClients {
    /// The controller's own client: used only to request tokens.
    controller: Client,
    /// The API server's address, CA, timeouts and headers, with no credentials of the
    /// controller's (each client adds its own token).
    base: Config,
    connections: SharedConnections,
    cache: Arc<RwLock<HashMap<(String, String), CachedToken>>>,
    /// Service account clients stop with the controller's leadership.
    leadership: Leadership,
}

impl ServiceAccountClients {
    /// Builds the factory from the controller's own client and config; its clients are guarded
    /// by `leadership`.
    pub fn new(controller: Client, base: Config, leadership: Leadership) -> Result<Self, kube::Error> {
        let mut base = base;
        // Only the bearer token: no client certificate, exec plugin or impersonation of the
        // controller's own identity may reach the service accounts' connections or requests.
        base.auth_info = AuthInfo::default();
        let connections = shared_connections(&base)?;
        Ok(Self {
            controller,
            base,
            connections,
            cache: Arc::default(),
            leadership,
        })
    }

    /// A client acting as the service account `namespace/name`.
    pub async fn client_for(&self, namespace: &str, name: &str) -> Result<Client, IdentityError> {
        let key = (namespace.to_string(), name.to_string());
        if let Some(cached) = self.cache.read().await.get(&key)
            && Instant::now() < cached.renew_at
        {
            return Ok(cached.client.clone());
        }
        let token = self.request_token(namespace, name).await?;
        let client = self.client_with_token(token, namespace, name)?;
        // Renew when less than 10% of the lifetime is left.
        let renew_at = Instant::now() + TOKEN_LIFETIME.mul_f64(0.9);
        self.cache.write().await.insert(
            key,
            CachedToken {
                client: client.clone(),
                renew_at,
            },
        );
        Ok(client)
    }

    /// Forgets the cached token of a service account (e.g. after an authentication failure or
    /// when its ClusterExtension is deleted).
    pub async fn forget(&self, namespace: &str, name: &str) {
        self.cache
            .write()
            .await
            .remove(&(namespace.to_string(), name.to_string()));
    }

    async fn request_token(&self, namespace: &str, name: &str) -> Result<String, IdentityError> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.controller.clone(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
                ..Default::default()
            },
            ..Default::default()
        };
        match accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
        {
            Ok(response) => token_of(response, namespace, name),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                Err(IdentityError::ServiceAccountNotFound {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })
            }
            Err(source) => Err(IdentityError::TokenRequest {
                namespace: namespace.to_string(),
                name: name.to_string(),
                source,
            }),
        }
    }

    fn client_with_token(&self, token: String, namespace: &str, name: &str) -> Result<Client, IdentityError> {
        let mut config = self.base.clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        };
        let client_error = |source| IdentityError::Client {
            namespace: namespace.to_string(),
            name: name.to_string(),
            source,
        };
        if config.proxy_url.is_some() {
            // kube's own stack speaks to proxies; the shared pool connects directly.
            return self.leadership.client(config).map_err(client_error);
        }
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(
                config
                    .default_retry
                    .then(|| RetryLayer::new(RetryPolicy::server_retry())),
            )
            .option_layer(config.auth_layer().map_err(client_error)?)
            .layer(config.extra_headers_layer().map_err(client_error)?)
            // Innermost, next to the connections: each attempt (a retry too) is checked as late
            // as it can be, so a replica paused past its lease with a request under way sends
            // it only if the pause fell in this last step.
            .layer(self.leadership.guard::<http::Request<Body>>())
            .map_err(BoxError::from)
            .service(self.connections.clone());
        Ok(Client::new(service, config.default_namespace))
    }
}

/// One connection pool to the API server of `base` (kube's client stack: TLS with its CA, and
/// its connect, read and write timeouts), without credentials.
fn shared_connections(base: &Config) -> Result<SharedConnections, kube::Error> {
    crate::tls_profile::install_default_provider();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector =
        hyper_timeout::TimeoutConnector::new(base.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(base.connect_timeout);
    connector.set_read_timeout(base.read_timeout);
    connector.set_write_timeout(base.write_timeout);
    Ok(hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector))
}

/// The token of a TokenRequest answer; an answer without one is an error.
fn token_of(response: TokenRequest, namespace: &str, name: &str) -> Result<String, IdentityError> {
    response
        .status
        .map(|s| s.token)
        .filter(|token| !token.trim().is_empty())
        .ok_or_else(|| IdentityError::EmptyToken {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenRequestStatus;

    fn extension(service_account: Option<serde_json::Value>) -> ClusterExtension {
        let mut ext = serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "ext"},
            "spec": {"namespace": "ns", "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}},
        });
        if let Some(account) = service_account {
            ext["spec"]["serviceAccount"] = account;
        }
        serde_json::from_value(ext).expect("a ClusterExtension")
    }

    #[test]
    fn the_mode_and_the_spec_choose_the_installer() {
        let named = extension(Some(serde_json::json!({"name": "installer"})));
        let unnamed = extension(None);
        let account = ServiceAccountRef::new("ns", "installer");
        assert_eq!(
            InstallIdentity::ServiceAccount.installer_of(&named).unwrap(),
            Installer::ServiceAccount(account.clone())
        );
        let refused = InstallIdentity::ServiceAccount
            .installer_of(&unnamed)
            .unwrap_err();
        assert!(refused.is_terminal());
        assert!(
            refused
                .to_string()
                .starts_with("ClusterExtension \"ext\" is not installed")
        );
        assert_eq!(
            InstallIdentity::Controller.installer_of(&named).unwrap(),
            Installer::Controller {
                ignored: Some("installer".into())
            }
        );
        assert_eq!(
            InstallIdentity::Controller.installer_of(&unnamed).unwrap(),
            Installer::Controller { ignored: None }
        );
        // Only a service account is reviewed by the permission preflight, and the two never
        // fingerprint alike.
        let controller = Installer::Controller { ignored: None };
        assert_eq!(
            Installer::ServiceAccount(account.clone()).reviewed_account(),
            Some(&account)
        );
        assert_eq!(controller.reviewed_account(), None);
        assert_ne!(controller.fingerprint_part(), "installer");
    }

    #[test]
    fn a_token_request_answer_without_a_token_is_an_error() {
        let answer = |token: Option<&str>| TokenRequest {
            status: token.map(|t| TokenRequestStatus {
                token: t.to_string(),
                expiration_timestamp: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            }),
            ..Default::default()
        };
        assert_eq!(token_of(answer(Some("t0k")), "ns", "sa").unwrap(), "t0k");
        for empty in [None, Some(""), Some("  ")] {
            let err = token_of(answer(empty), "ns", "sa").unwrap_err();
            assert_eq!(
                err.to_string(),
                "the TokenRequest for service account ns/sa returned no token"
            );
        }
    }
}
