//! A client for the OCI distribution API: manifests, blobs, uploads; anonymous, Basic and
//! bearer-token auth; TLS with extra CAs; plain HTTP only for insecure or loopback registries.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::ImageError;
use super::mirrors::RegistriesConf;
use super::reference::ImageReference;
use crate::backoff::Backoff;

/// OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker v2 schema 2 manifest media type.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker v2 manifest list media type.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// OCI image config media type.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// OCI gzip layer media type.
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// OCI uncompressed layer media type.
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json";
const USER_AGENT: &str = concat!("olmv1/", env!("CARGO_PKG_VERSION"));
const MAX_TOKEN_BODY_BYTES: usize = 1 << 20;
const MAX_ERROR_BODY_BYTES: usize = 4096;
/// The longest wait between two attempts of one request.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

pub use super::credentials::{Credential, Credentials};

/// The platform chosen from a multi-platform index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// e.g. `linux`.
    pub os: String,
    /// e.g. `amd64`.
    pub architecture: String,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
        }
    }
}

/// How to reach registries.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// Registries (`host[:port]`) that may be reached over plain HTTP (HTTPS is tried first).
    /// Loopback registries are always allowed plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Extra trusted CA certificates (PEM), added to the system roots.
    pub extra_ca_pem: Vec<u8>,
    /// Credentials by registry host (`host[:port]`), shared by every clone of this configuration.
    pub credentials: Credentials,
    /// Connect timeout, and the longest wait for any read.
    pub timeout: Duration,
    /// Attempts for a request failing with a transport error, 429 or 5xx.
    pub max_attempts: u32,
    /// First backoff between attempts; doubles each time.
    pub initial_backoff: Duration,
    /// Platform picked from an index.
    pub platform: Platform,
    /// Largest manifest or config accepted.
    pub max_manifest_bytes: u64,
    /// Largest blob accepted.
    pub max_blob_bytes: u64,
    /// Mirrors, remapped, blocked and insecure registries (containers-registries.conf(5)).
    pub registries_conf: RegistriesConf,
    /// The lowest TLS version accepted (the TLS profile's; TLS 1.2 by default).
    pub min_tls_version: crate::tls_profile::TlsVersion,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            insecure_registries: Vec::new(),
            extra_ca_pem: Vec::new(),
            credentials: Credentials::default(),
            timeout: Duration::from_secs(30),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(250),
            platform: Platform::default(),
            max_manifest_bytes: 4 << 20,
            max_blob_bytes: 4 << 30,
            registries_conf: RegistriesConf::default(),
            min_tls_version: crate::tls_profile::TlsVersion::Tls12,
        }
    }
}

/// How a command reaches registries, as its flags name them: hosts allowed plain HTTP, extra
/// CAs, an auth file.
#[derive(Debug, Default)]
pub struct RegistryOptions<'a> {
    /// Registries (`host[:port]`) allowed plain HTTP.
    pub insecure_registries: Vec<String>,
    /// PEM files or directories of extra trusted CAs.
    pub ca_paths: Vec<&'a Path>,
    /// A Docker/Podman auth file (`{"auths":{...}}`).
    pub auth_file: Option<&'a Path>,
}

impl RegistryOptions<'_> {
    /// The registry configuration these options describe; the error names the unreadable file.
    pub fn config(self) -> Result<RegistryConfig, String> {
        let mut config = RegistryConfig {
            insecure_registries: self.insecure_registries,
            ..RegistryConfig::default()
        };
        for path in self.ca_paths {
            config
                .add_ca_path(path)
                .map_err(|e| format!("cannot read CA file {}: {e}", path.display()))?;
        }
        if let Some(path) = self.auth_file {
            config.add_auth_file(path)?;
        }
        Ok(config)
    }
}

