//! Reading requirements from properties and from a bundle image's metadata files.
//!
//! Catalog content is untrusted: every requirement is bounded before anything is evaluated (raw
//! bytes per property, field lengths, nodes and CEL rules per constraint tree, requirements,
//! nodes and CEL rules per bundle, version ranges), and a CEL rule is compiled only once the whole
//! tree it belongs to, and the bundle's totals, are known to be within the limits. Catalog text
//! in a message is quoted and cut ([`go_quote_cut`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    DependencyError,
    cel_rule::{CelRule, CompileError},
    model::{Constraint, Gvk, Requirement},
};
use crate::{
    catalog::{PROPERTY_CONSTRAINT, PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE_REQUIRED, Property},
    go_format::{QUOTE_CHARS, go_quote_cut},
    meter::{Meter, Work},
    version::{SkipRange, VersionError},
};

/// The largest raw `olm.constraint` value read (operator-framework/api's `2 << 16`).
pub const MAX_CONSTRAINT_BYTES: usize = 2 << 16;
/// The largest raw `olm.package.required` or `olm.gvk.required` value read (also a
/// `dependencies.yaml` `olm.package` or `olm.gvk` entry, once converted). The largest in the
/// shared catalogs is 96 bytes; the longest package name and range allowed, with their keys and
/// some JSON escaping, fit in well under 4 KiB.
pub const MAX_REQUIRED_BYTES: usize = 4096;
/// The deepest nesting of compound constraints read (the enhancement's 10 levels).
pub const MAX_CONSTRAINT_DEPTH: usize = 10;
/// The most nodes (`package`, `gvk`, `cel`, `all`, `any`, `not` objects) in one `olm.constraint`:
/// each is evaluated against every candidate bundle. The shared catalogs have no `olm.constraint`;
/// the enhancement's examples have at most 5 nodes; 256 is 50 times that.
pub const MAX_CONSTRAINT_NODES: usize = 256;
/// The most CEL rules in one `olm.constraint`. Each is compiled (a parser on its own thread) and
/// evaluated against every candidate; the enhancement's examples have one per constraint.
pub const MAX_CEL_RULES_PER_CONSTRAINT: usize = 16;
/// The most CEL rules in all of one bundle's requirements: twice a constraint's, so a bundle may
/// carry two full constraints, while 4,000 rules in one bundle (13 s of compiling) are refused.
pub const MAX_CEL_RULES_PER_BUNDLE: usize = 32;
/// The most requirements one bundle may declare. The shared catalogs have at most 3 per bundle
/// (`linstor-operator.v2.10.1`); 256 is 85 times that.
pub const MAX_REQUIREMENTS: usize = 256;
/// The most constraint nodes in all of one bundle's requirements (a package or API requirement is
/// one node): what evaluating the bundle's requirements against one candidate costs at most.
/// Four times a constraint's limit; the shared catalogs' largest bundle has 3.
pub const MAX_BUNDLE_NODES: usize = 1024;
/// The longest package name read: a ClusterExtension's `packageName` is at most 253 characters
/// (a DNS-1123 subdomain), so a longer name can never be installed. The shared catalogs' longest
/// is 32 (`openshift-fusion-access-operator`).
pub const MAX_PACKAGE_NAME_BYTES: usize = 253;
/// The longest API group read: Kubernetes requires a DNS-1123 subdomain (253). Longest in the
/// shared catalogs: 39.
pub const MAX_GROUP_BYTES: usize = 253;
/// The longest API version read: Kubernetes requires a DNS-1035 label (63). Longest in the shared
/// catalogs: 8 (`v1alpha1`).
pub const MAX_API_VERSION_BYTES: usize = 63;
/// The longest kind read: Kubernetes requires its lower case to be a DNS-1035 label (63). Longest
/// in the shared catalogs: 33.
pub const MAX_KIND_BYTES: usize = 63;
/// The longest `failureMessage` read: it is printed whole in explanations and conditions. The
/// shared catalogs have none; a sentence or two fits in 1 KiB with room to spare.
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 1024;

/// Whether the properties declare any dependency.
pub fn has_dependencies(properties: &[Property]) -> bool {
    properties.iter().any(|p| is_requirement_type(&p.type_))
}

pub(super) fn is_requirement_type(t: &str) -> bool {
    matches!(
        t,
        PROPERTY_PACKAGE_REQUIRED | PROPERTY_GVK_REQUIRED | PROPERTY_CONSTRAINT
    )
}

/// The requirements declared by a bundle's properties, in order; other properties are ignored.
/// A requirement beyond a limit refuses the bundle with one sentence naming the property and the
/// limit.
pub fn requirements_of(
    bundle: &str,
    properties: &[Property],
    meter: &mut Meter,
) -> Result<Vec<Requirement>, DependencyError> {
    let mut budget = BundleBudget::default();
    let mut out = Vec::new();
    for p in properties.iter().filter(|p| is_requirement_type(&p.type_)) {
        out.push(requirement(bundle, &p.type_, p.value.raw(), &mut budget, meter)?);
    }
    Ok(out)
}

