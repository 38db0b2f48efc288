//! The controller's cached catalog client: fetches `<status.urls.base>/api/v1/all` of a served
//! ClusterCatalog, indexes it, and keeps one index per catalog name keyed by
//! `status.resolvedSource.image.ref` (not Last-Modified, which changes on every catalogd poll).
//! Non-200 answers and transport errors are not cached (a non-leader catalogd answers 404);
//! content that does not parse is cached for its ref, since the same ref gives the same bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::{ResourceExt, runtime::watcher};
use olmv1_api::v1::ClusterCatalog;
use olmv1_api::v1::conditions::{ConditionStatus, TYPE_SERVING};

use super::client::CatalogClient;
use super::{CatalogError, CatalogIndex};

/// Why a catalog's content is not available.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogCacheError {
    /// The catalog's `Serving` condition is not True.
    #[error("catalog {0:?} is not being served")]
    NotServed(String),
    /// `status.resolvedSource` is missing.
    #[error("error: catalog {0:?} has a nil status.resolvedSource value")]
    NoResolvedSource(String),
    /// `status.urls.base` is missing.
    #[error("error: catalog {0:?} has a nil status.urls value")]
    NoUrls(String),
    /// Fetching or parsing failed.
    #[error("error retrieving cache for catalog {catalog:?}: {source}")]
    Fetch {
        /// The catalog name.
        catalog: String,
        /// The cause (names the URL or the object).
        #[source]
        source: CatalogError,
    },
}

impl CatalogCacheError {
    /// Never terminal: each of these clears when catalogd serves the catalog again.
    pub fn is_terminal(&self) -> bool {
        false
    }
}

struct CacheEntry {
    resolved_ref: String,
    content: Result<Arc<CatalogIndex>, CatalogCacheError>,
    /// Seen in the watch's current re-list (see [`CachedCatalogClient::forget_deleted`]).
    listed: bool,
}

/// A catalog client with a per-catalog cache; share it with an `Arc`.
pub struct CachedCatalogClient {
    client: CatalogClient,
    entries: Mutex<HashMap<String, CacheEntry>>,
    // Serialises fetches so concurrent reconciles of one catalog fetch it once.
    fetch_lock: tokio::sync::Mutex<()>,
}

