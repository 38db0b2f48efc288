//! Image pulling and pushing against real docker-registry processes: tags and digests, digest
//! verification, Basic auth (htpasswd), bearer tokens, TLS with a test CA, and hostile layers.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::image::unpack::{UnpackTotals, apply_layer};
use olmv1::image::{
    self, Credential, ImageError, PullOptions, PushOptions, RegistryConfig, UnpackError, UnpackLimits,
    push_dir, push_layers,
};
use support::{RegistryOptions, TestTls, TokenAuth, htpasswd_file, start_registry};

fn fixture(name: &str) -> PathBuf {
    support::repo_root().join("test/fixtures/images").join(name)
}

fn labels() -> BTreeMap<String, String> {
    [("org.example.fixture".to_string(), "simple".to_string())].into()
}

fn push_options(registry: RegistryConfig) -> PushOptions {
    PushOptions {
        registry,
        labels: labels(),
        prefix: "/".into(),
        ..Default::default()
    }
}

fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            out.push(path.strip_prefix(root).unwrap_or(&path).display().to_string());
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The `simple` fixture pushed as `fixtures/simple:v1`: its tag reference and what was pushed.
async fn push_simple(registry: &support::RegistryProcess) -> (String, image::PushedImage) {
    let reference = format!("{}/fixtures/simple:v1", registry.host_port);
    let pushed = push_dir(
        &fixture("simple"),
        &reference,
        &push_options(RegistryConfig::default()),
    )
    .await
    .expect("push the fixture");
    (reference, pushed)
}

#[tokio::test]
async fn push_then_pull_by_tag_and_by_digest_uses_the_cache() {
    let registry = start_registry(&RegistryOptions::default());
    let (reference, pushed) = push_simple(&registry).await;
    assert_eq!(
        pushed.digest_ref,
        format!("{}/fixtures/simple@{}", registry.host_port, pushed.digest)
    );

    let work = tempfile::tempdir().unwrap();
    let options = PullOptions::new(work.path().join("cache"));
    let by_tag = image::pull_to_dir(&reference, &options)
        .await
        .expect("pull by tag");
    assert_eq!(by_tag.digest_ref, pushed.digest_ref);
    assert_eq!(by_tag.labels, labels());
    let configmap = std::fs::read_to_string(by_tag.dir.join("manifests/configmap.yaml")).unwrap();
    assert!(configmap.contains("greeting: hello"));
    assert!(by_tag.dir.join("metadata/annotations.yaml").is_file());

    let by_digest = image::pull_to_dir(&pushed.digest_ref, &options)
        .await
        .expect("pull by digest");
    assert_eq!(by_digest, by_tag, "a digest pull reuses the cache entry");

    // With the registry gone, the digest is still served from the cache: it needs no network.
    drop(registry);
    let again = image::pull_to_dir(&pushed.digest_ref, &options)
        .await
        .expect("cached pull without registry");
    assert_eq!(again.dir, by_tag.dir);
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("a tag needs the registry");
    assert!(err.to_string().contains(&reference), "{err}");
}

#[tokio::test]
async fn image_push_cli_publishes_a_catalog_with_its_label() {
    let registry = start_registry(&RegistryOptions::default());
    let reference = format!("{}/catalogs/fixture:latest", registry.host_port);
    let out = support::run(std::process::Command::new(support::olmv1_bin()).args([
        "image",
        "push",
        fixture("catalog-v1").to_str().unwrap(),
        &reference,
        "--prefix",
        "/configs",
        "--label",
        "operators.operatorframework.io.index.configs.v1=/configs",
    ]))
    .ok();
    let digest_ref = out.trim();
    assert!(
        digest_ref.starts_with(&format!("{}/catalogs/fixture@sha256:", registry.host_port)),
        "{out}"
    );

    let work = tempfile::tempdir().unwrap();
    let pulled = image::pull_to_dir(digest_ref, &PullOptions::new(work.path()))
        .await
        .expect("pull");
    assert_eq!(
        pulled.labels["operators.operatorframework.io.index.configs.v1"],
        "/configs"
    );
    assert!(pulled.dir.join("configs/fixture-op/catalog.yaml").is_file());

    let bad = support::run(std::process::Command::new(support::olmv1_bin()).args([
        "image",
        "push",
        "/nonexistent-dir",
        &reference,
    ]))
    .err();
    assert!(
        bad.contains("/nonexistent-dir") && bad.contains(&reference),
        "{bad}"
    );
}

#[tokio::test]
async fn a_corrupted_blob_is_refused_by_digest() {
    let registry = start_registry(&RegistryOptions::default());
    let reference = format!("{}/fixtures/corrupt:v1", registry.host_port);
    let pushed = push_dir(
        &fixture("simple"),
        &reference,
        &push_options(RegistryConfig::default()),
    )
    .await
    .unwrap();

    // Rewrite the layer's bytes in the registry's storage (same length, different content).
    let client = image::RegistryClient::new(RegistryConfig::default()).unwrap();
    let parsed = image::ImageReference::parse(&reference).unwrap();
    let top = client.fetch_manifest(&parsed, "v1").await.unwrap();
    let manifest = client.platform_manifest(&parsed, &top).await.unwrap();
    let layer_hex = manifest.layers[0]
        .digest
        .trim_start_matches("sha256:")
        .to_string();
    let blob_path = registry
        .dir
        .path()
        .join("storage/docker/registry/v2/blobs/sha256")
        .join(&layer_hex[..2])
        .join(&layer_hex)
        .join("data");
    let mut bytes = std::fs::read(&blob_path).expect("layer blob in registry storage");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob_path, bytes).unwrap();

    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let err = image::pull_to_dir(&pushed.digest_ref, &PullOptions::new(&cache))
        .await
        .expect_err("corrupt blob");
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&pushed.digest_ref) && message.contains("digest mismatch"),
        "{message}"
    );
    assert!(
        image::cache::lookup(&cache, &pushed.digest).is_none(),
        "nothing cached"
    );
}

