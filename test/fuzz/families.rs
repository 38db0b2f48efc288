//! Part A's families of hostile catalogs: what the meter, the bounded caches and the cut
//! compiler texts answer. Each is a proptest strategy of [`Case`]s; its sizes grow with the
//! [`Scale`] (about 1 MB in the bounded run, up to 10 MB in the long one).

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::{Case, Family, check_family};

// ---------------------------------------------------------------------------------------------
// FBC objects.

fn package(name: &str) -> Value {
    json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"})
}

fn channel(package: &str, name: &str, entries: Vec<Value>) -> Value {
    json!({"schema": "olm.channel", "package": package, "name": name, "entries": entries})
}

/// `package.v<version>` with its `olm.package` property and `more`.
fn bundle(package: &str, version: &str, more: Vec<Value>) -> Value {
    let mut properties =
        vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    properties.extend(more);
    json!({"schema": "olm.bundle", "package": package, "name": format!("{package}.v{version}"),
           "image": format!("registry.test/{package}:v{version}"), "properties": properties})
}

fn constraint(value: Value) -> Value {
    json!({"type": "olm.constraint", "value": value})
}

fn cel(rule: &str) -> Value {
    constraint(json!({"cel": {"rule": rule}}))
}

fn gvk(kind: &str) -> Value {
    json!({"type": "olm.gvk", "value": {"group": "fuzz.io", "version": "v1", "kind": kind}})
}

/// A package of `count` bundles `1.0.<i>` in one channel, each replacing the one before, with
/// `more(i)` properties; the first is the one installed.
fn chain(name: &str, count: usize, more: impl Fn(usize) -> Vec<Value>) -> Vec<Value> {
    let version = |i: usize| format!("1.0.{i}");
    let entries: Vec<Value> = (0..count)
        .map(|i| match i {
            0 => json!({"name": format!("{name}.v{}", version(0))}),
            _ => json!({"name": format!("{name}.v{}", version(i)), "replaces": format!("{name}.v{}", version(i - 1))}),
        })
        .collect();
    let mut lines = vec![package(name), channel(name, "stable", entries)];
    lines.extend((0..count).map(|i| bundle(name, &version(i), more(i))));
    lines
}

/// A package of `count` bundles `1.0.<i>` in one channel, each skipping every one before it
/// (a `skipRange`): every bundle is one step from the first, which is the one installed.
fn flat(name: &str, count: usize, more: impl Fn(usize) -> Vec<Value>) -> Vec<Value> {
    let version = |i: usize| format!("1.0.{i}");
    let entries: Vec<Value> = (0..count)
        .map(|i| match i {
            0 => json!({"name": format!("{name}.v{}", version(0))}),
            _ => json!({"name": format!("{name}.v{}", version(i)), "skipRange": format!("<{}", version(i))}),
        })
        .collect();
    let mut lines = vec![package(name), channel(name, "stable", entries)];
    lines.extend((0..count).map(|i| bundle(name, &version(i), more(i))));
    lines
}

/// A case over `lines` about package `app`, installed at its first bundle.
fn app_case(lines: Vec<Value>) -> Case {
    Case::new("app", lines).installed("app.v1.0.0", "1.0.0")
}

// ---------------------------------------------------------------------------------------------
// The families.

/// Deep: constraint trees nested to the limit around leaves only another package satisfies, on
/// every bundle of a long replaces chain (a deep upgrade graph).
pub const DEEP: Family = Family {
    name: "deep",
    cases: |scale| {
        (20..scale.pick(150, 3000), 1..=10usize, 1..30usize)
            .prop_map(move |(bundles, depth, leaves)| {
                let bundles = scale.fit(bundles, 400 + depth * 40 + leaves * 90, 0.9);
                let tree = move |i: usize| {
                    let mut c = json!({"any": {"constraints": (0..leaves).map(|l| json!(
                        {"gvk": {"group": "fuzz.io", "version": "v1", "kind": format!("K{}", (i + l) % 7)}}
                    )).collect::<Vec<_>>()}});
                    for _ in 1..depth {
                        c = json!({"all": {"constraints": [c]}});
                    }
                    vec![constraint(c)]
                };
                let mut lines = chain("app", bundles, tree);
                lines.extend(chain("dep", 20, |i| vec![gvk(&format!("K{}", i % 7))]));
                let mut case = app_case(lines);
                // `upgrades` lists each later version's path whole: the sum of the paths'
                // lengths, about 200 bytes a step in JSON with its requirements.
                case.legitimate_output = (bundles * bundles * 200) as u64;
                case
            })
            .boxed()
    },
};