impl RegistryConfig {
    /// Adds the PEM certificates in `path` (a file, or every file of a directory) to the trusted CAs.
    pub fn add_ca_path(&mut self, path: &Path) -> std::io::Result<()> {
        if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            files.sort();
            for file in files.into_iter().filter(|f| f.is_file()) {
                self.extra_ca_pem.extend(std::fs::read(file)?);
                self.extra_ca_pem.push(b'\n');
            }
        } else {
            self.extra_ca_pem.extend(std::fs::read(path)?);
            self.extra_ca_pem.push(b'\n');
        }
        Ok(())
    }

    /// Reads credentials from a Docker/Podman auth file (`{"auths":{"host":{"auth":"base64(user:pass)"}}}`).
    pub fn add_auth_file(&mut self, path: &Path) -> Result<(), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("reading auth file {}: {e}", path.display()))?;
        let credentials = super::credentials::parse_docker_config_json(&bytes)
            .map_err(|e| format!("auth file {}: {e}", path.display()))?;
        for (host, credential) in credentials {
            self.credentials.insert(host, credential);
        }
        Ok(())
    }

    fn allows_plain_http(&self, image: &ImageReference) -> bool {
        image.is_loopback()
            || self.insecure_registries.iter().any(|r| r == &image.registry)
            || self
                .registries_conf
                .is_insecure(&format!("{}/{}", image.registry, image.repository))
    }
}

/// A content descriptor.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the content.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Platform, in index entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<DescriptorPlatform>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The platform of an index entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DescriptorPlatform {
    /// Operating system.
    pub os: String,
    /// CPU architecture.
    pub architecture: String,
    /// CPU variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// An image manifest (OCI or Docker schema 2).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// Media type, when the manifest carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// Layers, base first.
    pub layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct ImageIndex {
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct MediaTypeOnly {
    #[serde(default, rename = "mediaType")]
    media_type: Option<String>,
}

/// A manifest as fetched: raw bytes, media type and digest (verified when asked by digest).
#[derive(Clone, Debug)]
pub struct FetchedManifest {
    /// Raw bytes as served.
    pub bytes: Vec<u8>,
    /// Media type from Content-Type or the body.
    pub media_type: String,
    /// `sha256:` of the bytes.
    pub digest: String,
}

/// The system's trusted roots, read once per process, as upstream's Go reads its system pool:
/// a client is made for every pull, and loading them (every file of /etc/ssl/certs, then PEM)
/// was the controller's largest CPU cost when installing. The ones rustls cannot use are left
/// out, as reqwest's own loading does.
fn system_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: std::sync::OnceLock<Vec<reqwest::Certificate>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let loaded = rustls_native_certs::load_native_certs();
        let mut usable = rustls::RootCertStore::empty();
        let roots: Vec<reqwest::Certificate> = (loaded.certs.into_iter())
            .filter(|der| usable.add(der.clone()).is_ok())
            .filter_map(|der| reqwest::Certificate::from_der(&der).ok())
            .collect();
        if roots.is_empty() {
            tracing::warn!(errors = ?loaded.errors, "no usable system root certificate: registries are trusted through --ca-file only");
        }
        roots
    })
}

/// A client for one set of [`RegistryConfig`]; cheap to share, caches schemes and tokens.
pub struct RegistryClient {
    http: reqwest::Client,
    config: RegistryConfig,
    // Authorization header values by "registry repository actions".
    auth_headers: Mutex<HashMap<String, String>>,
    // "https" or "http" by registry.
    schemes: Mutex<HashMap<String, &'static str>>,
}

enum Challenge {
    Basic,
    Bearer { realm: String, service: Option<String> },
}

