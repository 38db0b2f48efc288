//! End-to-end figures for images and the catalog server, on the largest shared catalog
//! (`../shared/catalogs/certified-operators-v4.16`):
//!
//! 1. pull + unpack + index: push the catalog as an image to a local docker-registry, then, in a
//!    fresh child process (for an honest peak RSS), pull it into an empty cache, unpack it and
//!    store+index it as catalogd does;
//! 2. `olmv1 catalogd serve` of the same catalog, loaded from this (second) process over loopback:
//!    `/api/v1/all` throughput (identity and gzip) and `/api/v1/metas` latency, bounded requests.
//!
//! Run: `cargo bench --bench catalogd` (needs `docker-registry` on PATH). Prints a Markdown table.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use olmv1::catalog::server::CatalogStore;
use olmv1::image::{self, PullOptions, PushOptions, RegistryConfig};

const CHILD_ENV: &str = "OLMV1_BENCH_PULL_REF";
const CATALOG: &str = "certified-operators-v4.16";

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("catalogd: bench");
        return;
    }
    if let Ok(reference) = std::env::var(CHILD_ENV) {
        child_pull(&reference);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(parent());
}

fn shared_catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/catalogs")
        .join(CATALOG)
}

fn peak_rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            dir_size(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Child: pull + unpack + store/index; prints `pull_ms unpack_index_ms metas peak_kib`.
fn child_pull(reference: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let pulled = runtime
        .block_on(image::pull_to_dir(
            reference,
            &PullOptions {
                limits: olmv1::image::UnpackLimits::CATALOG,
                ..PullOptions::new(work.path().join("unpack"))
            },
        ))
        .expect("pull");
    let pulled_at = started.elapsed();
    let store = CatalogStore::new(&work.path().join("catalogs")).unwrap();
    let stored = store
        .store_from_dir(
            "bench",
            &pulled.dir.join("configs"),
            olmv1::image::UnpackLimits::CATALOG.max_file_bytes,
        )
        .expect("store");
    let total = started.elapsed();
    println!(
        "{} {} {} {} {}",
        pulled_at.as_millis(),
        (total - pulled_at).as_millis(),
        stored.meta_count,
        stored.jsonl_len(),
        peak_rss_kib("self")
    );
}

// The temp dir is held so the registry's storage lives as long as the process.
struct Registry(std::process::Child, #[allow(dead_code)] tempfile::TempDir, String);

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} did not open");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_registry() -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
        dir.path().join("storage").display()
    );
    std::fs::write(dir.path().join("config.yml"), config).unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(dir.path().join("config.yml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry must be installed for this benchmark");
    wait_port(port);
    Registry(child, dir, format!("127.0.0.1:{port}"))
}

