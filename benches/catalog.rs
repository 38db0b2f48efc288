//! Catalog parse + index benchmark on the real catalogs in `../shared/catalogs`: throughput (MB/s)
//! for the YAML directory and for JSONL (as catalogd serves it), peak RSS of each load (measured in
//! a child process), and the index's memory against the input size. Prints a Markdown table.
//!
//! `cargo bench --bench catalog` (release). A child is `catalog --child <dir|jsonl> <catalog>`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Instant,
};

use bytes::Bytes;
use olmv1::catalog::{CatalogIndex, list_fbc_files, read_dir_metas, write_jsonl};

const CATALOGS: [&str; 3] = [
    "community-operators-v4.16",
    "certified-operators-v4.16",
    "certified-operators-v4.20",
];
const RUNS: usize = 3;

fn root() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
    assert!(dir.is_dir(), "real catalogs missing at {}", dir.display());
    dir
}

fn dir_bytes(dir: &Path) -> usize {
    list_fbc_files(dir)
        .expect("catalog lists")
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len() as usize))
        .sum()
}

fn jsonl_of(dir: &Path) -> Bytes {
    let metas = read_dir_metas(dir).expect("catalog reads");
    let mut out = Vec::new();
    write_jsonl(&mut out, &metas).expect("jsonl writes");
    Bytes::from(out)
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Child mode: load one catalog one way, print `peak_rss_kib index_bytes`. `dir NAME` reads the
/// YAML directory; `jsonl FILE` streams a JSONL file line by line; `jsonl-buffer FILE` reads the
/// whole file first (as a client holding an HTTP body does).
fn child(format: &str, arg: &str) {
    let index = match format {
        "dir" => CatalogIndex::from_dir(&root().join(arg)).expect("dir indexes"),
        "jsonl" => {
            let file = std::io::BufReader::new(std::fs::File::open(arg).expect("jsonl file opens"));
            CatalogIndex::from_jsonl_reader(file, arg, 64 << 20).expect("jsonl indexes")
        }
        _ => CatalogIndex::from_jsonl(
            Bytes::from(std::fs::read(arg).expect("jsonl reads")),
            arg,
            64 << 20,
        )
        .expect("indexes"),
    };
    println!("{} {}", status_kib("VmHWM:"), index.approx_heap_bytes());
}

fn best_secs(mut f: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], &args[i + 2]);
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## Catalog parse + index ({cores} cores, best of {RUNS})\n");
    println!(
        "| catalog | YAML dir MB | YAML dir → metas MB/s | YAML dir → index MB/s | JSONL MB | JSONL → index MB/s | index KiB | index / YAML | peak RSS dir MiB | peak RSS JSONL streamed MiB | peak RSS JSONL buffered MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for name in CATALOGS {
        let dir = root().join(name);
        let yaml_bytes = dir_bytes(&dir);
        let metas_secs = best_secs(|| {
            let _ = read_dir_metas(&dir).expect("reads");
        });
        let index_secs = best_secs(|| {
            let _ = CatalogIndex::from_dir(&dir).expect("indexes");
        });
        let jsonl = jsonl_of(&dir);
        let jsonl_secs = best_secs(|| {
            let _ = CatalogIndex::from_jsonl(jsonl.clone(), name, 64 << 20).expect("indexes");
        });
        let index = CatalogIndex::from_jsonl(jsonl.clone(), name, 64 << 20).expect("indexes");
        let index_bytes = index.approx_heap_bytes();
        let exe = std::env::current_exe().expect("bench exe");
        let jsonl_file =
            std::env::temp_dir().join(format!("olmv1-bench-{name}-{}.jsonl", std::process::id()));
        std::fs::write(&jsonl_file, &jsonl).expect("temp jsonl writes");
        let jsonl_path = jsonl_file.display().to_string();
        let rss = |format: &str| -> f64 {
            let arg = if format == "dir" {
                name
            } else {
                jsonl_path.as_str()
            };
            let out = Command::new(&exe)
                .args(["--child", format, arg])
                .output()
                .expect("child runs");
            let text = String::from_utf8_lossy(&out.stdout);
            text.split_whitespace()
                .next()
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        let mb = |b: usize| b as f64 / 1e6;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2}% | {:.0} | {:.0} | {:.0} |",
            mb(yaml_bytes),
            mb(yaml_bytes) / metas_secs,
            mb(yaml_bytes) / index_secs,
            mb(jsonl.len()),
            mb(jsonl.len()) / jsonl_secs,
            index_bytes / 1024,
            100.0 * index_bytes as f64 / yaml_bytes as f64,
            rss("dir"),
            rss("jsonl"),
            rss("jsonl-buffer"),
        );
        let _ = std::fs::remove_file(&jsonl_file);
        let _ = Arc::new(index);
    }
}
