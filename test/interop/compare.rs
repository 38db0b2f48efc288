//! The differences table: each scenario's recorded fields under olmv1 and upstream, compared one
//! by one; a difference passes only when docs/upstream.md lists it with its reason, in the list
//! that applies to the run (upstream's model, or olmv1 as it ships).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::scenarios::{CONDITION_TYPES, Outcome, Run, Scenario};

/// Where docs/upstream.md keeps the machine-read lists: tables between `<!-- NAME:start -->` and
/// `<!-- NAME:end -->` whose rows are `| scenario | fields | reason |` (`*` as the scenario: every
/// scenario; fields separated by commas). A row naming a scenario must still be a difference: one
/// that no longer is fails the comparison too, so that the list stays what olmv1 does. This one
/// holds the differences of olmv1 in upstream's model, which every olmv1 run
/// shows.
const UPSTREAM_MODEL_LIST: &str = "interop-differences";
/// The differences only olmv1 as it ships shows (its defaults: dependencies checked, an installer
/// ServiceAccount required).
const OLMV1_LIST: &str = "interop-differences-olmv1";

/// (scenario or `*`, field) -> reason.
pub type Listed = BTreeMap<(String, String), String>;

/// The differences the page lists for the olmv1 run `run`.
pub fn listed_for(page: &str, run: Run) -> Listed {
    let mut listed = listed_differences(page, UPSTREAM_MODEL_LIST);
    if run == Run::Olmv1 {
        listed.extend(listed_differences(page, OLMV1_LIST));
    }
    listed
}

/// Reads the differences listed between the markers of list `name` from the page's text.
fn listed_differences(page: &str, name: &str) -> Listed {
    let (start, end) = (format!("<!-- {name}:start -->"), format!("<!-- {name}:end -->"));
    let Some(body) = page
        .split(start.as_str())
        .nth(1)
        .and_then(|rest| rest.split(end.as_str()).next())
    else {
        return Listed::new();
    };
    let mut listed = Listed::new();
    for line in body.lines() {
        let Some(cells) = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|')) else {
            continue;
        };
        let cells: Vec<&str> = cells.split('|').collect();
        let [scenario, fields, reason] = cells[..] else {
            continue;
        };
        let unquote = |c: &str| c.trim().trim_matches('`').to_string();
        let scenario = unquote(scenario);
        if scenario == "scenario" || scenario.starts_with("---") {
            continue;
        }
        for field in fields.split(',') {
            listed.insert((scenario.clone(), unquote(field)), reason.trim().to_string());
        }
    }
    listed
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
    /// What was compared with what, e.g. `olmv1 vs upstream`.
    pub title: String,
    pub rows: Vec<Row>,
    pub unlisted: usize,
    /// (scenario, field) listed for a scenario but the same on both sides now.
    pub stale: Vec<(String, String)>,
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

/// Compares every scenario of `scenarios` between the two records; `title` names them.
pub fn compare(
    title: String,
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
    let stale = listed
        .keys()
        .filter(|(scenario, field)| {
            scenario != "*"
                && !rows
                    .iter()
                    .any(|row| &row.scenario == scenario && row.differences.iter().any(|d| &d.0 == field))
        })
        .cloned()
        .collect();
    Table {
        title,
        rows,
        unlisted,
        stale,
    }
}

impl Table {
    /// What fails the comparison, one line each: an unlisted difference (`scenario field: olmv1
    /// ..., upstream ...`), or a listed one that is no longer a difference.
    pub fn failures(&self) -> Vec<String> {
        let unlisted = self.rows.iter().flat_map(|row| {
            row.differences
                .iter()
                .filter(|d| d.3.is_none())
                .map(|(field, a, b, _)| format!("{} {field}: olmv1 {a:?}, upstream {b:?}", row.scenario))
        });
        let stale = self.stale.iter().map(|(scenario, field)| {
            format!("{scenario} {field}: listed as a difference, but the same on both sides")
        });
        unlisted.chain(stale).collect()
    }

