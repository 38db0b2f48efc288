//! CRD upgrade safety: is replacing an installed CustomResourceDefinition with a new one safe for the
//! custom resources already stored and for the clients that use them?
//!
//! The rules are upstream's (operator-controller `rukpak/preflights/crdupgradesafety`, built on
//! sigs.k8s.io/crdify with its default registry and operator-controller's configuration):
//!
//! - CRD-wide: `existingFieldRemoval`, `scope`, `storedVersionRemoval`.
//! - Per property, for every version present in both CRDs ("same version") and between every pair
//!   of versions served by the new CRD ("served versions", skipped when the new CRD has a `Webhook`
//!   conversion strategy, and reporting only issues the installed CRD did not already have):
//!   `default`, `enum` (adding values allowed), `maximum`, `maxItems`, `maxLength`,
//!   `maxProperties`, `minimum`, `minItems`, `minLength`, `minProperties`, `required`, `type`,
//!   `pattern`, `nullable`; `description` changes are accepted; any other change to a property is
//!   `unhandled` and refused (fail closed).
//!
//! Messages follow upstream's format: `validating upgrade for CRD "<name>": ` followed by the
//! failures joined with newlines, each `<validation>: <message>` (CRD-wide) or
//! `<version>: <property path>: <validation>: <message>` (property; the version is `v1` for a
//! same-version comparison, `v1 -> v2` for a served-version pair).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::{Map, Value};

use crate::go_format::{go_float, go_quote, go_string_list};

/// Why replacing one installed CRD with a new one is unsafe: every failed check, in upstream's
/// wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("validating upgrade for CRD {}: {}", go_quote(.crd), .failures.join("\n"))]
pub struct CrdUpgradeError {
    /// The CRD's name, e.g. `widgets.example.com`.
    pub crd: String,
    /// One line per failed check, e.g. `v1: ^.spec.size: type: type changed : "string" -> "integer"`.
    pub failures: Vec<String>,
}

/// Checks that `new` can safely replace the installed `old` CRD (same name), with upstream's
/// rules. Returns every failure at once.
pub fn check_crd_upgrade(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Result<(), CrdUpgradeError> {
    let mut failures = Vec::new();
    for (validation, message) in crd_wide_failures(old, new) {
        failures.push(format!("{validation}: {message}"));
    }
    for issue in same_version_issues(old, new) {
        failures.push(issue.to_string());
    }
    for issue in served_version_issues(old, new) {
        failures.push(issue.to_string());
    }
    if failures.is_empty() {
        Ok(())
    } else {
        let crd = new.metadata.name.clone().unwrap_or_default();
        Err(CrdUpgradeError { crd, failures })
    }
}

/// One property-level failure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PropertyIssue {
    /// `v1` (same version) or `v1 -> v2` (served pair).
    version: String,
    /// `^.spec.foo`.
    property: String,
    /// Position of the validation in [`VALIDATIONS`] (unhandled last), for a stable order.
    validation: usize,
    message: String,
}

impl std::fmt::Display for PropertyIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = VALIDATIONS.get(self.validation).copied().unwrap_or(UNHANDLED);
        write!(
            f,
            "{}: {}: {}: {}",
            self.version, self.property, name, self.message
        )
    }
}

// ---------------------------------------------------------------------------------------------
// CRD-wide validations