/// The requirements of a bundle image: `metadata/dependencies.yaml` (`dependencies:` of
/// `olm.package` `{packageName, version}`, `olm.gvk` `{group, version, kind}` and `olm.constraint`
/// entries, as opm converts them) followed by those of `metadata/properties.yaml`. The two files
/// share one bundle's limits.
pub fn requirements_from_bundle_metadata(
    bundle: &str,
    dependencies_yaml: Option<&str>,
    properties_yaml: Option<&str>,
    meter: &mut Meter,
) -> Result<Vec<Requirement>, DependencyError> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        type_: String,
        value: Value,
    }
    #[derive(Deserialize)]
    struct DependenciesFile {
        #[serde(default)]
        dependencies: Option<Vec<Entry>>,
    }
    #[derive(Deserialize)]
    struct PropertiesFile {
        #[serde(default)]
        properties: Option<Vec<Entry>>,
    }
    let file_error = |file: &str, message: String| DependencyError::File {
        bundle: bundle.to_string(),
        file: file.to_string(),
        message,
    };
    let mut budget = BundleBudget::default();
    let mut out = Vec::new();
    if let Some(text) = dependencies_yaml.filter(|t| !t.trim().is_empty()) {
        let file: DependenciesFile = serde_saphyr::from_str(text)
            .map_err(|e| file_error("metadata/dependencies.yaml", e.to_string()))?;
        for entry in file.dependencies.unwrap_or_default() {
            let (property, value) = match entry.type_.as_str() {
                "olm.package" => {
                    let fields = object(&entry.value, &["packageName", "version"])
                        .map_err(|m| invalid(bundle, "olm.package", m))?;
                    let mut value = Map::new();
                    value.insert("packageName".into(), fields[0].cloned().unwrap_or(Value::Null));
                    value.insert("versionRange".into(), fields[1].cloned().unwrap_or(Value::Null));
                    (PROPERTY_PACKAGE_REQUIRED, Value::Object(value))
                }
                "olm.gvk" => (PROPERTY_GVK_REQUIRED, entry.value),
                PROPERTY_CONSTRAINT => (PROPERTY_CONSTRAINT, entry.value),
                other => {
                    return Err(file_error(
                        "metadata/dependencies.yaml",
                        format!(
                            "dependency type {} is not supported (olm.package, olm.gvk and olm.constraint are)",
                            quote(other)
                        ),
                    ));
                }
            };
            let raw = serde_json::to_string(&value).expect("a JSON value serializes");
            out.push(requirement(bundle, property, &raw, &mut budget, meter)?);
        }
    }
    if let Some(text) = properties_yaml.filter(|t| !t.trim().is_empty()) {
        let file: PropertiesFile = serde_saphyr::from_str(text)
            .map_err(|e| file_error("metadata/properties.yaml", e.to_string()))?;
        for entry in file.properties.unwrap_or_default() {
            if is_requirement_type(&entry.type_) {
                let raw = serde_json::to_string(&entry.value).expect("a JSON value serializes");
                out.push(requirement(bundle, &entry.type_, &raw, &mut budget, meter)?);
            }
        }
    }
    Ok(out)
}

fn invalid(bundle: &str, property: &str, message: String) -> DependencyError {
    DependencyError::Invalid {
        bundle: bundle.to_string(),
        property: property.to_string(),
        message,
    }
}

/// Catalog text in a message: quoted as Go's `%q`, cut to [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    go_quote_cut(text, QUOTE_CHARS)
}

/// `field` of `text` is refused when longer than `limit` bytes.
fn check_length(field: &str, text: &str, limit: usize) -> Result<(), String> {
    if text.len() > limit {
        return Err(format!(
            "{field} {} is {} bytes, over the limit of {limit}",
            quote(text),
            text.len()
        ));
    }
    Ok(())
}

/// What one bundle's requirements have used so far of the limits that hold per bundle.
#[derive(Debug, Default)]
struct BundleBudget {
    requirements: usize,
    nodes: usize,
    cel_rules: usize,
}

impl BundleBudget {
    /// Takes one requirement of `nodes` nodes holding `cel_rules` CEL rules, or says which
    /// per-bundle limit it would pass.
    fn take(&mut self, nodes: usize, cel_rules: usize) -> Result<(), String> {
        if self.requirements == MAX_REQUIREMENTS {
            return Err(format!(
                "the bundle has more than the limit of {MAX_REQUIREMENTS} requirements"
            ));
        }
        if self.nodes + nodes > MAX_BUNDLE_NODES {
            return Err(format!(
                "the bundle's requirements have more than the limit of {MAX_BUNDLE_NODES} constraint nodes"
            ));
        }
        if self.cel_rules + cel_rules > MAX_CEL_RULES_PER_BUNDLE {
            return Err(format!(
                "the bundle's requirements have more than the limit of {MAX_CEL_RULES_PER_BUNDLE} CEL rules"
            ));
        }
        self.requirements += 1;
        self.nodes += nodes;
        self.cel_rules += cel_rules;
        Ok(())
    }
}

/// What reading a requirement's node costs beyond its bytes (its version range parsed, its
/// leaf built: a 250-leaf constraint reads at about 2.5 us a leaf), in bytes of text, charged
/// once the tree is read and within its limits.
const PARSE_NODE_BYTES: u64 = 32;

/// One requirement property's value (raw JSON text), counted against the bundle's `budget`;
/// reading it and compiling its CEL rules charged to `meter`.
fn requirement(
    bundle: &str,
    property: &str,
    raw: &str,
    budget: &mut BundleBudget,
    meter: &mut Meter,
) -> Result<Requirement, DependencyError> {
    let fail = |m: String| invalid(bundle, property, m);
    let exhausted = |exhausted| DependencyError::Exhausted {
        bundle: bundle.to_string(),
        property: property.to_string(),
        exhausted,
    };
    // Reading the text costs its bytes, whatever it holds.
    meter.charge(Work::Parse, raw.len() as u64).map_err(exhausted)?;
    let limit = if property == PROPERTY_CONSTRAINT {
        MAX_CONSTRAINT_BYTES
    } else {
        MAX_REQUIRED_BYTES
    };
    if raw.len() > limit {
        return Err(fail(format!(
            "the value is {} bytes, over the limit of {limit}",
            raw.len()
        )));
    }
    let value: Value = serde_json::from_str(raw).map_err(|e| fail(e.to_string()))?;
    match property {
        PROPERTY_PACKAGE_REQUIRED => {
            let constraint = package(&value, "versionRange").map_err(fail)?;
            budget.take(1, 0).map_err(fail)?;
            meter.charge(Work::Parse, PARSE_NODE_BYTES).map_err(exhausted)?;
            Ok(Requirement {
                property: property.to_string(),
                constraint,
                failure_message: None,
            })
        }
        PROPERTY_GVK_REQUIRED => {
            let gvk = gvk(&value).map_err(fail)?;
            budget.take(1, 0).map_err(fail)?;
            meter.charge(Work::Parse, PARSE_NODE_BYTES).map_err(exhausted)?;
            Ok(Requirement {
                property: property.to_string(),
                constraint: Constraint::Gvk(gvk),
                failure_message: None,
            })
        }
        _ => {
            let mut count = TreeCount::default();
            let (draft, failure_message) = constraint(&value, 1, &mut count).map_err(fail)?;
            // Every limit is checked before the first CEL rule is compiled.
            budget.take(count.nodes, count.cel_rules).map_err(fail)?;
            meter
                .charge(Work::Parse, (count.nodes as u64).saturating_mul(PARSE_NODE_BYTES))
                .map_err(exhausted)?;
            let constraint = draft.compile(meter).map_err(|e| match e {
                CompileError::Invalid(m) => fail(m),
                CompileError::Exhausted(e) => exhausted(e),
            })?;
            Ok(Requirement {
                property: property.to_string(),
                constraint,
                failure_message,
            })
        }
    }
}