async fn parent() {
    let catalog = shared_catalog();
    println!(
        "catalog: {} ({} MiB on disk)\n",
        catalog.display(),
        dir_size(&catalog) >> 20
    );

    // 1. Pull + unpack + index in a fresh process.
    let registry = start_registry();
    let reference = format!("{}/bench/{CATALOG}:latest", registry.2);
    let push = PushOptions {
        registry: RegistryConfig::default(),
        labels: [(
            "operators.operatorframework.io.index.configs.v1".to_string(),
            "/configs".to_string(),
        )]
        .into(),
        prefix: "/configs".into(),
        ..Default::default()
    };
    let started = Instant::now();
    let pushed = image::push_dir(&catalog, &reference, &push).await.expect("push");
    println!(
        "push (layer build + upload): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let mut runs = Vec::new();
    for _ in 0..3 {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, &pushed.digest_ref)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let f: Vec<u64> = text.split_whitespace().map(|v| v.parse().unwrap()).collect();
        runs.push(f);
    }
    println!("| run | pull+unpack (ms) | store+index (ms) | metas | JSONL bytes | peak RSS (MiB) |");
    println!("|---|---|---|---|---|---|");
    for (i, f) in runs.iter().enumerate() {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} |",
            i + 1,
            f[0],
            f[1],
            f[2],
            f[3],
            f[4] as f64 / 1024.0
        );
    }
    drop(registry);

    // 2. Serve and load.
    let port = free_port();
    let store_dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(["catalogd", "serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--catalog")
        .arg(format!("bench={}", catalog.display()))
        .arg("--cache-dir")
        .arg(store_dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let started = Instant::now();
    wait_port(port);
    println!(
        "\n`olmv1 catalogd serve` ready (parse + store + index + gzip) in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let base = format!("http://127.0.0.1:{port}/catalogs/bench/api/v1");
    let client = reqwest::Client::builder()
        .no_gzip()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();

    println!("\n| endpoint | concurrency | requests | MiB/s transferred | req/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|");
    for (label, url, gzip, concurrency, requests) in [
        ("/api/v1/all", format!("{base}/all"), false, 4, 24),
        ("/api/v1/all (gzip)", format!("{base}/all"), true, 4, 48),
        (
            "/api/v1/metas?package=",
            format!("{base}/metas?package=nvidia-network-operator"),
            false,
            8,
            2000,
        ),
        (
            "/api/v1/metas?schema=olm.package",
            format!("{base}/metas?schema=olm.package"),
            false,
            8,
            2000,
        ),
        (
            "/api/v1/metas?schema&package&name",
            format!("{base}/metas?schema=olm.channel&package=nvidia-network-operator&name=stable"),
            false,
            8,
            4000,
        ),
    ] {
        let (bytes, elapsed, mut latencies) = load(&client, &url, gzip, concurrency, requests).await;
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
        println!(
            "| {label} | {concurrency} | {requests} | {:.0} | {:.0} | {:.2} | {:.2} |",
            bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64(),
            requests as f64 / elapsed.as_secs_f64(),
            p(0.5),
            p(0.99)
        );
    }
    let pid = server.id().to_string();
    println!(
        "\ncatalogd serve peak RSS: {:.1} MiB",
        peak_rss_kib(&pid) as f64 / 1024.0
    );
    hostile_clients(port, &pid).await;
    let _ = server.kill();
    let _ = server.wait();
}

fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Phase 3, the server under hostile clients (default limits): 300 connections that never finish
/// their headers, and 20 clients reading `metas?schema=olm.bundle` (gzip) at 800 KiB/s each.
async fn hostile_clients(port: u16, pid: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SLOW_CLIENTS: usize = 20;
    const PHASE: Duration = Duration::from_secs(30);
    let before = rss_kib(pid);
    let mut half_sent = Vec::new();
    for _ in 0..300 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let _ = stream
                .write_all(b"GET /catalogs/bench/api/v1/all HTTP/1.1\r\nHost: x\r\n")
                .await;
            half_sent.push(stream);
        }
    }
    let mut slow = Vec::new();
    for _ in 0..SLOW_CLIENTS {
        slow.push(tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            stream
                .write_all(b"GET /catalogs/bench/api/v1/metas?schema=olm.bundle HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
                .await
                .unwrap();
            let (mut buf, mut total) = (vec![0u8; 16 * 1024], 0u64);
            let started = Instant::now();
            while started.elapsed() < PHASE {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n as u64,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            total
        }));
    }
    let started = Instant::now();
    let mut max_rss = 0;
    while started.elapsed() < PHASE {
        max_rss = max_rss.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut received = 0;
    for task in slow {
        received += task.await.unwrap_or(0);
    }
    let mut closed = 0;
    for stream in &mut half_sent {
        let mut byte = [0u8; 1];
        if matches!(
            tokio::time::timeout(Duration::from_millis(10), stream.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        ) {
            closed += 1;
        }
    }
    println!(
        "\nhostile clients for {} s: RSS {:.1} MiB before, at most {:.1} MiB during; {SLOW_CLIENTS} slow \
         metas clients received {:.1} MiB in all; {closed} of {} half-sent connections closed by the server",
        PHASE.as_secs(),
        before as f64 / 1024.0,
        max_rss as f64 / 1024.0,
        received as f64 / (1 << 20) as f64,
        half_sent.len()
    );
}

async fn load(
    client: &reqwest::Client,
    url: &str,
    gzip: bool,
    concurrency: usize,
    requests: usize,
) -> (u64, Duration, Vec<Duration>) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, next) = (client.clone(), url.to_string(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut bytes, mut latencies) = (0u64, Vec::new());
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < requests {
                let t = Instant::now();
                let mut request = client.get(&url);
                if gzip {
                    request = request.header("accept-encoding", "gzip");
                }
                let response = request.send().await.expect("request");
                assert_eq!(response.status(), 200);
                bytes += response.bytes().await.expect("body").len() as u64;
                latencies.push(t.elapsed());
            }
            (bytes, latencies)
        }));
    }
    let (mut bytes, mut latencies) = (0, Vec::new());
    for task in tasks {
        let (b, l) = task.await.unwrap();
        bytes += b;
        latencies.extend(l);
    }
    (bytes, started.elapsed(), latencies)
}