fn crd_wide_failures(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<(&'static str, String)> {
    let mut failures = Vec::new();
    let crd_name = new.metadata.name.as_deref().unwrap_or_default();

    // existingFieldRemoval: every property path of a version must survive in that version.
    for new_version in &new.spec.versions {
        let Some(old_version) = version_named(old, &new_version.name) else {
            continue;
        };
        let old_paths: BTreeSet<String> = flatten_version(old_version).into_keys().collect();
        let new_paths: BTreeSet<String> = flatten_version(new_version).into_keys().collect();
        for removed in old_paths.difference(&new_paths) {
            failures.push((
                "existingFieldRemoval",
                format!(
                    "crd/{crd_name} version/{} field/{removed} may not be removed",
                    new_version.name
                ),
            ));
        }
    }

    if old.spec.scope != new.spec.scope {
        failures.push((
            "scope",
            format!(
                "scope changed from {} to {}",
                go_quote(&old.spec.scope),
                go_quote(&new.spec.scope)
            ),
        ));
    }

    // storedVersionRemoval: versions with objects in etcd must stay in the CRD.
    let new_versions: BTreeSet<&str> = new.spec.versions.iter().map(|v| v.name.as_str()).collect();
    let stored = old
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.as_deref())
        .unwrap_or_default();
    let removed: Vec<String> = stored
        .iter()
        .filter(|v| !new_versions.contains(v.as_str()))
        .cloned()
        .collect();
    if !removed.is_empty() {
        failures.push((
            "storedVersionRemoval",
            format!("stored versions {} removed", go_string_list(&removed)),
        ));
    }
    failures
}

fn version_named<'a>(
    crd: &'a CustomResourceDefinition,
    name: &str,
) -> Option<&'a CustomResourceDefinitionVersion> {
    crd.spec.versions.iter().find(|v| v.name == name)
}

// ---------------------------------------------------------------------------------------------
// Version comparisons

