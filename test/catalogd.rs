//! The catalog server (`olmv1 catalogd`): standalone serving of a shared catalog over real HTTP,
//! and ClusterCatalog reconciling against the local control plane and real registries.

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1::catalog::cache::CachedCatalogClient;
use olmv1::catalog::client::CatalogClient;
use olmv1::catalog::{CatalogIndex, Meta, read_dir_metas, write_jsonl};
use olmv1::image::{PushOptions, PushedImage, RegistryConfig, push_dir};
use olmv1_api::v1::ClusterCatalog;
use support::{RegistryOptions, start_registry, wait_for};

const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
const STARTUP: Duration = Duration::from_secs(180);

fn shared_catalog(name: &str) -> PathBuf {
    support::repo_root().join("../shared/catalogs").join(name)
}

fn fixture(name: &str) -> PathBuf {
    support::repo_root().join("test/fixtures/images").join(name)
}

fn expected_jsonl(metas: &[Meta]) -> Vec<u8> {
    let mut out = Vec::new();
    write_jsonl(&mut out, metas).unwrap();
    out
}

fn lines_of<'a>(metas: impl IntoIterator<Item = &'a Meta>) -> Vec<u8> {
    expected_jsonl(&metas.into_iter().cloned().collect::<Vec<_>>())
}

