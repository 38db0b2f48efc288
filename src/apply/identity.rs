//! The identity bundle content is read and written with: a ClusterExtension's service account.
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
use kube::{
    Api, Client, Config,
    api::PostParams,
    client::{Body, ConfigExt, retry::RetryPolicy},
    config::AuthInfo,
};
use tokio::sync::RwLock;
use tower::{BoxError, ServiceBuilder, retry::RetryLayer};

use crate::{go_format::go_quote, leader::Leadership};

/// How long a requested token lives.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

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
    /// A missing service account needs the admin to act; the rest may pass on retry. Neither
    /// stops retrying: the admin may create the account at any time.
    pub fn is_terminal(&self) -> bool {
        false
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
            .layer(self.leadership.guard::<http::Request<Body>>())
            .layer(config.base_uri_layer())
            .option_layer(
                config
                    .default_retry
                    .then(|| RetryLayer::new(RetryPolicy::server_retry())),
            )
            .option_layer(config.auth_layer().map_err(client_error)?)
            .layer(config.extra_headers_layer().map_err(client_error)?)
            .map_err(BoxError::from)
            .service(self.connections.clone());
        Ok(Client::new(service, config.default_namespace))
    }
}

/// One connection pool to the API server of `base` (kube's client stack: TLS with its CA, and
/// its connect, read and write timeouts), without credentials.
fn shared_connections(base: &Config) -> Result<SharedConnections, kube::Error> {
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
