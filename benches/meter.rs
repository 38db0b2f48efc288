//! Calibration of the one meter (`olmv1::meter`): for each kind of work, a workload that is
//! charged only that kind (or mostly), its CPU time divided by the units charged. The weights in
//! `Work::weight` are set from this table so that every kind costs about the same CPU per unit;
//! the table ends with the spread (largest ns/unit over smallest), which must stay under 10.
//!
//! `cargo bench --bench meter` (release). Prints Markdown (docs/limits-and-faults.md, "One meter
//! for catalog-driven work").

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use olmv1::{
    admin::{table::Table, terminal::to_json_pretty_within},
    catalog::{CatalogIndex, Meta, Property, PropertyValue},
    dependencies::{BundleFacts, CelRule, requirements_of},
    meter::{Meter, Work},
    resolve::{CatalogInput, ResolveRequest, resolve_within},
};
use serde_json::json;

/// One workload's figure: the CPU it took, the units it was charged, the kind (`None`: every
/// kind a whole plan charges).
struct Figure {
    kind: Option<Work>,
    workload: &'static str,
    seconds: f64,
    units: u64,
    /// The units by kind, summed over the repetitions.
    by_kind: [u64; Work::ALL.len()],
}

/// Runs `f` with a fresh unlimited meter `reps` times; the figure is the total time over the
/// total units of `kind`.
fn measure(
    kind: impl Into<Option<Work>>,
    workload: &'static str,
    reps: usize,
    mut f: impl FnMut(usize, &mut Meter),
) -> Figure {
    let kind = kind.into();
    // Warm up once (caches, allocator), with a different input index than the measured runs.
    f(usize::MAX / 2, &mut Meter::unlimited());
    let mut units = 0;
    let mut by_kind = [0; Work::ALL.len()];
    let started = CpuClock::now();
    for i in 0..reps {
        let mut meter = Meter::unlimited();
        f(i, &mut meter);
        units += kind.map_or(meter.spent(), |k| meter.spent_on(k));
        for (total, k) in by_kind.iter_mut().zip(Work::ALL) {
            *total += meter.spent_on(k);
        }
    }
    Figure {
        kind,
        workload,
        seconds: started.elapsed_seconds(),
        units,
        by_kind,
    }
}

/// The process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`), so that a busy machine's waiting is not
/// counted; the process's, not this thread's, because a CEL rule is parsed on a thread of its own
/// (`cel_rule`'s parser thread) while the caller waits. Only one workload runs at a time.
struct CpuClock(Duration);

impl CpuClock {
    fn process_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the call writes only it.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    fn now() -> CpuClock {
        CpuClock(Self::process_cpu())
    }

    fn elapsed_seconds(&self) -> f64 {
        (Self::process_cpu() - self.0).as_secs_f64()
    }
}

fn property(type_: &str, value: serde_json::Value) -> Property {
    Property::new(type_, PropertyValue::from_json(&value.to_string()).unwrap())
}

/// A bundle's properties: its package and `keywords` keywords of 8 bytes.
fn properties(keywords: usize) -> Vec<Property> {
    let words: Vec<String> = (0..keywords).map(|k| format!("kw{k:05}")).collect();
    vec![
        property("olm.package", json!({"packageName": "p", "version": "1.0.0"})),
        property("olm.csv.metadata", json!({"keywords": words})),
    ]
}

/// A catalog of these FBC objects, as the benchmark's resolutions read it.
fn catalog_of(objects: &[serde_json::Value]) -> CatalogInput {
    let metas: Vec<Meta> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("bench"), i as u32 + 1).unwrap()
        })
        .collect();
    CatalogInput::new("bench", Arc::new(CatalogIndex::from_metas(&metas).unwrap()))
}