/// Wide: many requirements that any package satisfies (`not` of a missing package, an `any` of
/// many packages) against thousands of packages: the plan's deadline and budget (the issue's
/// 256 `not` requirements x 5,000 packages).
pub const WIDE: Family = Family {
    name: "wide",
    cases: |scale| {
        (1..scale.pick(64, 256), 100..scale.pick(800, 5000), 0..200usize)
            .prop_map(|(requirements, packages, width)| {
                let mut needs: Vec<Value> = (0..requirements)
                    .map(|r| {
                        constraint(json!({"not": {"constraints": [
                            {"package": {"packageName": format!("missing{r}"), "versionRange": ">=0.0.0"}}]}}))
                    })
                    .collect();
                if width > 0 {
                    let leaves: Vec<Value> = (0..width)
                        .map(|i| json!({"package": {"packageName": format!("p{}", i % packages), "versionRange": ">=1.0.0"}}))
                        .collect();
                    needs.push(constraint(json!({"any": {"constraints": leaves}})));
                }
                let mut lines = flat("app", 2, |i| if i == 1 { needs.clone() } else { Vec::new() });
                for p in 0..packages {
                    lines.extend(chain(&format!("p{p}"), 1, |_| Vec::new()));
                }
                app_case(lines)
            })
            .boxed()
    },
};

/// Long text: failure messages at their limit, long deprecation messages and long edges' names
/// on many bundles: what the commands show is bounded by what the catalog holds.
pub const LONG_TEXT: Family = Family {
    name: "long text",
    cases: |scale| {
        (10..scale.pick(100, 400), 1..scale.pick(20_000, 200_000))
            .prop_map(|(bundles, message)| {
                let failure = "f".repeat(1024);
                let mut lines = flat("app", bundles, |_| {
                    vec![constraint(json!({"failureMessage": failure,
                        "package": {"packageName": "dep", "versionRange": ">=9.0.0"}}))]
                });
                lines.push(json!({"schema": "olm.deprecations", "package": "app", "entries": [
                    {"reference": {"schema": "olm.package"}, "message": "d".repeat(message)},
                    {"reference": {"schema": "olm.channel", "name": "stable"}, "message": "c".repeat(message)},
                    {"reference": {"schema": "olm.bundle", "name": "app.v1.0.0"}, "message": "b".repeat(message)},
                ]}));
                let mut case = app_case(lines);
                // The messages are shown once each, the failure messages once per bundle and row.
                case.legitimate_output = (3 * message + 4 * bundles * failure.len()) as u64;
                case
            })
            .boxed()
    },
};

/// Many rules: every bundle carries the most CEL rules a bundle may (32), each distinct: what
/// compiling costs, per process and per command.
pub const MANY_RULES: Family = Family {
    name: "many rules",
    cases: |scale| {
        (10..scale.pick(120, 1200), 1..=32usize, any::<u16>())
            .prop_map(|(bundles, rules, salt)| {
                let lines = flat("app", bundles, |i| {
                    (0..rules)
                        .map(|r| {
                            cel(&format!(
                                "properties.exists(p, p.type == 'x{salt}.{i}.{r}' && p.value.size() > {r})"
                            ))
                        })
                        .collect()
                });
                app_case(lines)
            })
            .boxed()
    },
};