impl RegistryClient {
    /// Builds a client; fails only when the extra CA bundle cannot be parsed.
    pub fn new(config: RegistryConfig) -> Result<Self, ImageError> {
        let mut builder = crate::egress::client_builder()
            .user_agent(USER_AGENT)
            .no_gzip()
            .connect_timeout(config.timeout)
            .read_timeout(config.timeout)
            .use_rustls_tls()
            .min_tls_version(config.min_tls_version.for_reqwest())
            .tls_built_in_native_certs(false);
        for cert in system_roots() {
            builder = builder.add_root_certificate(cert.clone());
        }
        if !config.extra_ca_pem.is_empty() {
            let certs = reqwest::Certificate::from_pem_bundle(&config.extra_ca_pem).map_err(|e| {
                ImageError::Config {
                    cause: format!("the CA bundle is not valid PEM: {e}"),
                }
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| ImageError::Config {
            cause: format!("building the HTTP client: {e}"),
        })?;
        Ok(RegistryClient {
            http,
            config,
            auth_headers: Mutex::new(HashMap::new()),
            schemes: Mutex::new(HashMap::new()),
        })
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// Fetches the manifest named by `reference` (tag or digest) of `image`'s repository, and
    /// verifies its digest when `reference` is a digest.
    pub async fn fetch_manifest(
        &self,
        image: &ImageReference,
        reference: &str,
    ) -> Result<FetchedManifest, ImageError> {
        let url = self.endpoint(image, "manifests", reference).await?;
        let response = self
            .send(image, "pull", || {
                self.http
                    .get(&url)
                    .header(reqwest::header::ACCEPT, ACCEPT_MANIFESTS)
            })
            .await?;
        let response = self
            .expect_success(image, response, &format!("manifest {reference}"))
            .await?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().trim().to_string());
        let bytes = read_limited(image, response, self.config.max_manifest_bytes, "manifest").await?;
        let digest = sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(ImageError::DigestMismatch {
                image: image.to_string(),
                what: "manifest".into(),
                expected: reference.to_string(),
                actual: digest,
            });
        }
        let media_type = match content_type.filter(|t| !t.is_empty() && t != "application/json") {
            Some(t) => t,
            None => serde_json::from_slice::<MediaTypeOnly>(&bytes)
                .ok()
                .and_then(|m| m.media_type)
                .unwrap_or_else(|| OCI_MANIFEST.to_string()),
        };
        Ok(FetchedManifest {
            bytes,
            media_type,
            digest,
        })
    }

    /// From a fetched top-level manifest, returns the image manifest for the configured platform
    /// (fetching it when the top level is an index or manifest list).
    pub async fn platform_manifest(
        &self,
        image: &ImageReference,
        top: &FetchedManifest,
    ) -> Result<ImageManifest, ImageError> {
        let invalid = |cause: String| ImageError::InvalidImage {
            image: image.to_string(),
            cause,
        };
        match top.media_type.as_str() {
            OCI_INDEX | DOCKER_MANIFEST_LIST => {
                let index: ImageIndex = serde_json::from_slice(&top.bytes)
                    .map_err(|e| invalid(format!("the image index is not valid JSON: {e}")))?;
                let wanted = &self.config.platform;
                let chosen = index
                    .manifests
                    .iter()
                    .find(|d| {
                        d.platform
                            .as_ref()
                            .is_some_and(|p| p.os == wanted.os && p.architecture == wanted.architecture)
                    })
                    .ok_or_else(|| {
                        invalid(format!(
                            "the image index has no manifest for {}/{}",
                            wanted.os, wanted.architecture
                        ))
                    })?;
                let fetched = self.fetch_manifest(image, &chosen.digest).await?;
                match fetched.media_type.as_str() {
                    OCI_MANIFEST | DOCKER_MANIFEST => parse_image_manifest(image, &fetched.bytes),
                    other => Err(invalid(format!(
                        "unsupported manifest media type {other:?} in the index"
                    ))),
                }
            }
            OCI_MANIFEST | DOCKER_MANIFEST => parse_image_manifest(image, &top.bytes),
            other => Err(invalid(format!("unsupported manifest media type {other:?}"))),
        }
    }

    /// Fetches a small blob (a config) into memory and verifies its digest.
    pub async fn fetch_blob_bytes(
        &self,
        image: &ImageReference,
        descriptor: &Descriptor,
    ) -> Result<Vec<u8>, ImageError> {
        let limit = self.config.max_manifest_bytes.max(descriptor.size.min(64 << 20));
        let response = self.get_blob(image, &descriptor.digest).await?;
        let bytes = read_limited(image, response, limit, "config blob").await?;
        let actual = sha256_digest(&bytes);
        if actual != descriptor.digest {
            return Err(ImageError::DigestMismatch {
                image: image.to_string(),
                what: format!("blob {}", descriptor.digest),
                expected: descriptor.digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Streams a blob to `dest`, bounded by its descriptor's size, and verifies its digest.
    pub async fn fetch_blob_to_file(
        &self,
        image: &ImageReference,
        descriptor: &Descriptor,
        dest: &Path,
    ) -> Result<(), ImageError> {
        if descriptor.size > self.config.max_blob_bytes {
            return Err(ImageError::TooLarge {
                image: image.to_string(),
                what: format!("blob {}", descriptor.digest),
                limit: self.config.max_blob_bytes,
            });
        }
        let mut response = self.get_blob(image, &descriptor.digest).await?;
        let io_err = |source| ImageError::Io {
            image: image.to_string(),
            action: "writing blob to",
            path: dest.to_path_buf(),
            source,
        };
        let mut file = tokio::io::BufWriter::new(tokio::fs::File::create(dest).await.map_err(io_err)?);
        let mut hasher = Sha256::new();
        let mut received: u64 = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport(image, "reading blob", &e))?
        {
            received += chunk.len() as u64;
            if received > descriptor.size {
                return Err(ImageError::InvalidImage {
                    image: image.to_string(),
                    cause: format!(
                        "blob {} is larger than its declared size {}",
                        descriptor.digest, descriptor.size
                    ),
                });
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(io_err)?;
        }
        file.flush().await.map_err(io_err)?;
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != descriptor.digest {
            return Err(ImageError::DigestMismatch {
                image: image.to_string(),
                what: format!("blob {}", descriptor.digest),
                expected: descriptor.digest.clone(),
                actual,
            });
        }
        Ok(())
    }

    async fn get_blob(&self, image: &ImageReference, digest: &str) -> Result<reqwest::Response, ImageError> {
        let url = self.endpoint(image, "blobs", digest).await?;
        let response = self.send(image, "pull", || self.http.get(&url)).await?;
        self.expect_success(image, response, &format!("blob {digest}"))
            .await
    }

    /// True when the repository already holds the blob.
    pub async fn blob_exists(&self, image: &ImageReference, digest: &str) -> Result<bool, ImageError> {
        let url = self.endpoint(image, "blobs", digest).await?;
        let response = self.send(image, "pull,push", || self.http.head(&url)).await?;
        Ok(response.status().is_success())
    }

    /// Uploads a blob (monolithic: POST then PUT with the digest) unless it is already there.
    pub async fn upload_blob(
        &self,
        image: &ImageReference,
        digest: &str,
        content: bytes::Bytes,
    ) -> Result<(), ImageError> {
        if self.blob_exists(image, digest).await? {
            return Ok(());
        }
        let base = self.base_url(image).await?;
        let start = format!("{base}/v2/{}/blobs/uploads/", image.repository);
        let response = self.send(image, "pull,push", || self.http.post(&start)).await?;
        let response = self.expect_success(image, response, "blob upload start").await?;
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| ImageError::Registry {
                image: image.to_string(),
                cause: "blob upload start returned no Location header".into(),
            })?
            .to_string();
        let mut url = url::Url::parse(&base)
            .and_then(|b| b.join(&location))
            .map_err(|e| ImageError::Registry {
                image: image.to_string(),
                cause: format!("bad upload location: {e}"),
            })?;
        url.query_pairs_mut().append_pair("digest", digest);
        let response = self
            .send(image, "pull,push", || {
                self.http
                    .put(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                    .body(content.clone())
            })
            .await?;
        self.expect_success(image, response, &format!("blob {digest} upload"))
            .await?;
        Ok(())
    }

    /// Stores a manifest under `reference` (tag or digest); returns its digest.
    pub async fn put_manifest(
        &self,
        image: &ImageReference,
        reference: &str,
        media_type: &str,
        content: bytes::Bytes,
    ) -> Result<String, ImageError> {
        let url = self.endpoint(image, "manifests", reference).await?;
        let response = self
            .send(image, "pull,push", || {
                self.http
                    .put(&url)
                    .header(reqwest::header::CONTENT_TYPE, media_type)
                    .body(content.clone())
            })
            .await?;
        self.expect_success(image, response, &format!("manifest {reference} upload"))
            .await?;
        Ok(sha256_digest(&content))
    }

    /// `https://host` or, for insecure/loopback registries that do not answer TLS, `http://host`.
    /// `<base>/v2/<repository>/<kind>/<reference>`, for `manifests` and `blobs`.
    async fn endpoint(
        &self,
        image: &ImageReference,
        kind: &str,
        reference: &str,
    ) -> Result<String, ImageError> {
        Ok(format!(
            "{}/v2/{}/{kind}/{reference}",
            self.base_url(image).await?,
            image.repository
        ))
    }

    async fn base_url(&self, image: &ImageReference) -> Result<String, ImageError> {
        let host = image.api_host().to_string();
        if let Some(scheme) = self.schemes.lock().ok().and_then(|m| m.get(&host).copied()) {
            return Ok(format!("{scheme}://{host}"));
        }
        if !self.config.allows_plain_http(image) {
            return Ok(format!("https://{host}"));
        }
        // A registry allowed plain HTTP is asked over TLS first; the answer is remembered only
        // when one of the two schemes answers, so a registry that is down is probed again later.
        let probe = |scheme: &str| {
            self.http
                .get(format!("{scheme}://{host}/v2/"))
                .timeout(self.config.timeout)
                .send()
        };
        let scheme = if probe("https").await.is_ok() {
            Some("https")
        } else if probe("http").await.is_ok() {
            Some("http")
        } else {
            None
        };
        if let (Some(scheme), Ok(mut schemes)) = (scheme, self.schemes.lock()) {
            schemes.insert(host.clone(), scheme);
        }
        Ok(format!("{}://{host}", scheme.unwrap_or("http")))
    }

    /// Sends a request with retries (transport errors, 429, 5xx) and answers auth challenges once.
    async fn send(
        &self,
        image: &ImageReference,
        actions: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ImageError> {
        // Keyed by credential too: a rotated secret gets a fresh challenge, not the old header.
        let scope = self.config.credentials.scope(&image.registry);
        let auth_key = format!("{} {} {actions} {scope}", image.registry, image.repository);
        let mut answered_challenge = false;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let mut request = build().header("Docker-Distribution-API-Version", "registry/2.0");
            let cached = self
                .auth_headers
                .lock()
                .ok()
                .and_then(|m| m.get(&auth_key).cloned());
            if let Some(value) = &cached {
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            let retry_delay = Backoff::new(self.config.initial_backoff, MAX_RETRY_DELAY).delay(attempt);
            match request.send().await {
                Err(e) => {
                    if attempt >= self.config.max_attempts {
                        return Err(transport(image, "contacting the registry", &e));
                    }
                    tracing::debug!(image = %image, attempt, error = %e, "registry request failed; retrying");
                    tokio::time::sleep(retry_delay).await;
                }
                Ok(response) if response.status() == reqwest::StatusCode::UNAUTHORIZED => {
                    if answered_challenge {
                        let body = error_body(response).await;
                        return Err(ImageError::Unauthorized {
                            image: image.to_string(),
                            registry: image.registry.clone(),
                            repository: image.repository.clone(),
                            cause: format!("the registry refused the credentials (HTTP 401{body})"),
                        });
                    }
                    answered_challenge = true;
                    attempt -= 1;
                    let header = self.answer_challenge(image, actions, &response).await?;
                    if let Ok(mut map) = self.auth_headers.lock() {
                        map.insert(auth_key.clone(), header);
                    }
                }
                Ok(response)
                    if (response.status().is_server_error()
                        || response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS)
                        && attempt < self.config.max_attempts =>
                {
                    tracing::debug!(image = %image, attempt, status = %response.status(), "registry busy; retrying");
                    tokio::time::sleep(retry_delay).await;
                }
                Ok(response) => return Ok(response),
            }
        }
    }

    async fn answer_challenge(
        &self,
        image: &ImageReference,
        actions: &str,
        response: &reqwest::Response,
    ) -> Result<String, ImageError> {
        let unauthorized = |cause: String| ImageError::Unauthorized {
            image: image.to_string(),
            registry: image.registry.clone(),
            repository: image.repository.clone(),
            cause,
        };
        let header = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let credential = self.config.credentials.get(&image.registry);
        let credential = credential.as_ref();
        match parse_challenge(header) {
            Some(Challenge::Basic) => {
                let credential = credential.ok_or_else(|| {
                    unauthorized(
                        "the registry requires credentials and none are configured (HTTP 401)".into(),
                    )
                })?;
                Ok(basic_header(credential))
            }
            Some(Challenge::Bearer { realm, service }) => {
                let mut url = url::Url::parse(&realm)
                    .map_err(|e| unauthorized(format!("bad token realm {realm:?}: {e}")))?;
                // Credentials go to the token service: over plain HTTP only where the registry
                // itself may be reached so (insecure or loopback).
                let realm_is_loopback = url.host_str().is_some_and(super::reference::is_loopback_host);
                if url.scheme() != "https" && !(self.config.allows_plain_http(image) || realm_is_loopback) {
                    return Err(unauthorized(format!(
                        "refusing the token realm {realm:?}: not HTTPS"
                    )));
                }
                {
                    let mut query = url.query_pairs_mut();
                    if let Some(service) = &service {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", &format!("repository:{}:{actions}", image.repository));
                    if let Some(c) = credential {
                        query.append_pair("account", &c.username);
                    }
                }
                let mut request = self.http.get(url);
                if let Some(c) = credential {
                    request = request.header(reqwest::header::AUTHORIZATION, basic_header(c));
                }
                let token_response = request
                    .send()
                    .await
                    .map_err(|e| unauthorized(format!("fetching a token from {realm}: {e}")))?;
                if !token_response.status().is_success() {
                    return Err(unauthorized(format!(
                        "the token service {realm} answered HTTP {}",
                        token_response.status().as_u16()
                    )));
                }
                let body = read_limited(image, token_response, MAX_TOKEN_BODY_BYTES as u64, "token").await?;
                #[derive(Deserialize)]
                struct TokenResponse {
                    #[serde(default)]
                    token: Option<String>,
                    #[serde(default)]
                    access_token: Option<String>,
                }
                let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
                    unauthorized(format!("the token service {realm} answered invalid JSON: {e}"))
                })?;
                let token = parsed
                    .token
                    .or(parsed.access_token)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| unauthorized(format!("the token service {realm} returned no token")))?;
                Ok(format!("Bearer {token}"))
            }
            None => Err(unauthorized(format!(
                "unsupported authentication challenge {header:?}"
            ))),
        }
    }

    async fn expect_success(
        &self,
        image: &ImageReference,
        response: reqwest::Response,
        what: &str,
    ) -> Result<reqwest::Response, ImageError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = error_body(response).await;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(ImageError::NotFound {
                image: image.to_string(),
                what: format!("{what}{body}"),
            });
        }
        if status == reqwest::StatusCode::FORBIDDEN {
            return Err(ImageError::Unauthorized {
                image: image.to_string(),
                registry: image.registry.clone(),
                repository: image.repository.clone(),
                cause: format!("access to {what} denied (HTTP 403{body})"),
            });
        }
        Err(ImageError::Registry {
            image: image.to_string(),
            cause: format!("{what}: unexpected HTTP {}{body}", status.as_u16()),
        })
    }
}

fn parse_image_manifest(image: &ImageReference, bytes: &[u8]) -> Result<ImageManifest, ImageError> {
    let manifest: ImageManifest = serde_json::from_slice(bytes).map_err(|e| ImageError::InvalidImage {
        image: image.to_string(),
        cause: format!("the image manifest is not valid: {e}"),
    })?;
    for descriptor in std::iter::once(&manifest.config).chain(&manifest.layers) {
        super::reference::validate_digest(&descriptor.digest).map_err(|cause| ImageError::InvalidImage {
            image: image.to_string(),
            cause,
        })?;
    }
    Ok(manifest)
}

fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => Some(Challenge::Basic),
        "bearer" => {
            let params = parse_auth_params(rest);
            Some(Challenge::Bearer {
                realm: params.get("realm")?.clone(),
                service: params.get("service").cloned(),
            })
        }
        _ => None,
    }
}

