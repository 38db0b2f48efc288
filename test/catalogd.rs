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
use olmv1::image::{PushOptions, RegistryConfig, push_dir};
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

#[tokio::test]
async fn polling_picks_up_a_new_digest_and_a_registry_outage_keeps_serving() {
    let registry = start_registry(&RegistryOptions::default());
    let reference = format!("{}/catalogs/fixture:latest", registry.host_port);
    let first = push_dir(
        &fixture("catalog-v1"),
        &reference,
        &catalog_push_options(RegistryConfig::default()),
    )
    .await
    .unwrap();

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
        &["--leader-elect", "--leader-election-namespace", "default"],
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