/// Costly rules: rules whose estimate is near the per-rule limit, on bundles whose properties are
/// large (a keywords list of many entries), against many candidates.
pub const COSTLY_RULES: Family = Family {
    name: "costly rules",
    cases: |scale| {
        (5..scale.pick(30, 600), 100..scale.pick(800, 12000), 1..8usize)
            .prop_map(move |(bundles, keywords, rules)| {
                // Each bundle of both packages carries the keywords: 15 bytes a word at most.
                let keywords = scale.fit(keywords, 2 * bundles * 15, 0.9);
                let words: Vec<String> = (0..keywords).map(|k| format!("keyword{k}")).collect();
                let metadata = json!({"type": "olm.csv.metadata.fuzz", "value": {"keywords": words}});
                let rule = |r: usize| {
                    cel(&format!(
                        "properties.exists(p, p.type == 'olm.csv.metadata.fuzz' && p.value.keywords.exists(k, k == 'db{r}'))"
                    ))
                };
                let mut lines = flat("app", bundles, |i| {
                    if i == 0 {
                        vec![metadata.clone()]
                    } else {
                        (0..rules).map(rule).chain([metadata.clone()]).collect()
                    }
                });
                lines.extend(flat("dep", bundles, |_| vec![metadata.clone()]));
                app_case(lines)
            })
            .boxed()
    },
};

/// Regular expressions: rules with the most `matches` patterns a rule may have (8), each a short
/// pattern whose automaton is near the size limit, distinct per bundle (the 96 KB
/// catalog: 9.8 CPU s and 585 MB).
pub const REGEX: Family = Family {
    name: "regex",
    cases: |scale| {
        (4..scale.pick(60, 400), 1..=8usize, 200..1200usize, any::<u16>())
            .prop_map(|(bundles, patterns, repeat, salt)| {
                let lines = flat("app", bundles, |i| {
                    let tests: Vec<String> = (0..patterns)
                        .map(|k| format!("p.type.matches('(x{salt}y{i}z{k}){{{repeat}}}')"))
                        .collect();
                    vec![cel(&format!("properties.exists(p, {})", tests.join(" || ")))]
                });
                app_case(lines)
            })
            .boxed()
    },
};

/// Compiler error texts: rules of bad characters (the CEL parser makes one error per character,
/// each with the whole line), distinct per bundle, and patterns that do not parse (the 5
/// KB catalog: 57 to 92 MB of output).
pub const ERROR_TEXTS: Family = Family {
    name: "error texts",
    cases: |scale| {
        (
            2..scale.pick(100, 1000),
            100..4096usize,
            prop::sample::select(vec!['#', '`', '\u{1b}', '@']),
        )
            .prop_map(|(bundles, length, bad)| {
                let lines = flat("app", bundles, |i| {
                    let rule: String = std::iter::repeat_n(bad, length.saturating_sub(8)).collect();
                    vec![
                        cel(&format!("{i} == {rule}")),
                        cel(&format!(
                            "properties.exists(p, p.type.matches('({}'))",
                            "(".repeat(i % 200)
                        )),
                    ]
                });
                app_case(lines)
            })
            .boxed()
    },
};

/// Many bundles: one package of thousands of bundles with replaces, skips and skipRanges
/// (`upgrades` resolved once per successor; the plan's candidates).
pub const MANY_BUNDLES: Family = Family {
    name: "many bundles",
    cases: |scale| {
        (100..scale.pick(1000, 8000), 0..4usize)
            .prop_map(|(bundles, skips)| {
                let version = |i: usize| format!("1.{}.{}", i / 100, i % 100);
                let entries: Vec<Value> = (0..bundles)
                    .map(|i| {
                        let mut e = json!({"name": format!("app.v{}", version(i))});
                        if i > 0 {
                            e["replaces"] = json!(format!("app.v{}", version(i - 1)));
                            e["skips"] = json!(
                                (1..=skips.min(i))
                                    .map(|s| format!("app.v{}", version(i - s)))
                                    .collect::<Vec<_>>()
                            );
                            e["skipRange"] = json!(format!("<{}", version(i)));
                        }
                        e
                    })
                    .collect();
                let mut lines = vec![package("app"), channel("app", "stable", entries)];
                lines.extend((0..bundles).map(|i| bundle("app", &version(i), Vec::new())));
                let mut case = Case::new("app", lines).installed("app.v1.0.0", "1.0.0");
                // Every version is listed once in each answer.
                case.legitimate_output = (bundles * 400) as u64;
                case
            })
            .boxed()
    },
};