/// Parses `key="value", key2=value2` (quoted values may hold commas).
fn parse_auth_params(input: &str) -> HashMap<String, String> {
    let mut params = HashMap::new();
    let mut chars = input.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if key.is_empty() || chars.next() != Some('=') {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                .collect::<String>()
                .trim()
                .to_string();
        }
        params.insert(key.trim().to_ascii_lowercase(), value);
    }
    params
}

fn basic_header(credential: &Credential) -> String {
    let raw = format!("{}:{}", credential.username, credential.password);
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn transport(image: &ImageReference, action: &str, e: &reqwest::Error) -> ImageError {
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    let kind = if e.is_timeout() { " (timeout)" } else { "" };
    ImageError::Registry {
        image: image.to_string(),
        cause: format!("{action}{kind}: {cause}"),
    }
}

async fn error_body(response: reqwest::Response) -> String {
    let mut response = response;
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY_BYTES {
            break;
        }
    }
    body.truncate(MAX_ERROR_BODY_BYTES);
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

async fn read_limited(
    image: &ImageReference,
    mut response: reqwest::Response,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, ImageError> {
    let too_large = || ImageError::TooLarge {
        image: image.to_string(),
        what: what.to_string(),
        limit,
    };
    if response.content_length().is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport(image, &format!("reading {what}"), &e))?
    {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_roots_are_read_once_and_every_client_takes_them() {
        let first = system_roots();
        assert!(
            std::ptr::eq(first, system_roots()),
            "read once, the same list after"
        );
        // What reqwest would have trusted: every usable certificate of the system's store.
        let loaded = rustls_native_certs::load_native_certs().certs;
        let mut store = rustls::RootCertStore::empty();
        let (usable, _) = store.add_parsable_certificates(loaded);
        assert_eq!(first.len(), usable);
        RegistryClient::new(RegistryConfig::default()).expect("a client with the system roots");
    }

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let header = r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#;
        match parse_challenge(header) {
            Some(Challenge::Bearer { realm, service }) => {
                assert_eq!(realm, "https://auth.example/token");
                assert_eq!(service.as_deref(), Some("registry.example"));
            }
            _ => panic!("bearer challenge not parsed"),
        }
        assert!(matches!(
            parse_challenge(r#"Basic realm="basic-realm""#),
            Some(Challenge::Basic)
        ));
        assert!(parse_challenge("Negotiate").is_none());
        let params = parse_auth_params(r#"realm="x,y", service=plain"#);
        assert_eq!(params["realm"], "x,y");
        assert_eq!(params["service"], "plain");
    }

    #[test]
    fn reads_docker_auth_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        std::fs::write(
            &path,
            r#"{"auths":{"https://127.0.0.1:5000":{"auth":"dXNlcjpwYTpzcw=="}}}"#,
        )
        .unwrap();
        let mut config = RegistryConfig::default();
        config.add_auth_file(&path).unwrap();
        let credential = config.credentials.get("127.0.0.1:5000").unwrap();
        assert_eq!(credential.username, "user");
        assert_eq!(credential.password, "pa:ss");
        assert!(
            !format!("{config:?}").contains("pa:ss"),
            "Debug never shows a password"
        );
    }
}
