//! Registry credentials: parsing Docker auth files and Kubernetes pull secrets without ever
//! printing a secret, and a credential set shared by every clone of a registry configuration so
//! that a watched pull secret takes effect without a restart.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// User name.
    pub username: String,
    /// Password or token.
    pub password: String,
}

impl fmt::Debug for Credential {
    /// The user name only: credentials never reach logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Credentials by registry host (`host[:port]`), shared between every clone: replacing them
/// (a rotated pull secret) is seen by every client built from the same configuration.
#[derive(Clone)]
pub struct Credentials(Arc<Shared>);

struct Shared {
    by_registry: RwLock<BTreeMap<String, Credential>>,
    /// Bumped on every change, so that controllers retry what failed for want of credentials.
    generation: tokio::sync::watch::Sender<u64>,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials(Arc::new(Shared {
            by_registry: RwLock::default(),
            generation: tokio::sync::watch::channel(0).0,
        }))
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.registries()).finish()
    }
}

impl Credentials {
    /// The credential for `registry`, if any.
    pub fn get(&self, registry: &str) -> Option<Credential> {
        self.read().get(registry).cloned()
    }

    /// Sets the credential of one registry.
    pub fn insert(&self, registry: impl Into<String>, credential: Credential) {
        self.write().insert(registry.into(), credential);
        self.0.generation.send_modify(|g| *g += 1);
    }

    /// Replaces every credential; returns whether anything changed.
    pub fn replace_all(&self, credentials: BTreeMap<String, Credential>) -> bool {
        let changed = {
            let mut current = self.write();
            let changed = *current != credentials;
            *current = credentials;
            changed
        };
        if changed {
            self.0.generation.send_modify(|g| *g += 1);
        }
        changed
    }

