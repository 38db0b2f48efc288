//! The global pull secret and the component's own ServiceAccount `imagePullSecrets`, merged into
//! the registry credentials and kept current while the process runs (creating, rotating or
//! deleting a Secret takes effect without a restart).
//!
//! Merge order, as upstream's pull-secret controller writes its auth file: the static auth file,
//! then the global pull secret, then the ServiceAccount's pull secrets in their listed order; a
//! later source wins for the same registry. A Secret is read from `.dockerconfigjson`
//! (`kubernetes.io/dockerconfigjson`) or `.dockercfg` (`kubernetes.io/dockercfg`); a missing
//! Secret or ServiceAccount contributes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tracing::{info, warn};

use super::credentials::{Credential, Credentials, parse_docker_config_json, parse_dockercfg};

/// Where a Secret or ServiceAccount lives: `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// Parses `NAMESPACE/NAME`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ObjectKey {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Where credentials come from besides the static auth file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullSecretSources {
    /// `--global-pull-secret`.
    pub global: Option<ObjectKey>,
    /// The component's own ServiceAccount, whose `imagePullSecrets` are used too.
    pub service_account: Option<ObjectKey>,
}

impl PullSecretSources {
    fn is_empty(&self) -> bool {
        self.global.is_none() && self.service_account.is_none()
    }
}

/// Command-line options of both components, for `#[command(flatten)]`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PullSecretArgs {
    /// A `kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg` Secret (`NAMESPACE/NAME`,
    /// e.g. `openshift-config/pull-secret`) with registry credentials; watched.
    #[arg(long, value_name = "NAMESPACE/NAME", env = "OLMV1_GLOBAL_PULL_SECRET", value_parser = ObjectKey::parse)]
    pub global_pull_secret: Option<ObjectKey>,
    /// The component's own ServiceAccount (`NAMESPACE/NAME`), whose `imagePullSecrets` are used
    /// too; default: the one of the in-cluster token, none outside a cluster.
    #[arg(long, value_name = "NAMESPACE/NAME", env = "OLMV1_SERVICE_ACCOUNT", value_parser = ObjectKey::parse)]
    pub service_account: Option<ObjectKey>,
}

impl PullSecretArgs {
    /// The sources these options name.
    pub fn sources(&self) -> PullSecretSources {
        PullSecretSources {
            global: self.global_pull_secret.clone(),
            service_account: self.service_account.clone().or_else(in_cluster_service_account),
        }
    }
}

/// Loads the credentials of `sources` into `credentials` (over what it holds now, the auth file),
/// then keeps them current in a background task. A first read that fails is logged and retried by
/// the task.
pub async fn start(client: &Client, sources: PullSecretSources, credentials: &Credentials) {
    if sources.is_empty() {
        return;
    }
    let base = credentials.snapshot();
    match load(client, &sources, &base).await {
        Ok((merged, _)) => {
            credentials.replace_all(merged);
            info!(
                global = ?sources.global.as_ref().map(ToString::to_string),
                service_account = ?sources.service_account.as_ref().map(ToString::to_string),
                registries = ?credentials.registries(),
                "registry credentials loaded"
            );
        }
        Err(e) => warn!(error = %e, "pull secrets not read yet; will retry"),
    }
    tokio::spawn(keep_current(client.clone(), sources, base, credentials.clone()));
}

/// The ServiceAccount this process runs as, from its in-cluster token (`sub` is
/// `system:serviceaccount:<namespace>:<name>`); `None` outside a cluster.
pub fn in_cluster_service_account() -> Option<ObjectKey> {
    let token = std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/token").ok()?;
    service_account_of_token(&token)
}

