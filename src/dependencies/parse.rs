//! Reading requirements from properties and from a bundle image's metadata files.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    DependencyError,
    cel_rule::CelRule,
    model::{Constraint, Gvk, Requirement},
};
use crate::{
    catalog::{PROPERTY_CONSTRAINT, PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE_REQUIRED, Property},
    version::SkipRange,
};

/// The largest raw `olm.constraint` value read (operator-framework/api's `2 << 16`).
pub const MAX_CONSTRAINT_BYTES: usize = 2 << 16;
/// The deepest nesting of compound constraints read (the enhancement's 10 levels).
pub const MAX_CONSTRAINT_DEPTH: usize = 10;
/// The most requirements one bundle may declare.
const MAX_REQUIREMENTS: usize = 1024;

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
pub fn requirements_of(bundle: &str, properties: &[Property]) -> Result<Vec<Requirement>, DependencyError> {
    let mut out = Vec::new();
    for p in properties.iter().filter(|p| is_requirement_type(&p.type_)) {
        if out.len() == MAX_REQUIREMENTS {
            return Err(invalid(
                bundle,
                &p.type_,
                format!("more than {MAX_REQUIREMENTS} requirements"),
            ));
        }
        out.push(requirement(bundle, &p.type_, p.value.raw())?);
    }
    Ok(out)
}

