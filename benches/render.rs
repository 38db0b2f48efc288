//! Render benchmark over every real bundle of `../shared/catalogs/*-v4.16` carrying
//! `olm.bundle.object`: per-bundle time of loading (base64 + JSON + typed CSV/CRDs) and of
//! rendering (AllNamespaces, else OwnNamespace), as p50/p99/max across bundles; and the peak RSS
//! of a fresh process loading and rendering the largest bundle from a directory.
//!
//! Run: `cargo bench --bench render`. Prints a Markdown table.

use std::path::Path;
use std::time::{Duration, Instant};

#[path = "../test/support/mod.rs"]
mod support;

use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::bundle::render::{render, render_for_watch_namespace};

const CHILD_ENV: &str = "OLMV1_RENDER_BENCH_CHILD_DIR";
const RUNS: usize = 5;

/// A real bundle and the size of its manifests.
struct RealBundle {
    id: String,
    bundle: support::CatalogBundle,
    manifest_bytes: usize,
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child_load_and_render(Path::new(&dir));
        return;
    }
    let read_started = Instant::now();
    let bundles: Vec<RealBundle> = support::read_v4_16_bundles()
        .into_iter()
        .map(|bundle| RealBundle {
            id: format!("{}/{}", bundle.catalog, bundle.name),
            manifest_bytes: bundle.manifests().iter().map(Vec::len).sum(),
            bundle,
        })
        .collect();
    let read_time = read_started.elapsed();

    let mut load_times = Vec::new();
    let mut render_times = Vec::new();
    let mut total_times = Vec::new();
    let mut refused = 0;
    for b in &bundles {
        let mut load = Vec::new();
        let mut rend = Vec::new();
        for _ in 0..RUNS {
            let t0 = Instant::now();
            let bundle = RegistryV1Bundle::from_catalog_bundle(
                &b.bundle.package,
                &b.bundle.name,
                &b.bundle.properties,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", b.id));
            let t1 = Instant::now();
            let objects = render(&bundle, "operators", None)
                .or_else(|_| render_for_watch_namespace(&bundle, "operators", Some("operators")));
            let t2 = Instant::now();
            if objects.is_err() && load.is_empty() {
                refused += 1;
            }
            std::hint::black_box(&objects);
            load.push(t1 - t0);
            rend.push(t2 - t1);
        }
        load.sort();
        rend.sort();
        load_times.push(load[RUNS / 2]);
        render_times.push(rend[RUNS / 2]);
        total_times.push(load[RUNS / 2] + rend[RUNS / 2]);
    }

    let largest = bundles
        .iter()
        .max_by_key(|b| b.manifest_bytes)
        .expect("at least one bundle");
    let (peak_kib, baseline_kib) = peak_rss_of_largest(largest);

    println!(
        "### Render benchmark ({} bundles, {} not renderable in either mode)\n",
        bundles.len(),
        refused
    );
    println!("Catalog read (FBC parse of both v4.16 catalogs, release build): {read_time:.2?}\n");
    println!("| per bundle | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for (label, times) in [
        ("load (base64 + JSON + typed CSV/CRDs)", &mut load_times),
        ("render", &mut render_times),
        ("load + render", &mut total_times),
    ] {
        times.sort();
        println!(
            "| {label} | {} | {} | {} |",
            fmt(pct(times, 50)),
            fmt(pct(times, 99)),
            fmt(*times.last().expect("times"))
        );
    }
    println!(
        "\nLargest bundle: {} ({:.2} MB of manifests). Peak RSS of a process loading it from a directory \
         and rendering it: {:.1} MiB (process baseline before loading: {:.1} MiB).",
        largest.id,
        largest.manifest_bytes as f64 / 1e6,
        peak_kib as f64 / 1024.0,
        baseline_kib as f64 / 1024.0
    );
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    let idx = ((sorted.len() * p).div_ceil(100))
        .saturating_sub(1)
        .min(sorted.len() - 1);
    sorted[idx]
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

/// Writes the bundle as a registry+v1 directory and measures a child process loading and
/// rendering it: (peak RSS KiB, baseline RSS KiB).
fn peak_rss_of_largest(b: &RealBundle) -> (u64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    b.bundle.write_dir(dir.path());
    let out = std::process::Command::new(std::env::current_exe().expect("current exe"))
        .env(CHILD_ENV, dir.path())
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut nums = text.split_whitespace().filter_map(|s| s.parse::<u64>().ok());
    (nums.next().unwrap_or(0), nums.next().unwrap_or(0))
}

fn child_load_and_render(dir: &Path) {
    let baseline = vm_hwm_kib();
    let bundle = RegistryV1Bundle::from_dir(dir).expect("load largest bundle");
    let objects = render(&bundle, "operators", None)
        .or_else(|_| render_for_watch_namespace(&bundle, "operators", Some("operators")))
        .expect("render largest bundle");
    let text = olmv1::admin::render::format_objects(&objects, olmv1::admin::render::OutputFormat::Yaml)
        .expect("format");
    std::hint::black_box(text);
    println!("{} {}", vm_hwm_kib(), baseline);
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}