fn service_account_of_token(token: &str) -> Option<ObjectKey> {
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let sub = claims.get("sub")?.as_str()?;
    let rest = sub.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    Some(ObjectKey {
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// Why the pull secrets could not be read. Messages name the object, never its content.
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    /// The API server refused or failed a read.
    #[error("reading {what} {key}: {source}")]
    Read {
        /// `Secret` or `ServiceAccount`.
        what: &'static str,
        /// Which one.
        key: ObjectKey,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A Secret's content is not a Docker config.
    #[error("pull secret {key}: {reason}")]
    Invalid {
        /// Which Secret.
        key: ObjectKey,
        /// What is wrong (never the content).
        reason: String,
    },
}

/// The credentials of one pull Secret; `Ok(None)` when it has neither key.
pub fn secret_credentials(
    key: &ObjectKey,
    secret: &Secret,
) -> Result<Option<BTreeMap<String, Credential>>, PullSecretError> {
    let data = secret.data.as_ref();
    let invalid = |reason: String| PullSecretError::Invalid {
        key: key.clone(),
        reason,
    };
    if let Some(bytes) = data.and_then(|d| d.get(".dockerconfigjson")) {
        return parse_docker_config_json(&bytes.0)
            .map(Some)
            .map_err(|e| invalid(format!(".dockerconfigjson: {e}")));
    }
    if let Some(bytes) = data.and_then(|d| d.get(".dockercfg")) {
        return parse_dockercfg(&bytes.0)
            .map(Some)
            .map_err(|e| invalid(format!(".dockercfg: {e}")));
    }
    Ok(None)
}

async fn get_secret(client: &Client, key: &ObjectKey) -> Result<Option<Secret>, PullSecretError> {
    Api::<Secret>::namespaced(client.clone(), &key.namespace)
        .get_opt(&key.name)
        .await
        .map_err(|source| PullSecretError::Read {
            what: "Secret",
            key: key.clone(),
            source: Box::new(source),
        })
}

/// Everything the sources hold now, merged over `base` (the auth file); also returns the
/// Secrets read, so that their changes are watched for.
pub async fn load(
    client: &Client,
    sources: &PullSecretSources,
    base: &BTreeMap<String, Credential>,
) -> Result<(BTreeMap<String, Credential>, BTreeSet<ObjectKey>), PullSecretError> {
    let mut keys: Vec<ObjectKey> = sources.global.iter().cloned().collect();
    if let Some(sa_key) = &sources.service_account {
        let account = Api::<ServiceAccount>::namespaced(client.clone(), &sa_key.namespace)
            .get_opt(&sa_key.name)
            .await
            .map_err(|source| PullSecretError::Read {
                what: "ServiceAccount",
                key: sa_key.clone(),
                source: Box::new(source),
            })?;
        let pull_secrets = account.and_then(|a| a.image_pull_secrets).unwrap_or_default();
        keys.extend(pull_secrets.into_iter().map(|reference| ObjectKey {
            namespace: sa_key.namespace.clone(),
            name: reference.name,
        }));
    }
    let mut merged = base.clone();
    for key in &keys {
        let Some(secret) = get_secret(client, key).await? else {
            continue;
        };
        match secret_credentials(key, &secret)? {
            Some(credentials) => merged.extend(credentials),
            None => warn!(secret = %key, "pull secret has neither .dockerconfigjson nor .dockercfg"),
        }
    }
    Ok((merged, keys.into_iter().collect()))
}

type Events = Pin<Box<dyn Stream<Item = bool> + Send>>;

/// Keeps `credentials` equal to `base` merged with what the sources hold, until the process ends.
/// A source that cannot be read (or holds garbage) leaves the credentials as they were: a broken
/// rotation does not take working credentials away. Returns at once when there are no sources.
pub async fn keep_current(
    client: Client,
    sources: PullSecretSources,
    base: BTreeMap<String, Credential>,
    credentials: Credentials,
) {
    if sources.is_empty() {
        return;
    }
    // Secrets whose events matter: the global one and those the ServiceAccount lists.
    let watched: Arc<Mutex<BTreeSet<ObjectKey>>> = Arc::default();
    let mut streams: Vec<Events> = Vec::new();
    let mut secret_namespaces: BTreeSet<String> = BTreeSet::new();
    secret_namespaces.extend(sources.global.iter().map(|k| k.namespace.clone()));
    secret_namespaces.extend(sources.service_account.iter().map(|k| k.namespace.clone()));
    for namespace in secret_namespaces {
        let (watched, ns) = (watched.clone(), namespace.clone());
        let events = watcher(
            Api::<Secret>::namespaced(client.clone(), &namespace),
            crate::watch::config(),
        )
        .default_backoff()
        .map(move |event| match event {
            Ok(watcher::Event::Apply(s) | watcher::Event::Delete(s) | watcher::Event::InitApply(s)) => {
                let key = ObjectKey {
                    namespace: ns.clone(),
                    name: s.metadata.name.unwrap_or_default(),
                };
                watched.lock().unwrap_or_else(|e| e.into_inner()).contains(&key)
            }
            Ok(watcher::Event::InitDone) => true,
            Ok(watcher::Event::Init) => false,
            Err(e) => {
                warn!(error = %e, "pull secret watch failed; retrying");
                false
            }
        });
        streams.push(events.boxed());
    }
    if let Some(key) = &sources.service_account {
        let events = watcher(
            Api::<ServiceAccount>::namespaced(client.clone(), &key.namespace),
            crate::watch::config().fields(&format!("metadata.name={}", key.name)),
        )
        .default_backoff()
        .map(|event| event.is_ok());
        streams.push(events.boxed());
    }
    let mut events = futures::stream::select_all(streams);
    let mut dirty = true;
    loop {
        if dirty {
            match load(&client, &sources, &base).await {
                Ok((merged, keys)) => {
                    *watched.lock().unwrap_or_else(|e| e.into_inner()) = keys;
                    if credentials.replace_all(merged) {
                        info!(registries = ?credentials.registries(), "registry credentials updated from pull secrets");
                    }
                    dirty = false;
                }
                Err(e) => {
                    warn!(error = %e, "pull secrets not read; keeping the current registry credentials")
                }
            }
        }
        let wait = if dirty {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(600)
        };
        tokio::select! {
            event = events.next() => match event {
                Some(relevant) => dirty |= relevant,
                None => return,
            },
            () = tokio::time::sleep(wait) => dirty = true,
        }
        // One reload for a burst of events.
        while let Some(Some(relevant)) = events.next().now_or_never() {
            dirty |= relevant;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn object_keys_parse() {
        assert_eq!(
            ObjectKey::parse("openshift-config/pull-secret")
                .unwrap()
                .to_string(),
            "openshift-config/pull-secret"
        );
        for bad in ["pull-secret", "/x", "x/", "a/b/c"] {
            assert!(ObjectKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_service_account_comes_from_the_token_subject() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"system:serviceaccount:olmv1-system:olmv1-controller"}"#);
        let token = format!("e30.{payload}.sig");
        assert_eq!(
            service_account_of_token(&token),
            Some(ObjectKey::parse("olmv1-system/olmv1-controller").unwrap())
        );
        assert_eq!(service_account_of_token("not-a-jwt"), None);
    }

    #[test]
    fn secrets_of_both_types_decode_and_garbage_names_the_secret_only() {
        let key = ObjectKey::parse("ns/pull").unwrap();
        let secret = |data_key: &str, value: &str| Secret {
            data: Some(BTreeMap::from([(
                data_key.to_string(),
                ByteString(value.as_bytes().to_vec()),
            )])),
            ..Default::default()
        };
        let json = secret(".dockerconfigjson", r#"{"auths":{"r.example":{"auth":"dTpw"}}}"#);
        assert_eq!(
            secret_credentials(&key, &json).unwrap().unwrap()["r.example"].password,
            "p"
        );
        let cfg = secret(".dockercfg", r#"{"r.example":{"auth":"dTpx"}}"#);
        assert_eq!(
            secret_credentials(&key, &cfg).unwrap().unwrap()["r.example"].password,
            "q"
        );
        assert!(secret_credentials(&key, &secret("other", "x")).unwrap().is_none());
        let err = secret_credentials(&key, &secret(".dockerconfigjson", "hunter2")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("pull secret ns/pull: .dockerconfigjson: "),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