/// The values of `fields` in a JSON object, keys matched case-insensitively (Go's decoder); any
/// other key is refused, as is a key given twice.
/// Borrowed: a tree's nodes are read where they are (cloned at each level, a constraint tree
/// nested 10 deep was copied 10 times over, 70% of `upgrades`' CPU on the fuzzer's deep case).
fn object<'v>(value: &'v Value, fields: &[&str]) -> Result<Vec<Option<&'v Value>>, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "expected an object with {}, got {}",
            fields.join(", "),
            kind(value)
        ));
    };
    let mut out = vec![None; fields.len()];
    for (key, v) in map {
        let Some(i) = fields.iter().position(|f| f.eq_ignore_ascii_case(key)) else {
            return Err(format!("unknown field {}", quote(key)));
        };
        if out[i].is_some() {
            return Err(format!("field {:?} is given twice", fields[i]));
        }
        out[i] = Some(v);
    }
    Ok(out)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn string(value: Option<&Value>, field: &str) -> Result<String, String> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{field} must be a string, got {}", kind(other))),
    }
}

fn package(value: &Value, range_field: &str) -> Result<Constraint, String> {
    let mut fields = object(value, &["packageName", range_field])?;
    let name = string(fields[0].take(), "packageName")?;
    let range_text = string(fields[1].take(), range_field)?;
    if name.is_empty() {
        return Err("packageName is empty".to_string());
    }
    check_length("packageName", &name, MAX_PACKAGE_NAME_BYTES)?;
    let range = SkipRange::parse(&range_text).map_err(|e| match e {
        // These name the range themselves, quoted and cut.
        VersionError::RangeTooLong { range, bytes, limit } => {
            format!("{range_field} {range} is {bytes} bytes, over the limit of {limit}")
        }
        VersionError::RangeTooManyTerms {
            range,
            what,
            count,
            limit,
        } => format!("{range_field} {range} has {count} {what}, over the limit of {limit}"),
        e => format!("{range_field} {}: {e}", quote(&range_text)),
    })?;
    Ok(Constraint::Package { package: name, range })
}

fn gvk(value: &Value) -> Result<Gvk, String> {
    let mut fields = object(value, &["group", "version", "kind"])?;
    let gvk = Gvk {
        group: string(fields[0].take(), "group")?,
        version: string(fields[1].take(), "version")?,
        kind: string(fields[2].take(), "kind")?,
    };
    if gvk.version.is_empty() || gvk.kind.is_empty() {
        return Err("an API needs a version and a kind".to_string());
    }
    check_length("group", &gvk.group, MAX_GROUP_BYTES)?;
    check_length("version", &gvk.version, MAX_API_VERSION_BYTES)?;
    check_length("kind", &gvk.kind, MAX_KIND_BYTES)?;
    Ok(gvk)
}

const CONSTRAINT_FIELDS: [&str; 8] = [
    "failureMessage",
    "package",
    "gvk",
    "cel",
    "all",
    "any",
    "not",
    "none",
];

/// The nodes and CEL rules of one constraint tree, counted while it is read.
#[derive(Debug, Default)]
struct TreeCount {
    nodes: usize,
    cel_rules: usize,
}

/// A constraint read and within its limits, its CEL rules not compiled yet.
enum Draft {
    /// A `package` or `gvk` leaf.
    Leaf(Constraint),
    /// A CEL rule's source.
    Cel(String),
    All(Vec<Draft>),
    Any(Vec<Draft>),
    Not(Vec<Draft>),
}

impl Draft {
    /// The constraint, its CEL rules compiled (charged to `meter`).
    fn compile(self, meter: &mut Meter) -> Result<Constraint, CompileError> {
        let mut all = |children: Vec<Draft>| {
            children
                .into_iter()
                .map(|c| c.compile(meter))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match self {
            Draft::Leaf(c) => c,
            Draft::Cel(rule) => {
                #[cfg(test)]
                tests::CEL_COMPILES.with(|n| n.set(n.get() + 1));
                Constraint::Cel(CelRule::compile_metered(&rule, meter)?)
            }
            Draft::All(children) => Constraint::All(all(children)?),
            Draft::Any(children) => Constraint::Any(all(children)?),
            Draft::Not(children) => Constraint::Not(all(children)?),
        })
    }
}

