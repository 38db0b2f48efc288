//! Just enough PromQL to evaluate the expressions of charts/olmv1/files/olmv1-alerts.yaml against a
//! scrape, at one instant: a vector selector with `=`/`!=` matchers compared with a number
//! (`== < > <= >= !=`), `sum(<selector>)` compared with a number, `absent(<selector>)`, and `or`
//! between them. Anything else panics, so an alert written with more fails its test rather than
//! being evaluated wrongly. (Debian's `prometheus` package has promtool, but installing it starts
//! a server; its engine is not needed for these few forms.)

use std::collections::BTreeMap;

/// One sample of a scrape: its name, labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a Prometheus or OpenMetrics text exposition.
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (
                name,
                parse_labels(rest.strip_suffix('}').expect("labels end with }")),
            ),
            None => (series, BTreeMap::new()),
        };
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value: value.parse().unwrap_or_else(|_| panic!("a number in {line:?}")),
        });
    }
    samples
}

/// `a="x",b="y"` (values without escapes, which olmv1's labels do not need).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").expect("label=\"value\"");
        let (value, after) = after.split_once('"').expect("a closing quote");
        labels.insert(name.trim().to_string(), value.to_string());
        rest = after.trim_start_matches(',').trim();
    }
    labels
}

/// The series `expr` returns over `samples` (an alert fires for each), label sets only.
pub fn evaluate(expr: &str, samples: &[Sample]) -> Vec<BTreeMap<String, String>> {
    expr.split(" or ")
        .flat_map(|term| evaluate_term(term.trim(), samples))
        .collect()
}

fn evaluate_term(term: &str, samples: &[Sample]) -> Vec<BTreeMap<String, String>> {
    if let Some(inner) = term.strip_prefix("absent(").and_then(|t| t.strip_suffix(')')) {
        let selector = Selector::parse(inner);
        return if samples.iter().any(|s| selector.matches(s)) {
            vec![]
        } else {
            vec![selector.equalities()]
        };
    }
    let (operand, op, threshold) = split_comparison(term);
    if let Some(inner) = operand.strip_prefix("sum(").and_then(|t| t.strip_suffix(')')) {
        let selector = Selector::parse(inner);
        let matched: Vec<f64> = samples
            .iter()
            .filter(|s| selector.matches(s))
            .map(|s| s.value)
            .collect();
        if matched.is_empty() {
            return vec![];
        }
        let sum: f64 = matched.iter().sum();
        return if compare(sum, op, threshold) {
            vec![BTreeMap::new()]
        } else {
            vec![]
        };
    }
    let selector = Selector::parse(operand);
    samples
        .iter()
        .filter(|s| selector.matches(s) && compare(s.value, op, threshold))
        .map(|s| s.labels.clone())
        .collect()
}

fn split_comparison(term: &str) -> (&str, &str, f64) {
    for op in ["==", "!=", "<=", ">=", "<", ">"] {
        // The operator after the selector's closing brace or parenthesis.
        let end = term.rfind(['}', ')']).expect("a selector");
        if let Some(at) = term[end..].find(op) {
            let threshold = term[end + at + op.len()..].trim();
            return (
                term[..end + 1].trim(),
                op,
                threshold
                    .parse()
                    .unwrap_or_else(|_| panic!("unsupported comparison in {term:?}")),
            );
        }
    }
    panic!("unsupported expression {term:?}: a comparison with a number is expected")
}

fn compare(value: f64, op: &str, threshold: f64) -> bool {
    match op {
        "==" => value == threshold,
        "!=" => value != threshold,
        "<=" => value <= threshold,
        ">=" => value >= threshold,
        "<" => value < threshold,
        ">" => value > threshold,
        _ => unreachable!(),
    }
}

/// `name{label="v",label!="v"}`.
struct Selector {
    name: String,
    matchers: Vec<(String, bool, String)>,
}

impl Selector {
    fn parse(text: &str) -> Selector {
        let text = text.trim();
        let (name, matchers) = match text.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').expect("matchers end with }")),
            None => (text, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "unsupported selector {text:?}"
        );
        let matchers = matchers
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| {
                let (label, equal, value) = if let Some((l, v)) = m.split_once("!=") {
                    (l, false, v)
                } else if let Some((l, v)) = m.split_once('=') {
                    assert!(
                        !v.starts_with('~') && !l.ends_with('='),
                        "unsupported matcher {m:?}"
                    );
                    (l, true, v)
                } else {
                    panic!("unsupported matcher {m:?}")
                };
                let value = value.trim().strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                (
                    label.trim().to_string(),
                    equal,
                    value
                        .unwrap_or_else(|| panic!("a quoted value in {m:?}"))
                        .to_string(),
                )
            })
            .collect();
        Selector {
            name: name.to_string(),
            matchers,
        }
    }

    fn matches(&self, sample: &Sample) -> bool {
        sample.name == self.name
            && self.matchers.iter().all(|(label, equal, value)| {
                let actual = sample.labels.get(label).map(String::as_str).unwrap_or("");
                (actual == value) == *equal
            })
    }

    /// What `absent()` returns: the selector's equality matchers as labels.
    fn equalities(&self) -> BTreeMap<String, String> {
        self.matchers
            .iter()
            .filter(|(_, equal, _)| *equal)
            .map(|(l, _, v)| (l.clone(), v.clone()))
            .collect()
    }
}
