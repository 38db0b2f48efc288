//! The catalog HTTP server (catalogd's role): stores each catalog as `catalog.jsonl` plus a
//! precompressed copy and an in-memory metas index, and serves
//! `/catalogs/<name>/api/v1/all` and `/catalogs/<name>/api/v1/metas?schema=&package=&name=`
//! as upstream catalogd does (status codes, bodies, gzip, Last-Modified / If-Modified-Since).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use regex::Regex;

use super::for_each_dir_meta;

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

    /// Sections matching every given filter, in file order.
    fn lookup(&self, schema: Option<&str>, package: Option<&str>, name: Option<&str>) -> Vec<Section> {
        let lists = [
            (&self.by_schema, schema),
            (&self.by_package, package),
            (&self.by_name, name),
        ];
        let mut result: Option<Vec<Section>> = None;
        for (map, wanted) in lists {
            let Some(wanted) = wanted else { continue };
            let found = map.get(wanted).map(Vec::as_slice).unwrap_or_default();
            result = Some(match result {
                None => found.to_vec(),
                Some(previous) => intersect_sorted(&previous, found),
            });
        }
        result.unwrap_or_default()
    }
}

fn intersect_sorted(a: &[Section], b: &[Section]) -> Vec<Section> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].offset.cmp(&b[j].offset) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
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
    index: MetasIndex,
    /// When the content was stored, truncated to seconds (the `Last-Modified` value).
    pub last_modified: SystemTime,
    /// Number of metas.
    pub meta_count: usize,
    dir: PathBuf,
}

impl StoredCatalog {
    /// Size of `catalog.jsonl` in bytes.
    pub fn jsonl_len(&self) -> u64 {
        self.jsonl_len
    }
}