/// An `olmv1 catalogd` process; killed on drop.
struct Catalogd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Catalogd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Catalogd {
    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("catalogd.log")).unwrap_or_default()
    }

    /// Waits until the server accepts connections (it listens once its catalogs are stored).
    async fn wait_listening(&mut self) {
        let addr = self.url.trim_start_matches("http://").to_string();
        let deadline = std::time::Instant::now() + STARTUP;
        loop {
            if std::net::TcpStream::connect(&addr).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("olmv1 catalogd exited ({status}):\n{}", self.log());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "catalogd did not listen in time:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn spawn_catalogd(mut command: Command, dir: tempfile::TempDir, port: u16) -> Catalogd {
    let log = std::fs::File::create(dir.path().join("catalogd.log")).unwrap();
    let child = command
        .env("OLMV1_EXIT_WITH_PARENT", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("run olmv1 catalogd");
    Catalogd {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// `olmv1 catalogd serve` of one catalog directory.
async fn serve_standalone(name: &str, dir: &Path) -> Catalogd {
    let port = support::free_port();
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(support::olmv1_bin());
    command.args(["catalogd", "serve", "--listen", &format!("127.0.0.1:{port}")]);
    command.arg("--catalog").arg(format!("{name}={}", dir.display()));
    command.arg("--cache-dir").arg(work.path().join("store"));
    let mut catalogd = spawn_catalogd(command, work, port);
    catalogd.wait_listening().await;
    catalogd
}

#[tokio::test]
async fn standalone_serves_over_tls_with_a_test_ca() {
    let tls_dir = tempfile::tempdir().unwrap();
    let tls = support::TestTls::generate(tls_dir.path());
    let port = support::free_port();
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(support::olmv1_bin());
    command.args(["catalogd", "serve", "--listen", &format!("127.0.0.1:{port}")]);
    command
        .arg("--catalog")
        .arg(format!("fixture={}", fixture("catalog-v2").display()));
    command
        .arg("--tls-cert")
        .arg(&tls.serving.cert)
        .arg("--tls-key")
        .arg(&tls.serving.key);
    let mut catalogd = spawn_catalogd(command, work, port);
    catalogd.wait_listening().await;

    let ca = std::fs::read(&tls.ca_cert).unwrap();
    let client = CatalogClient::new(&[ca]).unwrap();
    let body = client
        .fetch_all(&format!("https://127.0.0.1:{port}/catalogs/fixture"))
        .await
        .expect("HTTPS fetch");
    assert!(body == expected_jsonl(&read_dir_metas(&fixture("catalog-v2")).unwrap()));

    let untrusted = CatalogClient::new(&[]).unwrap();
    let err = untrusted
        .fetch_all(&format!("https://127.0.0.1:{port}/catalogs/fixture"))
        .await;
    assert!(err.is_err(), "a client without the test CA must not connect");
    let plain = reqwest::get(format!("http://127.0.0.1:{port}/catalogs/fixture/api/v1/all")).await;
    assert!(
        plain.map(|r| r.status() != 200).unwrap_or(true),
        "no plain HTTP on a TLS listener"
    );
}

#[tokio::test]
async fn a_rotated_serving_certificate_is_served_without_a_restart() {
    // The files the server reads, as a Secret volume holds them; replaced by renames as the
    // kubelet swaps a rotated Secret in.
    let served = tempfile::tempdir().unwrap();
    let generate = |name: &str| {
        let dir = served.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        support::TestTls::generate(&dir)
    };
    let first = generate("first");
    let (cert, key) = (served.path().join("tls.crt"), served.path().join("tls.key"));
    std::fs::copy(&first.serving.cert, &cert).unwrap();
    std::fs::copy(&first.serving.key, &key).unwrap();
    let port = support::free_port();
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(support::olmv1_bin());
    command.args(["catalogd", "serve", "--listen", &format!("127.0.0.1:{port}")]);
    command
        .arg("--catalog")
        .arg(format!("fixture={}", fixture("catalog-v2").display()));
    command.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key);
    let mut catalogd = spawn_catalogd(command, work, port);
    catalogd.wait_listening().await;
    let url = format!("https://127.0.0.1:{port}/catalogs/fixture");
    let trusting = |ca: &Path| CatalogClient::new(&[std::fs::read(ca).unwrap()]).unwrap();
    trusting(&first.ca_cert)
        .fetch_all(&url)
        .await
        .expect("the first certificate is served");

    let second = generate("second");
    for (from, to) in [(&second.serving.key, &key), (&second.serving.cert, &cert)] {
        let staged = to.with_extension("new");
        std::fs::copy(from, &staged).unwrap();
        std::fs::rename(&staged, to).unwrap();
    }
    let rotated = trusting(&second.ca_cert);
    wait_for(
        "the server to serve the rotated certificate",
        Duration::from_secs(90),
        || async {
            rotated
                .fetch_all(&url)
                .await
                .map(|_| ())
                .map_err(|e| format!("{e}; log: {}", catalogd.log()))
        },
    )
    .await;
}

/// `olmv1 catalogd` in cluster mode, reconciling the ClusterCatalogs labelled `selector`.
async fn run_cluster_catalogd(selector: &str, extra: &[&str]) -> Catalogd {
    let env = support::env();
    let port = support::free_port();
    let work = tempfile::tempdir().unwrap();
    let address = format!("127.0.0.1:{port}");
    let mut command = env.command(support::olmv1_bin());
    command.args([
        "catalogd",
        "--catalogs-server-addr",
        &address,
        "--external-address",
        &address,
    ]);
    command.args(["--selector", selector, "--poll-interval-unit-seconds", "1"]);
    command.args([
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        "127.0.0.1:0",
    ]);
    command.arg("--cache-dir").arg(work.path().join("cache"));
    command.args(extra);
    command.env("RUST_LOG", "info,olmv1=debug");
    let mut catalogd = spawn_catalogd(command, work, port);
    catalogd.wait_listening().await;
    catalogd
}

fn http() -> reqwest::Client {
    // No automatic gzip: the tests look at what the server sends.
    reqwest::Client::builder().no_gzip().build().unwrap()
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    request(reqwest::Method::GET, url, headers).await
}

async fn request(
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut builder = http().request(method, url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let response = builder.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap().to_vec();
    (status, headers, body)
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn standalone_serves_the_shared_community_catalog_as_upstream_catalogd() {
    let dir = shared_catalog("community-operators-v4.16");
    let metas = read_dir_metas(&dir).expect("the shared catalog parses");
    let expected = expected_jsonl(&metas);
    let catalogd = serve_standalone("community", &dir).await;
    let base = format!("{}/catalogs/community/api/v1", catalogd.url);

    let (status, headers, body) = get(&format!("{base}/all"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/jsonl");
    assert!(
        body == expected,
        "/api/v1/all returns every blob of the catalog, in catalogd's order"
    );
    let last_modified = headers["last-modified"].to_str().unwrap().to_string();

    let (status, headers, body) = get(&format!("{base}/all"), &[("accept-encoding", "gzip")]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-encoding"], "gzip");
    assert!(gunzip(&body) == expected);

    let (status, _, body) = get(&format!("{base}/all"), &[("if-modified-since", &last_modified)]).await;
    assert_eq!((status, body.len()), (304, 0));
    let (status, headers, body) = request(reqwest::Method::HEAD, &format!("{base}/all"), &[]).await;
    assert_eq!((status, body.len()), (200, 0));
    assert_eq!(
        headers["content-length"].to_str().unwrap(),
        expected.len().to_string()
    );

    // Metas: filtered from the index, in file order.
    let (status, _, body) = get(&format!("{base}/metas?schema=olm.package"), &[]).await;
    assert_eq!(status, 200);
    assert!(body == lines_of(metas.iter().filter(|m| &*m.schema == "olm.package")));
    let package = "koku-metrics-operator";
    let (_, _, body) = get(&format!("{base}/metas?package={package}"), &[]).await;
    let of_package: Vec<&Meta> = metas.iter().filter(|m| &*m.package == package).collect();
    assert!(
        !of_package.is_empty() && body == lines_of(of_package.iter().copied()),
        "package filter"
    );
    assert!(
        !String::from_utf8_lossy(&body).contains("\"schema\":\"olm.package\""),
        "no olm.package blob"
    );
    let (_, _, body) = get(
        &format!("{base}/metas?schema=olm.channel&package={package}&name=beta"),
        &[],
    )
    .await;
    assert!(
        body == lines_of(
            metas
                .iter()
                .filter(|m| &*m.schema == "olm.channel" && &*m.package == package && &*m.name == "beta")
        )
    );
    let (status, _, body) = get(&format!("{base}/metas?package=no-such-package"), &[]).await;
    assert_eq!((status, body.len()), (200, 0));
    let (status, headers, body) = get(
        &format!("{base}/metas?schema=olm.bundle&package={package}"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-encoding"], "gzip");
    assert!(
        gunzip(&body)
            == lines_of(
                metas
                    .iter()
                    .filter(|m| &*m.schema == "olm.bundle" && &*m.package == package)
            )
    );
    let (status, _, _) = get(
        &format!("{base}/metas?package={package}"),
        &[("if-modified-since", &last_modified)],
    )
    .await;
    assert_eq!(status, 304);

    // Errors, with upstream's bodies.
    let (status, _, body) = get(&format!("{base}/metas?foo=bar"), &[]).await;
    assert_eq!((status, body.as_slice()), (400, &b"400 Bad Request\n"[..]));
    for method in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let (status, _, body) = request(method, &format!("{base}/all"), &[]).await;
        assert_eq!((status, body.as_slice()), (405, &b"Method Not Allowed\n"[..]));
    }
    let (status, _, body) = get(&format!("{}/catalogs/missing/api/v1/all", catalogd.url), &[]).await;
    assert_eq!((status, body.as_slice()), (404, &b"404 Not Found\n"[..]));
    for path in [
        "/",
        "/catalogs/",
        "/catalogs/community/",
        "/catalogs/community/api/v1",
        "/catalogs/community.jsonl",
    ] {
        let (status, _, body) = get(&format!("{}{path}", catalogd.url), &[]).await;
        assert_eq!(
            (status, body.as_slice()),
            (404, &b"404 page not found\n"[..]),
            "{path}"
        );
    }
    let (status, _, body) = get(&format!("{}/catalogs/Bad_Name/api/v1/all", catalogd.url), &[]).await;
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&body).starts_with("invalid catalog name: a lowercase RFC 1123 subdomain")
    );
}

// ---------------------------------------------------------------------------------------------
// Cluster mode

fn cluster_catalog(
    name: &str,
    selector_value: &str,
    reference: &str,
    poll_minutes: Option<i32>,
) -> ClusterCatalog {
    let mut image = serde_json::json!({ "ref": reference });
    if let Some(minutes) = poll_minutes {
        image["pollIntervalMinutes"] = minutes.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "metadata": { "name": name, "labels": { "olmv1.test/catalogd": selector_value } },
        "spec": { "source": { "type": "Image", "image": image } },
    }))
    .unwrap()
}

fn condition<'a>(
    catalog: &'a ClusterCatalog,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    catalog
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

fn describe(catalog: &ClusterCatalog) -> String {
    serde_json::to_string(&catalog.status).unwrap_or_default()
}

async fn wait_catalog(
    api: &Api<ClusterCatalog>,
    name: &str,
    what: &str,
    check: impl Fn(&ClusterCatalog) -> bool,
) -> ClusterCatalog {
    wait_for(what, Duration::from_secs(120), || async {
        match api.get(name).await {
            Ok(catalog) if check(&catalog) => Ok(catalog),
            Ok(catalog) => Err(describe(&catalog)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

fn is(catalog: &ClusterCatalog, type_: &str, status: &str, reason: &str) -> bool {
    condition(catalog, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

fn catalog_push_options(registry: RegistryConfig) -> PushOptions {
    PushOptions {
        registry,
        labels: [(CONFIGS_LABEL.to_string(), "/configs".to_string())].into(),
        prefix: "/configs".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn cluster_catalog_from_the_shared_community_catalog_is_served_and_resolves_the_same() {
    let env = support::env();
    let dir = shared_catalog("community-operators-v4.16");
    let reference = format!(
        "{}/catalogs/{}:v4.16",
        env.registry,
        support::fresh_name("community")
    );
    let pushed = push_dir(&dir, &reference, &catalog_push_options(RegistryConfig::default()))
        .await
        .expect("push");

    let selector_value = support::fresh_name("sel");
    let catalogd = run_cluster_catalogd(&format!("olmv1.test/catalogd={selector_value}"), &[]).await;
    let client = support::client().await;
    let api: Api<ClusterCatalog> = Api::all(client.clone());
    let name = support::fresh_name("community");
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &reference, None),
    )
    .await
    .unwrap();

    let served = wait_catalog(&api, &name, "Serving=True", |c| {
        is(c, "Serving", "True", "Available")
    })
    .await;
    let status = served.status.clone().unwrap();
    assert_eq!(
        status.resolved_source.as_ref().unwrap().image.reference,
        pushed.digest_ref
    );
    let base = status.urls.as_ref().unwrap().base.clone();
    assert_eq!(base, format!("{}/catalogs/{name}", catalogd.url));
    assert!(status.last_unpacked.is_some());
    assert!(is(&served, "Progressing", "True", "Succeeded"));
    assert_eq!(
        condition(&served, "Progressing").unwrap().message,
        "Successfully unpacked and stored content from resolved source"
    );
    assert!(
        served
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .contains(&"olm.operatorframework.io/delete-server-cache".into())
    );

    let metas = read_dir_metas(&dir).unwrap();
    let (code, _, body) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert_eq!(code, 200);
    assert!(
        body == expected_jsonl(&metas),
        "every blob of the catalog is served"
    );

    // The controller's cached client reads it, keyed by the resolved ref.
    let cached = CachedCatalogClient::new(CatalogClient::new(&[]).unwrap());
    let index = cached.index(&served).await.expect("cached client");
    let from_dir = CatalogIndex::from_dir(&dir).unwrap();
    assert_eq!(index.len(), from_dir.len());
    assert!(
        Arc::ptr_eq(&index, &cached.index(&served).await.unwrap()),
        "second call is a cache hit"
    );

    // Round trip: resolving against the served catalog equals resolving against the directory.
    let resolve = |catalog: String| {
        support::run(Command::new(support::olmv1_bin()).args([
            "resolve",
            "--catalog",
            &catalog,
            "--package",
            "koku-metrics-operator",
            "-o",
            "json",
        ]))
        .ok()
    };
    let from_url = resolve(format!("community={base}"));
    let from_directory = resolve(format!("community={}", dir.display()));
    assert_eq!(from_url, from_directory);
    assert!(from_url.contains("koku-metrics-operator"), "{from_url}");

    // availabilityMode: Unavailable stops serving and drops the finalizer.
    let patch = serde_json::json!({ "spec": { "availabilityMode": "Unavailable" } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let unavailable = wait_catalog(&api, &name, "Serving=False/UserSpecifiedUnavailable", |c| {
        is(c, "Serving", "False", "UserSpecifiedUnavailable")
    })
    .await;
    assert!(unavailable.status.as_ref().unwrap().urls.is_none());
    let (code, _, _) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert_eq!(code, 404);
    let err = cached.index(&unavailable).await.expect_err("not served");
    assert_eq!(err.to_string(), format!("catalog {name:?} is not being served"));

    let patch = serde_json::json!({ "spec": { "availabilityMode": "Available" } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_catalog(&api, &name, "Serving=True again", |c| {
        is(c, "Serving", "True", "Available")
    })
    .await;

    // Deleting it drops the served content and lets the object go.
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(
        "the ClusterCatalog to be gone",
        Duration::from_secs(60),
        || async {
            match api.get_opt(&name).await {
                Ok(None) => Ok(()),
                Ok(Some(c)) => Err(format!("still there: {:?}", c.metadata.finalizers)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    let (code, _, _) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert_eq!(code, 404, "catalogd log:\n{}", catalogd.log());
}

/// The `catalog-v1` fixture pushed to `registry` as `catalogs/fixture:TAG`: its tag reference
/// and what was pushed.
async fn push_fixture_catalog(registry: &support::RegistryProcess, tag: &str) -> (String, PushedImage) {
    let reference = format!("{}/catalogs/fixture:{tag}", registry.host_port);
    let pushed = push_dir(
        &fixture("catalog-v1"),
        &reference,
        &catalog_push_options(RegistryConfig::default()),
    )
    .await
    .unwrap();
    (reference, pushed)
}

#[tokio::test]
async fn polling_picks_up_a_new_digest_and_a_registry_outage_keeps_serving() {
    let registry = start_registry(&RegistryOptions::default());
    let (reference, first) = push_fixture_catalog(&registry, "latest").await;

    let selector_value = support::fresh_name("sel");
    let catalogd = run_cluster_catalogd(&format!("olmv1.test/catalogd={selector_value}"), &[]).await;
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("polled");
    // One poll unit is one second in this catalogd.
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &reference, Some(1)),
    )
    .await
    .unwrap();
    let resolved_ref = |c: &ClusterCatalog| {
        c.status
            .as_ref()
            .and_then(|s| s.resolved_source.as_ref())
            .map(|r| r.image.reference.clone())
    };
    let served = wait_catalog(&api, &name, "Serving=True on the first digest", |c| {
        is(c, "Serving", "True", "Available") && resolved_ref(c).as_deref() == Some(&first.digest_ref)
    })
    .await;
    let base = served.status.unwrap().urls.unwrap().base;
    let (_, _, body) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert!(!String::from_utf8_lossy(&body).contains("fixture-op.v1.1.0"));

    let second = push_dir(
        &fixture("catalog-v2"),
        &reference,
        &catalog_push_options(RegistryConfig::default()),
    )
    .await
    .unwrap();
    assert_ne!(first.digest, second.digest);
    wait_catalog(&api, &name, "the new digest to be picked up by polling", |c| {
        resolved_ref(c).as_deref() == Some(&second.digest_ref)
    })
    .await;
    let expected = expected_jsonl(&read_dir_metas(&fixture("catalog-v2")).unwrap());
    let (code, _, body) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert_eq!(code, 200);
    assert!(body == expected, "new content served");

    drop(registry);
    let retrying = wait_catalog(
        &api,
        &name,
        "Progressing=True/Retrying after the registry stopped",
        |c| is(c, "Progressing", "True", "Retrying"),
    )
    .await;
    let message = &condition(&retrying, "Progressing").unwrap().message;
    assert!(
        message.starts_with("source catalog content: ") && message.contains(&reference),
        "{message}"
    );
    assert!(
        is(&retrying, "Serving", "True", "Available"),
        "{}",
        describe(&retrying)
    );
    assert_eq!(
        resolved_ref(&retrying).as_deref(),
        Some(second.digest_ref.as_str())
    );
    let (code, _, body) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert_eq!(code, 200, "catalogd log:\n{}", catalogd.log());
    assert!(body == expected, "the last good content is still served");
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_pinned_image_without_the_configs_label_is_blocked() {
    let env = support::env();
    let reference = format!("{}/catalogs/{}:v1", env.registry, support::fresh_name("nolabel"));
    let options = PushOptions {
        prefix: "/configs".into(),
        ..Default::default()
    };
    let pushed = push_dir(&fixture("catalog-v1"), &reference, &options)
        .await
        .unwrap();

    let selector_value = support::fresh_name("sel");
    // This one also elects a leader first (the only test here that does: the Lease is shared).
    let _catalogd = run_cluster_catalogd(
        &format!("olmv1.test/catalogd={selector_value}"),
        &[
            "--leader-elect",
            "--leader-election-namespace",
            "default",
            // A Lease a killed run left behind is free after 15 s, not the default 137 s.
            "--leader-election-lease-duration-seconds=15",
            "--leader-election-renew-deadline-seconds=10",
            "--leader-election-retry-period-seconds=2",
        ],
    )
    .await;
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("nolabel");
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &pushed.digest_ref, None),
    )
    .await
    .unwrap();
    let blocked = wait_catalog(&api, &name, "Progressing=False/Blocked", |c| {
        is(c, "Progressing", "False", "Blocked")
    })
    .await;
    assert_eq!(
        condition(&blocked, "Progressing").unwrap().message,
        format!("source catalog content: catalog image is missing the required label {CONFIGS_LABEL:?}")
    );
    assert!(condition(&blocked, "Serving").is_none_or(|c| c.status != "True"));
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Hostile clients

/// `olmv1 catalogd serve` of one catalog directory with extra flags.
async fn serve_standalone_with(name: &str, dir: &Path, flags: &[&str]) -> Catalogd {
    let port = support::free_port();
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(support::olmv1_bin());
    command.args(["catalogd", "serve", "--listen", &format!("127.0.0.1:{port}")]);
    command.arg("--catalog").arg(format!("{name}={}", dir.display()));
    command.arg("--cache-dir").arg(work.path().join("store"));
    command.args(flags);
    let mut catalogd = spawn_catalogd(command, work, port);
    catalogd.wait_listening().await;
    catalogd
}

/// Waits until the server closes `stream` (EOF or reset), reading and dropping what it sends.
async fn wait_closed(stream: &mut tokio::net::TcpStream, what: &str) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "{what}: the server kept the connection open");
    received
}

#[tokio::test]
async fn half_sent_stalled_and_excess_requests_are_bounded_and_metas_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = shared_catalog("community-operators-v4.16");
    let metas = read_dir_metas(&dir).expect("the shared catalog parses");
    let catalogd = serve_standalone_with(
        "community",
        &dir,
        &[
            "--max-concurrent-requests",
            "2",
            "--header-read-timeout-seconds",
            "2",
            "--idle-timeout-seconds",
            "5",
        ],
    )
    .await;
    let addr = catalogd.url.trim_start_matches("http://").to_string();
    let base = format!("{}/catalogs/community/api/v1", catalogd.url);

    // /metas streams from disk, gzip-compressed on the way when asked.
    let expected = lines_of(metas.iter().filter(|m| &*m.schema == "olm.bundle"));
    let (status, headers, body) = get(
        &format!("{base}/metas?schema=olm.bundle"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(
        (status, &headers["content-encoding"]),
        (200, &"gzip".parse().unwrap())
    );
    assert!(
        gunzip(&body) == expected,
        "gzip metas hold every olm.bundle blob in file order"
    );
    let (_, headers, body) = get(&format!("{base}/metas?schema=olm.bundle"), &[]).await;
    assert!(body == expected);
    assert_eq!(
        headers["content-length"].to_str().unwrap(),
        expected.len().to_string()
    );

    // Requests whose headers never end are closed after the header-read timeout.
    let mut half_sent = Vec::new();
    for _ in 0..5 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /catalogs/community/api/v1/all HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        half_sent.push(stream);
    }
    for stream in &mut half_sent {
        wait_closed(stream, "a half-sent request").await;
    }

    // Two clients that never read their (20 MB) answers hold both request slots: a third request
    // is refused at once rather than queued behind them.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /catalogs/community/api/v1/all HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        stalled.push(stream);
    }
    let (status, headers, _) = get(&format!("{base}/metas?schema=olm.package"), &[]).await;
    assert_eq!(status, 503, "a third request while two are in progress");
    assert_eq!(headers["retry-after"], "1");
    // Nothing moves on the stalled connections: the idle timeout closes them and frees the slots.
    wait_for(
        "the stalled clients to be dropped",
        Duration::from_secs(90),
        || async {
            match get(&format!("{base}/metas?schema=olm.package"), &[]).await.0 {
                200 => Ok(()),
                other => Err(other),
            }
        },
    )
    .await;
    drop(stalled);
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_unanswered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Long header-read and idle timeouts: a held connection must not be closed (freeing its slot)
    // however slowly the machine runs the test.
    let catalogd = serve_standalone_with(
        "fixture",
        &fixture("catalog-v1"),
        &[
            "--max-connections",
            "4",
            "--header-read-timeout-seconds",
            "600",
            "--idle-timeout-seconds",
            "600",
        ],
    )
    .await;
    let addr = catalogd.url.trim_start_matches("http://").to_string();
    let request = b"GET /catalogs/fixture/api/v1/all HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    // Four connections that each got an answer and stay open (keep-alive) hold the four slots.
    // Connected but unanswered is not enough: the server may still hold an earlier connection
    // (wait_listening's probe) that it has not yet seen closed, and then refuse one of these and
    // free that slot for the fifth.
    let keep_alive = b"GET /nosuch HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut held = Vec::new();
    while held.len() < 4 {
        let stream = wait_for(
            "a held connection to be answered",
            Duration::from_secs(90),
            || async {
                let mut stream = tokio::net::TcpStream::connect(&addr)
                    .await
                    .map_err(|e| e.to_string())?;
                stream.write_all(keep_alive).await.map_err(|e| e.to_string())?;
                let mut first = [0u8; 8];
                match tokio::time::timeout(Duration::from_secs(60), stream.read_exact(&mut first)).await {
                    Ok(Ok(_)) if &first == b"HTTP/1.1" => Ok(stream),
                    other => Err(format!("closed unanswered or garbled: {other:?} {first:?}")),
                }
            },
        )
        .await;
        held.push(stream);
    }
    let mut excess = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _ = excess.write_all(request).await;
    let answer = wait_closed(&mut excess, "a connection over the limit").await;
    assert!(
        answer.is_empty(),
        "a fifth connection got an answer: {}",
        String::from_utf8_lossy(&answer)
    );
    drop(held);
    wait_for(
        "a connection to be served once the others closed",
        Duration::from_secs(90),
        || async {
            let mut stream = tokio::net::TcpStream::connect(&addr)
                .await
                .map_err(|e| e.to_string())?;
            stream.write_all(request).await.map_err(|e| e.to_string())?;
            let answer = wait_closed(&mut stream, "a served connection").await;
            if answer.starts_with(b"HTTP/1.1 200") {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&answer).into_owned())
            }
        },
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Hostile catalog images

fn catalog_layer(dir: &Path) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.append_dir_all("configs", dir).unwrap();
    builder.into_inner().unwrap()
}

fn symlink_layer(name: &str, target: &Path) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    header.set_mode(0o777);
    builder.append_link(&mut header, name, target).unwrap();
    builder.into_inner().unwrap()
}

fn file_layer(name: &str, content: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, name, content).unwrap();
    builder.into_inner().unwrap()
}

#[tokio::test]
async fn hostile_catalog_images_are_refused_with_the_reason_and_the_last_good_content_stays() {
    let registry = start_registry(&RegistryOptions::default());
    let corpus = support::hostile::Corpus::generate();
    let sentinel_before = corpus.sentinel_snapshot();
    let reference = format!("{}/catalogs/hostile:latest", registry.host_port);
    let options = catalog_push_options(RegistryConfig::default());
    let good = olmv1::image::push_layers(&reference, vec![catalog_layer(&fixture("catalog-v1"))], &options)
        .await
        .unwrap();

    let selector_value = support::fresh_name("sel");
    // A small per-file read limit, so that a catalog file over it is cheap to build.
    let catalogd = run_cluster_catalogd(
        &format!("olmv1.test/catalogd={selector_value}"),
        &["--max-file-bytes", "65536"],
    )
    .await;
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("hostile");
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &reference, Some(1)),
    )
    .await
    .unwrap();
    let served = wait_catalog(&api, &name, "Serving=True on the good digest", |c| {
        is(c, "Serving", "True", "Available")
    })
    .await;
    let base = served.status.unwrap().urls.unwrap().base;
    let (_, _, good_body) = get(&format!("{base}/api/v1/all"), &[]).await;
    assert!(String::from_utf8_lossy(&good_body).contains("fixture-op"));

    let opaque_then_symlink = corpus
        .cases
        .iter()
        .find(|c| c.name == "opaque-then-symlink")
        .expect("corpus case");
    let big_package = format!(
        r#"{{"schema":"olm.package","name":"big","description":"{}"}}"#,
        "x".repeat(100 << 10)
    );
    // (what, layers, the reason, what the message names)
    let cases: Vec<(&str, Vec<Vec<u8>>, &str, &str)> = vec![
        (
            "a catalog file linked to /dev/zero",
            vec![
                catalog_layer(&fixture("catalog-v2")),
                symlink_layer("configs/zz.json", Path::new("/dev/zero")),
            ],
            "is a symbolic link, which is not followed",
            "configs/zz.json",
        ),
        (
            "a catalog file over --max-file-bytes",
            vec![
                catalog_layer(&fixture("catalog-v2")),
                file_layer("configs/big/catalog.json", big_package.as_bytes()),
            ],
            "is over the limit of 65536 bytes",
            "configs/big/catalog.json",
        ),
        (
            "a catalog file linked to a host file",
            vec![
                catalog_layer(&fixture("catalog-v2")),
                symlink_layer("configs/zz.json", &corpus.sentinel.join("secret.txt")),
            ],
            "is a symbolic link, which is not followed",
            "configs/zz.json",
        ),
        (
            "an opaque whiteout, then its directory made a link out",
            vec![
                catalog_layer(&fixture("catalog-v2")),
                corpus.layers(opaque_then_symlink).pop().unwrap(),
            ],
            "would be written through the symbolic link",
            &reference,
        ),
    ];
    for (what, layers, reason, named) in cases {
        let pushed = olmv1::image::push_layers(&reference, layers, &options)
            .await
            .unwrap();
        assert_ne!(pushed.digest, good.digest);
        let refused = wait_catalog(&api, &name, &format!("{what}: Progressing says why"), |c| {
            condition(c, "Progressing")
                .is_some_and(|p| p.status == "True" && p.reason == "Retrying" && p.message.contains(reason))
        })
        .await;
        let message = &condition(&refused, "Progressing").unwrap().message;
        assert!(
            message.contains(named),
            "{what}: the message names {named}: {message}"
        );
        assert!(!message.contains(support::hostile::SECRET), "{what}: {message}");
        assert!(
            is(&refused, "Serving", "True", "Available"),
            "{what}: {}",
            describe(&refused)
        );
        let (code, _, body) = get(&format!("{base}/api/v1/all"), &[]).await;
        assert_eq!(code, 200, "catalogd log:\n{}", catalogd.log());
        assert!(body == good_body, "{what}: the last good content is still served");
        assert_eq!(
            corpus.sentinel_snapshot(),
            sentinel_before,
            "{what}: the sentinel changed"
        );
    }
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Faults of the stored content and of the cache directory; the JSONL line limit

/// The stored file `file` of catalog `name` in a cluster catalogd's cache directory.
fn stored_file(catalogd: &Catalogd, name: &str, file: &str) -> PathBuf {
    let root = catalogd._dir.path().join("cache/catalogs");
    std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|dir| {
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
                && dir.join(file).is_file()
        })
        .unwrap_or_else(|| panic!("no stored {file} of {name} under {}", root.display()))
        .join(file)
}

/// Waits until `/api/v1/all` answers 200 with `expected` (asking for gzip when `gzip`).
async fn wait_served(catalogd: &Catalogd, all: &str, gzip: bool, expected: &[u8], what: &str) {
    let headers: &[(&str, &str)] = if gzip { &[("Accept-Encoding", "gzip")] } else { &[] };
    wait_for(what, Duration::from_secs(120), || async {
        let mut builder = http().get(all);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let response = builder.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let compressed = response
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v == "gzip");
        let body = response.bytes().await.map_err(|e| e.to_string())?.to_vec();
        let body = if compressed { gunzip(&body) } else { body };
        if status == 200 && body == expected {
            Ok(())
        } else {
            Err(format!(
                "status {status}, {} bytes; log:\n{}",
                body.len(),
                catalogd.log()
            ))
        }
    })
    .await;
}

#[tokio::test]
async fn damaged_stored_content_is_never_served_and_is_stored_again() {
    let registry = start_registry(&RegistryOptions::default());
    let (_, pushed) = push_fixture_catalog(&registry, "damaged").await;
    let selector_value = support::fresh_name("sel");
    let catalogd = run_cluster_catalogd(&format!("olmv1.test/catalogd={selector_value}"), &[]).await;
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("damaged");
    // Pinned by digest: never polled, so only the damage can make it store the catalog again.
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &pushed.digest_ref, None),
    )
    .await
    .unwrap();
    let served = wait_catalog(&api, &name, "Serving=True", |c| {
        is(c, "Serving", "True", "Available")
    })
    .await;
    let all = format!("{}/api/v1/all", served.status.unwrap().urls.unwrap().base);
    let expected = expected_jsonl(&read_dir_metas(&fixture("catalog-v1")).unwrap());
    wait_served(&catalogd, &all, false, &expected, "the catalog served").await;

    // One byte changed in place, the size unchanged: the digest check of the body fails before
    // its last byte, so no client ever receives the damaged content as a whole response.
    let jsonl = stored_file(&catalogd, &name, "catalog.jsonl");
    let mut bytes = std::fs::read(&jsonl).unwrap();
    let at = bytes.windows(10).position(|w| w == b"fixture-op").unwrap();
    bytes[at + 9] = b'q';
    std::fs::write(&jsonl, &bytes).unwrap();
    // The response fails before or after its headers (the body is one chunk here): either way
    // the damaged bytes never arrive as a complete 200 response.
    if let Ok(response) = http().get(&all).send().await {
        let status = response.status().as_u16();
        if let Ok(body) = response.bytes().await {
            assert!(
                status != 200 || body.to_vec() != bytes,
                "the damaged catalog.jsonl was served whole"
            );
        }
    }
    wait_served(
        &catalogd,
        &all,
        false,
        &expected,
        "the catalog stored and served again",
    )
    .await;
    assert!(
        catalogd
            .log()
            .contains("stored catalog content is damaged; it is no longer served and will be stored again"),
        "{}",
        catalogd.log()
    );

    // The gzip copy truncated: its size is checked on every request, so it is not served at all.
    // The damage above may have triggered more than one store: wait until one stored copy is
    // left and served, so that the truncation hits the copy being served.
    wait_served(&catalogd, &all, true, &expected, "the gzip copy served").await;
    let root = catalogd._dir.path().join("cache/catalogs");
    wait_for(
        "one stored copy of the catalog",
        Duration::from_secs(60),
        || async {
            let copies = std::fs::read_dir(&root)
                .map_err(|e| e.to_string())?
                .flatten()
                .filter(|entry| {
                    entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{name}-"))
                })
                .count();
            if copies == 1 {
                Ok(())
            } else {
                Err(format!("{copies} stored copies"))
            }
        },
    )
    .await;
    let gzip = stored_file(&catalogd, &name, "catalog.jsonl.gz");
    let len = std::fs::metadata(&gzip).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&gzip)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let (code, _, body) = get(&all, &[("Accept-Encoding", "gzip")]).await;
    if code == 200 {
        // Only a copy stored again since (a late trigger of the first damage) may be served.
        let mut whole = Vec::new();
        let decoded =
            std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&body[..]), &mut whole);
        assert!(
            decoded.is_ok() && whole == expected,
            "a truncated gzip copy was served ({} bytes)",
            body.len()
        );
    }
    wait_served(&catalogd, &all, true, &expected, "the gzip copy stored again").await;
    let after = api.get(&name).await.unwrap();
    assert!(is(&after, "Serving", "True", "Available"), "{}", describe(&after));
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_read_only_image_cache_is_named_in_status_and_the_catalog_is_served_once_writable() {
    let registry = start_registry(&RegistryOptions::default());
    let (_, pushed) = push_fixture_catalog(&registry, "rocache").await;
    let selector_value = support::fresh_name("sel");
    let catalogd = run_cluster_catalogd(&format!("olmv1.test/catalogd={selector_value}"), &[]).await;
    // Where catalogd unpacks images (`<--cache-dir>/unpack`), made read-only before any pull.
    let unpack = catalogd._dir.path().join("cache/unpack");
    let mount = support::TmpfsMount::new(&unpack, "ro,size=1m");
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("rocache");
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &pushed.digest_ref, None),
    )
    .await
    .unwrap();
    let retrying = wait_catalog(&api, &name, "Progressing=True/Retrying", |c| {
        is(c, "Progressing", "True", "Retrying")
    })
    .await;
    assert_eq!(
        condition(&retrying, "Progressing").unwrap().message,
        format!(
            "source catalog content: image {}: cannot write to the cache directory {}: Read-only file system (os error 30)",
            pushed.digest_ref,
            unpack.display()
        )
    );
    assert!(
        condition(&retrying, "Serving").is_none_or(|c| c.status != "True"),
        "nothing is served: {}",
        describe(&retrying)
    );

    drop(mount);
    let served = wait_catalog(&api, &name, "Serving=True once the directory is writable", |c| {
        is(c, "Serving", "True", "Available")
    })
    .await;
    let all = format!("{}/api/v1/all", served.status.unwrap().urls.unwrap().base);
    let expected = expected_jsonl(&read_dir_metas(&fixture("catalog-v1")).unwrap());
    wait_served(&catalogd, &all, false, &expected, "the catalog served").await;
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_jsonl_line_over_the_limit_is_refused_by_catalogd_and_by_the_controllers_client() {
    let metas = read_dir_metas(&fixture("catalog-v1")).unwrap();
    let longest = metas.iter().map(|m| m.blob.len()).max().unwrap();
    let limit = longest - 1;

    // catalogd refuses to store it.
    let registry = start_registry(&RegistryOptions::default());
    let (_, pushed) = push_fixture_catalog(&registry, "longline").await;
    let selector_value = support::fresh_name("sel");
    let _catalogd = run_cluster_catalogd(
        &format!("olmv1.test/catalogd={selector_value}"),
        &["--max-jsonl-line-bytes", &limit.to_string()],
    )
    .await;
    let api: Api<ClusterCatalog> = Api::all(support::client().await);
    let name = support::fresh_name("longline");
    api.create(
        &PostParams::default(),
        &cluster_catalog(&name, &selector_value, &pushed.digest_ref, None),
    )
    .await
    .unwrap();
    let refused = wait_catalog(&api, &name, "Progressing=True/Retrying", |c| {
        is(c, "Progressing", "True", "Retrying")
    })
    .await;
    let message = &condition(&refused, "Progressing").unwrap().message;
    let suffix = format!(": JSONL line longer than the limit of {limit} bytes");
    assert!(
        message.starts_with(&format!("error storing fbc: catalog {name:?}: "))
            && message.contains("object #")
            && message.ends_with(&suffix),
        "{message}"
    );
    assert!(condition(&refused, "Serving").is_none_or(|c| c.status != "True"));
    api.delete(&name, &DeleteParams::default()).await.unwrap();

    // The controller's catalog client refuses a served catalog with a longer line.
    let catalogd = serve_standalone("longline", &fixture("catalog-v1")).await;
    let base = format!("{}/catalogs/longline", catalogd.url);
    let served: ClusterCatalog = serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": "longline"},
        "spec": {"source": {"type": "Image", "image": {"ref": pushed.digest_ref}}},
        "status": {
            "conditions": [{"type": "Serving", "status": "True", "reason": "Available", "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "resolvedSource": {"type": "Image", "image": {"ref": pushed.digest_ref}},
            "urls": {"base": base}
        }
    }))
    .unwrap();
    let limited = CachedCatalogClient::new(CatalogClient::new(&[]).unwrap().with_max_line_bytes(limit));
    let err = limited.index(&served).await.expect_err("a line over the limit");
    let err = err.to_string();
    assert!(
        err.starts_with("error retrieving cache for catalog \"longline\": ") && err.ends_with(&suffix),
        "{err}"
    );
    let unlimited = CachedCatalogClient::new(CatalogClient::new(&[]).unwrap().with_max_line_bytes(longest));
    unlimited
        .index(&served)
        .await
        .expect("the longest line at the limit is read");
}

// ---------------------------------------------------------------------------------------------
// Slow clients of /metas on a catalog of interleaved schemas

/// A process's resident memory now and at its peak (`VmRSS`, `VmHWM`), in MiB.
fn rss_mib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A catalog of `n` tiny metas of two schemas, interleaved, so that no two metas of one schema
/// follow each other in the file (about 9 MB with `n` = 300,000).
fn interleaved_catalog(dir: &Path, n: usize) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("catalog.json")).unwrap());
    for i in 0..n {
        let schema = if i % 2 == 0 { "olm.bundle" } else { "x.other" };
        writeln!(out, r#"{{"schema":"{schema}","package":"p","name":"m{i}"}}"#).unwrap();
    }
    out.flush().unwrap();
}

/// 128 clients ask `/metas` for one schema of a 9 MB catalog whose schemas interleave (150,000
/// separate sections each) and then read nothing: catalogd's memory stays bounded (each request
/// walks the index as its body is sent, and what it has read waits in the bytes-in-flight
/// budget), and nothing is held per closed connection: a second wave reuses what the first
/// freed. Before, each request copied its sections into lists it held until its body was sent:
/// 182 -> 842 MB, and 828 MB after the clients closed.
/// `n` clients that ask `/metas` for the olm.bundle schema at `addr`, read the status line and
/// nothing more.
async fn stalled_metas_clients(addr: &str, n: usize) -> Vec<tokio::net::TcpStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut clients = Vec::new();
    for _ in 0..n {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                b"GET /catalogs/interleaved/api/v1/metas?schema=olm.bundle HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .await
            .unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        clients.push(stream);
    }
    clients
}

