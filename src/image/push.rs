//! Publishing a directory as a one-layer OCI image (layer, config with labels, manifest),
//! with no container runtime. Layers are deterministic: same directory, same digest.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::ImageError;
use super::reference::ImageReference;
use super::registry::{
    Descriptor, ImageManifest, OCI_CONFIG, OCI_LAYER_GZIP, OCI_LAYER_TAR, OCI_MANIFEST, RegistryClient,
    RegistryConfig, sha256_digest,
};

/// What [`push_dir`] needs besides the directory and the reference.
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// How to reach the registry.
    pub registry: RegistryConfig,
    /// Config labels (e.g. `operators.operatorframework.io.index.configs.v1=/configs`).
    pub labels: BTreeMap<String, String>,
    /// Where the directory's content lands in the image (`/` by default, e.g. `/configs`).
    pub prefix: String,
    /// How a container runtime starts the image (empty for bundle and catalog images).
    pub runtime: RuntimeConfig,
}

/// The runnable part of an image config (OCI image spec `config`): what a container runtime
/// starts and as whom (`olmv1 image push`'s flags). Empty fields are left out, so images without
/// them keep their digests.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RuntimeConfig {
    /// Entrypoint argument (repeatable, in order), e.g. `--entrypoint /usr/local/bin/olmv1`.
    #[arg(long = "entrypoint", value_name = "ARG")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    /// Default argument after the entrypoint (repeatable, in order).
    #[arg(long = "cmd", value_name = "ARG")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<String>,
    /// User the process runs as, `UID[:GID]` (numeric, so runAsNonRoot can check it).
    #[arg(long, value_name = "UID[:GID]")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Environment entry `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Working directory of the process.
    #[arg(long = "workdir", value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
}

/// The result of a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedImage {
    /// `registry/repository@sha256:...` of the pushed manifest.
    pub digest_ref: String,
    /// The manifest digest.
    pub digest: String,
}

impl RuntimeConfig {
    /// Refuses what a cluster could not check or run: a user that is not a numeric `UID[:GID]`
    /// (runAsNonRoot checks numbers), an environment entry that is not `KEY=VALUE`.
    pub fn check(&self) -> Result<(), String> {
        parse_labels(&self.env).map_err(|e| format!("--env: {e}"))?;
        if let Some(user) = &self.user
            && !user
                .split(':')
                .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(format!("--user {user:?} must be a numeric UID or UID:GID"));
        }
        Ok(())
    }
}

/// Parses `KEY=VALUE` pairs (image labels, environment entries).
pub fn parse_labels(raw: &[String]) -> Result<BTreeMap<String, String>, String> {
    raw.iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(format!("label {pair:?} must be KEY=VALUE")),
        })
        .collect()
}

/// What `olmv1 image push` publishes, and how it reaches the registry (its flags).
#[derive(clap::Args, Debug)]
pub struct PushRequest {
    /// Directory whose content becomes the image's file system.
    pub dir: PathBuf,
    /// Target reference, e.g. `127.0.0.1:5000/catalogs/community:v4.16`.
    pub reference: String,
    /// Config label `KEY=VALUE` (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Path inside the image where DIR's content lands (e.g. `/configs` for catalogs).
    #[arg(long, default_value = "/")]
    pub prefix: String,
    /// How a container runtime starts the image (a runnable image, e.g. olmv1's own).
    #[command(flatten)]
    pub runtime: RuntimeConfig,
    /// Allow plain HTTP to this registry (loopback registries always are).
    #[arg(long)]
    pub insecure: bool,
    /// PEM file or directory of extra trusted CA certificates.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Docker/Podman auth file (`{"auths":{...}}`).
    #[arg(long, value_name = "PATH", env = "REGISTRY_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// User name for Basic or token auth.
    #[arg(long, env = "OLMV1_REGISTRY_USERNAME")]
    pub username: Option<String>,
    /// Password for Basic or token auth (prefer --password-stdin or --password-file: a flag's
    /// value shows in the process list).
    #[arg(long, env = "OLMV1_REGISTRY_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Read the password from standard input (up to the first newline).
    #[arg(long, conflicts_with_all = ["password", "password_file"])]
    pub password_stdin: bool,
    /// Read the password from this file (up to the first newline).
    #[arg(long, value_name = "PATH", conflicts_with = "password")]
    pub password_file: Option<PathBuf>,
}