impl CachedCatalogClient {
    /// Wraps a [`CatalogClient`] (its body limit, gzip and CAs apply).
    pub fn new(client: CatalogClient) -> Self {
        CachedCatalogClient {
            client,
            entries: Mutex::new(HashMap::new()),
            fetch_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The index of `catalog`'s served content: from the cache when its resolved ref is
    /// unchanged, else fetched from `<status.urls.base>/api/v1/all`. Fails, as upstream, when the
    /// catalog is not `Serving=True` or has no resolved source.
    pub async fn index(&self, catalog: &ClusterCatalog) -> Result<Arc<CatalogIndex>, CatalogCacheError> {
        let name = catalog.metadata.name.clone().unwrap_or_default();
        let (resolved_ref, base) = served_source(catalog, &name)?;
        if let Some(hit) = self.cached(&name, &resolved_ref) {
            return hit;
        }
        let _guard = self.fetch_lock.lock().await;
        if let Some(hit) = self.cached(&name, &resolved_ref) {
            return hit;
        }
        let fetch_error = |source| CatalogCacheError::Fetch {
            catalog: name.clone(),
            source,
        };
        let body = self.client.fetch_all(&base).await.map_err(fetch_error)?;
        let origin = format!("catalog {name:?} ({resolved_ref})");
        let max_line_bytes = self.client.max_line_bytes();
        let parsed =
            tokio::task::spawn_blocking(move || CatalogIndex::from_jsonl(body, &origin, max_line_bytes))
                .await
                .map_err(|e| fetch_error(CatalogError::Invalid(format!("indexing was interrupted: {e}"))))?;
        let content = parsed.map(Arc::new).map_err(fetch_error);
        self.lock().insert(
            name.clone(),
            CacheEntry {
                resolved_ref,
                content: content.clone(),
                listed: true,
            },
        );
        content
    }

    /// The cached index of `catalog` for its current resolved ref, without fetching.
    pub fn cached_index(&self, catalog: &ClusterCatalog) -> Option<Arc<CatalogIndex>> {
        let name = catalog.metadata.name.clone().unwrap_or_default();
        let (resolved_ref, _) = served_source(catalog, &name).ok()?;
        self.cached(&name, &resolved_ref).and_then(Result::ok)
    }

    /// Drops the cache entry of a deleted catalog.
    pub fn remove(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Follows a ClusterCatalog watch: drops the entry of a deleted catalog, and after a
    /// re-list the entries of catalogs no longer listed (deleted while the watch was down).
    pub fn forget_deleted(&self, event: &watcher::Event<ClusterCatalog>) {
        match event {
            watcher::Event::Delete(catalog) => self.remove(&catalog.name_any()),
            watcher::Event::Init => self.lock().values_mut().for_each(|e| e.listed = false),
            watcher::Event::InitApply(catalog) => {
                if let Some(entry) = self.lock().get_mut(&catalog.name_any()) {
                    entry.listed = true;
                }
            }
            watcher::Event::InitDone => self.lock().retain(|_, e| e.listed),
            watcher::Event::Apply(_) => {}
        }
    }

    fn cached(&self, name: &str, resolved_ref: &str) -> Option<Result<Arc<CatalogIndex>, CatalogCacheError>> {
        let entries = self.lock();
        let entry = entries.get(name)?;
        (entry.resolved_ref == resolved_ref).then(|| entry.content.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CacheEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `(resolvedSource.image.ref, urls.base)` of a catalog that is `Serving=True`.
pub fn served_source(catalog: &ClusterCatalog, name: &str) -> Result<(String, String), CatalogCacheError> {
    let status = catalog.status.as_ref();
    let serving = status
        .map(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == TYPE_SERVING && c.status == ConditionStatus::True.as_str())
        })
        .unwrap_or(false);
    if !serving {
        return Err(CatalogCacheError::NotServed(name.to_string()));
    }
    let resolved = status
        .and_then(|s| s.resolved_source.as_ref())
        .ok_or_else(|| CatalogCacheError::NoResolvedSource(name.to_string()))?;
    let base = status
        .and_then(|s| s.urls.as_ref())
        .map(|u| u.base.clone())
        .ok_or_else(|| CatalogCacheError::NoUrls(name.to_string()))?;
    Ok((resolved.image.reference.clone(), base))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(name: &str) -> ClusterCatalog {
        ClusterCatalog::new(
            name,
            serde_json::from_value(
                serde_json::json!({"source": {"type": "Image", "image": {"ref": "r/c:1"}}}),
            )
            .unwrap(),
        )
    }

    /// A cache holding an index for each of `names` (as a fetch would leave it).
    fn cache_holding(names: &[&str]) -> CachedCatalogClient {
        let cache = CachedCatalogClient::new(CatalogClient::new(&[]).unwrap());
        for name in names {
            let index = CatalogIndex::from_jsonl(
                bytes::Bytes::from_static(br#"{"schema":"olm.package","name":"p"}"#),
                name,
                1 << 20,
            )
            .unwrap();
            cache.lock().insert(
                name.to_string(),
                CacheEntry {
                    resolved_ref: "r/c@sha256:00".into(),
                    content: Ok(Arc::new(index)),
                    listed: true,
                },
            );
        }
        cache
    }

    fn held(cache: &CachedCatalogClient) -> Vec<String> {
        let mut names: Vec<String> = cache.lock().keys().cloned().collect();
        names.sort();
        names
    }

    #[test]
    fn a_deleted_catalog_loses_its_index() {
        let cache = cache_holding(&["a", "b"]);
        cache.forget_deleted(&watcher::Event::Apply(catalog("a")));
        assert_eq!(held(&cache), ["a", "b"]);
        cache.forget_deleted(&watcher::Event::Delete(catalog("a")));
        assert_eq!(held(&cache), ["b"]);
        assert!(cache.cached("a", "r/c@sha256:00").is_none());
    }

    #[test]
    fn a_relist_drops_the_catalogs_deleted_while_the_watch_was_down() {
        let cache = cache_holding(&["a", "b", "c"]);
        cache.forget_deleted(&watcher::Event::Init);
        cache.forget_deleted(&watcher::Event::InitApply(catalog("b")));
        cache.forget_deleted(&watcher::Event::InitDone);
        assert_eq!(held(&cache), ["b"]);
    }
}