/// A request for package `app`, from `installed` if given.
fn request_for_app(installed: Option<olmv1::resolve::InstalledBundle>) -> ResolveRequest {
    ResolveRequest {
        package: "app".into(),
        version_range: None,
        channels: Vec::new(),
        selector: None,
        upgrade_constraint_policy: Default::default(),
        installed,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("meter: bench");
        return;
    }
    let mut figures = Vec::new();

    // Evaluate: rules near the per-rule limit on a large input, and a cheap rule on a small one;
    // each evaluation charged its estimate for the bundle, as the check and the plan charge it.
    // Each repetition evaluates a bundle of its own (its input converted beforehand), so that no
    // repetition reads what an earlier one cached; 32 K keywords keep the input under its bounds.
    for (workload, rule, keywords, reps) in [
        (
            "CEL exists over a 32 K keywords list",
            "properties.exists(p, p.type == 'olm.csv.metadata' && p.value.keywords.exists(k, k == 'db'))",
            32_768,
            8,
        ),
        (
            "CEL matches over every property type",
            "properties.exists(p, p.type.matches('^olm\\\\.(gvk|package)$'))",
            32_768,
            8,
        ),
        (
            "CEL exists on a real-sized bundle",
            "properties.exists(p, p.type == 'olm.package' && semver_compare(p.value.version, '1.1.0') >= 0)",
            16,
            20_000,
        ),
    ] {
        let rule = CelRule::compile(rule).expect("a valid rule");
        let props: Vec<Vec<Property>> = (0..=reps).map(|_| properties(keywords)).collect();
        let facts: Vec<BundleFacts> = props.iter().map(|p| BundleFacts::new("p.v1", "p", p)).collect();
        for f in &facts {
            assert!(
                f.cel_input().is_within_bounds(),
                "{workload}: the input is within its bounds"
            );
        }
        let requirement = olmv1::dependencies::Requirement {
            property: "olm.constraint".into(),
            constraint: olmv1::dependencies::Constraint::Cel(rule),
            failure_message: None,
        };
        figures.push(measure(Work::Evaluate, workload, reps, |i, meter| {
            let facts = &facts[i.min(reps)];
            requirement.charge(facts, meter).unwrap();
            std::hint::black_box(requirement.satisfied_by(facts));
        }));
    }
    // A package leaf against a bundle: `LEAF_UNITS`.
    {
        let props = properties(1);
        let facts = BundleFacts::new("p.v1", "p", &props);
        let value = property(
            "olm.package.required",
            json!({"packageName": "p", "versionRange": ">=1.0.0 <2.0.0"}),
        );
        let requirement = requirements_of("x", &[value], &mut Meter::unlimited())
            .unwrap()
            .remove(0);
        figures.push(measure(
            Work::Evaluate,
            "package range leaf",
            200_000,
            |_, meter| {
                requirement.charge(&facts, meter).unwrap();
                std::hint::black_box(requirement.satisfied_by(&facts));
            },
        ));
    }

    // Estimate: a rule near the limit of 400 expressions (48 terms: 392) estimated for a new size
    // class each time (the class cache holds 32 of the 200 classes, cycled through).
    {
        let body = vec!["p.value.a.b.c == 'x'"; 48].join(" || ");
        let rule = CelRule::compile(&format!("[].exists(p, {body})")).expect("a valid rule");
        let inputs: Vec<(Vec<Property>, olmv1::dependencies::CelInput)> = (0..200)
            .map(|i| {
                let count = 1usize << (i % 10);
                let bytes = 1usize << (i / 10);
                let props: Vec<Property> = (0..count)
                    .map(|_| property("t", json!("x".repeat(bytes / count))))
                    .collect();
                let input = olmv1::dependencies::CelInput::new(&props);
                (props, input)
            })
            .collect();
        figures.push(measure(
            Work::Estimate,
            "a 392-node rule, a new size class each time",
            2000,
            |i, meter| {
                std::hint::black_box(rule.cost_for(&inputs[i % inputs.len()].1, meter).unwrap());
            },
        ));
    }

    // Compile CEL: distinct rules, tiny and at the length limit (no patterns).
    figures.push(measure(
        Work::CompileCel,
        "tiny distinct rules",
        2000,
        |i, meter| {
            let source = format!("properties.exists(p, p.type == 'x{i}')");
            CelRule::compile_metered(&source, meter).unwrap();
        },
    ));
    figures.push(measure(
        Work::CompileCel,
        "4 KiB distinct rules",
        100,
        |i, meter| {
            let long = "y".repeat(3900);
            let source = format!("properties.exists(p, p.type == '{i}{long}')");
            CelRule::compile_metered(&source, meter).unwrap();
        },
    ));
    figures.push(measure(
        Work::CompileCel,
        "rules of bad characters (one error each)",
        100,
        |i, meter| {
            let source = format!("{i} == {}", "#".repeat(4000));
            assert!(CelRule::compile_metered(&source, meter).is_err());
        },
    ));

    // Compile regex: patterns near the size limit, and short ones, each distinct (a rule's
    // patterns are compiled once per rule), alone: without a CEL rule around them.
    figures.push(measure(
        Work::CompileRegex,
        "patterns near the size limit",
        40,
        |i, meter| {
            olmv1::dependencies::compile_pattern_within(&format!("(a{}bc){{900}}", i % 10_000), meter)
                .unwrap();
        },
    ));
    figures.push(measure(
        Work::CompileRegex,
        "a short anchored pattern",
        5000,
        |i, meter| {
            olmv1::dependencies::compile_pattern_within(&format!("^olm\\.{i}[a-z]+$"), meter).unwrap();
        },
    ));

    // Render: the text of a wide constraint (the plan's key of a requirement).
    {
        let leaves: Vec<serde_json::Value> = (0..250)
            .map(|i| json!({"package": {"packageName": format!("package{i}"), "versionRange": ">=1.0.0"}}))
            .collect();
        let value = property("olm.constraint", json!({"any": {"constraints": leaves}}));
        let requirement = requirements_of("x", &[value], &mut Meter::unlimited())
            .unwrap()
            .remove(0);
        figures.push(measure(
            Work::Render,
            "the text of a 250-leaf constraint",
            2000,
            |_, meter| {
                let text = requirement.to_string();
                meter.charge(Work::Render, text.len() as u64).unwrap();
                std::hint::black_box(text);
            },
        ));
    }

    // Render: what the admin commands print, through their own writers: a `versions`-like table
    // of 2,000 rows (cells escaped, measured and laid out, a wide cell after its row) and the
    // JSON of the same entries.
    {
        let rows: Vec<[String; 7]> = (0..2000)
            .map(|i| {
                [
                    "stable".to_string(),
                    format!("app.v1.{i}.0"),
                    format!("1.{i}.0"),
                    format!("app.v1.{}.0", i.max(1) - 1),
                    (0..i % 12)
                        .map(|k| format!("app.v0.{k}.0"))
                        .collect::<Vec<_>>()
                        .join(","),
                    format!("<1.{i}.0"),
                    "-".to_string(),
                ]
            })
            .collect();
        let mut table = Table::new(&[
            "CHANNEL",
            "BUNDLE",
            "VERSION",
            "REPLACES",
            "SKIPS",
            "SKIP RANGE",
            "DEPRECATED",
        ]);
        for row in &rows {
            table.row(row.iter().cloned());
        }
        figures.push(measure(
            Work::Render,
            "a table of 2,000 rows of 7 cells",
            50,
            |_, meter| {
                std::hint::black_box(table.render(false, meter).unwrap());
            },
        ));
        figures.push(measure(
            Work::Render,
            "the JSON of the same 2,000 rows",
            50,
            |_, meter| {
                std::hint::black_box(to_json_pretty_within(&rows, u64::MAX, meter).unwrap());
            },
        ));
    }

    // Parse: requirements read from their JSON (no CEL).
    {
        let leaves: Vec<serde_json::Value> = (0..250)
            .map(|i| json!({"package": {"packageName": format!("package{i}"), "versionRange": ">=1.0.0 <2.0.0"}}))
            .collect();
        let value = property("olm.constraint", json!({"any": {"constraints": leaves}}));
        let props = vec![value];
        figures.push(measure(
            Work::Parse,
            "a 250-leaf constraint read",
            2000,
            |_, meter| {
                std::hint::black_box(requirements_of("x", &props, meter).unwrap());
            },
        ));
    }

    // Visit: resolution over a package of 5,000 bundles with edges.
    {
        let count = 5000;
        let version = |i: usize| format!("1.{}.{}", i / 100, i % 100);
        let mut objects = vec![json!({"schema": "olm.package", "name": "app", "defaultChannel": "stable"})];
        let entries: Vec<serde_json::Value> = (0..count)
            .map(|i| match i {
                0 => json!({"name": "app.v1.0.0"}),
                _ => json!({"name": format!("app.v{}", version(i)), "replaces": format!("app.v{}", version(i - 1)),
                            "skips": [format!("app.v{}", version(i - 1))], "skipRange": format!("<{}", version(i))}),
            })
            .collect();
        objects
            .push(json!({"schema": "olm.channel", "package": "app", "name": "stable", "entries": entries}));
        for i in 0..count {
            objects.push(
                json!({"schema": "olm.bundle", "package": "app", "name": format!("app.v{}", version(i)),
                "image": "registry.test/app", "properties": [{"type": "olm.package",
                "value": {"packageName": "app", "version": version(i)}}]}),
            );
        }
        let catalogs = [catalog_of(&objects)];
        let request = request_for_app(Some(olmv1::resolve::InstalledBundle {
            name: "app.v1.0.0".into(),
            version: "1.0.0".into(),
            release: None,
        }));
        figures.push(measure(
            Work::Visit,
            "a resolution over 5,000 bundles with edges",
            200,
            |_, meter| {
                std::hint::black_box(resolve_within(&request, &catalogs, meter).unwrap());
            },
        ));
    }

    // A whole plan: the requirements that any package satisfies, over 2,000 packages
    // (every kind it charges, mostly visiting packages and evaluating leaves).
    {
        let mut objects = Vec::new();
        let mut bundle = |package: &str, properties: Vec<serde_json::Value>| {
            let name = format!("{package}.v1.0.0");
            objects.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
            objects.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}));
            let mut all =
                vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
            all.extend(properties);
            objects.push(json!({"schema": "olm.bundle", "package": package, "name": name,
                "image": "registry.test/x", "properties": all}));
        };
        let needs: Vec<serde_json::Value> = (0..16)
            .map(|r| {
                json!({"type": "olm.constraint", "value": {"not": {"constraints": [
                {"package": {"packageName": format!("missing{r}"), "versionRange": ">=0.0.0"}}]}}})
            })
            .collect();
        bundle("app", needs);
        for p in 0..2000 {
            bundle(&format!("p{p}"), Vec::new());
        }
        let catalogs = [catalog_of(&objects)];
        let request = request_for_app(None);
        let plan_request = olmv1::dependencies::PlanRequest {
            request: &request,
            installed: &[],
            served_apis: &[],
            allow_changes: false,
            limits: olmv1::dependencies::PlanLimits::default(),
        };
        figures.push(measure(
            None,
            "a plan: 16 `not` requirements over 2,000 packages",
            3,
            |_, meter| {
                std::hint::black_box(
                    olmv1::dependencies::plan_within(&plan_request, &catalogs, meter).is_ok(),
                );
            },
        ));
    }

    // The deadline: a plan with no budget whose work far exceeds its deadline (32 CEL
    // requirements, the most a bundle may have, that no package meets: each scans the 256
    // properties of each of 10,000 packages), refused at the deadline; how long after it, in
    // wall time (the machine's load counts here, as it does in a cluster) and in CPU.
    let deadline = {
        let mut objects = Vec::new();
        let mut bundle = |package: &str, properties: Vec<serde_json::Value>| {
            let name = format!("{package}.v1.0.0");
            objects.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
            objects.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}));
            let mut all =
                vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
            all.extend((0..255).map(|k| json!({"type": format!("t{k}"), "value": k})));
            all.extend(properties);
            objects.push(json!({"schema": "olm.bundle", "package": package, "name": name,
                "image": "registry.test/x", "properties": all}));
        };
        let needs: Vec<serde_json::Value> = (0..32)
            .map(|r| {
                json!({"type": "olm.constraint", "value": {"cel": {"rule": format!(
                    "properties.exists(p, p.type == 'missing{r}')"
                )}}})
            })
            .collect();
        bundle("app", needs);
        for p in 0..10_000 {
            bundle(&format!("p{p}"), Vec::new());
        }
        let catalogs = [catalog_of(&objects)];
        let request = request_for_app(None);
        let limit = Duration::from_secs(1);
        let plan_request = olmv1::dependencies::PlanRequest {
            request: &request,
            installed: &[],
            served_apis: &[],
            allow_changes: false,
            limits: olmv1::dependencies::PlanLimits {
                max_work: u64::MAX,
                max_duration: limit,
                ..Default::default()
            },
        };
        let started = std::time::Instant::now();
        let cpu = CpuClock::now();
        let mut meter = Meter::unlimited().with_deadline(limit);
        let result = olmv1::dependencies::plan_within(&plan_request, &catalogs, &mut meter);
        let (wall, cpu) = (started.elapsed(), cpu.elapsed_seconds());
        assert!(
            matches!(result, Err(olmv1::dependencies::PlanError::TimedOut { .. })),
            "the plan stops at its deadline: {:?}",
            result.map(|_| "a plan")
        );
        (limit, wall, cpu, meter.spent())
    };

    println!("| kind | weight (units per item) | workload | units | CPU (ms) | ns per unit |");
    println!("|---|---:|---|---:|---:|---:|");
    let mut per_kind: Vec<(Work, f64)> = Vec::new();
    for f in &figures {
        let ns = f.seconds * 1e9 / f.units.max(1) as f64;
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.2} |",
            f.kind.map_or("every kind", Work::name),
            f.kind.map_or("-".to_string(), |k| k.weight().to_string()),
            f.workload,
            f.units,
            f.seconds * 1e3,
            ns
        );
        let Some(kind) = f.kind else { continue };
        match per_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, worst)) => *worst = worst.max(ns),
            None => per_kind.push((kind, ns)),
        }
    }
    for f in figures.iter().filter(|f| f.kind.is_none()) {
        println!(
            "\n{}: units by kind: {}",
            f.workload,
            Work::ALL
                .iter()
                .zip(f.by_kind)
                .filter(|(_, units)| *units > 0)
                .map(|(k, units)| format!("{} {units}", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let most = per_kind.iter().map(|(_, ns)| *ns).fold(0.0, f64::max);
    let least = per_kind.iter().map(|(_, ns)| *ns).fold(f64::MAX, f64::min);
    println!(
        "\nthe deadline: a plan of 32 CEL requirements over 10,000 packages, no budget, a deadline of {} s: refused after {:.3} s wall ({:.3} s CPU, {} units charged)",
        deadline.0.as_secs_f64(),
        deadline.1.as_secs_f64(),
        deadline.2,
        deadline.3
    );
    println!(
        "\nns per unit, worst workload of each kind: {}; spread {:.1}x (must stay under 10x)",
        per_kind
            .iter()
            .map(|(k, ns)| format!("{} {ns:.2}", k.name()))
            .collect::<Vec<_>>()
            .join(", "),
        most / least
    );
}