impl PushRequest {
    /// The password from --password, --password-stdin or --password-file (first line, no
    /// newline).
    fn password(&self) -> Result<Option<secrecy::SecretString>, String> {
        use std::io::Read as _;
        let text = if self.password_stdin {
            let mut text = String::new();
            std::io::stdin()
                .take(64 * 1024)
                .read_to_string(&mut text)
                .map_err(|e| format!("reading the password from standard input: {e}"))?;
            text
        } else if let Some(path) = &self.password_file {
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
                .map_err(|e| format!("reading the password file {}: {e}", path.display()))?;
            text
        } else {
            return Ok(self.password.clone().map(secrecy::SecretString::from));
        };
        match text.lines().next().unwrap_or_default() {
            "" => Err("the password read is empty".to_string()),
            line => Ok(Some(secrecy::SecretString::from(line))),
        }
    }
}

/// Pushes `request.dir` as a one-layer image; returns its digest reference.
pub async fn push(request: PushRequest) -> Result<String, String> {
    let labels = parse_labels(&request.labels)?;
    let login = request.username.clone().zip(request.password()?);
    request.runtime.check()?;
    let image = ImageReference::parse(&request.reference).map_err(|e| e.to_string())?;
    let registry = super::RegistryOptions {
        insecure_registries: request
            .insecure
            .then(|| image.registry.clone())
            .into_iter()
            .collect(),
        ca_paths: request.ca_file.as_deref().into_iter().collect(),
        auth_file: request.auth_file.as_deref(),
    }
    .config()?;
    if let Some((username, password)) = login {
        registry.credentials.insert(
            image.registry.clone(),
            super::Credential {
                username,
                password: secrecy::ExposeSecret::expose_secret(&password).to_string(),
            },
        );
    }
    let options = PushOptions {
        registry,
        labels,
        prefix: request.prefix,
        runtime: request.runtime,
    };
    let pushed = push_dir(&request.dir, &request.reference, &options)
        .await
        .map_err(|e| e.to_string())?;
    Ok(pushed.digest_ref)
}

/// Pushes `dir` to `reference` (a tag, or a digest which must then match) as one gzip layer.
pub async fn push_dir(dir: &Path, reference: &str, options: &PushOptions) -> Result<PushedImage, ImageError> {
    let image = ImageReference::parse(reference)?;
    let (dir_owned, prefix) = (dir.to_path_buf(), options.prefix.clone());
    let layer = tokio::task::spawn_blocking(move || build_layer(&dir_owned, &prefix))
        .await
        .map_err(|e| io_error(&image, dir, io::Error::other(e.to_string())))?
        .map_err(|e| io_error(&image, dir, e))?;
    push_built_layers(&image, vec![layer], options).await
}

/// Pushes an image made of the given layer blobs as they are (gzip or plain tar, any content,
/// hostile included: for tests of the puller), with `options.labels`.
pub async fn push_layers(
    reference: &str,
    layers: Vec<Vec<u8>>,
    options: &PushOptions,
) -> Result<PushedImage, ImageError> {
    let image = ImageReference::parse(reference)?;
    let built = layers
        .into_iter()
        .map(|blob| {
            let digest = sha256_digest(&blob);
            // The diff ID is the digest of the uncompressed tar (no puller here checks it).
            let diff_id = if blob.starts_with(&[0x1f, 0x8b]) {
                let mut decoder = flate2::read::MultiGzDecoder::new(blob.as_slice());
                let mut sink = HashingWriter {
                    inner: io::sink(),
                    hasher: Sha256::new(),
                };
                let _ = io::copy(&mut decoder, &mut sink);
                format!("sha256:{}", hex::encode(sink.hasher.finalize()))
            } else {
                digest.clone()
            };
            BuiltLayer {
                compressed: blob,
                digest,
                diff_id,
            }
        })
        .collect();
    push_built_layers(&image, built, options).await
}

