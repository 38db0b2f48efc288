//! The catalog HTTP server (catalogd's role): stores each catalog as `catalog.jsonl` plus a
//! precompressed copy and an in-memory metas index, and serves
//! `/catalogs/<name>/api/v1/all` and `/catalogs/<name>/api/v1/metas?schema=&package=&name=`
//! as upstream catalogd does (status codes, bodies, gzip, Last-Modified / If-Modified-Since).
//!
//! The stored files are a cache of the catalog image and are checked before they are served:
//! their SHA-256 digests are taken while they are written; every response first checks the
//! files' sizes, a whole-file response (`/all`) hashes what it sends and fails before its last
//! byte when the digest differs, and each reconcile of the catalog checks both digests in full.
//! Damaged content stops being served (404, as before it was stored) and the reconciler is told,
//! so it pulls and stores the catalog again.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use regex::Regex;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::for_each_dir_meta_within;
use super::read::{DEFAULT_MAX_JSONL_LINE_BYTES, line_too_long};

/// Content type of `/api/v1/all` and `/api/v1/metas`.
pub const JSONL_CONTENT_TYPE: &str = "application/jsonl";
/// Responses at least this large are gzip-compressed when the client accepts gzip (gzhttp's default).
pub const GZIP_MIN_BYTES: u64 = 1024;
const CATALOG_FILE: &str = "catalog.jsonl";
const CATALOG_GZIP_FILE: &str = "catalog.jsonl.gz";
const READ_CHUNK_BYTES: u64 = 256 * 1024;
const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("static regex")
});

/// Why a catalog could not be stored or served.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The catalog's FBC could not be read.
    #[error("catalog {catalog:?}: {source}")]
    Catalog {
        /// The catalog name.
        catalog: String,
        /// The parse or read error (names the file and object).
        #[source]
        source: super::CatalogError,
    },
    /// Writing or reading the stored content failed.
    #[error("catalog {catalog:?}: {action} {}: {source}", path.display())]
    Io {
        /// The catalog name.
        catalog: String,
        /// What was being done.
        action: &'static str,
        /// Which path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The catalog name is not a DNS-1123 subdomain.
    #[error("invalid catalog name {0:?}: {DNS1123_SUBDOMAIN_MESSAGE}")]
    InvalidName(String),
    /// TLS material could not be loaded.
    #[error("TLS: {0}")]
    Tls(String),
}

/// A half-open byte range of one meta (its blob and newline) in `catalog.jsonl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Section {
    offset: u64,
    len: u64,
}

/// Where each meta is in `catalog.jsonl`, by schema, package and name (catalogd's `index.json`).
#[derive(Debug, Default)]
struct MetasIndex {
    by_schema: HashMap<Arc<str>, Vec<Section>>,
    by_package: HashMap<Arc<str>, Vec<Section>>,
    by_name: HashMap<Arc<str>, Vec<Section>>,
}

impl MetasIndex {
    fn add(&mut self, schema: &Arc<str>, package: &Arc<str>, name: &Arc<str>, section: Section) {
        for (map, key) in [
            (&mut self.by_schema, schema),
            (&mut self.by_package, package),
            (&mut self.by_name, name),
        ] {
            if !key.is_empty() {
                map.entry(key.clone()).or_default().push(section);
            }
        }
    }

    /// The sections of one filter's key (0 schema, 1 package, 2 name), in file order.
    fn list(&self, filter: usize, key: &str) -> &[Section] {
        let map = match filter {
            0 => &self.by_schema,
            1 => &self.by_package,
            _ => &self.by_name,
        };
        map.get(key).map(Vec::as_slice).unwrap_or_default()
    }
}

/// The sections a `/metas` request asks for (those every given filter's list holds), found as
/// its body is sent: a walk along the shortest of the filters' lists, each section looked up in
/// the others by binary search. A request holds its position and the catalog, never a list of
/// what matches, so a catalog of interleaved schemas costs a slow client no memory.
#[derive(Clone)]
struct MetasWalk {
    index: Arc<MetasIndex>,
    filters: [Option<String>; 3],
    /// The filter whose list the walk follows.
    driver: usize,
    /// The position in that list.
    at: usize,
}

impl MetasWalk {
    /// A walk over `filters` (at least one given).
    fn new(index: Arc<MetasIndex>, filters: [Option<String>; 3]) -> MetasWalk {
        let driver = (0..3)
            .filter_map(|i| Some((i, index.list(i, filters[i].as_deref()?).len())))
            .min_by_key(|&(_, len)| len)
            .map_or(0, |(i, _)| i);
        MetasWalk {
            index,
            filters,
            driver,
            at: 0,
        }
    }