fn same_version_issues(old: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<PropertyIssue> {
    let mut issues = Vec::new();
    for old_version in &old.spec.versions {
        // A removed version is storedVersionRemoval's business.
        let Some(new_version) = version_named(new, &old_version.name) else {
            continue;
        };
        issues.extend(compare_versions(&old_version.name, old_version, new_version));
    }
    issues
}

fn served_version_issues(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<PropertyIssue> {
    // Conversion policy "Ignore": a conversion webhook is trusted to translate between versions.
    let webhook = new
        .spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook");
    if webhook {
        return Vec::new();
    }
    // Issues the installed CRD already had between the same pair are not the upgrade's fault.
    let known: BTreeSet<(String, String, usize, String)> = served_pair_issues(old)
        .into_iter()
        .map(|i| (i.version, i.property, i.validation, i.message))
        .collect();
    served_pair_issues(new)
        .into_iter()
        .filter(|i| {
            !known.contains(&(
                i.version.clone(),
                i.property.clone(),
                i.validation,
                i.message.clone(),
            ))
        })
        .collect()
}

fn served_pair_issues(crd: &CustomResourceDefinition) -> Vec<PropertyIssue> {
    let mut served: Vec<&CustomResourceDefinitionVersion> =
        crd.spec.versions.iter().filter(|v| v.served).collect();
    served.sort_by(|a, b| compare_kube_aware_versions(&a.name, &b.name));
    let mut issues = Vec::new();
    for (i, older) in served.iter().enumerate() {
        for newer in &served[i + 1..] {
            let pair = format!("{} -> {}", older.name, newer.name);
            issues.extend(compare_versions(&pair, older, newer));
        }
    }
    issues
}

/// Orders Kubernetes version names as apimachinery's `CompareKubeAwareVersionStrings` does, so that
/// sorting ascending gives: non-kube names, then alpha < beta < GA, then by major and minor.
pub(crate) fn compare_kube_aware_versions(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (parse_kube_version(a), parse_kube_version(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((a_major, a_stage, a_minor)), Some((b_major, b_stage, b_minor))) => a_stage
            .cmp(&b_stage)
            .then(a_major.cmp(&b_major))
            .then(a_minor.cmp(&b_minor)),
    }
}

/// `v2beta1` -> (major 2, stage 1 (alpha 0, beta 1, GA 2), minor 1).
fn parse_kube_version(name: &str) -> Option<(u64, u8, u64)> {
    let rest = name.strip_prefix('v')?;
    let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major: u64 = rest[..digits_end].parse().ok()?;
    let rest = &rest[digits_end..];
    if rest.is_empty() {
        return Some((major, 2, 0));
    }
    let (stage, minor) = if let Some(m) = rest.strip_prefix("alpha") {
        (0, m)
    } else if let Some(m) = rest.strip_prefix("beta") {
        (1, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((major, stage, minor.parse().ok()?))
}

fn compare_versions(
    label: &str,
    old: &CustomResourceDefinitionVersion,
    new: &CustomResourceDefinitionVersion,
) -> Vec<PropertyIssue> {
    let old_flat = flatten_version(old);
    let new_flat = flatten_version(new);
    let empty = Map::new();
    let mut issues = Vec::new();
    // Properties only in the new version are additions (their parent's `required` catches the
    // unsafe kind); properties only in the old one are compared with an empty schema.
    for (path, old_node) in &old_flat {
        let mut old_props = comparable_props(old_node);
        let mut new_props = new_flat
            .get(path)
            .map(comparable_props)
            .unwrap_or_else(|| empty.clone());
        if old_props == new_props {
            continue;
        }
        for (validation, message) in compare_properties(&mut old_props, &mut new_props) {
            issues.push(PropertyIssue {
                version: label.to_string(),
                property: path.clone(),
                validation,
                message,
            });
        }
    }
    issues
}

// ---------------------------------------------------------------------------------------------
// Schema flattening

/// Every schema node of a version's `openAPIV3Schema`, keyed by crdify's property path (`^` is
/// the root, `^.spec.replicas` a property, `^.spec.ports.items` an array's item schema).
fn flatten_version(version: &CustomResourceDefinitionVersion) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref());
    if let Some(schema) = schema {
        // Serialising a typed schema cannot fail: it only holds JSON-compatible data.
        if let Ok(value) = serde_json::to_value(schema) {
            flatten_into(&value, "^".to_string(), &mut out);
        }
    }
    out
}

fn flatten_into(node: &Value, path: String, out: &mut BTreeMap<String, Value>) {
    let Some(obj) = node.as_object() else { return };
    for (key, child) in obj {
        match key.as_str() {
            "items" => match child {
                Value::Array(schemas) => {
                    for (i, s) in schemas.iter().enumerate() {
                        flatten_into(s, format!("{path}.items[{i}]"), out);
                    }
                }
                other => flatten_into(other, format!("{path}.items"), out),
            },
            "allOf" | "anyOf" | "oneOf" => {
                for (i, s) in child.as_array().into_iter().flatten().enumerate() {
                    flatten_into(s, format!("{path}.{key}[{i}]"), out);
                }
            }
            "not" | "additionalProperties" | "additionalItems" => {
                flatten_into(child, format!("{path}.{key}"), out);
            }
            "properties" => {
                for (name, s) in child.as_object().into_iter().flatten() {
                    flatten_into(s, format!("{path}.{name}"), out);
                }
            }
            "patternProperties" | "definitions" | "dependencies" => {
                for (name, s) in child.as_object().into_iter().flatten() {
                    flatten_into(s, format!("{path}.{key}[{name}]"), out);
                }
            }
            _ => {}
        }
    }
    out.insert(path, node.clone());
}

/// Keys holding child schemas: compared at the children's own paths, never at the parent's.
const CHILD_KEYS: &[&str] = &[
    "properties",
    "items",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "additionalProperties",
    "patternProperties",
    "additionalItems",
    "definitions",
    "dependencies",
];

/// How Go's `JSONSchemaProps` holds a field, which decides when two schemas are "equal" (Go's zero
/// values equal an absent field for plain fields, not for pointers) and how the unhandled message
/// prints it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GoField {
    /// `string`: absent == "".
    Text,
    /// `bool`: absent == false.
    Flag,
    /// A slice: absent == empty.
    List,
    /// A pointer to a scalar: absent is `nil`, distinct from any value.
    Pointer,
    /// A pointer to a structure (JSON, ExternalDocumentation).
    Structure,
}

/// `JSONSchemaProps` fields other than child schemas: JSON name, Go name, Go representation, in
/// Go's declaration order (the order of the unhandled message).
const FIELDS: &[(&str, &str, GoField)] = &[
    ("id", "ID", GoField::Text),
    ("$schema", "Schema", GoField::Text),
    ("$ref", "Ref", GoField::Pointer),
    ("description", "Description", GoField::Text),
    ("type", "Type", GoField::Text),
    ("format", "Format", GoField::Text),
    ("title", "Title", GoField::Text),
    ("default", "Default", GoField::Structure),
    ("maximum", "Maximum", GoField::Pointer),
    ("exclusiveMaximum", "ExclusiveMaximum", GoField::Flag),
    ("minimum", "Minimum", GoField::Pointer),
    ("exclusiveMinimum", "ExclusiveMinimum", GoField::Flag),
    ("maxLength", "MaxLength", GoField::Pointer),
    ("minLength", "MinLength", GoField::Pointer),
    ("pattern", "Pattern", GoField::Text),
    ("maxItems", "MaxItems", GoField::Pointer),
    ("minItems", "MinItems", GoField::Pointer),
    ("uniqueItems", "UniqueItems", GoField::Flag),
    ("multipleOf", "MultipleOf", GoField::Pointer),
    ("enum", "Enum", GoField::List),
    ("maxProperties", "MaxProperties", GoField::Pointer),
    ("minProperties", "MinProperties", GoField::Pointer),
    ("required", "Required", GoField::List),
    ("externalDocs", "ExternalDocs", GoField::Structure),
    ("example", "Example", GoField::Structure),
    ("nullable", "Nullable", GoField::Flag),
    (
        "x-kubernetes-preserve-unknown-fields",
        "XPreserveUnknownFields",
        GoField::Pointer,
    ),
    (
        "x-kubernetes-embedded-resource",
        "XEmbeddedResource",
        GoField::Flag,
    ),
    ("x-kubernetes-int-or-string", "XIntOrString", GoField::Flag),
    ("x-kubernetes-list-map-keys", "XListMapKeys", GoField::List),
    ("x-kubernetes-list-type", "XListType", GoField::Pointer),
    ("x-kubernetes-map-type", "XMapType", GoField::Pointer),
    ("x-kubernetes-validations", "XValidations", GoField::List),
];

fn go_field(key: &str) -> Option<(&'static str, GoField)> {
    FIELDS
        .iter()
        .find(|(json, _, _)| *json == key)
        .map(|(_, go, kind)| (*go, *kind))
}

/// A schema node without its children and without fields at Go's zero value.
fn comparable_props(node: &Value) -> Map<String, Value> {
    let mut props = node.as_object().cloned().unwrap_or_default();
    for key in CHILD_KEYS {
        props.remove(*key);
    }
    props.retain(|key, value| {
        if value.is_null() {
            return false;
        }
        match go_field(key).map(|(_, kind)| kind) {
            Some(GoField::Text) => value.as_str() != Some(""),
            Some(GoField::Flag) => value.as_bool() != Some(false),
            Some(GoField::List) => value.as_array().is_none_or(|a| !a.is_empty()),
            _ => true,
        }
    });
    props
}

// ---------------------------------------------------------------------------------------------
// Property validations

/// Validation names in report order; `unhandled` comes last.
const VALIDATIONS: &[&str] = &[
    "default",
    "enum",
    "maximum",
    "maxItems",
    "maxLength",
    "maxProperties",
    "minimum",
    "minItems",
    "minLength",
    "minProperties",
    "required",
    "type",
    "description",
    "pattern",
    "nullable",
];
const UNHANDLED: &str = "unhandled";

fn validation_index(name: &str) -> usize {
    VALIDATIONS
        .iter()
        .position(|v| *v == name)
        .unwrap_or(VALIDATIONS.len())
}

/// Runs every property validation on one property (each consumes the fields it understands), then
/// reports what is left as unhandled. Returns (validation index, message) pairs.
fn compare_properties(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut report = |name: &str, message: Option<String>| {
        if let Some(message) = message {
            out.push((validation_index(name), message));
        }
    };
    report(
        "default",
        check_default(old.remove("default"), new.remove("default")),
    );
    report("enum", check_enum(old.remove("enum"), new.remove("enum")));
    for key in ["maximum", "maxItems", "maxLength", "maxProperties"] {
        report(key, check_bound(Bound::Max, old.remove(key), new.remove(key)));
    }
    for key in ["minimum", "minItems", "minLength", "minProperties"] {
        report(key, check_bound(Bound::Min, old.remove(key), new.remove(key)));
    }
    report(
        "required",
        check_required(old.remove("required"), new.remove("required")),
    );
    report("type", check_type(old.remove("type"), new.remove("type")));
    // description: enforcement None in operator-controller's configuration.
    old.remove("description");
    new.remove("description");
    report(
        "pattern",
        check_pattern(old.remove("pattern"), new.remove("pattern")),
    );
    report(
        "nullable",
        check_nullable(old.remove("nullable"), new.remove("nullable")),
    );
    if let Some(message) = unhandled_message(old, new) {
        out.push((VALIDATIONS.len(), message));
    }
    out
}

/// The JSON text of a value, as Go's `json.RawMessage` would hold it.
fn raw(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn check_default(old: Option<Value>, new: Option<Value>) -> Option<String> {
    match (old, new) {
        (None, Some(n)) => Some(format!(
            "default added when there was none previously : {}",
            go_quote(&raw(&n))
        )),
        (Some(o), None) => Some(format!("default value removed : {}", go_quote(&raw(&o)))),
        (Some(o), Some(n)) if o != n => Some(format!(
            "default value changed : {} -> {}",
            go_quote(&raw(&o)),
            go_quote(&raw(&n))
        )),
        _ => None,
    }
}

fn raw_set(value: Option<Value>) -> BTreeSet<String> {
    match value {
        Some(Value::Array(items)) => items.iter().map(raw).collect(),
        _ => BTreeSet::new(),
    }
}

fn check_enum(old: Option<Value>, new: Option<Value>) -> Option<String> {
    let old = raw_set(old);
    let new = raw_set(new);
    if old.is_empty() && !new.is_empty() {
        let values: Vec<String> = new.into_iter().collect();
        return Some(format!(
            "enum constraint added when there was none previously : [{}]",
            values.join(" ")
        ));
    }
    let removed: Vec<String> = old.difference(&new).cloned().collect();
    if !removed.is_empty() {
        return Some(format!("allowed enum values removed : [{}]", removed.join(" ")));
    }
    // Adding values to an existing enum: additionPolicy Allow.
    None
}

#[derive(Clone, Copy)]
enum Bound {
    Max,
    Min,
}

fn check_bound(bound: Bound, old: Option<Value>, new: Option<Value>) -> Option<String> {
    let new = new?;
    let (name, tightened) = match bound {
        Bound::Max => ("maximum", "decreased"),
        Bound::Min => ("minimum", "increased"),
    };
    let Some(old) = old else {
        return Some(format!(
            "{name} constraint added when there was none previously : {}",
            number(&new)
        ));
    };
    let (o, n) = (old.as_f64().unwrap_or(f64::NAN), new.as_f64().unwrap_or(f64::NAN));
    let unsafe_change = match bound {
        Bound::Max => n < o,
        Bound::Min => n > o,
    };
    unsafe_change.then(|| format!("{name} {tightened} : {} -> {}", number(&old), number(&new)))
}

/// A number as Go's `%v` prints an int64 or a float64.
fn number(value: &Value) -> String {
    if let Some(i) = value.as_i64() {
        return i.to_string();
    }
    if let Some(f) = value.as_f64() {
        return go_float(f);
    }
    raw(value)
}

fn check_required(old: Option<Value>, new: Option<Value>) -> Option<String> {
    let names = |v: Option<Value>| -> BTreeSet<String> {
        v.and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let (old, new) = (names(old), names(new));
    let added: Vec<String> = new.difference(&old).cloned().collect();
    (!added.is_empty()).then(|| format!("new required fields: {}", go_string_list(&added)))
}

fn text(value: &Option<Value>) -> &str {
    value.as_ref().and_then(Value::as_str).unwrap_or_default()
}

fn check_type(old: Option<Value>, new: Option<Value>) -> Option<String> {
    let (o, n) = (text(&old), text(&new));
    (o != n).then(|| format!("type changed : {} -> {}", go_quote(o), go_quote(n)))
}

fn check_pattern(old: Option<Value>, new: Option<Value>) -> Option<String> {
    let (o, n) = (text(&old), text(&new));
    match (o.is_empty(), n.is_empty()) {
        _ if o == n => None,
        (true, false) => Some(format!("pattern added : {} -> {}", go_quote(o), go_quote(n))),
        // Removing a pattern only widens what is accepted.
        (false, true) => None,
        _ => Some(format!("pattern changed : {} -> {}", go_quote(o), go_quote(n))),
    }
}

fn check_nullable(old: Option<Value>, new: Option<Value>) -> Option<String> {
    let flag = |v: &Option<Value>| v.as_ref().and_then(Value::as_bool).unwrap_or(false);
    match (flag(&old), flag(&new)) {
        (false, true) => Some("nullable added : false -> true".to_string()),
        (true, false) => Some("nullable removed : true -> false".to_string()),
        _ => None,
    }
}

/// Upstream's condensed report of what no validation understood:
/// `unhandled changes found (Format "" -> "email"; ...)`.
fn unhandled_message(old: &Map<String, Value>, new: &Map<String, Value>) -> Option<String> {
    if old == new {
        return None;
    }
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut keys: Vec<&String> = keys.into_iter().filter(|k| old.get(*k) != new.get(*k)).collect();
    // Go's declaration order; unknown fields (from a newer API) last, by name.
    keys.sort_by_key(|k| {
        (
            FIELDS
                .iter()
                .position(|(json, _, _)| json == k)
                .unwrap_or(FIELDS.len()),
            (*k).clone(),
        )
    });
    let details: Vec<String> = keys
        .into_iter()
        .map(|key| {
            let (go_name, kind) = go_field(key).unwrap_or(("", GoField::Structure));
            let name = if go_name.is_empty() { key.as_str() } else { go_name };
            let before = go_value(kind, old.get(key));
            let mut after = go_value(kind, new.get(key));
            if before == after {
                // Two different structures both print as <complex value>.
                after.push_str(" (changed)");
            }
            format!("{name} {before} -> {after}")
        })
        .collect();
    Some(format!("unhandled changes found ({})", details.join("; ")))
}

/// A field's value as upstream's condensed diff shows it.
fn go_value(kind: GoField, value: Option<&Value>) -> String {
    match (kind, value) {
        (GoField::Text, None) => "\"\"".to_string(),
        (GoField::Flag, None) => "false".to_string(),
        (GoField::List | GoField::Pointer | GoField::Structure, None) => "nil".to_string(),
        (_, Some(Value::String(s))) if kind == GoField::Text => go_quote(s),
        (_, Some(Value::Bool(b))) if kind == GoField::Flag => b.to_string(),
        (GoField::Pointer, Some(Value::String(s))) => format!("&{}", go_quote(s)),
        (GoField::Pointer, Some(Value::Bool(b))) => format!("&{b}"),
        (GoField::Pointer, Some(n @ Value::Number(_))) => format!("&{}", number(n)),
        _ => "<complex value>".to_string(),
    }
}

#[cfg(test)]
#[path = "crd_upgrade_tests.rs"]
mod tests;