async fn push_built_layers(
    image: &ImageReference,
    layers: Vec<BuiltLayer>,
    options: &PushOptions,
) -> Result<PushedImage, ImageError> {
    let client = RegistryClient::new(options.registry.clone())?;
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.diff_id.as_str()).collect();
    let config_bytes = bytes::Bytes::from(image_config(&options.runtime, &options.labels, &diff_ids));
    let config_digest = sha256_digest(&config_bytes);
    let mut descriptors = Vec::new();
    for layer in layers {
        let layer_bytes = bytes::Bytes::from(layer.compressed);
        let media_type = if layer_bytes.starts_with(&[0x1f, 0x8b]) {
            OCI_LAYER_GZIP
        } else {
            OCI_LAYER_TAR
        };
        descriptors.push(Descriptor {
            media_type: media_type.to_string(),
            digest: layer.digest.clone(),
            size: layer_bytes.len() as u64,
            platform: None,
            annotations: None,
        });
        client.upload_blob(image, &layer.digest, layer_bytes).await?;
    }
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.to_string()),
        config: Descriptor {
            media_type: OCI_CONFIG.to_string(),
            digest: config_digest.clone(),
            size: config_bytes.len() as u64,
            platform: None,
            annotations: None,
        },
        layers: descriptors,
        annotations: None,
    };
    let manifest_bytes = bytes::Bytes::from(serde_json::to_vec(&manifest).unwrap_or_default());
    client.upload_blob(image, &config_digest, config_bytes).await?;
    let digest = sha256_digest(&manifest_bytes);
    if let Some(wanted) = &image.digest
        && wanted != &digest
    {
        return Err(ImageError::DigestMismatch {
            image: image.to_string(),
            what: "pushed manifest".into(),
            expected: wanted.clone(),
            actual: digest,
        });
    }
    client
        .put_manifest(image, image.manifest_reference(), OCI_MANIFEST, manifest_bytes)
        .await?;
    Ok(PushedImage {
        digest_ref: image.with_digest(&digest),
        digest,
    })
}

/// The image config blob: platform, runtime settings, labels and layer diff IDs. It has no
/// creation time or history, so the same content always gives the same digest.
fn image_config(runtime: &RuntimeConfig, labels: &BTreeMap<String, String>, diff_ids: &[&str]) -> Vec<u8> {
    let mut config = serde_json::to_value(runtime).unwrap_or_else(|_| json!({}));
    config["Labels"] = json!(labels);
    let image = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    serde_json::to_vec(&image).unwrap_or_default()
}

/// A compressed layer with its digests.
pub struct BuiltLayer {
    /// The gzip bytes.
    pub compressed: Vec<u8>,
    /// `sha256:` of the compressed bytes.
    pub digest: String,
    /// `sha256:` of the uncompressed tar.
    pub diff_id: String,
}

/// Builds a deterministic tar+gzip of `dir` (sorted, zero times and owners) under `prefix`.
pub fn build_layer(dir: &Path, prefix: &str) -> io::Result<BuiltLayer> {
    if !dir.is_dir() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "not a directory"));
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    let hashing = HashingWriter {
        inner: gz,
        hasher: Sha256::new(),
    };
    let mut builder = tar::Builder::new(hashing);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let prefix: PathBuf = prefix
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let mut so_far = PathBuf::new();
    for component in prefix.iter() {
        so_far.push(component);
        append_dir_entry(&mut builder, &so_far)?;
    }
    append_tree(&mut builder, dir, &prefix)?;
    let hashing = builder.into_inner()?;
    let diff_id = format!("sha256:{}", hex::encode(hashing.hasher.finalize()));
    let compressed = hashing.inner.finish()?;
    let digest = sha256_digest(&compressed);
    Ok(BuiltLayer {
        compressed,
        digest,
        diff_id,
    })
}

