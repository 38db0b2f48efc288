//! The differences table: each scenario's recorded fields under olmv1 and upstream, compared one
//! by one; a difference passes only when docs/upstream.md lists it with its reason.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::scenarios::{CONDITION_TYPES, Outcome, Scenario};

/// Where docs/upstream.md keeps the machine-read list: a table between these two lines whose
/// rows are `| scenario | field | reason |` (`*` as the scenario: every scenario).
const START: &str = "<!-- interop-differences:start -->";
const END: &str = "<!-- interop-differences:end -->";

/// (scenario or `*`, field) -> reason.
pub type Listed = BTreeMap<(String, String), String>;

/// Reads the listed differences from the page's text.
pub fn listed_differences(page: &str) -> Listed {
    let Some(body) = page.split(START).nth(1).and_then(|rest| rest.split(END).next()) else {
        return Listed::new();
    };
    body.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .collect();
            let [scenario, field, reason] = cells[..] else {
                return None;
            };
            let unquote = |c: &str| c.trim().trim_matches('`').to_string();
            let (scenario, field) = (unquote(scenario), unquote(field));
            if scenario == "scenario" || scenario.starts_with("---") {
                return None;
            }
            Some(((scenario, field), reason.trim().to_string()))
        })
        .collect()
}

/// One scenario's comparison.
pub struct Row {
    pub scenario: String,
    /// Short summary of each side's end state.
    pub olmv1: String,
    pub upstream: String,
    /// (field, olmv1 value, upstream value, listed reason if any).
    pub differences: Vec<(String, String, String, Option<String>)>,
}

pub struct Table {
    pub rows: Vec<Row>,
    pub unlisted: usize,
}

/// The fields compared: the six conditions' status, reason and message, `status.install`, and
/// the applied objects.
fn fields(outcome: &Outcome) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for type_ in CONDITION_TYPES {
        let condition = outcome.conditions.get(type_).cloned().flatten();
        for (i, part) in ["status", "reason", "message"].iter().enumerate() {
            let value = condition
                .as_ref()
                .map(|c| c[i].clone())
                .unwrap_or_else(|| "(absent)".into());
            out.push((format!("{type_}.{part}"), value));
        }
    }
    out.push(("install".into(), compact(&outcome.install)));
    out.push(("objects".into(), outcome.objects.join(", ")));
    out
}

fn compact(value: &Value) -> String {
    if value.is_null() {
        "(none)".into()
    } else {
        value.to_string()
    }
}

fn summary(outcome: &Outcome) -> String {
    let part = |t: &str| {
        outcome
            .conditions
            .get(t)
            .cloned()
            .flatten()
            .map(|c| format!("{t}={}/{}", c[0], c[1]))
            .unwrap_or_else(|| format!("{t} absent"))
    };
    let version = outcome.install["bundle"]["version"].as_str().unwrap_or("-");
    format!(
        "{} {} v={} objects={}",
        part("Installed"),
        part("Progressing"),
        version,
        outcome.objects.len()
    )
}

/// Compares every scenario of `scenarios` between the two records.
pub fn compare(
    scenarios: &[Scenario],
    olmv1: &BTreeMap<String, Outcome>,
    upstream: &BTreeMap<String, Outcome>,
    listed: &Listed,
) -> Table {
    let mut rows = Vec::new();
    let mut unlisted = 0;
    for scenario in scenarios {
        let name = scenario.name.to_string();
        let missing = Outcome::default();
        let (ours, theirs) = (
            olmv1.get(&name).unwrap_or(&missing),
            upstream.get(&name).unwrap_or(&missing),
        );
        let mut differences = Vec::new();
        for ((field, a), (_, b)) in fields(ours).into_iter().zip(fields(theirs)) {
            if a == b {
                continue;
            }
            let reason = listed
                .get(&(name.clone(), field.clone()))
                .or_else(|| listed.get(&("*".to_string(), field.clone())))
                .cloned();
            if reason.is_none() {
                unlisted += 1;
            }
            differences.push((field, a, b, reason));
        }
        rows.push(Row {
            scenario: name,
            olmv1: summary(ours),
            upstream: summary(theirs),
            differences,
        });
    }
    Table { rows, unlisted }
}

impl Table {
    /// The table as text: one block per scenario, unlisted differences marked.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let listed: usize = self.rows.iter().map(|r| r.differences.len()).sum::<usize>() - self.unlisted;
        writeln!(
            out,
            "differences table: olmv1 controller vs upstream operator-controller, same catalogs"
        )
        .unwrap();
        for row in &self.rows {
            let verdict = match row.differences.iter().filter(|d| d.3.is_none()).count() {
                0 if row.differences.is_empty() => "same".to_string(),
                0 => format!("{} listed difference(s)", row.differences.len()),
                n => format!("{n} UNLISTED difference(s)"),
            };
            writeln!(out, "\n{:<24} {verdict}", row.scenario).unwrap();
            writeln!(out, "  olmv1:    {}", row.olmv1).unwrap();
            writeln!(out, "  upstream: {}", row.upstream).unwrap();
            for (field, a, b, reason) in &row.differences {
                match reason {
                    Some(reason) => writeln!(out, "  ~ {field}: listed ({reason})").unwrap(),
                    None => {
                        writeln!(out, "  ! {field}:").unwrap();
                        writeln!(out, "      olmv1:    {a}").unwrap();
                        writeln!(out, "      upstream: {b}").unwrap();
                    }
                }
            }
        }
        writeln!(
            out,
            "\n{} scenarios; {listed} listed difference(s); {} unlisted",
            self.rows.len(),
            self.unlisted
        )
        .unwrap();
        out
    }
}
