//! Delegated authentication and authorization, as an aggregated API server does them: the API
//! server authenticates the user, then proxies the request with a front-proxy client certificate
//! and the user in request headers; this server trusts the headers only on a connection whose
//! certificate the request-header CA signed, for a common name the API server allows. Bearer
//! tokens are reviewed with a TokenReview; every request is authorized with a SubjectAccessReview.
//! Reading the configuration needs the `extension-apiserver-authentication-reader` Role in
//! `kube-system`; the reviews need the `system:auth-delegator` ClusterRole: exactly the bindings
//! OLM makes for a bundle that owns an APIService.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::danger::ClientCertVerifier;
use x509_cert::der::Decode;

use crate::aggregated::{Attributes, GROUP, RESOURCE};

pub const CONFIG_NAMESPACE: &str = "kube-system";
pub const CONFIG_MAP: &str = "extension-apiserver-authentication";

#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    #[error("reading ConfigMap {CONFIG_NAMESPACE}/{CONFIG_MAP}: {0}")]
    Read(#[source] kube::Error),
    #[error(
        "ConfigMap {CONFIG_NAMESPACE}/{CONFIG_MAP} has no requestheader-client-ca-file: the API server runs without \
         --requestheader-client-ca-file, so it cannot proxy requests to an aggregated API server"
    )]
    NoRequestHeaderCa,
    #[error("ConfigMap {CONFIG_NAMESPACE}/{CONFIG_MAP}: {key} is not a JSON list of strings: {reason}")]
    BadList { key: String, reason: String },
    #[error("ConfigMap {CONFIG_NAMESPACE}/{CONFIG_MAP}: requestheader-client-ca-file: {0}")]
    BadCa(String),
    #[error("reviewing a token: {0}")]
    TokenReview(#[source] kube::Error),
    #[error("reviewing access: {0}")]
    AccessReview(#[source] kube::Error),
}

/// The request-header settings of the API server (`--requestheader-*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// The CA that signs the front-proxy client certificate (PEM).
    pub client_ca_pem: String,
    /// Common names the client certificate may have; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    /// Headers naming the user, the first present wins.
    pub username_headers: Vec<String>,
    /// Headers naming the user's uid.
    pub uid_headers: Vec<String>,
    /// Headers naming the user's groups.
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying the user's extra attributes.
    pub extra_header_prefixes: Vec<String>,
}

/// Who made a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The settings as the ConfigMap's data holds them (lists are JSON arrays).
pub fn request_header_config(
    data: &BTreeMap<String, String>,
) -> Result<RequestHeaderConfig, DelegationError> {
    let client_ca_pem = data
        .get("requestheader-client-ca-file")
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .ok_or(DelegationError::NoRequestHeaderCa)?;
    let list = |key: &str| -> Result<Vec<String>, DelegationError> {
        match data.get(key) {
            None => Ok(Vec::new()),
            Some(text) => serde_json::from_str(text).map_err(|e| DelegationError::BadList {
                key: key.to_string(),
                reason: e.to_string(),
            }),
        }
    };
    Ok(RequestHeaderConfig {
        client_ca_pem,
        allowed_names: list("requestheader-allowed-names")?,
        username_headers: list("requestheader-username-headers")?,
        uid_headers: list("requestheader-uid-headers")?,
        group_headers: list("requestheader-group-headers")?,
        extra_header_prefixes: list("requestheader-extra-headers-prefix")?,
    })
}

/// Reads the API server's settings (read once at start: a rotated front-proxy CA needs a restart).
pub async fn load(client: &Client) -> Result<RequestHeaderConfig, DelegationError> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), CONFIG_NAMESPACE)
        .get(CONFIG_MAP)
        .await
        .map_err(DelegationError::Read)?;
    request_header_config(&cm.data.unwrap_or_default())
}

/// The TLS client verifier: a client certificate, when one is sent, must chain to the
/// request-header CA; connections without one are accepted (they must bring a token).
pub fn client_verifier(config: &RequestHeaderConfig) -> Result<Arc<dyn ClientCertVerifier>, DelegationError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(config.client_ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| DelegationError::BadCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| DelegationError::BadCa(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| DelegationError::BadCa(e.to_string()))
}

/// The subject common name of a certificate (DER), if it has one.
pub fn common_name(cert: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(cert).ok()?;
    let cn = cert.tbs_certificate().subject().common_name().ok()??;
    Some(cn.value().into_owned())
}

/// The group of every authenticated user.
const AUTHENTICATED: &str = "system:authenticated";

/// The user of a request that came with a verified front-proxy certificate of common name
/// `common_name`: read from the headers the API server sets (`headers`: names lower-case).
pub fn proxied_user(
    config: &RequestHeaderConfig,
    common_name: &str,
    headers: &[(String, String)],
) -> Result<UserInfo, String> {
    if !config.allowed_names.is_empty() && !config.allowed_names.iter().any(|n| n == common_name) {
        return Err(format!(
            "the client certificate's common name {common_name:?} is not one of requestheader-allowed-names {:?}",
            config.allowed_names
        ));
    }
    let values = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .flat_map(|name| {
                let name = name.to_ascii_lowercase();
                headers
                    .iter()
                    .filter(move |(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            })
            .collect()
    };
    let username = values(&config.username_headers)
        .into_iter()
        .find(|v| !v.is_empty())
        .ok_or("the request names no user in the request headers")?;
    let uid = values(&config.uid_headers).into_iter().next().unwrap_or_default();
    // Every authenticated user is in system:authenticated, as a Kubernetes API server's
    // authenticator chain adds it: the aggregator's own discovery requests name no group, and
    // RBAC grants discovery to that group.
    let mut groups = values(&config.group_headers);
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.to_string());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in &config.extra_header_prefixes {
        let prefix = prefix.to_ascii_lowercase();
        for (k, v) in headers {
            if let Some(key) = k.strip_prefix(&prefix) {
                extra.entry(unescape(key)).or_default().push(v.clone());
            }
        }
    }
    Ok(UserInfo {
        username,
        uid,
        groups,
        extra,
    })
}