/// One constraint object at nesting `depth` (1 = top level), with its failure message; its nodes
/// and CEL rules are added to `count`, and reading stops at the first limit passed.
fn constraint(value: &Value, depth: usize, count: &mut TreeCount) -> Result<(Draft, Option<String>), String> {
    if depth > MAX_CONSTRAINT_DEPTH {
        return Err(format!(
            "constraints are nested deeper than {MAX_CONSTRAINT_DEPTH} levels"
        ));
    }
    count.nodes += 1;
    if count.nodes > MAX_CONSTRAINT_NODES {
        return Err(format!(
            "the constraint tree has more than the limit of {MAX_CONSTRAINT_NODES} nodes"
        ));
    }
    let mut f = object(value, &CONSTRAINT_FIELDS)?;
    let failure_message = match f[0].take() {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            if s.len() > MAX_FAILURE_MESSAGE_BYTES {
                return Err(format!(
                    "failureMessage is {} bytes, over the limit of {MAX_FAILURE_MESSAGE_BYTES}",
                    s.len()
                ));
            }
            Some(s.clone())
        }
        Some(other) => return Err(format!("failureMessage must be a string, got {}", kind(other))),
    };
    // `none` is the deprecated spelling of `not`, ignored when both are set.
    if f[6].as_ref().is_some_and(|v| !v.is_null()) {
        f[7] = None;
    }
    let set: Vec<usize> = (1..8)
        .filter(|&i| f[i].as_ref().is_some_and(|v| !v.is_null()))
        .collect();
    let [i] = set[..] else {
        return Err(if set.is_empty() {
            "a constraint must set one of package, gvk, cel, all, any, not".to_string()
        } else {
            let names: Vec<&str> = set.iter().map(|&i| CONSTRAINT_FIELDS[i]).collect();
            format!(
                "a constraint must set exactly one of package, gvk, cel, all, any, not; it sets {}",
                names.join(", ")
            )
        });
    };
    let v = f[i].take().expect("set");
    let c = match CONSTRAINT_FIELDS[i] {
        "package" => Draft::Leaf(package(v, "versionRange")?),
        "gvk" => Draft::Leaf(Constraint::Gvk(gvk(v)?)),
        "cel" => {
            let mut fields = object(v, &["rule"])?;
            let rule = string(fields[0].take(), "rule")?;
            count.cel_rules += 1;
            if count.cel_rules > MAX_CEL_RULES_PER_CONSTRAINT {
                return Err(format!(
                    "the constraint has more than the limit of {MAX_CEL_RULES_PER_CONSTRAINT} CEL rules"
                ));
            }
            Draft::Cel(rule)
        }
        word => {
            let mut fields = object(v, &["constraints"])?;
            let children: &[Value] = match fields[0].take() {
                None | Some(Value::Null) => &[],
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(format!("{word}.constraints must be a list, got {}", kind(other)));
                }
            };
            let children = children
                .iter()
                .map(|c| constraint(c, depth + 1, count).map(|(c, _)| c))
                .collect::<Result<Vec<_>, _>>()?;
            match word {
                "all" => Draft::All(children),
                "any" => Draft::Any(children),
                _ => Draft::Not(children),
            }
        }
    };
    Ok((c, failure_message))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::{catalog::PropertyValue, dependencies::BundleFacts};

    thread_local! {
        /// CEL rules compiled on this thread (each test runs on its own thread).
        pub(super) static CEL_COMPILES: Cell<usize> = const { Cell::new(0) };
    }

    fn prop(t: &str, v: &str) -> Property {
        Property::new(t, PropertyValue::from_json(v).unwrap())
    }

    fn bundle_props(
        package: &str,
        version: &str,
        gvks: &[(&str, &str, &str)],
        extra: &[Property],
    ) -> Vec<Property> {
        let mut out = vec![prop(
            "olm.package",
            &format!(r#"{{"packageName":"{package}","version":"{version}"}}"#),
        )];
        for (g, v, k) in gvks {
            out.push(prop(
                "olm.gvk",
                &format!(r#"{{"group":"{g}","version":"{v}","kind":"{k}"}}"#),
            ));
        }
        out.extend(extra.iter().cloned());
        out
    }

    fn one(t: &str, v: &str) -> Requirement {
        let mut r = requirements_of("x.v1", &[prop(t, v)], &mut crate::meter::Meter::unlimited()).unwrap();
        assert_eq!(r.len(), 1);
        r.pop().unwrap()
    }

    fn err(t: &str, v: &str) -> String {
        requirements_of("x.v1", &[prop(t, v)], &mut crate::meter::Meter::unlimited())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn package_and_gvk_requirements() {
        let blue1 = bundle_props("blue", "1.2.0", &[("blue.io", "v1", "Blue")], &[]);
        let blue0 = bundle_props("blue", "0.9.0", &[], &[]);
        let r = one(
            "olm.package.required",
            r#"{"packageName":"blue","versionRange":">=1.0.0"}"#,
        );
        assert!(r.satisfied_by(&BundleFacts::new("blue.v1.2.0", "blue", &blue1)));
        assert!(!r.satisfied_by(&BundleFacts::new("blue.v0.9.0", "blue", &blue0)));
        assert_eq!(r.to_string(), "package blue >=1.0.0");
        let r = one(
            "olm.gvk.required",
            r#"{"group":"blue.io","version":"v1","kind":"Blue"}"#,
        );
        assert!(r.satisfied_by(&BundleFacts::new("b", "blue", &blue1)));
        assert!(!r.satisfied_by(&BundleFacts::new("b", "blue", &blue0)));
        assert_eq!(r.to_string(), "API Blue (blue.io/v1)");
    }

    #[test]
    fn compound_constraints_are_one_predicate_over_one_bundle() {
        let both = bundle_props("blue", "1.0.0", &[("green.io", "v1", "Green")], &[]);
        let blue_only = bundle_props("blue", "1.0.0", &[("green.io", "v1alpha1", "Green")], &[]);
        let green_only = bundle_props("green", "1.0.0", &[("green.io", "v1", "Green")], &[]);
        let all = one(
            "olm.constraint",
            r#"{"failureMessage":"blue with Green v1","all":{"constraints":[{"package":{"packageName":"blue","versionRange":">=1.0.0"}},{"gvk":{"group":"green.io","version":"v1","kind":"Green"}}]}}"#,
        );
        assert!(all.satisfied_by(&BundleFacts::new("a", "blue", &both)));
        assert!(!all.satisfied_by(&BundleFacts::new("b", "blue", &blue_only)));
        assert!(!all.satisfied_by(&BundleFacts::new("c", "green", &green_only)));
        assert_eq!(all.failure_message.as_deref(), Some("blue with Green v1"));
        // `not` inside `all`: blue >=1.0.0 that does not provide Green/v1alpha1.
        let not_in_all = one(
            "olm.constraint",
            r#"{"all":{"constraints":[{"package":{"packageName":"blue","versionRange":">=1.0.0"}},{"not":{"constraints":[{"gvk":{"group":"green.io","version":"v1alpha1","kind":"Green"}}]}}]}}"#,
        );
        assert!(not_in_all.satisfied_by(&BundleFacts::new("a", "blue", &both)));
        assert!(!not_in_all.satisfied_by(&BundleFacts::new("b", "blue", &blue_only)));
        // Nested `any` of `all`.
        let any_of_all = one(
            "olm.constraint",
            r#"{"any":{"constraints":[{"all":{"constraints":[{"package":{"packageName":"blue","versionRange":">=2.0.0"}}]}},{"all":{"constraints":[{"package":{"packageName":"green","versionRange":"<2.0.0"}},{"gvk":{"group":"green.io","version":"v1","kind":"Green"}}]}}]}}"#,
        );
        assert!(!any_of_all.satisfied_by(&BundleFacts::new("a", "blue", &both)));
        assert!(any_of_all.satisfied_by(&BundleFacts::new("c", "green", &green_only)));
        // `none` is `not`'s old spelling; ignored when `not` is set too.
        let none = one(
            "olm.constraint",
            r#"{"none":{"constraints":[{"package":{"packageName":"blue","versionRange":">=0.0.0"}}]}}"#,
        );
        assert!(!none.satisfied_by(&BundleFacts::new("a", "blue", &both)));
        assert!(none.satisfied_by(&BundleFacts::new("c", "green", &green_only)));
        let both_spellings = one(
            "olm.constraint",
            r#"{"not":{"constraints":[]},"none":{"constraints":[{"package":{"packageName":"blue","versionRange":">=0.0.0"}}]}}"#,
        );
        assert!(both_spellings.satisfied_by(&BundleFacts::new("a", "blue", &both)));
        assert!(
            matches!(one("olm.constraint", r#"{"all":{"constraints":[]}}"#).constraint, Constraint::All(ref c) if c.is_empty())
        );
    }

    #[test]
    fn cel_constraints_see_properties_and_semver_compare() {
        let certified = bundle_props("blue", "1.1.0", &[], &[prop("certified", r#""true""#)]);
        let plain = bundle_props("blue", "1.0.5", &[], &[]);
        let r = one(
            "olm.constraint",
            r#"{"cel":{"rule":"properties.exists(p, p.type == \"certified\")"}}"#,
        );
        assert!(r.satisfied_by(&BundleFacts::new("a", "blue", &certified)));
        assert!(!r.satisfied_by(&BundleFacts::new("b", "blue", &plain)));
        let r = one(
            "olm.constraint",
            r#"{"cel":{"rule":"properties.exists(p, p.type == \"olm.package\" && semver_compare(p.value.version, \"1.1.0\") >= 0)"}}"#,
        );
        assert!(r.satisfied_by(&BundleFacts::new("a", "blue", &certified)));
        assert!(!r.satisfied_by(&BundleFacts::new("b", "blue", &plain)));
    }

    #[test]
    fn bad_input_is_an_error_of_the_bundle() {
        assert_eq!(
            err(
                "olm.package.required",
                r#"{"packageName":"blue","versionRange":">=1.0.0","extra":1}"#
            ),
            r#"bundle "x.v1" has an invalid olm.package.required dependency: unknown field "extra""#
        );
        assert!(
            err(
                "olm.package.required",
                r#"{"packageName":"blue","versionRange":"nope"}"#
            )
            .contains("versionRange \"nope\"")
        );
        assert!(
            err("olm.gvk.required", r#"{"group":"g","kind":"K"}"#).contains("needs a version and a kind")
        );
        assert!(err("olm.constraint", r#"{"failureMessage":"x"}"#).contains("must set one of"));
        assert!(
            err(
                "olm.constraint",
                r#"{"gvk":{"group":"g","version":"v1","kind":"K"},"cel":{"rule":"true"}}"#
            )
            .contains("it sets gvk, cel")
        );
        assert!(
            err("olm.constraint", r#"{"cel":{"rule":"properties.exists(p, "}}"#).contains("does not compile")
        );
        assert!(
            err("olm.constraint", r#"{"cel":{"rule":"properties.size()"}}"#).contains("must be of type bool")
        );
        assert!(
            err("olm.constraint", r#"{"cel":{"rule":"nope == 1"}}"#)
                .contains("undeclared reference to 'nope'")
        );
        // Keys are matched as Go matches them: case-insensitively.
        one(
            "olm.constraint",
            r#"{"Package":{"PackageName":"blue","VersionRange":">=1.0.0"}}"#,
        );
    }

    #[test]
    fn size_and_depth_are_bounded_before_evaluation() {
        let mut deep = r#"{"package":{"packageName":"blue","versionRange":">=1.0.0"}}"#.to_string();
        for _ in 0..(MAX_CONSTRAINT_DEPTH - 1) {
            deep = format!(r#"{{"all":{{"constraints":[{deep}]}}}}"#);
        }
        one("olm.constraint", &deep);
        let deeper = format!(r#"{{"any":{{"constraints":[{deep}]}}}}"#);
        assert!(err("olm.constraint", &deeper).contains("nested deeper than 10 levels"));
        let big = format!(
            r#"{{"failureMessage":"{}","package":{{"packageName":"blue","versionRange":">=1.0.0"}}}}"#,
            "x".repeat(MAX_CONSTRAINT_BYTES)
        );
        assert_eq!(
            err("olm.constraint", &big),
            format!(
                r#"bundle "x.v1" has an invalid olm.constraint dependency: the value is {} bytes, over the limit of 131072"#,
                big.len()
            )
        );
    }

    fn gvk_leaf(i: usize) -> String {
        format!(r#"{{"gvk":{{"group":"g{i}.io","version":"v1","kind":"K"}}}}"#)
    }

    fn any_of(children: &[String]) -> String {
        format!(r#"{{"any":{{"constraints":[{}]}}}}"#, children.join(","))
    }

    fn cel_leaf(i: usize) -> String {
        format!(r#"{{"cel":{{"rule":"properties.size() > {i}"}}}}"#)
    }

    #[test]
    fn every_requirement_property_is_bounded_in_bytes() {
        let long_range = format!(">=1.0.0 {}", "<2.0.0 ".repeat(700));
        let package = format!(r#"{{"packageName":"blue","versionRange":"{long_range}"}}"#);
        assert_eq!(
            err("olm.package.required", &package),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: the value is {} bytes, over the limit of 4096"#,
                package.len()
            )
        );
        let gvk = format!(r#"{{"group":"{}","version":"v1","kind":"K"}}"#, "g".repeat(5000));
        assert_eq!(
            err("olm.gvk.required", &gvk),
            format!(
                r#"bundle "x.v1" has an invalid olm.gvk.required dependency: the value is {} bytes, over the limit of 4096"#,
                gvk.len()
            )
        );
        // A dependencies.yaml entry is held to the same limit once converted.
        let deps = format!(
            "dependencies:\n- type: olm.gvk\n  value: {{group: {}, version: v1, kind: K}}\n",
            "g".repeat(5000)
        );
        assert_eq!(
            requirements_from_bundle_metadata(
                "x.v1",
                Some(&deps),
                None,
                &mut crate::meter::Meter::unlimited()
            )
            .unwrap_err()
            .to_string(),
            format!(
                r#"bundle "x.v1" has an invalid olm.gvk.required dependency: the value is {} bytes, over the limit of 4096"#,
                gvk.len()
            )
        );
    }

    #[test]
    fn names_and_api_fields_have_kubernetes_lengths() {
        let name = "p".repeat(MAX_PACKAGE_NAME_BYTES);
        one(
            "olm.package.required",
            &format!(r#"{{"packageName":"{name}","versionRange":">=1.0.0"}}"#),
        );
        let long = format!("{name}p");
        let shown = format!(r#""{}"... (126 more bytes)"#, "p".repeat(128));
        assert_eq!(
            err(
                "olm.package.required",
                &format!(r#"{{"packageName":"{long}","versionRange":">=1.0.0"}}"#)
            ),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: packageName {shown} is 254 bytes, over the limit of 253"#
            )
        );
        // The same inside a constraint tree.
        assert_eq!(
            err(
                "olm.constraint",
                &format!(r#"{{"package":{{"packageName":"{long}","versionRange":">=1.0.0"}}}}"#)
            ),
            format!(
                r#"bundle "x.v1" has an invalid olm.constraint dependency: packageName {shown} is 254 bytes, over the limit of 253"#
            )
        );
        let cases = [
            ("group", "g".repeat(254), "v1".to_string(), "K".to_string(), 253),
            ("version", "g".to_string(), "v".repeat(64), "K".to_string(), 63),
            ("kind", "g".to_string(), "v1".to_string(), "K".repeat(64), 63),
        ];
        for (field, group, version, kind, limit) in cases {
            let text = format!(r#"{{"group":"{group}","version":"{version}","kind":"{kind}"}}"#);
            let value = match field {
                "group" => &group,
                "version" => &version,
                _ => &kind,
            };
            assert_eq!(
                err("olm.gvk.required", &text),
                format!(
                    r#"bundle "x.v1" has an invalid olm.gvk.required dependency: {field} {} is {} bytes, over the limit of {limit}"#,
                    go_quote_cut(value, QUOTE_CHARS),
                    limit + 1
                )
            );
        }
        let at_limits = format!(
            r#"{{"group":"{}","version":"{}","kind":"{}"}}"#,
            "g".repeat(253),
            "v".repeat(63),
            "K".repeat(63)
        );
        one("olm.gvk.required", &at_limits);
    }

    #[test]
    fn a_failure_message_is_bounded() {
        let message = "m".repeat(MAX_FAILURE_MESSAGE_BYTES + 1);
        assert_eq!(
            err(
                "olm.constraint",
                &format!(
                    r#"{{"failureMessage":"{message}","gvk":{{"group":"g","version":"v1","kind":"K"}}}}"#
                )
            ),
            r#"bundle "x.v1" has an invalid olm.constraint dependency: failureMessage is 1025 bytes, over the limit of 1024"#
        );
    }

    #[test]
    fn a_constraint_tree_is_bounded_in_nodes() {
        // The `any` itself is a node: 255 children fill the tree exactly.
        let leaves: Vec<String> = (0..MAX_CONSTRAINT_NODES).map(gvk_leaf).collect();
        one("olm.constraint", &any_of(&leaves[..MAX_CONSTRAINT_NODES - 1]));
        assert_eq!(
            err("olm.constraint", &any_of(&leaves)),
            r#"bundle "x.v1" has an invalid olm.constraint dependency: the constraint tree has more than the limit of 256 nodes"#
        );
    }

    #[test]
    fn four_thousand_cel_rules_in_one_tree_are_refused_before_any_is_compiled() {
        let rules: Vec<String> = (0..4000)
            .map(|_| r#"{"cel":{"rule":"true"}}"#.to_string())
            .collect();
        let tree = any_of(&rules);
        assert!(tree.len() < MAX_CONSTRAINT_BYTES, "{}", tree.len());
        CEL_COMPILES.with(|n| n.set(0));
        assert_eq!(
            err("olm.constraint", &tree),
            r#"bundle "x.v1" has an invalid olm.constraint dependency: the constraint has more than the limit of 16 CEL rules"#
        );
        assert_eq!(CEL_COMPILES.with(Cell::get), 0);
        // At the limit, every rule is compiled once.
        let rules: Vec<String> = (0..MAX_CEL_RULES_PER_CONSTRAINT).map(cel_leaf).collect();
        one("olm.constraint", &any_of(&rules));
        assert_eq!(CEL_COMPILES.with(Cell::get), MAX_CEL_RULES_PER_CONSTRAINT);
    }

    #[test]
    fn a_bundle_is_bounded_in_cel_rules_nodes_and_requirements() {
        let full: Vec<String> = (0..MAX_CEL_RULES_PER_CONSTRAINT).map(cel_leaf).collect();
        let full = prop("olm.constraint", &any_of(&full));
        let one_more = prop("olm.constraint", &cel_leaf(99));
        CEL_COMPILES.with(|n| n.set(0));
        let e = requirements_of(
            "x.v1",
            &[full.clone(), full.clone(), one_more],
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"bundle "x.v1" has an invalid olm.constraint dependency: the bundle's requirements have more than the limit of 32 CEL rules"#
        );
        // Only the rules within the bundle's limit were compiled.
        assert_eq!(CEL_COMPILES.with(Cell::get), MAX_CEL_RULES_PER_BUNDLE);

        let leaves: Vec<String> = (0..MAX_CONSTRAINT_NODES - 1).map(gvk_leaf).collect();
        let tree = prop("olm.constraint", &any_of(&leaves));
        let four = vec![tree.clone(); MAX_BUNDLE_NODES / MAX_CONSTRAINT_NODES];
        assert_eq!(
            requirements_of("x.v1", &four, &mut crate::meter::Meter::unlimited())
                .unwrap()
                .len(),
            4
        );
        let mut five = four.clone();
        five.push(prop(
            "olm.gvk.required",
            r#"{"group":"g","version":"v1","kind":"K"}"#,
        ));
        assert_eq!(
            requirements_of("x.v1", &five, &mut crate::meter::Meter::unlimited())
                .unwrap_err()
                .to_string(),
            r#"bundle "x.v1" has an invalid olm.gvk.required dependency: the bundle's requirements have more than the limit of 1024 constraint nodes"#
        );

        let gvk = prop("olm.gvk.required", r#"{"group":"g","version":"v1","kind":"K"}"#);
        let mut many = vec![gvk; MAX_REQUIREMENTS];
        assert_eq!(
            requirements_of("x.v1", &many, &mut crate::meter::Meter::unlimited())
                .unwrap()
                .len(),
            MAX_REQUIREMENTS
        );
        many.push(prop(
            "olm.package.required",
            r#"{"packageName":"blue","versionRange":">=1.0.0"}"#,
        ));
        assert_eq!(
            requirements_of("x.v1", &many, &mut crate::meter::Meter::unlimited())
                .unwrap_err()
                .to_string(),
            r#"bundle "x.v1" has an invalid olm.package.required dependency: the bundle has more than the limit of 256 requirements"#
        );
    }

    #[test]
    fn version_ranges_are_bounded_and_named_cut() {
        // The issue's range: 100,000 `||` terms, refused on its length before any term is read.
        let range = vec!["1.0.0"; 100_000].join(" || ");
        let text = format!(r#"{{"packageName":"blue","versionRange":"{range}"}}"#);
        let e = requirements_from_bundle_metadata(
            "x.v1",
            None,
            Some(&format!(
                "properties:\n- type: olm.package.required\n  value: {text}\n"
            )),
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: the value is {} bytes, over the limit of 4096"#,
                text.len()
            )
        );
        // Within the property's bytes, the range's own limits speak, naming the range cut.
        let range = format!(">=1.0.0 {}", "<2.0.0 ".repeat(150));
        let text = format!(r#"{{"packageName":"blue","versionRange":"{range}"}}"#);
        assert_eq!(
            err("olm.package.required", &text),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: versionRange {} is 1058 bytes, over the limit of 1024"#,
                go_quote_cut(&range, QUOTE_CHARS)
            )
        );
        let range = vec!["1.0.0"; 33].join(" || ");
        assert_eq!(
            err(
                "olm.package.required",
                &format!(r#"{{"packageName":"blue","versionRange":"{range}"}}"#)
            ),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: versionRange {} has 33 alternatives, over the limit of 32"#,
                go_quote_cut(&range, QUOTE_CHARS)
            )
        );
        let range = format!(">=1.0.0 {}", "<2.0.0 ".repeat(64));
        assert_eq!(
            err(
                "olm.constraint",
                &format!(r#"{{"package":{{"packageName":"blue","versionRange":"{range}"}}}}"#)
            ),
            format!(
                r#"bundle "x.v1" has an invalid olm.constraint dependency: versionRange {} has 65 comparators, over the limit of 64"#,
                go_quote_cut(&range, QUOTE_CHARS)
            )
        );
    }

    #[test]
    fn a_wildcard_past_the_largest_version_number_is_refused_not_wrapped() {
        assert_eq!(
            err(
                "olm.package.required",
                r#"{"packageName":"blue","versionRange":">18446744073709551615.x"}"#
            ),
            r#"bundle "x.v1" has an invalid olm.package.required dependency: versionRange ">18446744073709551615.x": Could not parse Range ">18446744073709551615.x": the wildcard needs a version number above 18446744073709551615, the largest there is"#
        );
        // One below still bumps: only the largest major matches.
        let r = one(
            "olm.package.required",
            r#"{"packageName":"blue","versionRange":">18446744073709551614.x"}"#,
        );
        let Constraint::Package { range, .. } = &r.constraint else {
            panic!("a package requirement")
        };
        assert!(!range.contains(&semver::Version::new(0, 0, 0)));
        assert!(!range.contains(&semver::Version::new(18446744073709551614, 9, 9)));
        assert!(range.contains(&semver::Version::new(18446744073709551615, 0, 0)));
    }

    #[test]
    fn a_ten_megabyte_key_is_quoted_cut() {
        let key = "k".repeat(10 << 20);
        // YAML allows a key this long only in the explicit `? key` form.
        let deps = format!(
            "dependencies:\n- type: olm.package\n  value:\n    packageName: blue\n    ? {key}\n    : 1\n"
        );
        let e = requirements_from_bundle_metadata(
            "x.v1",
            Some(&deps),
            None,
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            format!(
                r#"bundle "x.v1" has an invalid olm.package dependency: unknown field "{}"... ({} more bytes)"#,
                "k".repeat(QUOTE_CHARS),
                (10 << 20) - QUOTE_CHARS
            )
        );
        let deps = format!("dependencies:\n- type: {key}\n  value: {{}}\n");
        let e = requirements_from_bundle_metadata(
            "x.v1",
            Some(&deps),
            None,
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.len() < 400, "{}", e.len());
        assert!(e.ends_with(&format!(
            r#""... ({} more bytes) is not supported (olm.package, olm.gvk and olm.constraint are)"#,
            (10 << 20) - QUOTE_CHARS
        )));
        // Within a property's bytes, a long key is cut too.
        let key = "k".repeat(3000);
        assert_eq!(
            err(
                "olm.package.required",
                &format!(r#"{{"packageName":"blue","{key}":1}}"#)
            ),
            format!(
                r#"bundle "x.v1" has an invalid olm.package.required dependency: unknown field "{}"... (2872 more bytes)"#,
                "k".repeat(QUOTE_CHARS)
            )
        );
    }

    /// Real data (needs ../shared/catalogs): every requirement property of the shared catalogs is
    /// read within the limits.
    #[test]
    fn real_catalogs_requirement_properties_all_parse() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/catalogs");
        let mut files = Vec::new();
        for catalog in
            std::fs::read_dir(root).unwrap_or_else(|e| panic!("real catalogs {root} must exist: {e}"))
        {
            let catalog = catalog.expect("a catalog entry").path();
            if catalog.is_dir() {
                for package in std::fs::read_dir(&catalog).expect("a catalog directory") {
                    files.push(package.expect("a package entry").path().join("catalog.yaml"));
                }
            }
        }
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            if !["olm.package.required", "olm.gvk.required", "olm.constraint"]
                .iter()
                .any(|t| text.contains(t))
            {
                continue;
            }
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("catalog YAML parses");
            for doc in docs.iter().filter(|d| d["schema"] == "olm.bundle") {
                let name = doc["name"].as_str().expect("bundle name");
                let properties: Vec<Property> = doc["properties"]
                    .as_array()
                    .expect("bundle properties")
                    .iter()
                    .map(|p| {
                        let value = PropertyValue::from_json(&p["value"].to_string()).expect("JSON");
                        Property::new(p["type"].as_str().expect("a type"), value)
                    })
                    .collect();
                let requirements = requirements_of(name, &properties, &mut crate::meter::Meter::unlimited())
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                for r in requirements {
                    *counts.entry(r.property).or_default() += 1;
                }
            }
        }
        let counts: Vec<(&str, usize)> = counts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(counts, [("olm.gvk.required", 106), ("olm.package.required", 29)]);
    }

    #[test]
    fn bundle_metadata_files_are_read_as_opm_converts_them() {
        let deps = "dependencies:\n- type: olm.package\n  value:\n    packageName: blue\n    version: '>=1.0.0'\n- type: olm.gvk\n  value:\n    group: green.io\n    kind: Green\n    version: v1\n- type: olm.constraint\n  value:\n    failureMessage: need certified\n    cel:\n      rule: 'properties.exists(p, p.type == \"certified\")'\n";
        let props = "properties:\n- type: olm.maxOpenShiftVersion\n  value: '4.18'\n- type: olm.gvk.required\n  value: {group: red.io, version: v1, kind: Red}\n";
        let r = requirements_from_bundle_metadata(
            "x.v1",
            Some(deps),
            Some(props),
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap();
        let shown: Vec<String> = r.iter().map(|r| format!("{}: {r}", r.property)).collect();
        assert_eq!(
            shown,
            [
                "olm.package.required: package blue >=1.0.0",
                "olm.gvk.required: API Green (green.io/v1)",
                "olm.constraint: a bundle matching the CEL rule \"properties.exists(p, p.type == \\\"certified\\\")\"",
                "olm.gvk.required: API Red (red.io/v1)",
            ]
        );
        let e = requirements_from_bundle_metadata(
            "x.v1",
            Some("dependencies:\n- type: olm.label\n  value: {label: x}\n"),
            None,
            &mut crate::meter::Meter::unlimited(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains(r#"dependency type "olm.label" is not supported"#),
            "{e}"
        );
        assert!(
            requirements_from_bundle_metadata(
                "x.v1",
                Some("dependencies: [\n"),
                None,
                &mut crate::meter::Meter::unlimited()
            )
            .is_err()
        );
    }

    #[test]
    fn unsatisfied_names_each_requirement_and_served_apis_count_for_api_requirements() {
        let reqs = requirements_of(
            "x.v1",
            &[
                prop("olm.package.required", r#"{"packageName":"blue","versionRange":">=1.0.0"}"#),
                prop("olm.gvk.required", r#"{"group":"green.io","version":"v1","kind":"Green"}"#),
                prop(
                    "olm.constraint",
                    r#"{"failureMessage":"Red v1 is needed for reports","gvk":{"group":"red.io","version":"v1","kind":"Red"}}"#,
                ),
            ], &mut crate::meter::Meter::unlimited())
        .unwrap();
        let blue = bundle_props("blue", "1.0.0", &[], &[]);
        let installed = [BundleFacts::new("blue.v1.0.0", "blue", &blue)];
        let green = Gvk {
            group: "green.io".into(),
            version: "v1".into(),
            kind: "Green".into(),
        };
        let mut budget = crate::meter::Meter::new(crate::dependencies::CHECK_WORK_UNITS);
        let missing =
            crate::dependencies::unsatisfied(&reqs, &installed, std::slice::from_ref(&green), &mut budget)
                .unwrap();
        let reasons: Vec<String> = missing.iter().map(|u| u.reason()).collect();
        assert_eq!(reasons, ["Red v1 is needed for reports"]);
        let missing = crate::dependencies::unsatisfied(&reqs, &[], &[], &mut budget).unwrap();
        let shown: Vec<String> = missing.iter().map(|u| u.to_string()).collect();
        assert_eq!(
            shown,
            [
                "requires package blue >=1.0.0",
                "requires API Green (green.io/v1)",
                "Red v1 is needed for reports (requires API Red (red.io/v1))",
            ]
        );
        // A served API never satisfies a package requirement.
        let served_blue_api = Gvk {
            group: "blue.io".into(),
            version: "v1".into(),
            kind: "Blue".into(),
        };
        let mut budget = crate::meter::Meter::unlimited();
        assert!(
            !reqs[0]
                .satisfied_by_served_api_within(&served_blue_api, &mut budget)
                .unwrap()
        );
        assert!(has_dependencies(&[prop("olm.gvk.required", "{}")]));
        assert!(!has_dependencies(&blue));
    }
}