/// Many deprecations: a package whose every bundle is deprecated, one entry each (the issue's
/// 60,000 x 60,000: 30 CPU s).
pub const MANY_DEPRECATIONS: Family = Family {
    name: "many deprecations",
    cases: |scale| {
        (100..scale.pick(3000, 60000))
            .prop_map(move |bundles| {
                // A channel entry, a bundle and a deprecation entry each.
                let bundles = scale.fit(bundles, 400, 0.9);
                let version = |i: usize| format!("1.{}.{}", i / 1000, i % 1000);
                let entries: Vec<Value> = (0..bundles)
                    .map(|i| json!({"name": format!("app.v{}", version(i))}))
                    .collect();
                let deprecated: Vec<Value> = (0..bundles)
                    .map(|i| json!({"reference": {"schema": "olm.bundle", "name": format!("app.v{}", version(i))}, "message": "old"}))
                    .collect();
                let mut lines = vec![package("app"), channel("app", "stable", entries)];
                lines.extend((0..bundles).map(|i| bundle("app", &version(i), Vec::new())));
                lines.push(json!({"schema": "olm.deprecations", "package": "app", "entries": deprecated}));
                let mut case = Case::new("app", lines);
                case.legitimate_output = (bundles * 200) as u64;
                case
            })
            .boxed()
    },
};

/// Many channels: every bundle in every one of many channels, each with requirements (a cell
/// per bundle and channel; the plan's channel ranks).
pub const MANY_CHANNELS: Family = Family {
    name: "many channels",
    cases: |scale| {
        (2..scale.pick(200, 1000), 2..scale.pick(40, 200))
            .prop_map(|(channels, bundles)| {
                let version = |i: usize| format!("1.0.{i}");
                let mut lines = vec![package("app")];
                for c in 0..channels {
                    let name = if c == 0 { "stable".to_string() } else { format!("c{c}") };
                    let entries: Vec<Value> = (0..bundles)
                        .map(|i| match i {
                            0 => json!({"name": format!("app.v{}", version(0))}),
                            _ => json!({"name": format!("app.v{}", version(i)), "replaces": format!("app.v{}", version(i - 1))}),
                        })
                        .collect();
                    lines.push(channel("app", &name, entries));
                }
                let needs = vec![constraint(json!({"failureMessage": "m".repeat(160),
                    "any": {"constraints": [{"package": {"packageName": "dep", "versionRange": ">=1.0.0"}}]}}))];
                lines.extend((0..bundles).map(|i| bundle("app", &version(i), needs.clone())));
                lines.extend(chain("dep", 3, |_| Vec::new()));
                let mut case = app_case(lines);
                // One row per bundle and channel, each bundle's requirements shown once.
                case.legitimate_output = (channels * bundles * 120 + bundles * 400) as u64;
                case
            })
            .boxed()
    },
};

/// Interleaved metas: many packages whose objects alternate line by line, with large bundles
/// (catalogd's `/metas` for one package or schema).
pub const INTERLEAVED_METAS: Family = Family {
    name: "interleaved metas",
    cases: |scale| {
        (10..scale.pick(200, 2000), 1..scale.pick(1500, 4000))
            .prop_map(move |(packages, padding)| {
                // Three bundles of each package carry the padding.
                let padding = scale.fit(padding, 3 * packages, 0.8);
                let per: Vec<Vec<Value>> = (0..packages)
                    .map(|p| {
                        let name = format!("p{p}");
                        chain(&name, 3, |_| {
                            vec![json!({"type": "fuzz.padding", "value": "x".repeat(padding)})]
                        })
                    })
                    .collect();
                // Line i of every package, then line i + 1 of every package, ...
                let longest = per.iter().map(Vec::len).max().unwrap_or(0);
                let mut lines = Vec::new();
                for i in 0..longest {
                    lines.extend(per.iter().filter_map(|l| l.get(i).cloned()));
                }
                let mut case = Case::new("p0", lines).installed("p0.v1.0.0", "1.0.0");
                case.slow_clients = 8;
                case
            })
            .boxed()
    },
};

/// Slow HTTP clients: catalogd holding many clients that ask for every bundle and read nothing.
pub const SLOW_CLIENTS: Family = Family {
    name: "slow clients",
    cases: |scale| {
        (16..scale.pick(64, 128), 100..scale.pick(250, 2000))
            .prop_map(|(clients, packages)| {
                let mut lines = Vec::new();
                for p in 0..packages {
                    lines.extend(chain(&format!("p{p}"), 2, |_| {
                        vec![json!({"type": "fuzz.padding", "value": "y".repeat(2000)})]
                    }));
                }
                let mut case = Case::new("p0", lines).installed("p0.v1.0.0", "1.0.0");
                case.slow_clients = clients;
                case
            })
            .boxed()
    },
};