    /// The next matching section, in file order.
    fn next_section(&mut self) -> Option<Section> {
        let index = &self.index;
        let driving = index.list(self.driver, self.filters[self.driver].as_deref()?);
        while let Some(&section) = driving.get(self.at) {
            self.at += 1;
            let everywhere = (0..3).filter(|&i| i != self.driver).all(|i| {
                self.filters[i].as_deref().is_none_or(|key| {
                    index
                        .list(i, key)
                        .binary_search_by_key(&section.offset, |s| s.offset)
                        .is_ok()
                })
            });
            if everywhere {
                return Some(section);
            }
        }
        None
    }
}

/// Where a body's sections come from.
enum Sections {
    /// Fixed ranges (`/all`: the whole file).
    Ranges(std::vec::IntoIter<Section>),
    /// A `/metas` walk.
    Metas(MetasWalk),
}

impl Sections {
    fn next_section(&mut self) -> Option<Section> {
        match self {
            Sections::Ranges(ranges) => ranges.next(),
            Sections::Metas(walk) => walk.next_section(),
        }
    }
}

/// One stored catalog: open handles to its JSONL and gzip files (so a replaced catalog keeps
/// serving requests already under way), its index and its modification time.
#[derive(Debug)]
pub struct StoredCatalog {
    /// The catalog name.
    pub name: String,
    jsonl: Arc<File>,
    jsonl_len: u64,
    gzip: Arc<File>,
    gzip_len: u64,
    index: Arc<MetasIndex>,
    /// When the content was stored, truncated to seconds (the `Last-Modified` value).
    pub last_modified: SystemTime,
    /// Number of metas.
    pub meta_count: usize,
    dir: PathBuf,
    jsonl_digest: [u8; 32],
    gzip_digest: [u8; 32],
}

impl StoredCatalog {
    /// Size of `catalog.jsonl` in bytes.
    pub fn jsonl_len(&self) -> u64 {
        self.jsonl_len
    }

    /// Where the stored files are (for tests that damage them).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Cheap: both files still have the sizes they were written with.
    fn sizes_intact(&self) -> Result<(), String> {
        for (file, expected, what) in [
            (&self.jsonl, self.jsonl_len, CATALOG_FILE),
            (&self.gzip, self.gzip_len, CATALOG_GZIP_FILE),
        ] {
            let actual = file.metadata().map_err(|e| format!("{what}: {e}"))?.len();
            if actual != expected {
                return Err(format!("{what} is {actual} bytes, {expected} were stored"));
            }
        }
        Ok(())
    }

    /// Reads both files whole (blocking): sizes and SHA-256 digests as written.
    pub fn verify(&self) -> Result<(), String> {
        self.sizes_intact()?;
        for (file, len, expected, what) in [
            (&self.jsonl, self.jsonl_len, &self.jsonl_digest, CATALOG_FILE),
            (&self.gzip, self.gzip_len, &self.gzip_digest, CATALOG_GZIP_FILE),
        ] {
            let mut hasher = Sha256::new();
            let mut buffer = vec![0u8; READ_CHUNK_BYTES as usize];
            let mut offset = 0u64;
            while offset < len {
                let want = usize::try_from((len - offset).min(READ_CHUNK_BYTES)).unwrap_or(0);
                file.read_exact_at(&mut buffer[..want], offset)
                    .map_err(|e| format!("{what}: {e}"))?;
                hasher.update(&buffer[..want]);
                offset += want as u64;
            }
            if hasher.finalize().as_slice() != expected {
                return Err(format!("{what} does not match the digest it was stored with"));
            }
        }
        Ok(())
    }
}