/// The requirements of a bundle image: `metadata/dependencies.yaml` (`dependencies:` of
/// `olm.package` `{packageName, version}`, `olm.gvk` `{group, version, kind}` and `olm.constraint`
/// entries, as opm converts them) followed by those of `metadata/properties.yaml`.
pub fn requirements_from_bundle_metadata(
    bundle: &str,
    dependencies_yaml: Option<&str>,
    properties_yaml: Option<&str>,
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
                    value.insert("packageName".into(), fields[0].clone().unwrap_or(Value::Null));
                    value.insert("versionRange".into(), fields[1].clone().unwrap_or(Value::Null));
                    (PROPERTY_PACKAGE_REQUIRED, Value::Object(value))
                }
                "olm.gvk" => (PROPERTY_GVK_REQUIRED, entry.value),
                PROPERTY_CONSTRAINT => (PROPERTY_CONSTRAINT, entry.value),
                other => {
                    return Err(file_error(
                        "metadata/dependencies.yaml",
                        format!(
                            "dependency type {other:?} is not supported (olm.package, olm.gvk and olm.constraint are)"
                        ),
                    ));
                }
            };
            let raw = serde_json::to_string(&value).expect("a JSON value serializes");
            out.push(requirement(bundle, property, &raw)?);
        }
    }
    if let Some(text) = properties_yaml.filter(|t| !t.trim().is_empty()) {
        let file: PropertiesFile = serde_saphyr::from_str(text)
            .map_err(|e| file_error("metadata/properties.yaml", e.to_string()))?;
        for entry in file.properties.unwrap_or_default() {
            if is_requirement_type(&entry.type_) {
                let raw = serde_json::to_string(&entry.value).expect("a JSON value serializes");
                out.push(requirement(bundle, &entry.type_, &raw)?);
            }
        }
    }
    if out.len() > MAX_REQUIREMENTS {
        return Err(invalid(
            bundle,
            "dependencies",
            format!("more than {MAX_REQUIREMENTS} requirements"),
        ));
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

/// One requirement property's value (raw JSON text).
fn requirement(bundle: &str, property: &str, raw: &str) -> Result<Requirement, DependencyError> {
    let fail = |m: String| invalid(bundle, property, m);
    if property == PROPERTY_CONSTRAINT && raw.len() > MAX_CONSTRAINT_BYTES {
        return Err(fail(format!(
            "the value is {} bytes, over the limit of {MAX_CONSTRAINT_BYTES}",
            raw.len()
        )));
    }
    let value: Value = serde_json::from_str(raw).map_err(|e| fail(e.to_string()))?;
    match property {
        PROPERTY_PACKAGE_REQUIRED => Ok(Requirement {
            property: property.to_string(),
            constraint: package(&value, "versionRange").map_err(fail)?,
            failure_message: None,
        }),
        PROPERTY_GVK_REQUIRED => Ok(Requirement {
            property: property.to_string(),
            constraint: Constraint::Gvk(gvk(&value).map_err(fail)?),
            failure_message: None,
        }),
        _ => {
            let (constraint, failure_message) = constraint(&value, 1).map_err(fail)?;
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
fn object(value: &Value, fields: &[&str]) -> Result<Vec<Option<Value>>, String> {
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
            return Err(format!("unknown field {key:?}"));
        };
        if out[i].is_some() {
            return Err(format!("field {:?} is given twice", fields[i]));
        }
        out[i] = Some(v.clone());
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

fn string(value: Option<Value>, field: &str) -> Result<String, String> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("{field} must be a string, got {}", kind(&other))),
    }
}

fn package(value: &Value, range_field: &str) -> Result<Constraint, String> {
    let mut fields = object(value, &["packageName", range_field])?;
    let name = string(fields[0].take(), "packageName")?;
    let range_text = string(fields[1].take(), range_field)?;
    if name.is_empty() {
        return Err("packageName is empty".to_string());
    }
    let range = SkipRange::parse(&range_text).map_err(|e| format!("{range_field} {range_text:?}: {e}"))?;
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

/// One constraint object at nesting `depth` (1 = top level), with its failure message.
fn constraint(value: &Value, depth: usize) -> Result<(Constraint, Option<String>), String> {
    if depth > MAX_CONSTRAINT_DEPTH {
        return Err(format!(
            "constraints are nested deeper than {MAX_CONSTRAINT_DEPTH} levels"
        ));
    }
    let mut f = object(value, &CONSTRAINT_FIELDS)?;
    let failure_message = match f[0].take() {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => return Err(format!("failureMessage must be a string, got {}", kind(&other))),
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
        "package" => package(&v, "versionRange")?,
        "gvk" => Constraint::Gvk(gvk(&v)?),
        "cel" => {
            let mut fields = object(&v, &["rule"])?;
            let rule = string(fields[0].take(), "rule")?;
            Constraint::Cel(CelRule::compile(&rule)?)
        }
        word => {
            let mut fields = object(&v, &["constraints"])?;
            let children = match fields[0].take() {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(format!("{word}.constraints must be a list, got {}", kind(&other)));
                }
            };
            let children = children
                .iter()
                .map(|c| constraint(c, depth + 1).map(|(c, _)| c))
                .collect::<Result<Vec<_>, _>>()?;
            match word {
                "all" => Constraint::All(children),
                "any" => Constraint::Any(children),
                _ => Constraint::Not(children),
            }
        }
    };
    Ok((c, failure_message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{catalog::PropertyValue, dependencies::BundleFacts};

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
        let mut r = requirements_of("x.v1", &[prop(t, v)]).unwrap();
        assert_eq!(r.len(), 1);
        r.pop().unwrap()
    }

    fn err(t: &str, v: &str) -> String {
        requirements_of("x.v1", &[prop(t, v)]).unwrap_err().to_string()
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
        assert!(err("olm.constraint", &big).contains("over the limit of 131072"));
    }

    #[test]
    fn bundle_metadata_files_are_read_as_opm_converts_them() {
        let deps = "dependencies:\n- type: olm.package\n  value:\n    packageName: blue\n    version: '>=1.0.0'\n- type: olm.gvk\n  value:\n    group: green.io\n    kind: Green\n    version: v1\n- type: olm.constraint\n  value:\n    failureMessage: need certified\n    cel:\n      rule: 'properties.exists(p, p.type == \"certified\")'\n";
        let props = "properties:\n- type: olm.maxOpenShiftVersion\n  value: '4.18'\n- type: olm.gvk.required\n  value: {group: red.io, version: v1, kind: Red}\n";
        let r = requirements_from_bundle_metadata("x.v1", Some(deps), Some(props)).unwrap();
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
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains(r#"dependency type "olm.label" is not supported"#),
            "{e}"
        );
        assert!(requirements_from_bundle_metadata("x.v1", Some("dependencies: [\n"), None).is_err());
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
            ],
        )
        .unwrap();
        let blue = bundle_props("blue", "1.0.0", &[], &[]);
        let installed = [BundleFacts::new("blue.v1.0.0", "blue", &blue)];
        let green = Gvk {
            group: "green.io".into(),
            version: "v1".into(),
            kind: "Green".into(),
        };
        let mut budget = crate::dependencies::WorkBudget::new(crate::dependencies::CHECK_WORK_UNITS);
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
        assert!(!reqs[0].satisfied_by_served_api(&served_blue_api));
        assert!(has_dependencies(&[prop("olm.gvk.required", "{}")]));
        assert!(!has_dependencies(&blue));
    }
}
