//! CEL rule cost: evaluation time of the most expensive accepted rules (their estimate near
//! `MAX_CEL_COST`) on the largest real bundle of `../shared/catalogs` within the CEL input bound and
//! on a synthetic worst-case input, and the compile time of 4,000 tiny distinct rules (one hostile
//! `olm.constraint`), first and cached, beside the former per-rule parser thread. Prints Markdown.
//!
//! `cargo bench --bench cel` (release).

use std::{path::PathBuf, time::Instant};

use olmv1::{
    catalog::{CatalogIndex, Property, PropertyValue},
    dependencies::{CelInput, CelRule, MAX_CEL_COST},
};

/// Runs per figure; each figure is the median.
const REPS: usize = 31;
/// The CEL input bound (`MAX_INPUT_BYTES` of the CEL module).
const INPUT_BYTES: usize = 512 * 1024;

const WORST_RULES: [&str; 4] = [
    r#"properties.exists(p, p.type == "olm.csv.metadata" && p.value.keywords.exists(k, k == "db"))"#,
    r#"properties.exists(p, p.type.matches("^olm\\.(gvk|package)$"))"#,
    r#"properties.all(p, p.type != "olm.gvk" || p.value.group.endsWith(".example.com"))"#,
    r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "1.1.0") >= 0)"#,
];

fn median_ms(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2] * 1e3
}

fn time(f: impl Fn()) -> f64 {
    median_ms(
        (0..REPS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
    assert!(root.is_dir(), "real catalogs missing at {}", root.display());
    let mut largest: Option<(usize, String, Vec<Property>)> = None;
    for catalog in ["certified-operators-v4.20", "community-operators-v4.16"] {
        let index = CatalogIndex::from_dir(&root.join(catalog)).expect("catalog indexes");
        for p in index.packages() {
            for b in &p.bundles {
                let bytes: usize = b
                    .properties
                    .iter()
                    .map(|p| p.type_.len() + p.value.raw().len())
                    .sum();
                if bytes <= INPUT_BYTES && largest.as_ref().is_none_or(|(n, _, _)| bytes > *n) {
                    largest = Some((bytes, b.name.to_string(), b.properties.to_vec()));
                }
            }
        }
    }
    let (bytes, name, real) = largest.expect("a bundle");
    // The worst input for the first rule: one metadata property whose keywords fill the bound.
    let keywords = vec!["a"; INPUT_BYTES / 4 - 16];
    let synthetic = vec![Property::new(
        "olm.csv.metadata",
        PropertyValue::from_json(&serde_json::json!({ "keywords": keywords }).to_string()).unwrap(),
    )];

    println!("MAX_CEL_COST = {MAX_CEL_COST}\n");
    println!("| rule | estimate | input | convert (ms) | evaluate (ms) |");
    println!("|---|---:|---|---:|---:|");
    for source in WORST_RULES {
        let rule = CelRule::compile(source).expect("accepted");
        for (label, properties) in [
            (
                format!("{name} ({} KB, {} properties)", bytes / 1024, real.len()),
                &real,
            ),
            ("synthetic: 128 K keywords".to_string(), &synthetic),
        ] {
            let convert = time(|| drop(CelInput::new(properties)));
            let input = CelInput::new(properties);
            let evaluate = time(|| {
                std::hint::black_box(rule.matches_input(&input));
            });
            println!(
                "| `{source}` | {} | {label} | {convert:.3} | {evaluate:.3} |",
                rule.estimated_cost()
            );
        }
    }

    println!("\n| 4,000 tiny distinct rules | total (ms) |");
    println!("|---|---:|");
    let rules: Vec<String> = (0..4000)
        .map(|i| format!("properties.exists(p, p.type == 't{i}')"))
        .collect();
    let t = Instant::now();
    for r in &rules {
        CelRule::compile(r).expect("compiles");
    }
    println!(
        "| compiled (one parser thread) | {:.1} |",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    for r in &rules {
        CelRule::compile(r).expect("compiles");
    }
    println!(
        "| again (process cache) | {:.1} |",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    for r in &rules {
        // What each read did before: a parser thread with a 64 MiB stack per rule.
        let r = format!("{r} || false");
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || cel::Program::compile(&r).is_ok())
            .unwrap()
            .join()
            .unwrap();
    }
    println!(
        "| former: a 64 MiB parser thread per rule | {:.1} |",
        t.elapsed().as_secs_f64() * 1e3
    );
}