/// Percent-decoding of an extra header's key, as the API server escapes it.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 3 <= bytes.len()
            && let Ok(b) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("-"), 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user a bearer token belongs to (a TokenReview), or `None` when it authenticates no one.
pub async fn review_token(client: &Client, token: &str) -> Result<Option<UserInfo>, DelegationError> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(DelegationError::TokenReview)?;
    let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
        return Ok(None);
    };
    let user = status.user.unwrap_or_default();
    Ok(Some(UserInfo {
        username: user.username.unwrap_or_default(),
        uid: user.uid.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default(),
    }))
}

/// The SubjectAccessReview asking whether `user` may make a request of `attributes`.
pub fn access_review(user: &UserInfo, attributes: &Attributes) -> SubjectAccessReview {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(user.username.clone()),
        uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
        groups: Some(user.groups.clone()),
        extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
        ..Default::default()
    };
    match attributes {
        Attributes::NonResource { path } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some("get".into()),
            });
        }
        Attributes::Resource { verb, version, name } => {
            spec.resource_attributes = Some(ResourceAttributes {
                group: Some(GROUP.into()),
                version: Some(version.clone()),
                resource: Some(RESOURCE.into()),
                verb: Some((*verb).into()),
                name: name.clone(),
                ..Default::default()
            });
        }
    }
    SubjectAccessReview {
        spec,
        ..Default::default()
    }
}

/// Whether the API server allows it: `Ok((allowed, reason))`.
pub async fn authorize(
    client: &Client,
    user: &UserInfo,
    attributes: &Attributes,
) -> Result<(bool, String), DelegationError> {
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &access_review(user, attributes))
        .await
        .map_err(DelegationError::AccessReview)?;
    let status = answer.status.unwrap_or_default();
    Ok((status.allowed, status.reason.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn config() -> RequestHeaderConfig {
        request_header_config(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            ("requestheader-extra-headers-prefix", r#"["X-Remote-Extra-"]"#),
        ]))
        .unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_configuration_is_read_from_the_api_servers_config_map() {
        let c = config();
        assert_eq!(c.allowed_names, ["front-proxy-client"]);
        assert_eq!(c.username_headers, ["X-Remote-User"]);
        assert!(c.uid_headers.is_empty());
        let missing = request_header_config(&data(&[("client-ca-file", "PEM")])).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("has no requestheader-client-ca-file"),
            "{missing}"
        );
        let bad = request_header_config(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]))
        .unwrap_err();
        assert!(
            bad.to_string()
                .contains("requestheader-allowed-names is not a JSON list"),
            "{bad}"
        );
    }

    #[test]
    fn the_user_comes_from_the_headers_of_an_allowed_front_proxy() {
        let user = proxied_user(
            &config(),
            "front-proxy-client",
            &headers(&[
                ("x-remote-user", "alice"),
                ("x-remote-group", "devs"),
                ("x-remote-group", "system:authenticated"),
                ("x-remote-extra-scopes", "a"),
                ("x-remote-extra-acme.com%2fproject", "p"),
                ("x-other", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], ["a"]);
        assert_eq!(user.extra["acme.com/project"], ["p"]);

        let refused =
            proxied_user(&config(), "someone-else", &headers(&[("x-remote-user", "alice")])).unwrap_err();
        assert_eq!(
            refused,
            "the client certificate's common name \"someone-else\" is not one of requestheader-allowed-names [\"front-proxy-client\"]"
        );
        let aggregator = proxied_user(
            &config(),
            "front-proxy-client",
            &headers(&[("x-remote-user", "system:kube-aggregator")]),
        )
        .unwrap();
        assert_eq!(
            aggregator.groups,
            ["system:authenticated"],
            "the aggregator's discovery requests name no group"
        );
        let nobody = proxied_user(&config(), "front-proxy-client", &headers(&[])).unwrap_err();
        assert_eq!(nobody, "the request names no user in the request headers");
    }

    #[test]
    fn access_reviews_carry_the_user_and_the_request() {
        let user = UserInfo {
            username: "alice".into(),
            groups: vec!["devs".into()],
            ..Default::default()
        };
        let review = access_review(
            &user,
            &Attributes::Resource {
                verb: "list",
                version: "v1".into(),
                name: None,
            },
        );
        let spec = serde_json::to_value(&review.spec).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({"user": "alice", "groups": ["devs"], "resourceAttributes": {
                "group": "gadgets.test.olmv1.dev", "version": "v1", "resource": "gadgets", "verb": "list"}})
        );
        let review = access_review(&user, &Attributes::NonResource { path: "/apis".into() });
        assert_eq!(
            serde_json::to_value(&review.spec).unwrap()["nonResourceAttributes"],
            serde_json::json!({"path": "/apis", "verb": "get"})
        );
    }

    #[test]
    fn the_common_name_is_read_from_a_certificate() {
        let pem = crate::tls::tests::testdata("a.crt");
        let der = CertificateDer::from_pem_slice(&pem).unwrap();
        assert_eq!(common_name(&der).as_deref(), Some("webhook-operator-test-a"));
        assert_eq!(common_name(b"not a certificate"), None);
    }
}