    /// A stream that yields once after each change of the credentials.
    pub fn changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let receiver = self.0.generation.subscribe();
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.changed().await.ok()?;
            Some(((), receiver))
        })
    }

    /// A copy of every credential.
    pub fn snapshot(&self) -> BTreeMap<String, Credential> {
        self.read().clone()
    }

    /// The registries that have credentials.
    pub fn registries(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Which credential a request to `registry` carries, as a cache key that reveals nothing:
    /// `anonymous`, or a hash of the registry, user and password. Content pulled with one
    /// credential is cached under its scope, so it is never served to a request made with another
    /// (or none) that the registry might have refused.
    pub fn scope(&self, registry: &str) -> String {
        match self.get(registry) {
            None => "anonymous".to_string(),
            Some(c) => {
                let mut hash = Sha256::new();
                for part in [registry, &c.username, &c.password] {
                    hash.update(part.as_bytes());
                    hash.update([0u8]);
                }
                let hex: String = hash
                    .finalize()
                    .iter()
                    .take(8)
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("credential-{hex}")
            }
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Credential>> {
        self.0.by_registry.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Credential>> {
        self.0.by_registry.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// One entry of a Docker config: `auth` (base64 `user:password`) or `username` and `password`.
#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// `{"auths": {...}}`: an auth file, or a `kubernetes.io/dockerconfigjson` Secret's
/// `.dockerconfigjson`.
#[derive(Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

/// The registry host of an auth key: `https://quay.io/v1/` and `quay.io/org` both mean `quay.io`.
fn registry_host(key: &str) -> String {
    let host = key.trim_start_matches("https://").trim_start_matches("http://");
    host.split('/').next().unwrap_or_default().to_string()
}

fn decode_entries(entries: BTreeMap<String, AuthEntry>) -> Result<BTreeMap<String, Credential>, String> {
    let mut out = BTreeMap::new();
    for (key, entry) in entries {
        let host = registry_host(&key);
        let credential = match (entry.auth, entry.username, entry.password) {
            (Some(auth), _, _) if !auth.trim().is_empty() => {
                // The decoding error's detail could quote a byte of the secret: left out.
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .map_err(|_| format!("the auth of registry {host:?} is not valid base64"))?;
                let decoded = String::from_utf8(decoded)
                    .map_err(|_| format!("the auth of registry {host:?} is not UTF-8"))?;
                let (user, pass) = decoded
                    .split_once(':')
                    .ok_or_else(|| format!("the auth of registry {host:?} is not user:password"))?;
                Credential {
                    username: user.to_string(),
                    password: pass.to_string(),
                }
            }
            (_, Some(username), Some(password)) => Credential { username, password },
            _ => continue,
        };
        out.insert(host, credential);
    }
    Ok(out)
}

/// Credentials of a Docker config JSON (`{"auths": {...}}`). Errors never quote the content.
pub fn parse_docker_config_json(bytes: &[u8]) -> Result<BTreeMap<String, Credential>, String> {
    let config: DockerConfigJson = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a Docker config JSON ({})", json_error_position(&e)))?;
    decode_entries(config.auths)
}

/// Credentials of a legacy `.dockercfg` (`{"registry": {...}}`, no `auths` wrapper).
pub fn parse_dockercfg(bytes: &[u8]) -> Result<BTreeMap<String, Credential>, String> {
    let entries: BTreeMap<String, AuthEntry> = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a .dockercfg ({})", json_error_position(&e)))?;
    decode_entries(entries)
}

/// Where a JSON error is, without serde's description (which may quote the input).
fn json_error_position(e: &serde_json::Error) -> String {
    format!("invalid JSON at line {} column {}", e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_json_and_dockercfg_decode_and_hosts_are_normalised() {
        let json = br#"{"auths":{"https://quay.io/v1/":{"auth":"dXNlcjpwYTpzcw=="},"r.example:5000/org":{"username":"u","password":"p"}}}"#;
        let creds = parse_docker_config_json(json).unwrap();
        assert_eq!(creds["quay.io"].username, "user");
        assert_eq!(creds["quay.io"].password, "pa:ss");
        assert_eq!(creds["r.example:5000"].password, "p");
        let cfg = br#"{"registry.example":{"auth":"YTpi","email":"x@example.com"}}"#;
        assert_eq!(parse_dockercfg(cfg).unwrap()["registry.example"].password, "b");
    }

    #[test]
    fn errors_and_debug_output_never_show_a_secret() {
        let bad_base64 = br#"{"auths":{"quay.io":{"auth":"s3cr3t-!!"}}}"#;
        let err = parse_docker_config_json(bad_base64).unwrap_err();
        assert_eq!(err, "the auth of registry \"quay.io\" is not valid base64");
        let not_json = b"{\"auths\": s3cr3t}";
        let err = parse_docker_config_json(not_json).unwrap_err();
        assert!(!err.contains("s3cr3t"), "{err}");
        let no_colon = br#"{"auths":{"quay.io":{"auth":"czNjcjN0"}}}"#; // "s3cr3t"
        assert!(!parse_docker_config_json(no_colon).unwrap_err().contains("s3cr3t"));
        let credential = Credential {
            username: "u".into(),
            password: "s3cr3t".into(),
        };
        assert!(!format!("{credential:?}").contains("s3cr3t"));
    }

    #[test]
    fn the_cache_scope_follows_the_credential_and_reveals_nothing() {
        let creds = Credentials::default();
        assert_eq!(creds.scope("quay.io"), "anonymous");
        creds.insert(
            "quay.io",
            Credential {
                username: "u".into(),
                password: "one".into(),
            },
        );
        let first = creds.scope("quay.io");
        assert!(
            first.starts_with("credential-") && !first.contains("one"),
            "{first}"
        );
        let shared = creds.clone();
        let mut rotated = BTreeMap::new();
        rotated.insert(
            "quay.io".to_string(),
            Credential {
                username: "u".into(),
                password: "two".into(),
            },
        );
        assert!(shared.replace_all(rotated.clone()));
        assert!(!shared.replace_all(rotated));
        assert_ne!(creds.scope("quay.io"), first, "clones share the rotation");
        assert_eq!(creds.scope("other.io"), "anonymous");
    }
}