#[tokio::test]
async fn basic_auth_with_htpasswd_and_a_wrong_password() {
    let auth_dir = tempfile::tempdir().unwrap();
    let htpasswd = htpasswd_file(auth_dir.path(), "tester", "s3cret");
    let registry = start_registry(&RegistryOptions {
        htpasswd: Some(htpasswd),
        ..Default::default()
    });
    let reference = format!("{}/private/simple:v1", registry.host_port);
    let with_credentials = |password: &str| {
        let config = RegistryConfig::default();
        config.credentials.insert(
            registry.host_port.clone(),
            Credential {
                username: "tester".into(),
                password: password.into(),
            },
        );
        config
    };

    let pushed = push_dir(
        &fixture("simple"),
        &reference,
        &push_options(with_credentials("s3cret")),
    )
    .await
    .expect("push with credentials");
    let work = tempfile::tempdir().unwrap();
    let mut options = PullOptions::new(work.path().join("cache"));
    options.registry = with_credentials("s3cret");
    let pulled = image::pull_to_dir(&reference, &options)
        .await
        .expect("pull with credentials");
    assert_eq!(pulled.digest_ref, pushed.digest_ref);

    // The cache never serves what one credential pulled to a pull that could not have made it:
    // the same digest, same cache, with a wrong password or none, asks the registry and is refused.
    for (what, config) in [
        ("a wrong password", with_credentials("wrong")),
        ("no credentials", RegistryConfig::default()),
    ] {
        let same_cache = PullOptions {
            registry: config,
            ..options.clone()
        };
        let err = image::pull_to_dir(&pulled.digest_ref, &same_cache)
            .await
            .expect_err(what);
        assert!(matches!(err, ImageError::Unauthorized { .. }), "{what}: {err}");
        assert!(err.to_string().contains("HTTP 401"), "{what}: {err}");
    }
    let again = image::pull_to_dir(&pulled.digest_ref, &options)
        .await
        .expect("the right credential is served from the cache");
    assert_eq!(again.dir, pulled.dir);

    options.cache_dir = work.path().join("cache-2");
    options.registry = with_credentials("wrong");
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("wrong password");
    assert!(matches!(err, ImageError::Unauthorized { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&reference) && message.contains("refused the credentials"),
        "{message}"
    );

    options.registry = RegistryConfig::default();
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("no credentials");
    assert!(err.to_string().contains("none are configured"), "{err}");
}

#[tokio::test]
async fn image_push_cli_reads_the_password_from_stdin_or_a_file() {
    let auth_dir = tempfile::tempdir().unwrap();
    let htpasswd = htpasswd_file(auth_dir.path(), "tester", "s3cret");
    let registry = start_registry(&RegistryOptions {
        htpasswd: Some(htpasswd),
        ..Default::default()
    });
    let reference = format!("{}/private/cli:v1", registry.host_port);
    let push = |extra: &[&str]| {
        let mut command = std::process::Command::new(support::olmv1_bin());
        command
            .args(["image", "push", fixture("simple").to_str().unwrap(), &reference])
            .args(["--username", "tester"])
            .args(extra)
            .env_remove("OLMV1_REGISTRY_PASSWORD")
            .env_remove("REGISTRY_AUTH_FILE");
        command
    };

    // From standard input (the first line; its newline is not part of the password).
    let from_stdin = support::run_with_stdin(&mut push(&["--password-stdin"]), "s3cret\n").ok();
    let digest_ref = from_stdin.trim().to_string();
    assert!(
        digest_ref.starts_with(&format!("{}/private/cli@sha256:", registry.host_port)),
        "{digest_ref}"
    );
    // From a file: the same content, so the same digest.
    let password_file = auth_dir.path().join("password");
    std::fs::write(&password_file, "s3cret\n").unwrap();
    let from_file = support::run(&mut push(&["--password-file", password_file.to_str().unwrap()])).ok();
    assert_eq!(from_file.trim(), digest_ref);
    // The registry authenticated the push: a pull with the same credentials finds the image.
    let work = tempfile::tempdir().unwrap();
    let options = PullOptions::new(work.path().join("cache"));
    options.registry.credentials.insert(
        registry.host_port.clone(),
        Credential {
            username: "tester".into(),
            password: "s3cret".into(),
        },
    );
    let pulled = image::pull_to_dir(&digest_ref, &options).await.expect("pull");
    assert_eq!(pulled.digest_ref, digest_ref);

    // A wrong password read from stdin is refused, and never printed.
    let wrong = support::run_with_stdin(&mut push(&["--password-stdin"]), "not-the-password\n").err();
    assert!(wrong.contains("refused the credentials"), "{wrong}");
    assert!(!wrong.contains("not-the-password"), "{wrong}");
    // An empty one, or a missing file, says so.
    let empty = support::run_with_stdin(&mut push(&["--password-stdin"]), "\n").err();
    assert!(empty.contains("the password read is empty"), "{empty}");
    let missing = auth_dir.path().join("no-such-file");
    let unreadable = support::run(&mut push(&["--password-file", missing.to_str().unwrap()])).err();
    assert!(
        unreadable.contains("reading the password file") && unreadable.contains("no-such-file"),
        "{unreadable}"
    );
    // --password-stdin and --password together are refused by the command line.
    let both = support::run_with_stdin(&mut push(&["--password-stdin", "--password", "x"]), "s3cret\n").err();
    assert!(both.contains("cannot be used with"), "{both}");
}

#[tokio::test]
async fn tls_registry_with_a_test_ca() {
    let tls_dir = tempfile::tempdir().unwrap();
    let tls = TestTls::generate(tls_dir.path());
    let registry = start_registry(&RegistryOptions {
        tls: Some(tls.serving.clone()),
        ..Default::default()
    });
    let reference = format!("{}/secure/simple:v1", registry.host_port);
    let mut trusted = RegistryConfig::default();
    trusted.add_ca_path(&tls.ca_cert).unwrap();

    let pushed = push_dir(&fixture("simple"), &reference, &push_options(trusted.clone()))
        .await
        .expect("push");
    let work = tempfile::tempdir().unwrap();
    let mut options = PullOptions::new(work.path().join("cache"));
    options.registry = trusted;
    let pulled = image::pull_to_dir(&reference, &options)
        .await
        .expect("pull over TLS");
    assert_eq!(pulled.digest_ref, pushed.digest_ref);

    // Without the CA the TLS handshake fails; falling back to plain HTTP is refused by the server.
    options.cache_dir = work.path().join("cache-2");
    options.registry = RegistryConfig::default();
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("untrusted CA");
    assert!(err.to_string().contains(&reference), "{err}");
}

/// A bearer-token service: answers every request carrying the right Basic credentials with a
/// pre-signed JWT (RS256, x5c chain) and records the query strings it was asked with.
struct TokenService {
    realm: String,
    queries: Arc<Mutex<Vec<String>>>,
    _server: tokio::task::JoinHandle<()>,
}

fn openssl(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl is needed to sign test tokens");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn signed_token(dir: &Path, service: &str, issuer: &str, repository: &str) -> (String, PathBuf) {
    use base64::Engine;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (key, cert) = (dir.join("signer.key"), dir.join("signer.crt"));
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=olmv1-token-signer",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ],
        b"",
    );
    let der = openssl(&["x509", "-in", cert.to_str().unwrap(), "-outform", "DER"], b"");
    let header = serde_json::json!({
        "alg": "RS256", "typ": "JWT",
        "x5c": [base64::engine::general_purpose::STANDARD.encode(der)],
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({
        "iss": issuer, "sub": "tester", "aud": service, "exp": now + 3600, "nbf": now - 60, "iat": now - 60,
        "jti": "olmv1-test", "access": [{"type": "repository", "name": repository, "actions": ["pull", "push"]}],
    });
    let signing_input = format!(
        "{}.{}",
        url.encode(serde_json::to_vec(&header).unwrap()),
        url.encode(serde_json::to_vec(&claims).unwrap())
    );
    let signature = openssl(
        &["dgst", "-sha256", "-sign", key.to_str().unwrap()],
        signing_input.as_bytes(),
    );
    (format!("{signing_input}.{}", url.encode(signature)), cert)
}

async fn start_token_service(token: String, user: &str, password: &str) -> TokenService {
    use base64::Engine;
    let queries = Arc::new(Mutex::new(Vec::new()));
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    let recorded = queries.clone();
    let app = axum::Router::new().route(
        "/token",
        axum::routing::get(move |uri: http::Uri, headers: http::HeaderMap| {
            let (token, expected, recorded) = (token.clone(), expected.clone(), recorded.clone());
            async move {
                recorded
                    .lock()
                    .unwrap()
                    .push(uri.query().unwrap_or_default().to_string());
                let authorized =
                    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&expected);
                if !authorized {
                    return (http::StatusCode::UNAUTHORIZED, String::from("{}"));
                }
                (
                    http::StatusCode::OK,
                    serde_json::json!({ "token": token, "expires_in": 3600 }).to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    TokenService {
        realm: format!("http://{addr}/token"),
        queries,
        _server: server,
    }
}

#[tokio::test]
async fn bearer_token_challenge_asks_for_the_repository_scope() {
    let dir = tempfile::tempdir().unwrap();
    let (service, issuer, repository) = ("olmv1-test-registry", "olmv1-test-issuer", "tokens/simple");
    let (token, signer_cert) = signed_token(dir.path(), service, issuer, repository);
    let tokens = start_token_service(token, "tester", "t0ken").await;
    let registry = start_registry(&RegistryOptions {
        token: Some(TokenAuth {
            realm: tokens.realm.clone(),
            service: service.into(),
            issuer: issuer.into(),
            root_cert_bundle: signer_cert,
        }),
        ..Default::default()
    });
    let reference = format!("{}/{repository}:v1", registry.host_port);
    let config = RegistryConfig::default();
    config.credentials.insert(
        registry.host_port.clone(),
        Credential {
            username: "tester".into(),
            password: "t0ken".into(),
        },
    );

    let pushed = push_dir(&fixture("simple"), &reference, &push_options(config.clone()))
        .await
        .unwrap_or_else(|e| panic!("push with a token: {e}\nregistry log:\n{}", registry.log()));
    let work = tempfile::tempdir().unwrap();
    let mut options = PullOptions::new(work.path().join("cache"));
    options.registry = config;
    let pulled = image::pull_to_dir(&reference, &options)
        .await
        .expect("pull with a token");
    assert_eq!(pulled.digest_ref, pushed.digest_ref);

    let queries = tokens.queries.lock().unwrap().clone();
    let pull_scope = format!("scope=repository%3A{}%3Apull&", repository.replace('/', "%2F"));
    assert!(
        queries
            .iter()
            .any(|q| q.contains(&pull_scope) && q.contains("service=olmv1-test-registry")),
        "token requests: {queries:?}"
    );

    options.cache_dir = work.path().join("cache-2");
    options.registry.credentials.insert(
        registry.host_port.clone(),
        Credential {
            username: "tester".into(),
            password: "wrong".into(),
        },
    );
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("wrong token password");
    assert!(matches!(err, ImageError::Unauthorized { .. }), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Hostile layers

fn raw_tar(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, kind, data, link) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        // Written byte by byte: the tar crate's setters refuse `..`, as a hostile tool would not.
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

async fn pull_hostile(
    registry: &support::RegistryProcess,
    name: &str,
    layers: Vec<Vec<u8>>,
) -> (ImageError, Vec<String>) {
    let reference = format!("{}/hostile/{name}:v1", registry.host_port);
    push_layers(&reference, layers, &push_options(RegistryConfig::default()))
        .await
        .expect("push hostile layers");
    let work = tempfile::tempdir().unwrap();
    let mut options = PullOptions::new(work.path().join("cache"));
    options.limits = UnpackLimits {
        max_total_bytes: 16 << 20,
        ..UnpackLimits::BUNDLE
    };
    let err = image::pull_to_dir(&reference, &options)
        .await
        .expect_err("hostile image must be refused");
    let message = err.to_string();
    assert!(
        message.contains(&reference),
        "the error names the image: {message}"
    );
    (err, files_under(work.path()))
}

#[tokio::test]
async fn hostile_layers_are_refused_and_write_nothing_outside() {
    use tar::EntryType::{Link, Regular, Symlink};
    let registry = start_registry(&RegistryOptions::default());

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "traversal",
            gzip(&raw_tar(&[("../../escaped", Regular, b"x", None)])),
            "escapes the unpack root",
        ),
        (
            "absolute",
            gzip(&raw_tar(&[("/tmp/escaped", Regular, b"x", None)])),
            "escapes the unpack root",
        ),
        (
            "symlink-then-write",
            gzip(&raw_tar(&[
                ("dir/", tar::EntryType::Directory, b"", None),
                ("ln", Symlink, b"", Some("dir")),
                ("ln/escaped", Regular, b"x", None),
            ])),
            "through the symbolic link",
        ),
        (
            "hardlink",
            raw_tar(&[("hard", Link, b"", Some("../../../etc/passwd"))]),
            "escapes the unpack root",
        ),
    ];
    for (name, layer, expected) in cases {
        let (err, files) = pull_hostile(&registry, name, vec![layer]).await;
        assert!(matches!(err, ImageError::Unpack { .. }), "{name}: {err}");
        assert!(err.to_string().contains(expected), "{name}: {err}");
        // Only the (empty) cache directory and its anonymous-credential scope remain.
        assert!(
            files.iter().all(|f| f == "cache" || f == "cache/anonymous"),
            "{name}: a refused image leaves nothing behind, found {files:?}"
        );
    }

    // 64 MiB of zeros compress to ~64 KiB; the limit is 16 MiB.
    let bomb = gzip(&raw_tar(&[("bomb", Regular, &vec![0u8; 64 << 20], None)]));
    assert!(bomb.len() < 1 << 20);
    let (err, files) = pull_hostile(&registry, "bomb", vec![bomb]).await;
    assert!(
        err.to_string().contains("exceeds the limit of 16777216 bytes"),
        "{err}"
    );
    assert!(
        files.iter().all(|f| f == "cache" || f == "cache/anonymous"),
        "{files:?}"
    );
}

#[tokio::test]
async fn layers_apply_in_order_with_whiteouts() {
    use tar::EntryType::Regular;
    let registry = start_registry(&RegistryOptions::default());
    let reference = format!("{}/layers/whiteouts:v1", registry.host_port);
    let base = gzip(&raw_tar(&[
        ("a/keep", Regular, b"1", None),
        ("a/drop", Regular, b"2", None),
        ("b/old", Regular, b"3", None),
    ]));
    let top = raw_tar(&[
        ("a/.wh.drop", Regular, b"", None),
        ("b/.wh..wh..opq", Regular, b"", None),
        ("b/new", Regular, b"4", None),
    ]);
    push_layers(
        &reference,
        vec![base, top],
        &push_options(RegistryConfig::default()),
    )
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let pulled = image::pull_to_dir(&reference, &PullOptions::new(work.path()))
        .await
        .expect("pull");
    assert_eq!(files_under(&pulled.dir), vec!["a", "a/keep", "b", "b/new"]);
}

// ---------------------------------------------------------------------------------------------
// The hostile corpus (test/fixtures/hostile-layers/generate.py)

/// The variant name of an unpack error, to compare with the corpus' `refused:<variant>`.
fn variant(err: &UnpackError) -> String {
    format!("{err:?}")
        .split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Runs `read` on a thread with a generous deadline: a reader that blocks on a FIFO never ends.
fn within_deadline<T: Send + 'static>(what: &str, read: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{what}: the reader did not return (blocked on a FIFO or device?)"))
}

/// What the readers make of an unpacked root: never the sentinel's secret, never a hang.
fn read_back(name: &str, root: &Path) -> (String, String) {
    let dir = root.to_path_buf();
    let bundle = within_deadline(name, move || format!("{:?}", RegistryV1Bundle::from_dir(&dir)));
    let dir = root.to_path_buf();
    let catalog = within_deadline(name, move || {
        format!("{:?}", olmv1::catalog::read_dir_metas(&dir).map(|m| m.len()))
    });
    for text in [&bundle, &catalog] {
        assert!(
            !text.contains(support::hostile::SECRET),
            "{name}: read the host's secret: {text}"
        );
        assert!(text.len() < 1 << 20, "{name}: read far more than the image holds");
    }
    (bundle, catalog)
}

#[test]
fn hostile_corpus_is_refused_or_contained_and_never_escapes() {
    let corpus = support::hostile::Corpus::generate();
    let before = corpus.sentinel_snapshot();
    for case in &corpus.cases {
        let parent = corpus.dir.path().join("roots").join(&case.name);
        let root = parent.join("rootfs");
        std::fs::create_dir_all(&root).unwrap();
        let mut totals = UnpackTotals::default();
        let mut result = Ok(());
        for layer in corpus.layers(case) {
            result = apply_layer(&root, layer.as_slice(), &UnpackLimits::BUNDLE, &mut totals);
            if result.is_err() {
                break;
            }
        }
        match (case.expect.strip_prefix("refused:"), &result) {
            (Some(expected), Err(err)) => {
                assert_eq!(
                    variant(err),
                    expected,
                    "{}: refused for the wrong reason: {err}",
                    case.name
                )
            }
            (None, Ok(())) => {}
            (_, _) => panic!("{}: expected {}, got {result:?}", case.name, case.expect),
        }
        assert_eq!(
            corpus.sentinel_snapshot(),
            before,
            "{}: the sentinel tree beside the root changed",
            case.name
        );
        assert_eq!(
            files_under(&parent),
            {
                let mut inside = vec!["rootfs".to_string()];
                inside.extend(files_under(&root).into_iter().map(|f| format!("rootfs/{f}")));
                inside
            },
            "{}: nothing is written beside the root",
            case.name
        );
        let (bundle, _) = read_back(&case.name, &root);
        if case.name.starts_with("manifest") || case.name.starts_with("annotations") {
            assert!(
                bundle.contains("symbolic link, which is not followed"),
                "{}: the bundle reader refuses the link: {bundle}",
                case.name
            );
        }
        let _ = std::fs::remove_dir_all(&parent);
    }
    // Cases read the whole corpus (a 3 GiB claim, a million entries, a 256 MiB bomb) in this
    // process; the unpacker holds none of it.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(peak_kib < 512 << 10, "peak RSS {peak_kib} KiB");
}

#[tokio::test]
async fn hostile_images_through_render_fail_cleanly_and_leave_no_complete_cache_entry() {
    let registry = start_registry(&RegistryOptions::default());
    let corpus = support::hostile::Corpus::generate();
    let before = corpus.sentinel_snapshot();
    for case in &corpus.cases {
        let reference = format!("{}/hostile/{}:v1", registry.host_port, case.name);
        push_layers(
            &reference,
            corpus.layers(case),
            &push_options(RegistryConfig::default()),
        )
        .await
        .expect("push hostile layers");
        let cache = corpus.dir.path().join("cache").join(&case.name);
        let out = support::run(
            std::process::Command::new(support::olmv1_bin())
                .args([
                    "render",
                    "--namespace",
                    "ns",
                    "--bundle",
                    &reference,
                    "--cache-dir",
                ])
                .arg(&cache),
        );
        assert!(
            !out.success,
            "{}: rendered a hostile image:\n{}",
            case.name, out.stdout
        );
        let stderr = out.stderr.trim().to_string();
        assert!(
            !stderr.contains(support::hostile::SECRET),
            "{}: {stderr}",
            case.name
        );
        assert!(!out.stdout.contains(support::hostile::SECRET), "{}", case.name);
        assert!(!stderr.contains("panicked"), "{}: {stderr}", case.name);
        let complete: Vec<String> = files_under(&cache)
            .into_iter()
            .filter(|f| f.ends_with("image.json"))
            .collect();
        if case.expect.starts_with("refused:") {
            assert!(
                stderr.contains(&reference),
                "{}: the error names the image: {stderr}",
                case.name
            );
            assert!(
                complete.is_empty(),
                "{}: a refused image was cached: {complete:?}",
                case.name
            );
        } else {
            assert!(
                stderr.contains("bundle image"),
                "{}: the error names the bundle: {stderr}",
                case.name
            );
        }
        assert_eq!(
            corpus.sentinel_snapshot(),
            before,
            "{}: the sentinel changed",
            case.name
        );
    }
    let peak = support::hostile::children_max_rss();
    assert!(
        peak < 256 << 20,
        "an `olmv1 render` of a hostile image peaked at {peak} bytes"
    );
}

/// The pull-secret sources merged over the auth file, in upstream's order, and kept current.
#[tokio::test]
async fn pull_secrets_merge_global_and_service_account_secrets_and_follow_changes() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    use kube::api::{Api, DeleteParams, Patch, PatchParams};
    use olmv1::image::Credentials;
    use olmv1::image::pull_secret::{ObjectKey, PullSecretSources, keep_current, load};
    use std::collections::BTreeMap;

    let client = support::client().await;
    let ns = support::fresh_namespace(&client, "pull-secrets").await;
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    let auth = |user: &str, password: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    };
    let apply_secret = |name: &'static str, key: &'static str, body: serde_json::Value| {
        let secrets = secrets.clone();
        async move {
            let secret = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(
                    key.to_string(),
                    ByteString(body.to_string().into_bytes()),
                )])),
                ..Default::default()
            };
            secrets
                .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&secret))
                .await
                .unwrap_or_else(|e| panic!("apply secret {name}: {e}"));
        }
    };
    apply_secret(
        "global",
        ".dockerconfigjson",
        serde_json::json!({"auths": {"x.example": {"auth": auth("global", "g")}, "g.example": {"auth": auth("global", "g")}}}),
    )
    .await;
    apply_secret(
        "first",
        ".dockerconfigjson",
        serde_json::json!({"auths": {"x.example": {"auth": auth("first", "1")}, "y.example": {"auth": auth("first", "1")}}}),
    )
    .await;
    apply_secret(
        "second",
        ".dockercfg",
        serde_json::json!({"y.example": {"auth": auth("second", "2")}}),
    )
    .await;
    let account: ServiceAccount = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "component"},
        "imagePullSecrets": [{"name": "first"}, {"name": "missing"}, {"name": "second"}]
    }))
    .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .patch(
            "component",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&account),
        )
        .await
        .expect("apply the ServiceAccount");

    // The auth file's entries are the base; every later source wins for its registries.
    let base = BTreeMap::from([
        (
            "x.example".to_string(),
            Credential {
                username: "file".into(),
                password: "f".into(),
            },
        ),
        (
            "z.example".to_string(),
            Credential {
                username: "file".into(),
                password: "f".into(),
            },
        ),
    ]);
    let credentials = Credentials::default();
    let sources = PullSecretSources {
        global: Some(ObjectKey::parse(&format!("{ns}/global")).unwrap()),
        service_account: Some(ObjectKey::parse(&format!("{ns}/component")).unwrap()),
    };
    let task = tokio::spawn(keep_current(
        client.clone(),
        sources.clone(),
        base.clone(),
        credentials.clone(),
    ));
    let users = |c: &Credentials| -> BTreeMap<String, String> {
        c.snapshot()
            .into_iter()
            .map(|(k, v)| (k, format!("{}:{}", v.username, v.password)))
            .collect()
    };
    let expect = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let merged = expect(&[
        ("g.example", "global:g"),
        ("x.example", "first:1"),
        ("y.example", "second:2"),
        ("z.example", "file:f"),
    ]);
    support::wait_for("the merged credentials", support::DEFAULT_TIMEOUT, || async {
        let now = users(&credentials);
        if now == merged {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;

    // Rotating a ServiceAccount secret and deleting the global one take effect, no restart.
    apply_secret(
        "second",
        ".dockercfg",
        serde_json::json!({"y.example": {"auth": auth("second", "rotated")}}),
    )
    .await;
    secrets
        .delete("global", &DeleteParams::default())
        .await
        .expect("delete the global secret");
    let after = expect(&[
        ("x.example", "first:1"),
        ("y.example", "second:rotated"),
        ("z.example", "file:f"),
    ]);
    support::wait_for(
        "the rotation and the deletion",
        support::DEFAULT_TIMEOUT,
        || async {
            let now = users(&credentials);
            if now == after {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await;

    // A Secret that holds garbage is refused by name, never quoted, and the watcher keeps the
    // credentials it has (it replaces them only with a complete, valid read).
    apply_secret("first", ".dockerconfigjson", serde_json::json!("hunter2")).await;
    let err = load(&client, &sources, &base)
        .await
        .expect_err("garbage is refused");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("pull secret {ns}/first: .dockerconfigjson: ")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert_eq!(users(&credentials), after, "a broken rotation takes nothing away");
    task.abort();
}

/// One kind of damage done to an unpacked cache entry (`rootfs` is the entry's root file system).
type Damage = (&'static str, fn(&Path));

#[tokio::test]
async fn a_damaged_cache_entry_is_detected_by_its_digest_and_pulled_again() {
    let registry = start_registry(&RegistryOptions::default());
    let (_, pushed) = push_simple(&registry).await;
    let work = tempfile::tempdir().unwrap();
    let options = PullOptions::new(work.path().join("cache"));
    let first = image::pull_to_dir(&pushed.digest_ref, &options)
        .await
        .expect("first pull");
    let configmap = "manifests/configmap.yaml";
    let original = std::fs::read(first.dir.join(configmap)).unwrap();
    let original_files = files_under(&first.dir);
    let scoped_cache = first.dir.parent().unwrap().parent().unwrap().to_path_buf();

    let damages: [Damage; 6] = [
        ("a byte changed in place, size unchanged", |rootfs| {
            let path = rootfs.join("manifests/configmap.yaml");
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.replace("greeting: hello", "greeting: jello")).unwrap();
        }),
        ("a file truncated", |rootfs| {
            let path = rootfs.join("manifests/configmap.yaml");
            let len = std::fs::metadata(&path).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len / 2)
                .unwrap();
        }),
        ("a file removed", |rootfs| {
            std::fs::remove_file(rootfs.join("metadata/annotations.yaml")).unwrap();
        }),
        ("a file added", |rootfs| {
            std::fs::write(
                rootfs.join("manifests/extra.yaml"),
                "apiVersion: v1\nkind: Secret\n",
            )
            .unwrap();
        }),
        ("the completion marker truncated", |rootfs| {
            let marker = rootfs.parent().unwrap().join("image.json");
            std::fs::write(&marker, &std::fs::read(&marker).unwrap()[..10]).unwrap();
        }),
        ("the completion marker gone", |rootfs| {
            std::fs::remove_file(rootfs.parent().unwrap().join("image.json")).unwrap();
        }),
    ];
    for (what, damage) in damages {
        damage(&first.dir);
        assert!(
            image::cache::lookup(&scoped_cache, &pushed.digest).is_none(),
            "{what}: the damaged entry is never handed out"
        );
        let again = image::pull_to_dir(&pushed.digest_ref, &options)
            .await
            .unwrap_or_else(|e| panic!("{what}: pulled again: {e}"));
        assert_eq!(again.dir, first.dir, "{what}");
        assert_eq!(
            std::fs::read(again.dir.join(configmap)).unwrap(),
            original,
            "{what}: the content is the image's again"
        );
        assert_eq!(files_under(&again.dir), original_files, "{what}");
        assert_eq!(
            image::cache::lookup(&scoped_cache, &pushed.digest).as_ref(),
            Some(&again),
            "{what}: the new entry verifies"
        );
    }
}

#[tokio::test]
async fn what_is_read_of_a_cache_entry_damaged_meanwhile_is_never_handed_out() {
    let registry = start_registry(&RegistryOptions::default());
    let (_, pushed) = push_simple(&registry).await;
    let work = tempfile::tempdir().unwrap();
    let options = PullOptions::new(work.path().join("cache"));
    let configmap = "manifests/configmap.yaml";
    let damage = |rootfs: &Path| {
        let path = rootfs.join(configmap);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("greeting: hello", "greeting: jello")).unwrap();
    };

    // Damage that lands after the pull's check, while the content is read: the entry is pulled
    // again and read again, and only the second read is handed out.
    let reads = std::cell::Cell::new(0);
    let (pulled, content) = image::pull_and_read(&pushed.digest_ref, &options, |rootfs| {
        reads.set(reads.get() + 1);
        let content = std::fs::read_to_string(rootfs.join(configmap)).unwrap();
        if reads.get() == 1 {
            damage(rootfs);
        }
        content
    })
    .await
    .expect("pulled again after the damage");
    assert_eq!(reads.get(), 2, "the damaged read is repeated");
    assert!(content.contains("greeting: hello"), "{content}");
    let scoped_cache = pulled.dir.parent().unwrap().parent().unwrap();
    assert_eq!(
        image::cache::lookup(scoped_cache, &pushed.digest).as_ref(),
        Some(&pulled),
        "the entry handed out verifies"
    );
    let on_disk = std::fs::read_to_string(pulled.dir.join(configmap)).unwrap();
    assert!(on_disk.contains("greeting: hello"), "{on_disk}");

    // Damaged at every read: an error naming the image, the entry and the damage.
    let error = image::pull_and_read(&pushed.digest_ref, &options, damage)
        .await
        .expect_err("an entry damaged at every read is refused");
    let message = error.to_string();
    assert!(
        message.contains(&pushed.digest_ref)
            && message.contains(&pulled.dir.parent().unwrap().display().to_string())
            && message.contains("content digest"),
        "{message}"
    );
}

/// Pushes a bundle-shaped image with a 1 MiB file (more than the small tmpfs below holds).
async fn push_large_image(host_port: &str) -> image::PushedImage {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    let filler: String = (0..(1 << 20) / 64)
        .map(|i| format!("# line {i:>10} of filler to fill a small disk quickly.......\n"))
        .collect();
    std::fs::write(dir.path().join("manifests/large.yaml"), filler).unwrap();
    push_dir(
        dir.path(),
        &format!("{host_port}/fixtures/large:v1"),
        &push_options(RegistryConfig::default()),
    )
    .await
    .expect("push the large image")
}

#[tokio::test]
async fn a_read_only_or_full_cache_directory_is_named_with_the_cause_and_nothing_is_kept() {
    let registry = start_registry(&RegistryOptions::default());
    let pushed = push_large_image(&registry.host_port).await;
    let work = tempfile::tempdir().unwrap();

    let read_only = work.path().join("read-only");
    let _read_only_mount = support::TmpfsMount::new(&read_only, "ro,size=1m");
    let err = image::pull_to_dir(&pushed.digest_ref, &PullOptions::new(&read_only))
        .await
        .expect_err("a read-only cache directory");
    assert!(matches!(err, ImageError::CacheUnwritable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "image {}: cannot write to the cache directory {}: Read-only file system (os error 30)",
            pushed.digest_ref,
            read_only.display()
        )
    );

    let full = work.path().join("full");
    let _full_mount = support::TmpfsMount::new(&full, "size=256k");
    let err = image::pull_to_dir(&pushed.digest_ref, &PullOptions::new(&full))
        .await
        .expect_err("a cache directory too small for the image");
    assert!(matches!(err, ImageError::CacheUnwritable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "image {}: cannot write to the cache directory {}: No space left on device (os error 28)",
            pushed.digest_ref,
            full.display()
        )
    );
    // The staging directory went with the error: the space is free again.
    assert_eq!(
        files_under(&full),
        vec!["anonymous".to_string()],
        "nothing of the image is left behind"
    );
}

/// registries.conf in the tests: a name that resolves nowhere, served by a mirror that needs
/// credentials; a blocked registry; a mirror for references by digest only.
fn mirrors_conf(mirror: &str) -> image::RegistriesConf {
    let text = format!(
        r#"
[[registry]]
prefix = "mirrored.registry.invalid/e2e"
location = "mirrored.registry.invalid/e2e"

[[registry.mirror]]
location = "{mirror}/copies"

[[registry]]
location = "blocked.registry.invalid"
blocked = true

[[registry]]
location = "digest-only.registry.invalid"
mirror-by-digest-only = true

[[registry.mirror]]
location = "{mirror}/copies"
"#
    );
    image::RegistriesConf::parse(&text, "test registries.conf").expect("valid registries.conf")
}

#[tokio::test]
async fn a_mirror_serves_a_name_that_resolves_nowhere_with_the_credentials_of_the_host_contacted() {
    let auth_dir = tempfile::tempdir().unwrap();
    let htpasswd = htpasswd_file(auth_dir.path(), "mirror-user", "m1rror");
    let mirror = start_registry(&RegistryOptions {
        htpasswd: Some(htpasswd),
        ..Default::default()
    });
    // Credentials for the mirror only: the image's own host is never looked up.
    let config = RegistryConfig {
        registries_conf: mirrors_conf(&mirror.host_port),
        ..RegistryConfig::default()
    };
    config.credentials.insert(
        mirror.host_port.clone(),
        Credential {
            username: "mirror-user".into(),
            password: "m1rror".into(),
        },
    );
    let pushed = push_dir(
        &fixture("simple"),
        &format!("{}/copies/simple:v1", mirror.host_port),
        &push_options(config.clone()),
    )
    .await
    .expect("push to the mirror");
    let work = tempfile::tempdir().unwrap();
    let options = PullOptions {
        registry: config.clone(),
        ..PullOptions::new(work.path().join("cache"))
    };

    let pulled = image::pull_to_dir("mirrored.registry.invalid/e2e/simple:v1", &options)
        .await
        .expect("pulled through the mirror");
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(
        pulled.digest_ref,
        format!("mirrored.registry.invalid/e2e/simple@{}", pushed.digest),
        "named as referenced, not as the mirror"
    );
    assert!(
        files_under(&pulled.dir)
            .iter()
            .any(|f| f.starts_with("manifests")),
        "the image's content"
    );

    // Without the mirror's credentials: the mirror's 401 and the primary's failure, both named.
    let no_credentials = PullOptions {
        registry: RegistryConfig {
            registries_conf: mirrors_conf(&mirror.host_port),
            ..RegistryConfig::default()
        },
        ..PullOptions::new(work.path().join("cache-2"))
    };
    let err = image::pull_to_dir("mirrored.registry.invalid/e2e/simple:v1", &no_credentials)
        .await
        .expect_err("the mirror refuses, the primary does not exist");
    let message = err.to_string();
    assert!(
        message.starts_with("image mirrored.registry.invalid/e2e/simple:v1: no pull source serves it (")
            && message.contains(&format!("{}/copies/simple:v1", mirror.host_port))
            && message.contains("HTTP 401")
            && message.contains("mirrored.registry.invalid/e2e/simple:v1: "),
        "{message}"
    );

    // A blocked registry: refused before any request, naming the file.
    let err = image::pull_to_dir("blocked.registry.invalid/e2e/simple:v1", &options)
        .await
        .expect_err("blocked");
    assert_eq!(
        err.to_string(),
        "image blocked.registry.invalid/e2e/simple:v1: registry blocked.registry.invalid is blocked in test registries.conf"
    );
    assert!(err.is_terminal());

    // A digest-only mirror: used for the digest, never for the tag (which goes to the primary,
    // which does not exist).
    let by_digest = image::pull_to_dir(
        &format!("digest-only.registry.invalid/simple@{}", pushed.digest),
        &options,
    )
    .await
    .expect("a digest through the digest-only mirror");
    assert_eq!(by_digest.digest, pushed.digest);
    let err = image::pull_to_dir("digest-only.registry.invalid/simple:v1", &options)
        .await
        .expect_err("a tag never goes to a digest-only mirror");
    let message = err.to_string();
    assert!(
        message.contains("digest-only.registry.invalid") && !message.contains(&mirror.host_port),
        "only the primary was tried: {message}"
    );
}
