//! Who may read `/metrics`: the caller's bearer token goes to the API server (TokenReview), then
//! the user it names is checked for `get` on the non-resource URL `/metrics`
//! (SubjectAccessReview), as upstream's controller-runtime filter
//! (`filters.WithAuthenticationAndAuthorization`) does. Answers are kept briefly, by a hash of
//! the token; an API server error denies and is not kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// How long an allowed caller is remembered: upstream's token-review cache (its access-review
/// cache keeps an allowed answer 5 minutes). A scraper every 30 s costs two requests per 2
/// minutes, not per minute.
pub const ALLOWED_TTL: Duration = Duration::from_secs(120);
/// How long a refused token or user is remembered (a new RoleBinding counts soon).
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// Most answers kept; beyond, expired ones go, then all.
pub const MAX_CACHED: usize = 1024;
/// Longest bearer token looked at (service account tokens are about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 8 << 10;

/// What a caller may do with `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and allowed `get` on `/metrics`.
    Allowed,
    /// No bearer token, or one the API server does not accept (401).
    Unauthenticated,
    /// Authenticated, but not allowed (403).
    Forbidden,
}

/// A review the API server could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The TokenReview request failed.
    #[error("TokenReview failed: {0}")]
    TokenReview(#[source] kube::Error),
    /// The SubjectAccessReview request failed.
    #[error("SubjectAccessReview failed: {0}")]
    SubjectAccessReview(#[source] kube::Error),
}

impl AccessError {
    /// The API server may answer the next request: never terminal.
    pub fn is_terminal(&self) -> bool {
        false
    }

    /// What the caller is told meanwhile: denied, as the step that failed.
    pub fn decision(&self) -> Decision {
        match self {
            Self::TokenReview(_) => Decision::Unauthenticated,
            Self::SubjectAccessReview(_) => Decision::Forbidden,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header; `None` for anything else (another
/// scheme, an empty or oversized token, bytes that are not text).
pub fn bearer_token(authorization: Option<&http::HeaderValue>) -> Option<&str> {
    let value = authorization?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN_BYTES)
        .then_some(token)
}

/// Decisions by token hash, each until its expiry.
#[derive(Default)]
pub struct DecisionCache {
    entries: HashMap<[u8; 32], (Decision, Instant)>,
}

impl DecisionCache {
    /// The decision kept for `key`, if not expired at `now`.
    pub fn get(&self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        self.entries
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(decision, _)| *decision)
    }

    /// Keeps `decision` for `key` from `now`; bounded by [`MAX_CACHED`].
    pub fn put(&mut self, key: [u8; 32], decision: Decision, now: Instant) {
        if self.entries.len() >= MAX_CACHED {
            self.entries.retain(|_, (_, until)| *until > now);
            if self.entries.len() >= MAX_CACHED {
                self.entries.clear();
            }
        }
        let ttl = match decision {
            Decision::Allowed => ALLOWED_TTL,
            Decision::Unauthenticated | Decision::Forbidden => DENIED_TTL,
        };
        self.entries.insert(key, (decision, now + ttl));
    }

    /// How many decisions are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Reviews callers with the API server, on a client of the component's own identity (which
/// needs `create` on tokenreviews and subjectaccessreviews).
pub struct AccessReviewer {
    client: kube::Client,
    cache: Mutex<DecisionCache>,
}

impl AccessReviewer {
    /// A reviewer asking through `client` (one that works whether or not this replica leads).
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Mutex::default(),
        }
    }

    /// May the caller with this `Authorization` header read `/metrics`?
    pub async fn review(&self, authorization: Option<&http::HeaderValue>) -> Decision {
        let Some(token) = bearer_token(authorization) else {
            return Decision::Unauthenticated;
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(decision) = self.lock().get(&key, Instant::now()) {
            return decision;
        }
        match self.ask(token).await {
            Ok(decision) => {
                self.lock().put(key, decision, Instant::now());
                decision
            }
            Err(error) => {
                tracing::warn!(%error, "cannot review a /metrics caller; denied");
                error.decision()
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn ask(&self, token: &str) -> Result<Decision, AccessError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(AccessError::TokenReview)?;
        let status = reviewed.status.unwrap_or_default();
        let (true, Some(user)) = (status.authenticated == Some(true), status.user) else {
            return Ok(Decision::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".to_string()),
                    verb: Some("get".to_string()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(AccessError::SubjectAccessReview)?;
        Ok(match answered.status.is_some_and(|s| s.allowed) {
            true => Decision::Allowed,
            false => Decision::Forbidden,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(value: &str) -> http::HeaderValue {
        http::HeaderValue::from_str(value).unwrap()
    }

    #[test]
    fn only_a_bounded_bearer_token_is_taken() {
        assert_eq!(bearer_token(Some(&header("Bearer abc"))), Some("abc"));
        assert_eq!(bearer_token(Some(&header("bearer  abc "))), Some("abc"));
        assert_eq!(bearer_token(Some(&header("Basic dXNlcjpwdw=="))), None);
        assert_eq!(bearer_token(Some(&header("Bearer "))), None);
        assert_eq!(bearer_token(Some(&header("Bearer"))), None);
        assert_eq!(bearer_token(None), None);
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(bearer_token(Some(&header(&long))), None);
    }

    #[test]
    fn denials_are_kept_shorter_than_allowances() {
        let mut cache = DecisionCache::default();
        let now = Instant::now();
        cache.put([1; 32], Decision::Allowed, now);
        cache.put([2; 32], Decision::Forbidden, now);
        let later = now + DENIED_TTL + Duration::from_secs(1);
        assert_eq!(cache.get(&[1; 32], later), Some(Decision::Allowed));
        assert_eq!(cache.get(&[2; 32], later), None);
        assert_eq!(cache.get(&[1; 32], now + ALLOWED_TTL), None);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut cache = DecisionCache::default();
        let now = Instant::now();
        for i in 0..(MAX_CACHED * 3) {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            cache.put(key, Decision::Allowed, now);
            assert!(cache.len() <= MAX_CACHED);
        }
        assert!(!cache.is_empty());
    }
}