/// Passes writes through, hashing them.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(data)?;
        self.hasher.update(&data[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The catalogs a server serves, stored under a root directory.
#[derive(Debug)]
pub struct CatalogStore {
    root: PathBuf,
    catalogs: RwLock<HashMap<String, Arc<StoredCatalog>>>,
    max_line_bytes: usize,
    /// Bumped each time damaged content is dropped.
    damaged: tokio::sync::watch::Sender<u64>,
}

impl CatalogStore {
    /// A store rooted at `root` (created if missing; leftovers of earlier runs are removed).
    pub fn new(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        // Content of an earlier run is stale: catalogs are stored again when reconciled.
        for entry in std::fs::read_dir(root)?.flatten() {
            let path = entry.path();
            if path.join(CATALOG_FILE).is_file() || path.join(CATALOG_GZIP_FILE).is_file() {
                let _ = std::fs::remove_dir_all(path);
            }
        }
        Ok(CatalogStore {
            root: root.to_path_buf(),
            catalogs: RwLock::new(HashMap::new()),
            max_line_bytes: DEFAULT_MAX_JSONL_LINE_BYTES,
            damaged: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The same store refusing catalogs with a meta longer than `max_line_bytes` as a JSONL line.
    pub fn with_max_line_bytes(mut self, max_line_bytes: usize) -> Self {
        self.max_line_bytes = max_line_bytes;
        self
    }

    /// A stream that yields once after damaged content was dropped (its catalog must be stored
    /// again).
    pub fn damage_events(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let receiver = self.damaged.subscribe();
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.changed().await.ok()?;
            Some(((), receiver))
        })
    }

    /// Checks `name`'s files in full (blocking); damaged content is dropped. False when the
    /// catalog is not (or no longer) served.
    pub fn verify(&self, name: &str) -> bool {
        let Some(stored) = self.get(name) else {
            return false;
        };
        match stored.verify() {
            Ok(()) => true,
            Err(cause) => {
                self.drop_damaged(&stored, &cause);
                false
            }
        }
    }

    /// Stops serving `stored` (unless newer content replaced it already) and tells the reconciler.
    fn drop_damaged(&self, stored: &Arc<StoredCatalog>, cause: &str) {
        tracing::warn!(catalog = %stored.name, path = %stored.dir.display(), %cause,
            "stored catalog content is damaged; it is no longer served and will be stored again");
        let mut catalogs = self.write_lock();
        if catalogs
            .get(&stored.name)
            .is_some_and(|current| Arc::ptr_eq(current, stored))
        {
            catalogs.remove(&stored.name);
            let _ = std::fs::remove_dir_all(&stored.dir);
        }
        drop(catalogs);
        self.damaged.send_modify(|count| *count += 1);
    }

    /// Parses the FBC tree at `fbc_dir` (blocking; call from a blocking thread for large
    /// catalogs), writes its JSONL, gzip copy and index, and serves it under `name`, replacing
    /// any earlier content only once the new content is complete. No file over `max_file_bytes`
    /// is read. What the parse freed goes back to the system once it is done: catalogd serves
    /// from the files, and would otherwise keep a parse's peak resident while it serves.
    pub fn store_from_dir(
        &self,
        name: &str,
        fbc_dir: &Path,
        max_file_bytes: u64,
    ) -> Result<Arc<StoredCatalog>, ServerError> {
        let stored = self.parse_and_store(name, fbc_dir, max_file_bytes);
        crate::memory::release_freed_pages();
        stored
    }

    fn parse_and_store(
        &self,
        name: &str,
        fbc_dir: &Path,
        max_file_bytes: u64,
    ) -> Result<Arc<StoredCatalog>, ServerError> {
        validate_catalog_name(name).map_err(|_| ServerError::InvalidName(name.to_string()))?;
        let io_err = |action: &'static str, path: &Path| {
            let (catalog, path) = (name.to_string(), path.to_path_buf());
            move |source| ServerError::Io {
                catalog,
                action,
                path,
                source,
            }
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(&self.root)
            .map_err(io_err("creating a directory in", &self.root))?;
        let jsonl_path = dir.path().join(CATALOG_FILE);
        let gzip_path = dir.path().join(CATALOG_GZIP_FILE);
        let mut jsonl_out = HashingWriter {
            inner: BufWriter::new(File::create(&jsonl_path).map_err(io_err("creating", &jsonl_path))?),
            hasher: Sha256::new(),
        };
        let gzip_file = File::create(&gzip_path).map_err(io_err("creating", &gzip_path))?;
        let mut gzip_out = flate2::write::GzEncoder::new(
            HashingWriter {
                inner: BufWriter::new(gzip_file),
                hasher: Sha256::new(),
            },
            flate2::Compression::new(6),
        );
        let mut index = MetasIndex::default();
        let mut offset = 0u64;
        let mut meta_count = 0usize;
        let mut write_failure: Option<io::Error> = None;
        for_each_dir_meta_within(fbc_dir, max_file_bytes, |meta| {
            if meta.blob.len() > self.max_line_bytes {
                return Err(line_too_long(&meta.origin, meta.position, self.max_line_bytes));
            }
            let write = jsonl_out
                .write_all(&meta.blob)
                .and_then(|()| jsonl_out.write_all(b"\n"))
                .and_then(|()| gzip_out.write_all(&meta.blob))
                .and_then(|()| gzip_out.write_all(b"\n"));
            if let Err(e) = write {
                write_failure.get_or_insert(e);
            }
            let len = meta.blob.len() as u64 + 1;
            index.add(&meta.schema, &meta.package, &meta.name, Section { offset, len });
            offset += len;
            meta_count += 1;
            Ok(())
        })
        .map_err(|source| ServerError::Catalog {
            catalog: name.to_string(),
            source,
        })?;
        if let Some(e) = write_failure {
            return Err(io_err("writing", &jsonl_path)(e));
        }
        jsonl_out.flush().map_err(io_err("writing", &jsonl_path))?;
        let jsonl_digest: [u8; 32] = jsonl_out.hasher.finalize().into();
        let mut gzip_written = gzip_out.finish().map_err(io_err("writing", &gzip_path))?;
        gzip_written.flush().map_err(io_err("writing", &gzip_path))?;
        let gzip_digest: [u8; 32] = gzip_written.hasher.finalize().into();

        let jsonl = File::open(&jsonl_path).map_err(io_err("opening", &jsonl_path))?;
        let gzip = File::open(&gzip_path).map_err(io_err("opening", &gzip_path))?;
        let gzip_len = gzip.metadata().map_err(io_err("reading", &gzip_path))?.len();
        let stored = Arc::new(StoredCatalog {
            name: name.to_string(),
            jsonl: Arc::new(jsonl),
            jsonl_len: offset,
            gzip: Arc::new(gzip),
            gzip_len,
            index: Arc::new(index),
            last_modified: truncate_to_seconds(SystemTime::now()),
            meta_count,
            dir: dir.keep(),
            jsonl_digest,
            gzip_digest,
        });
        let previous = self.write_lock().insert(name.to_string(), stored.clone());
        if let Some(previous) = previous {
            // Open handles keep serving requests under way; the files go when they close.
            let _ = std::fs::remove_dir_all(&previous.dir);
        }
        Ok(stored)
    }

    /// Stops serving `name` and deletes its files (no error when absent).
    pub fn remove(&self, name: &str) {
        if let Some(previous) = self.write_lock().remove(name) {
            let _ = std::fs::remove_dir_all(&previous.dir);
        }
    }

    /// The stored catalog `name`, if served.
    pub fn get(&self, name: &str) -> Option<Arc<StoredCatalog>> {
        self.catalogs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Names of the served catalogs.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .catalogs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<StoredCatalog>>> {
        self.catalogs.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn truncate_to_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Checks a catalog name as `validation.IsDNS1123Subdomain` does; the error is upstream's text.
pub fn validate_catalog_name(name: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    if name.len() > 253 {
        problems.push("must be no more than 253 characters".to_string());
    }
    if !DNS1123_SUBDOMAIN.is_match(name) {
        problems.push(DNS1123_SUBDOMAIN_MESSAGE.to_string());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Bounds on what clients can make the server hold; every one is a `catalogd` flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeLimits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Requests in progress at once (a response counts until its body is sent); more get 503.
    pub max_concurrent_requests: usize,
    /// Response bytes read from disk and not yet sent, over all responses; a response waits for
    /// room before reading more (a slow client slows only itself).
    pub max_bytes_in_flight: usize,
    /// Time a client has to send a request's headers.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: 1024,
            max_concurrent_requests: 128,
            max_bytes_in_flight: 64 << 20,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Clone, Debug)]
struct ServerState {
    store: Arc<CatalogStore>,
    requests: Arc<Semaphore>,
    bytes_in_flight: Arc<Semaphore>,
}

/// The HTTP handler of the catalog server (all routes) with default limits.
pub fn router(store: Arc<CatalogStore>) -> axum::Router {
    router_with_limits(store, &ServeLimits::default())
}

/// The HTTP handler of the catalog server (all routes), bounded by `limits`.
pub fn router_with_limits(store: Arc<CatalogStore>, limits: &ServeLimits) -> axum::Router {
    let state = ServerState {
        store,
        requests: Arc::new(Semaphore::new(limits.max_concurrent_requests.max(1))),
        bytes_in_flight: Arc::new(Semaphore::new(
            limits
                .max_bytes_in_flight
                .clamp(READ_CHUNK_BYTES as usize, Semaphore::MAX_PERMITS),
        )),
    };
    axum::Router::new().fallback(handle).with_state(state)
}

enum Endpoint {
    All,
    Metas,
}

async fn handle(State(state): State<ServerState>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let Some((catalog, endpoint)) = parse_path(&path) else {
        return text_response(StatusCode::NOT_FOUND, "404 page not found");
    };
    let method = request.method().clone();
    if method != Method::GET && method != Method::HEAD {
        return text_response(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    if let Err(problems) = validate_catalog_name(catalog) {
        return text_response(
            StatusCode::BAD_REQUEST,
            &format!("invalid catalog name: {problems}"),
        );
    }
    let Some(stored) = state.store.get(catalog) else {
        return text_response(StatusCode::NOT_FOUND, "404 Not Found");
    };
    if let Err(cause) = stored.sizes_intact() {
        state.store.drop_damaged(&stored, &cause);
        return text_response(StatusCode::NOT_FOUND, "404 Not Found");
    }
    // Held until the response body is sent (or the client goes away).
    let Ok(request_permit) = state.requests.clone().try_acquire_owned() else {
        let mut response = text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: too many requests in progress",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let head = method == Method::HEAD;
    let headers = request.headers();
    let body_source =
        |file: Arc<File>, sections: Sections, total: u64, gzip: bool, digest: Option<[u8; 32]>| BodySource {
            file,
            sections,
            left: total,
            gzip,
            bytes_in_flight: state.bytes_in_flight.clone(),
            _request_permit: request_permit,
            check: digest.map(|expected| WholeFileCheck {
                expected,
                hasher: Sha256::new(),
                store: state.store.clone(),
                stored: stored.clone(),
            }),
        };
    match endpoint {
        Endpoint::All => serve_all(&stored, headers, head, body_source),
        Endpoint::Metas => {
            let filters = match parse_metas_query(request.uri().query().unwrap_or("")) {
                Ok(filters) => filters,
                Err(()) => return text_response(StatusCode::BAD_REQUEST, "400 Bad Request"),
            };
            if filters.iter().all(Option::is_none) {
                return serve_all(&stored, headers, head, body_source);
            }
            if not_modified(headers, stored.last_modified) {
                return not_modified_response(stored.last_modified);
            }
            let walk = MetasWalk::new(stored.index.clone(), filters);
            // One walk to size the body (a few microseconds per thousand metas, no memory);
            // the body walks again as it is sent.
            let total: u64 = {
                let mut sizing = walk.clone();
                std::iter::from_fn(|| sizing.next_section()).map(|s| s.len).sum()
            };
            let gzip = accepts_gzip(headers) && total >= GZIP_MIN_BYTES;
            let mut builder = Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, JSONL_CONTENT_TYPE)
                .header(
                    header::LAST_MODIFIED,
                    httpdate::fmt_http_date(stored.last_modified),
                )
                .header(header::VARY, "Accept-Encoding");
            if gzip {
                builder = builder.header(header::CONTENT_ENCODING, "gzip");
            } else {
                builder = builder.header(header::CONTENT_LENGTH, total);
            }
            let body = if head {
                Body::empty()
            } else {
                // Streamed from disk a chunk at a time, compressed on the way when asked.
                Body::from_stream(
                    body_source(stored.jsonl.clone(), Sections::Metas(walk), total, gzip, None).stream(),
                )
            };
            builder.body(body).unwrap_or_else(|_| internal_error())
        }
    }
}

/// `/catalogs/<name>/api/v1/{all,metas}` -> (name, endpoint).
fn parse_path(path: &str) -> Option<(&str, Endpoint)> {
    let rest = path.strip_prefix("/catalogs/")?;
    let mut parts = rest.split('/');
    let (name, api, v1, last) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || name.is_empty() || api != "api" || v1 != "v1" {
        return None;
    }
    match last {
        "all" => Some((name, Endpoint::All)),
        "metas" => Some((name, Endpoint::Metas)),
        _ => None,
    }
}

/// `[schema, package, name]`; an unknown key is an error; empty values count as absent; the
/// first of duplicate keys wins (as Go's `Query().Get`).
fn parse_metas_query(query: &str) -> Result<[Option<String>; 3], ()> {
    let mut filters: [Option<String>; 3] = [None, None, None];
    let mut seen = [false; 3];
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match key.as_ref() {
            "schema" => 0,
            "package" => 1,
            "name" => 2,
            _ => return Err(()),
        };
        if !seen[slot] {
            seen[slot] = true;
            if !value.is_empty() {
                filters[slot] = Some(value.into_owned());
            }
        }
    }
    Ok(filters)
}

fn serve_all(
    stored: &StoredCatalog,
    headers: &HeaderMap,
    head: bool,
    body_source: impl FnOnce(Arc<File>, Sections, u64, bool, Option<[u8; 32]>) -> BodySource,
) -> Response {
    if not_modified(headers, stored.last_modified) {
        return not_modified_response(stored.last_modified);
    }
    let gzip = accepts_gzip(headers) && stored.jsonl_len >= GZIP_MIN_BYTES;
    let (file, len, digest) = if gzip {
        (stored.gzip.clone(), stored.gzip_len, stored.gzip_digest)
    } else {
        (stored.jsonl.clone(), stored.jsonl_len, stored.jsonl_digest)
    };
    let mut builder = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, JSONL_CONTENT_TYPE)
        .header(
            header::LAST_MODIFIED,
            httpdate::fmt_http_date(stored.last_modified),
        )
        .header(header::VARY, "Accept-Encoding")
        .header(header::CONTENT_LENGTH, len);
    if gzip {
        builder = builder.header(header::CONTENT_ENCODING, "gzip");
    }
    let body = if head {
        Body::empty()
    } else {
        // The stored gzip copy is sent as it is, its digest checked on the way.
        Body::from_stream(
            body_source(
                file,
                Sections::Ranges(vec![Section { offset: 0, len }].into_iter()),
                len,
                false,
                Some(digest),
            )
            .stream(),
        )
    };
    builder.body(body).unwrap_or_else(|_| internal_error())
}

/// One response body: byte ranges of a stored file, read a chunk at a time on blocking
/// threads (sections that follow each other in the file read as one), each chunk holding its
/// share of the server's bytes-in-flight budget until it is sent, and the request's permit held
/// until the body ends.
struct BodySource {
    file: Arc<File>,
    sections: Sections,
    /// Bytes of the sections not read yet.
    left: u64,
    gzip: bool,
    bytes_in_flight: Arc<Semaphore>,
    _request_permit: OwnedSemaphorePermit,
    check: Option<WholeFileCheck>,
}

/// The digest check of a whole-file body: the last chunk is sent only if it matches.
struct WholeFileCheck {
    expected: [u8; 32],
    hasher: Sha256,
    store: Arc<CatalogStore>,
    stored: Arc<StoredCatalog>,
}

/// A chunk of a response and the share of the bytes-in-flight budget it holds.
struct BudgetedChunk {
    data: Vec<u8>,
    _budget: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for BudgetedChunk {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

struct BodyCursor {
    source: BodySource,
    /// The rest of a section a chunk ended inside of.
    pending: Option<Section>,
    encoder: Option<flate2::write::GzEncoder<Vec<u8>>>,
    finished: bool,
}

impl BodySource {
    fn stream(self) -> impl futures::Stream<Item = io::Result<Bytes>> + Send {
        let encoder = self
            .gzip
            .then(|| flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let cursor = BodyCursor {
            source: self,
            pending: None,
            encoder,
            finished: false,
        };
        futures::stream::try_unfold(cursor, |mut cursor| async move {
            loop {
                if cursor.finished {
                    return Ok(None);
                }
                // The next chunk: at most READ_CHUNK_BYTES, its share of the budget taken before
                // it is read; the sections are found while it is read.
                let want = cursor.source.left.min(READ_CHUNK_BYTES);
                let budget = cursor
                    .source
                    .bytes_in_flight
                    .clone()
                    .acquire_many_owned(u32::try_from(want.max(1)).unwrap_or(u32::MAX))
                    .await
                    .map_err(io::Error::other)?;
                let file = cursor.source.file.clone();
                let mut encoder = cursor.encoder.take();
                let mut sections = std::mem::replace(
                    &mut cursor.source.sections,
                    Sections::Ranges(Vec::new().into_iter()),
                );
                let mut pending = cursor.pending.take();
                let (data, encoder, sections, pending, last) = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0u8; usize::try_from(want).map_err(io::Error::other)?];
                    let mut at = 0usize;
                    // A run of sections that follow each other, read at once.
                    let mut run: Option<(u64, usize)> = None;
                    let read = |buf: &mut [u8], run: (u64, usize), at: usize| {
                        file.read_exact_at(&mut buf[at - run.1..at], run.0)
                    };
                    while at < buf.len() {
                        let Some(section) = pending.take().or_else(|| sections.next_section()) else {
                            break;
                        };
                        let take = usize::try_from(section.len.min((buf.len() - at) as u64))
                            .map_err(io::Error::other)?;
                        if (take as u64) < section.len {
                            pending = Some(Section {
                                offset: section.offset + take as u64,
                                len: section.len - take as u64,
                            });
                        }
                        match &mut run {
                            Some((offset, len)) if *offset + *len as u64 == section.offset => *len += take,
                            _ => {
                                if let Some(done) = run {
                                    read(&mut buf, done, at)?;
                                }
                                run = Some((section.offset, take));
                            }
                        }
                        at += take;
                    }
                    if let Some(done) = run {
                        read(&mut buf, done, at)?;
                    }
                    if at < buf.len() {
                        // The catalog changed under the walk: never send what was not read.
                        return Err(io::Error::other("the stored catalog ended before its index"));
                    }
                    if pending.is_none() {
                        pending = sections.next_section();
                    }
                    let last = pending.is_none();
                    let Some(mut gz) = encoder.take() else {
                        return Ok::<_, io::Error>((buf, None, sections, pending, last));
                    };
                    gz.write_all(&buf)?;
                    if last {
                        return Ok((gz.finish()?, None, sections, pending, last));
                    }
                    let out = std::mem::take(gz.get_mut());
                    Ok((out, Some(gz), sections, pending, last))
                })
                .await
                .map_err(io::Error::other)??;
                cursor.source.sections = sections;
                cursor.source.left -= want;
                cursor.pending = pending;
                cursor.encoder = encoder;
                cursor.finished = last;
                if let Some(check) = cursor.source.check.as_mut() {
                    check.hasher.update(&data);
                    if last && check.hasher.finalize_reset().as_slice() != check.expected {
                        let cause = "the content read does not match the digest it was stored with";
                        check.store.drop_damaged(&check.stored, cause);
                        // The client sees a short body: never the damaged content as complete.
                        return Err(io::Error::other(format!(
                            "catalog {}: {cause}",
                            check.stored.name
                        )));
                    }
                }
                if data.is_empty() {
                    continue; // the compressor kept it all for now
                }
                let chunk = Bytes::from_owner(BudgetedChunk {
                    data,
                    _budget: budget,
                });
                return Ok(Some((chunk, cursor)));
            }
        })
    }
}

/// True when `Accept-Encoding` lists gzip (or `*`) with a non-zero quality.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|value| {
            value.split(',').any(|item| {
                let mut parts = item.split(';');
                let coding = parts.next().unwrap_or_default().trim();
                let zero_quality = parts.any(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .is_some_and(|q| q == 0.0)
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !zero_quality
            })
        })
}

/// RFC 7232: If-Modified-Since at or after the modification time (whole seconds) -> 304.
fn not_modified(headers: &HeaderMap, last_modified: SystemTime) -> bool {
    headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
        .is_some_and(|since| last_modified <= since)
}

fn not_modified_response(last_modified: SystemTime) -> Response {
    Response::builder()
        .status(StatusCode::NOT_MODIFIED)
        .header(header::LAST_MODIFIED, httpdate::fmt_http_date(last_modified))
        .header(header::VARY, "Accept-Encoding")
        .body(Body::empty())
        .unwrap_or_else(|_| internal_error())
}

fn text_response(status: StatusCode, message: &str) -> Response {
    let mut response = Response::new(Body::from(format!("{message}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert("X-Content-Type-Options", HeaderValue::from_static("nosniff"));
    response
}

fn internal_error() -> Response {
    let mut response = Response::new(Body::from("500 Internal Server Error\n"));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// TLS files for the server.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// Serves `store` on `listener` (HTTPS when `tls` is set) until `shutdown` completes, within
/// `limits`: a connection cap, a header-read timeout, an idle timeout, and (in the router) caps
/// on requests and bytes in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<CatalogStore>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = router_with_limits(store, &limits);
    serve_app(listener, app, tls, limits, shutdown).await;
    Ok(())
}

/// Serves `app` on `listener` (HTTPS with `acceptor`) until `shutdown` completes, with the
/// connection cap, header-read and idle timeouts of `limits` (the catalog server's and the
/// metrics server's connection handling).
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "connection limit reached; closing the new connection");
            continue;
        };
        let (acceptor, app, stopped) = (acceptor.clone(), app.clone(), stopped.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            match acceptor {
                None => serve_connection(stream, app, &limits, stopped).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve_connection(tls, app, &limits, stopped).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
    let _ = stop.send(true);
}

/// Serves HTTP/1.1 on one connection until it ends, sits idle past the limit, or the server stops.
async fn serve_connection<S>(
    stream: S,
    app: axum::Router,
    limits: &ServeLimits,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let started = tokio::time::Instant::now();
    let activity = Arc::new(AtomicU64::new(0));
    let io = hyper_util::rt::TokioIo::new(Watched {
        inner: stream,
        started,
        activity: activity.clone(),
    });
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut tick = tokio::time::interval((limits.idle_timeout / 4).max(Duration::from_millis(100)));
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tick.tick() => {
                let last = Duration::from_millis(activity.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(last) > limits.idle_timeout {
                    tracing::debug!("closing an idle connection");
                    return;
                }
            }
            changed = stopped.changed() => {
                if changed.is_err() || *stopped.borrow() {
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A stream that records when a byte last moved either way (for the idle timeout).
struct Watched<S> {
    inner: S,
    started: tokio::time::Instant,
    activity: Arc<AtomicU64>,
}

impl<S> Watched<S> {
    fn touch(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(now, Ordering::Relaxed);
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        result
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Builds a rustls acceptor from PEM files, offering what `profile` allows; the files are read
/// again when they change.
pub fn tls_acceptor(
    files: &TlsFiles,
    profile: &crate::tls_profile::TlsProfile,
) -> Result<tokio_rustls::TlsAcceptor, ServerError> {
    let certificates = Arc::new(ReloadingCertificate::load(files.clone())?);
    let config = profile
        .server_config(certificates)
        .map_err(|e| ServerError::Tls(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// How often a handshake may look at the certificate files' modification times.
const CERTIFICATE_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// A serving certificate read from PEM files, and read again after they change: cert-manager and
/// the OpenShift service CA rotate the mounted Secret in place (upstream's servers watch the
/// files too). A rotation that cannot be read keeps the previous certificate.
#[derive(Debug)]
struct ReloadingCertificate {
    files: TlsFiles,
    current: std::sync::Mutex<LoadedCertificate>,
}

#[derive(Debug)]
struct LoadedCertificate {
    key: Arc<rustls::sign::CertifiedKey>,
    modified: Option<std::time::SystemTime>,
    checked: std::time::Instant,
}

impl ReloadingCertificate {
    fn load(files: TlsFiles) -> Result<Self, ServerError> {
        let modified = Self::modified(&files);
        let key = Arc::new(Self::read(&files)?);
        Ok(Self {
            files,
            current: std::sync::Mutex::new(LoadedCertificate {
                key,
                modified,
                checked: std::time::Instant::now(),
            }),
        })
    }

    /// The later modification time of the two files (following the Secret volume's links).
    fn modified(files: &TlsFiles) -> Option<std::time::SystemTime> {
        let time = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        time(&files.cert).max(time(&files.key))
    }

    fn read(files: &TlsFiles) -> Result<rustls::sign::CertifiedKey, ServerError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
            .and_then(|iter| iter.collect::<Result<_, _>>())
            .map_err(|e| ServerError::Tls(format!("reading certificate {}: {e}", files.cert.display())))?;
        if certs.is_empty() {
            return Err(ServerError::Tls(format!(
                "no certificate in {}",
                files.cert.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(&files.key)
            .map_err(|e| ServerError::Tls(format!("reading key {}: {e}", files.key.display())))?;
        rustls::sign::CertifiedKey::from_der(certs, key, &rustls::crypto::ring::default_provider())
            .map_err(|e| ServerError::Tls(format!("certificate and key do not match: {e}")))
    }
}

impl rustls::server::ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.checked.elapsed() >= CERTIFICATE_CHECK_INTERVAL {
            current.checked = std::time::Instant::now();
            let modified = Self::modified(&self.files);
            if modified != current.modified {
                match Self::read(&self.files) {
                    Ok(key) => {
                        tracing::info!(certificate = %self.files.cert.display(), "serving certificate reloaded");
                        current.key = Arc::new(key);
                        current.modified = modified;
                    }
                    Err(error) => tracing::warn!(%error, "keeping the previous serving certificate"),
                }
            }
        }
        Some(current.key.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(offset: u64) -> Section {
        Section { offset, len: 1 }
    }

    /// The sections a walk finds, in order.
    fn lookup(index: MetasIndex, filters: [Option<&str>; 3]) -> Vec<Section> {
        let mut walk = MetasWalk::new(Arc::new(index), filters.map(|f| f.map(str::to_string)));
        std::iter::from_fn(|| walk.next_section()).collect()
    }

    #[test]
    fn index_walk_intersects_in_file_order() {
        let index = || {
            let mut index = MetasIndex::default();
            let a: Arc<str> = Arc::from("olm.bundle");
            let c: Arc<str> = Arc::from("olm.channel");
            let p: Arc<str> = Arc::from("foo");
            let empty: Arc<str> = Arc::from("");
            index.add(&Arc::from("olm.package"), &empty, &p, section(0));
            index.add(&c, &p, &Arc::from("stable"), section(10));
            index.add(&a, &p, &Arc::from("foo.v1"), section(20));
            index.add(&a, &Arc::from("bar"), &Arc::from("bar.v1"), section(30));
            index
        };
        assert_eq!(
            lookup(index(), [Some("olm.bundle"), None, None]),
            vec![section(20), section(30)]
        );
        assert_eq!(
            lookup(index(), [None, Some("foo"), None]),
            vec![section(10), section(20)]
        );
        assert_eq!(
            lookup(index(), [Some("olm.bundle"), Some("foo"), Some("foo.v1")]),
            vec![section(20)]
        );
        assert!(lookup(index(), [Some("olm.bundle"), Some("missing"), None]).is_empty());
        assert_eq!(lookup(index(), [None, None, Some("foo")]), vec![section(0)]);
    }

    #[test]
    fn paths_and_queries_parse_as_upstream() {
        assert!(matches!(
            parse_path("/catalogs/c/api/v1/all"),
            Some(("c", Endpoint::All))
        ));
        assert!(matches!(
            parse_path("/catalogs/c/api/v1/metas"),
            Some(("c", Endpoint::Metas))
        ));
        for bad in [
            "/",
            "/catalogs/",
            "/catalogs/c/",
            "/catalogs/c/api/v1",
            "/catalogs/c.jsonl",
            "/catalogs/c/api/v1c",
        ] {
            assert!(parse_path(bad).is_none(), "{bad}");
        }
        assert_eq!(
            parse_metas_query("schema=olm.bundle&schema=x&package=").unwrap(),
            [Some("olm.bundle".to_string()), None, None]
        );
        assert!(parse_metas_query("foo=bar").is_err());
        assert!(validate_catalog_name("operatorhubio").is_ok());
        assert!(validate_catalog_name("Bad_Name").is_err());
    }

    #[test]
    fn gzip_acceptance() {
        let mut headers = HeaderMap::new();
        assert!(!accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("br, gzip;q=0.8"),
        );
        assert!(accepts_gzip(&headers));
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip;q=0"));
        assert!(!accepts_gzip(&headers));
    }
}