fn append_tree<W: Write>(builder: &mut tar::Builder<W>, dir: &Path, name: &Path) -> io::Result<()> {
    let mut children: Vec<_> = std::fs::read_dir(dir)?.collect::<io::Result<_>>()?;
    children.sort_by_key(|c| c.file_name());
    for child in children {
        let path = child.path();
        let child_name = name.join(child.file_name());
        let file_type = child.file_type()?;
        if file_type.is_dir() {
            append_dir_entry(builder, &child_name)?;
            append_tree(builder, &path, &child_name)?;
        } else {
            builder.append_path_with_name(&path, &child_name)?;
        }
    }
    Ok(())
}

fn append_dir_entry<W: Write>(builder: &mut tar::Builder<W>, name: &Path) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_mode(0o755);
    header.set_size(0);
    header.set_mtime(0);
    builder.append_data(&mut header, name, io::empty())
}

struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn io_error(image: &ImageReference, dir: &Path, source: io::Error) -> ImageError {
    ImageError::Io {
        image: image.to_string(),
        action: "packing directory",
        path: dir.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_parse() {
        let labels = parse_labels(&["a=b=c".into(), "x=".into()]).unwrap();
        assert_eq!(labels["a"], "b=c");
        assert_eq!(labels["x"], "");
        assert!(parse_labels(&["novalue".into()]).is_err());
    }

    #[test]
    fn runtime_config_checks_user_and_env() {
        let config = |user: &str, env: &str| RuntimeConfig {
            user: Some(user.into()),
            env: vec![env.into()],
            ..Default::default()
        };
        config("65532:65532", "PATH=/usr/local/bin").check().unwrap();
        let err = config("nonroot", "A=b").check().unwrap_err();
        assert_eq!(err, r#"--user "nonroot" must be a numeric UID or UID:GID"#);
        assert!(
            config("1000", "NOEQUALS")
                .check()
                .unwrap_err()
                .starts_with("--env: ")
        );
    }

    use super::*;

    #[test]
    fn image_config_carries_the_runtime_settings_only_when_given() {
        let labels = BTreeMap::from([("k".to_string(), "v".to_string())]);
        let plain: serde_json::Value =
            serde_json::from_slice(&image_config(&RuntimeConfig::default(), &labels, &["sha256:aa"]))
                .unwrap();
        // Bundle and catalog images keep the config they always had (and so their digests).
        assert_eq!(plain["config"], json!({"Labels": {"k": "v"}}));
        let runtime = RuntimeConfig {
            entrypoint: vec!["/usr/local/bin/olmv1".into()],
            user: Some("65532:65532".into()),
            env: vec!["PATH=/usr/local/bin".into()],
            ..Default::default()
        };
        let runnable: serde_json::Value =
            serde_json::from_slice(&image_config(&runtime, &labels, &["sha256:aa"])).unwrap();
        assert_eq!(
            runnable["config"],
            json!({
                "Entrypoint": ["/usr/local/bin/olmv1"],
                "User": "65532:65532",
                "Env": ["PATH=/usr/local/bin"],
                "Labels": {"k": "v"},
            })
        );
        assert_eq!(runnable["rootfs"]["diff_ids"], json!(["sha256:aa"]));
        assert!(runnable.get("created").is_none());
        assert_eq!(
            image_config(&runtime, &labels, &["sha256:aa"]),
            image_config(&runtime, &labels, &["sha256:aa"])
        );
    }

    #[test]
    fn layers_are_deterministic_and_prefixed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        std::fs::write(
            dir.path().join("pkg/catalog.yaml"),
            "schema: olm.package\nname: pkg\n",
        )
        .unwrap();
        let a = build_layer(dir.path(), "/configs").unwrap();
        let b = build_layer(dir.path(), "/configs").unwrap();
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.diff_id, b.diff_id);
        let out = tempfile::tempdir().unwrap();
        let limits = crate::image::UnpackLimits::BUNDLE;
        let mut totals = crate::image::unpack::UnpackTotals::default();
        crate::image::unpack::apply_layer(out.path(), a.compressed.as_slice(), &limits, &mut totals).unwrap();
        assert!(out.path().join("configs/pkg/catalog.yaml").is_file());
    }
}