// One test per family (the bounded run; see the module comment of `fuzz`).

/// Classic CSVs (`migrate check`, whose CSVs carry their bundle's properties): each bundle of
/// `app` requires every other package by name and by API, with a long failure message and rules
/// near the cost limit over a large keywords list; each other package's bundle provides its API
/// and requires `app` back (a cycle): the check reads every installed CSV's requirements and
/// weighs them against every other Subscription's CSV, and settles the dependency chains.
pub const CLASSIC_CSVS: Family = Family {
    name: "classic CSVs",
    cases: |scale| {
        (
            2..scale.pick(40, 400),
            2..scale.pick(12, 60),
            100..scale.pick(800, 12000),
            0..4usize,
        )
            .prop_map(move |(bundles, packages, keywords, rules)| {
                // A bundle of `app` carries a 1 KB failure message and an API per package: half
                // the catalog at most; the keywords, on every bundle, the other half.
                let bundles = scale.fit(bundles, packages * 1300 + rules * 200, 0.45);
                let keywords = scale.fit(keywords, (bundles + packages) * 15, 0.45);
                classic_csvs(bundles, packages, keywords, rules)
            })
            .boxed()
    },
};

/// A case of [`CLASSIC_CSVS`]: `bundles` of `app`, `packages` others, a keywords list of
/// `keywords` entries, `rules` CEL rules per bundle of `app`.
pub fn classic_csvs(bundles: usize, packages: usize, keywords: usize, rules: usize) -> Case {
    let words: Vec<String> = (0..keywords).map(|k| format!("keyword{k}")).collect();
    let metadata = json!({"type": "olm.csv.metadata.fuzz", "value": {"keywords": words}});
    let failure = "f".repeat(1024);
    let needs: Vec<Value> = (0..packages)
                    .flat_map(|p| {
                        [
                            constraint(json!({"failureMessage": failure,
                                "package": {"packageName": format!("p{p}"), "versionRange": ">=1.0.0"}})),
                            json!({"type": "olm.gvk.required", "value":
                                {"group": "fuzz.io", "version": "v1", "kind": format!("K{p}")}}),
                        ]
                    })
                    .chain((0..rules).map(|r| {
                        cel(&format!(
                            "properties.exists(p, p.type == 'olm.csv.metadata.fuzz' && p.value.keywords.exists(k, k == 'db{r}'))"
                        ))
                    }))
                    .chain([metadata.clone()])
                    .collect();
    let mut lines = chain("app", bundles, |_| needs.clone());
    for p in 0..packages {
        lines.extend(chain(&format!("p{p}"), 1, |_| {
            vec![
                gvk(&format!("K{p}")),
                json!({"type": "olm.package.required", "value":
                                {"packageName": "app", "versionRange": ">=1.0.0"}}),
                metadata.clone(),
            ]
        }));
    }
    app_case(lines)
}

#[test]
fn fuzz_deep() {
    check_family(&DEEP);
}

#[test]
fn fuzz_wide() {
    check_family(&WIDE);
}

#[test]
fn fuzz_long_text() {
    check_family(&LONG_TEXT);
}

#[test]
fn fuzz_many_rules() {
    check_family(&MANY_RULES);
}

#[test]
fn fuzz_costly_rules() {
    check_family(&COSTLY_RULES);
}

#[test]
fn fuzz_regex() {
    check_family(&REGEX);
}

#[test]
fn fuzz_error_texts() {
    check_family(&ERROR_TEXTS);
}

#[test]
fn fuzz_many_bundles() {
    check_family(&MANY_BUNDLES);
}

#[test]
fn fuzz_many_deprecations() {
    check_family(&MANY_DEPRECATIONS);
}

#[test]
fn fuzz_many_channels() {
    check_family(&MANY_CHANNELS);
}

#[test]
fn fuzz_interleaved_metas() {
    check_family(&INTERLEAVED_METAS);
}

#[test]
fn fuzz_slow_clients() {
    check_family(&SLOW_CLIENTS);
}

#[test]
fn fuzz_classic_csvs() {
    check_family(&CLASSIC_CSVS);
}