/// The catalogs a server serves, stored under a root directory.
#[derive(Debug)]
pub struct CatalogStore {
    root: PathBuf,
    catalogs: RwLock<HashMap<String, Arc<StoredCatalog>>>,
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
        })
    }

    /// Parses the FBC tree at `fbc_dir` (blocking; call from a blocking thread for large
    /// catalogs), writes its JSONL, gzip copy and index, and serves it under `name`, replacing
    /// any earlier content only once the new content is complete.
    pub fn store_from_dir(&self, name: &str, fbc_dir: &Path) -> Result<Arc<StoredCatalog>, ServerError> {
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
        let mut jsonl_out =
            BufWriter::new(File::create(&jsonl_path).map_err(io_err("creating", &jsonl_path))?);
        let gzip_file = File::create(&gzip_path).map_err(io_err("creating", &gzip_path))?;
        let mut gzip_out =
            flate2::write::GzEncoder::new(BufWriter::new(gzip_file), flate2::Compression::new(6));
        let mut index = MetasIndex::default();
        let mut offset = 0u64;
        let mut meta_count = 0usize;
        let mut write_failure: Option<io::Error> = None;
        for_each_dir_meta(fbc_dir, |meta| {
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
        drop(jsonl_out);
        gzip_out
            .finish()
            .and_then(|mut w| w.flush())
            .map_err(io_err("writing", &gzip_path))?;

        let jsonl = File::open(&jsonl_path).map_err(io_err("opening", &jsonl_path))?;
        let gzip = File::open(&gzip_path).map_err(io_err("opening", &gzip_path))?;
        let gzip_len = gzip.metadata().map_err(io_err("reading", &gzip_path))?.len();
        let stored = Arc::new(StoredCatalog {
            name: name.to_string(),
            jsonl: Arc::new(jsonl),
            jsonl_len: offset,
            gzip: Arc::new(gzip),
            gzip_len,
            index,
            last_modified: truncate_to_seconds(SystemTime::now()),
            meta_count,
            dir: dir.keep(),
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

/// The HTTP handler of the catalog server (all routes), for `axum::serve` or tests.
pub fn router(store: Arc<CatalogStore>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(store)
}

enum Endpoint {
    All,
    Metas,
}

async fn handle(State(store): State<Arc<CatalogStore>>, request: Request) -> Response {
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
    let Some(stored) = store.get(catalog) else {
        return text_response(StatusCode::NOT_FOUND, "404 Not Found");
    };
    let head = method == Method::HEAD;
    let headers = request.headers();
    match endpoint {
        Endpoint::All => serve_all(&stored, headers, head),
        Endpoint::Metas => {
            let filters = match parse_metas_query(request.uri().query().unwrap_or("")) {
                Ok(filters) => filters,
                Err(()) => return text_response(StatusCode::BAD_REQUEST, "400 Bad Request"),
            };
            if filters.iter().all(Option::is_none) {
                return serve_all(&stored, headers, head);
            }
            if not_modified(headers, stored.last_modified) {
                return not_modified_response(stored.last_modified);
            }
            let sections = stored.index.lookup(
                filters[0].as_deref(),
                filters[1].as_deref(),
                filters[2].as_deref(),
            );
            let file = stored.jsonl.clone();
            let body = match tokio::task::spawn_blocking(move || read_sections(&file, &sections)).await {
                Ok(Ok(body)) => body,
                _ => return text_response(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error"),
            };
            let mut builder = Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, JSONL_CONTENT_TYPE)
                .header(
                    header::LAST_MODIFIED,
                    httpdate::fmt_http_date(stored.last_modified),
                )
                .header(header::VARY, "Accept-Encoding");
            let body = if accepts_gzip(headers) && body.len() as u64 >= GZIP_MIN_BYTES {
                builder = builder.header(header::CONTENT_ENCODING, "gzip");
                match tokio::task::spawn_blocking(move || gzip_bytes(&body)).await {
                    Ok(Ok(compressed)) => compressed,
                    _ => {
                        return text_response(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error");
                    }
                }
            } else {
                body
            };
            let body = if head { Body::empty() } else { Body::from(body) };
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

fn serve_all(stored: &StoredCatalog, headers: &HeaderMap, head: bool) -> Response {
    if not_modified(headers, stored.last_modified) {
        return not_modified_response(stored.last_modified);
    }
    let gzip = accepts_gzip(headers) && stored.jsonl_len >= GZIP_MIN_BYTES;
    let (file, len) = if gzip {
        (stored.gzip.clone(), stored.gzip_len)
    } else {
        (stored.jsonl.clone(), stored.jsonl_len)
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
        Body::from_stream(file_stream(file, len))
    };
    builder.body(body).unwrap_or_else(|_| internal_error())
}

/// Streams `len` bytes of `file` with positional reads on blocking threads.
fn file_stream(file: Arc<File>, len: u64) -> impl futures::Stream<Item = io::Result<Bytes>> + Send {
    futures::stream::try_unfold(0u64, move |offset| {
        let file = file.clone();
        async move {
            if offset >= len {
                return Ok(None);
            }
            let want = READ_CHUNK_BYTES.min(len - offset);
            let chunk = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; want as usize];
                file.read_exact_at(&mut buf, offset).map(|()| Bytes::from(buf))
            })
            .await
            .map_err(io::Error::other)??;
            Ok(Some((chunk, offset + want)))
        }
    })
}

fn read_sections(file: &File, sections: &[Section]) -> io::Result<Vec<u8>> {
    let total: u64 = sections.iter().map(|s| s.len).sum();
    let mut body = vec![0u8; usize::try_from(total).map_err(io::Error::other)?];
    let mut at = 0usize;
    for section in sections {
        let len = section.len as usize;
        file.read_exact_at(&mut body[at..at + len], section.offset)?;
        at += len;
    }
    Ok(body)
}

fn gzip_bytes(data: &[u8]) -> io::Result<Vec<u8>> {
    let mut encoder =
        flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 4), flate2::Compression::fast());
    encoder.write_all(data)?;
    encoder.finish()
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

/// Serves `store` on `listener` (HTTPS when `tls` is set) until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<CatalogStore>,
    tls: Option<TlsFiles>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = router(store);
    match tls {
        None => axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| ServerError::Tls(format!("serving: {e}"))),
        Some(files) => {
            let acceptor = tls_acceptor(&files)?;
            let listener = TlsListener::new(listener, acceptor);
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(|e| ServerError::Tls(format!("serving: {e}")))
        }
    }
}

/// Builds a rustls acceptor (TLS 1.2+) from PEM files.
pub fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, ServerError> {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServerError::Tls(format!("certificate and key do not match: {e}")))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A listener that completes TLS handshakes off the accept loop (a slow client cannot stall it).
struct TlsListener {
    incoming:
        tokio::sync::mpsc::Receiver<(tokio_rustls::server::TlsStream<tokio::net::TcpStream>, SocketAddr)>,
    local_addr: io::Result<SocketAddr>,
}

impl TlsListener {
    fn new(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor) -> Self {
        let local_addr = listener.local_addr();
        let (sender, incoming) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, addr) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, handshake_sender) = (acceptor.clone(), sender.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handshake_sender.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(peer = %addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(peer = %addr, "TLS handshake timed out"),
                    }
                });
                if sender.is_closed() {
                    return;
                }
            }
        });
        TlsListener { incoming, local_addr }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accept task only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.local_addr
            .as_ref()
            .map(|a| *a)
            .map_err(|e| io::Error::new(e.kind(), e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(offset: u64) -> Section {
        Section { offset, len: 1 }
    }

    #[test]
    fn index_lookup_intersects_in_file_order() {
        let mut index = MetasIndex::default();
        let a: Arc<str> = Arc::from("olm.bundle");
        let c: Arc<str> = Arc::from("olm.channel");
        let p: Arc<str> = Arc::from("foo");
        let empty: Arc<str> = Arc::from("");
        index.add(&Arc::from("olm.package"), &empty, &p, section(0));
        index.add(&c, &p, &Arc::from("stable"), section(10));
        index.add(&a, &p, &Arc::from("foo.v1"), section(20));
        index.add(&a, &Arc::from("bar"), &Arc::from("bar.v1"), section(30));
        assert_eq!(
            index.lookup(Some("olm.bundle"), None, None),
            vec![section(20), section(30)]
        );
        assert_eq!(
            index.lookup(None, Some("foo"), None),
            vec![section(10), section(20)]
        );
        assert_eq!(
            index.lookup(Some("olm.bundle"), Some("foo"), Some("foo.v1")),
            vec![section(20)]
        );
        assert!(index.lookup(Some("olm.bundle"), Some("missing"), None).is_empty());
        assert_eq!(index.lookup(None, None, Some("foo")), vec![section(0)]);
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