    /// The table as text: one block per scenario, unlisted differences marked.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let listed: usize = self.rows.iter().map(|r| r.differences.len()).sum::<usize>() - self.unlisted;
        writeln!(out, "differences table: {}, same scenarios", self.title).unwrap();
        for row in &self.rows {
            let verdict = match row.differences.iter().filter(|d| d.3.is_none()).count() {
                0 if row.differences.is_empty() => "same".to_string(),
                0 => format!("{} listed difference(s)", row.differences.len()),
                n => format!("{n} UNLISTED difference(s)"),
            };
            writeln!(out, "\n{:<24} {verdict}", row.scenario).unwrap();
            writeln!(out, "  olmv1:    {}", row.olmv1).unwrap();
            writeln!(out, "  upstream: {}", row.upstream).unwrap();
            // Listed differences: one line per reason, naming its fields.
            let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
            for (field, _, _, reason) in &row.differences {
                let Some(reason) = reason.as_deref() else {
                    continue;
                };
                match by_reason.iter_mut().find(|(r, _)| *r == reason) {
                    Some((_, fields)) => fields.push(field),
                    None => by_reason.push((reason, vec![field])),
                }
            }
            for (reason, fields) in by_reason {
                writeln!(out, "  ~ {}: listed ({reason})", fields.join(", ")).unwrap();
            }
            for (field, a, b, _) in row.differences.iter().filter(|d| d.3.is_none()) {
                writeln!(out, "  ! {field}:").unwrap();
                writeln!(out, "      olmv1:    {a}").unwrap();
                writeln!(out, "      upstream: {b}").unwrap();
            }
        }
        for (scenario, field) in &self.stale {
            writeln!(
                out,
                "\n! {scenario} {field}: listed in docs/upstream.md, but the same on both sides"
            )
            .unwrap();
        }
        writeln!(
            out,
            "\n{} scenarios; {listed} listed difference(s); {} unlisted; {} listed but not found",
            self.rows.len(),
            self.unlisted,
            self.stale.len()
        )
        .unwrap();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios;

    const PAGE: &str = "<!-- interop-differences:start -->\n\
        | scenario | field | reason |\n|---|---|---|\n\
        | refused-apiservice | Progressing.status, `Progressing.reason` | terminal |\n\
        <!-- interop-differences:end -->\n\
        <!-- interop-differences-olmv1:start -->\n\
        | scenario | field | reason |\n|---|---|---|\n\
        | no-service-account | install | blocked |\n\
        <!-- interop-differences-olmv1:end -->\n";

    fn outcome(progressing: &str) -> Outcome {
        let mut outcome = Outcome::default();
        outcome.conditions.insert(
            "Progressing".into(),
            Some(["True".into(), progressing.into(), "m".into()]),
        );
        outcome
    }

    #[test]
    fn a_row_may_list_several_fields_and_the_olmv1_list_applies_to_its_run_only() {
        let key = |s: &str, f: &str| (s.to_string(), f.to_string());
        let model = listed_for(PAGE, Run::Olmv1UpstreamModel);
        assert_eq!(
            model.keys().cloned().collect::<Vec<_>>(),
            [
                key("refused-apiservice", "Progressing.reason"),
                key("refused-apiservice", "Progressing.status")
            ]
        );
        let olmv1 = listed_for(PAGE, Run::Olmv1);
        assert_eq!(olmv1.len(), 3);
        assert_eq!(olmv1[&key("no-service-account", "install")], "blocked");
    }

    #[test]
    fn an_unlisted_difference_and_a_listed_one_that_is_gone_both_fail_naming_scenario_and_field() {
        let all = scenarios::all();
        let same: BTreeMap<String, Outcome> = all
            .iter()
            .map(|s| (s.name.to_string(), outcome("Succeeded")))
            .collect();
        let listed = listed_for(PAGE, Run::Olmv1UpstreamModel);
        let mut ours = same.clone();
        ours.insert("pinned-version".into(), outcome("Retrying"));
        let table = compare("t".into(), &all, &ours, &same, &listed);
        assert_eq!(table.unlisted, 1);
        assert_eq!(
            table.failures(),
            [
                "pinned-version Progressing.reason: olmv1 \"Retrying\", upstream \"Succeeded\"",
                "refused-apiservice Progressing.reason: listed as a difference, but the same on both sides",
                "refused-apiservice Progressing.status: listed as a difference, but the same on both sides",
            ]
        );
        // The listed difference present: only what is not listed fails.
        ours.insert("refused-apiservice".into(), outcome("Blocked"));
        let table = compare("t".into(), &all, &ours, &same, &listed);
        assert_eq!(
            table.failures(),
            [
                "pinned-version Progressing.reason: olmv1 \"Retrying\", upstream \"Succeeded\"",
                "refused-apiservice Progressing.status: listed as a difference, but the same on both sides",
            ]
        );
    }
}