#[tokio::test]
async fn slow_clients_of_metas_on_interleaved_schemas_hold_bounded_memory() {
    const CLIENTS: usize = 128;
    let catalog = tempfile::tempdir().unwrap();
    interleaved_catalog(catalog.path(), 300_000);
    let catalogd = serve_standalone_with(
        "interleaved",
        catalog.path(),
        &[
            "--max-concurrent-requests",
            "256",
            "--idle-timeout-seconds",
            "600",
            "--header-read-timeout-seconds",
            "600",
        ],
    )
    .await;
    let pid = catalogd.child.id();
    let addr = catalogd.url.trim_start_matches("http://").to_string();
    let (before, _) = rss_mib(pid);
    let clients = stalled_metas_clients(&addr, CLIENTS).await;
    // One more client reads its answer whole while the others stall: every olm.bundle meta, in
    // file order.
    let (status, _, body) = get(
        &format!(
            "{}/catalogs/interleaved/api/v1/metas?schema=olm.bundle",
            catalogd.url
        ),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 150_000);
    assert_eq!(lines[1], br#"{"name":"m2","package":"p","schema":"olm.bundle"}"#);
    let (during, peak) = rss_mib(pid);
    assert!(
        peak <= 256,
        "catalogd's peak RSS {peak} MiB with {CLIENTS} slow clients (before: {before} MiB)"
    );
    drop(clients);
    // Nothing is held per closed connection: a second wave of slow clients reuses what the first
    // freed (the allocator may keep freed pages in RSS, so RSS is not expected to fall).
    // Held open until RSS is read.
    let _second_wave = stalled_metas_clients(&addr, CLIENTS).await;
    let (again, peak_again) = rss_mib(pid);
    assert!(
        peak_again <= 256 && again <= during + 32,
        "a second wave of {CLIENTS} slow clients: {again} MiB, peak {peak_again} MiB (first wave {during} MiB, before {before} MiB)"
    );
}
