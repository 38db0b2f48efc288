//! One test per rule of upstream's CRD upgrade safety, each with the change it allows and the one it
//! refuses, asserting upstream's message text.

use super::*;
use serde_json::json;

const NAME: &str = "widgets.example.com";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "name": {"type": "string", "minLength": 1, "maxLength": 63, "pattern": "^[a-z]+$"},
                    "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Fast"},
                    "tags": {"type": "array", "minItems": 1, "maxItems": 5, "items": {"type": "string"}},
                    "labels": {
                        "type": "object",
                        "minProperties": 1,
                        "maxProperties": 8,
                        "additionalProperties": {"type": "string"}
                    },
                    "note": {"type": "string", "description": "A note."},
                    "optional": {"type": "string"}
                }
            }
        }
    })
}

fn version(name: &str, served: bool, storage: bool, schema: Value) -> Value {
    json!({"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": schema}})
}

fn crd_with(versions: Vec<Value>, stored: &[&str]) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": versions
        },
        "status": {"storedVersions": stored}
    }))
    .expect("test CRD is valid")
}

fn installed() -> CustomResourceDefinition {
    crd_with(vec![version("v1", true, true, schema())], &["v1"])
}

/// The installed CRD, and a new one whose v1 schema is changed by `edit`.
fn upgrade(edit: impl FnOnce(&mut Value)) -> (CustomResourceDefinition, CustomResourceDefinition) {
    let mut new_schema = schema();
    edit(&mut new_schema);
    (
        installed(),
        crd_with(vec![version("v1", true, true, new_schema)], &[]),
    )
}

fn spec_prop<'a>(schema: &'a mut Value, name: &str) -> &'a mut Value {
    schema
        .pointer_mut(&format!("/properties/spec/properties/{name}"))
        .expect("property exists")
}

fn failures(old: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<String> {
    match check_crd_upgrade(old, new) {
        Ok(()) => Vec::new(),
        Err(e) => {
            assert_eq!(e.crd, NAME);
            e.failures
        }
    }
}

fn assert_allowed(edit: impl FnOnce(&mut Value)) {
    let (old, new) = upgrade(edit);
    assert_eq!(failures(&old, &new), Vec::<String>::new());
}

fn assert_refused(edit: impl FnOnce(&mut Value), expected: &[&str]) {
    let (old, new) = upgrade(edit);
    assert_eq!(failures(&old, &new), expected);
}

#[test]
fn identical_crd_is_safe() {
    assert_eq!(check_crd_upgrade(&installed(), &installed()), Ok(()));
}

#[test]
fn description_changes_are_allowed() {
    assert_allowed(|s| spec_prop(s, "note")["description"] = json!("Another note."));
    assert_allowed(|s| spec_prop(s, "size")["description"] = json!("Added description."));
}

#[test]
fn adding_an_optional_field_is_allowed() {
    assert_allowed(|s| {
        s.pointer_mut("/properties/spec/properties").unwrap()["extra"] = json!({"type": "boolean"});
    });
}

#[test]
fn new_required_field_is_refused_and_dropping_one_allowed() {
    assert_refused(
        |s| s["properties"]["spec"]["required"] = json!(["size", "name", "mode"]),
        &["v1: ^.spec: required: new required fields: [mode name]"],
    );
    assert_allowed(|s| s["properties"]["spec"]["required"] = json!([]));
}

#[test]
fn removing_a_field_is_refused() {
    assert_refused(
        |s| {
            s.pointer_mut("/properties/spec/properties")
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove("optional");
        },
        &[
            "existingFieldRemoval: crd/widgets.example.com version/v1 field/^.spec.optional may not be removed",
            r#"v1: ^.spec.optional: type: type changed : "string" -> """#,
        ],
    );
}

#[test]
fn type_change_is_refused() {
    assert_refused(
        |s| spec_prop(s, "optional")["type"] = json!("integer"),
        &[r#"v1: ^.spec.optional: type: type changed : "string" -> "integer""#],
    );
}

#[test]
fn adding_changing_or_removing_a_default_is_refused() {
    assert_refused(
        |s| spec_prop(s, "optional")["default"] = json!("x"),
        &[r#"v1: ^.spec.optional: default: default added when there was none previously : "\"x\"""#],
    );
    assert_refused(
        |s| spec_prop(s, "mode")["default"] = json!("Slow"),
        &[r#"v1: ^.spec.mode: default: default value changed : "\"Fast\"" -> "\"Slow\"""#],
    );
    assert_refused(
        |s| {
            spec_prop(s, "mode").as_object_mut().unwrap().remove("default");
        },
        &[r#"v1: ^.spec.mode: default: default value removed : "\"Fast\"""#],
    );
}

#[test]
fn enum_restriction_or_removed_values_are_refused_and_added_values_allowed() {
    assert_allowed(|s| spec_prop(s, "mode")["enum"] = json!(["Fast", "Slow", "Medium"]));
    assert_refused(
        |s| spec_prop(s, "mode")["enum"] = json!(["Fast"]),
        &[r#"v1: ^.spec.mode: enum: allowed enum values removed : ["Slow"]"#],
    );
    assert_refused(
        |s| spec_prop(s, "optional")["enum"] = json!(["b", "a"]),
        &[r#"v1: ^.spec.optional: enum: enum constraint added when there was none previously : ["a" "b"]"#],
    );
    // As upstream: dropping the restriction altogether counts as removing every value.
    assert_refused(
        |s| {
            spec_prop(s, "mode").as_object_mut().unwrap().remove("enum");
        },
        &[r#"v1: ^.spec.mode: enum: allowed enum values removed : ["Fast" "Slow"]"#],
    );
}

/// (property, constraint, safer value, unsafe value, installed value)
const BOUNDS: &[(&str, &str, i64, i64, i64)] = &[
    ("size", "minimum", 0, 2, 1),
    ("size", "maximum", 11, 5, 10),
    ("name", "minLength", 0, 2, 1),
    ("name", "maxLength", 64, 10, 63),
    ("tags", "minItems", 0, 2, 1),
    ("tags", "maxItems", 6, 4, 5),
    ("labels", "minProperties", 0, 2, 1),
    ("labels", "maxProperties", 9, 7, 8),
];

#[test]
fn tightening_bounds_is_refused_and_loosening_allowed() {
    for &(prop, constraint, safer, tighter, installed) in BOUNDS {
        assert_allowed(|s| spec_prop(s, prop)[constraint] = json!(safer));
        let direction = if constraint.starts_with("min") {
            "minimum increased"
        } else {
            "maximum decreased"
        };
        let expected = format!("v1: ^.spec.{prop}: {constraint}: {direction} : {installed} -> {tighter}");
        assert_refused(
            |s| spec_prop(s, prop)[constraint] = json!(tighter),
            &[expected.as_str()],
        );
        // Removing the bound widens what is accepted.
        assert_allowed(|s| {
            spec_prop(s, prop).as_object_mut().unwrap().remove(constraint);
        });
    }
}

#[test]
fn adding_a_bound_where_none_existed_is_refused() {
    let cases = [
        ("optional", "minLength", "minimum"),
        ("optional", "maxLength", "maximum"),
        ("note", "minLength", "minimum"),
    ];
    for (prop, constraint, word) in cases {
        let expected = format!(
            "v1: ^.spec.{prop}: {constraint}: {word} constraint added when there was none previously : 3"
        );
        assert_refused(
            |s| spec_prop(s, prop)[constraint] = json!(3),
            &[expected.as_str()],
        );
    }
    assert_refused(
        |s| spec_prop(s, "tags")["items"]["maximum"] = json!(1_000_000.0),
        &["v1: ^.spec.tags.items: maximum: maximum constraint added when there was none previously : 1e+06"],
    );
}

#[test]
fn float_bounds_print_like_go() {
    assert_refused(
        |s| spec_prop(s, "size")["maximum"] = json!(9.5),
        &["v1: ^.spec.size: maximum: maximum decreased : 10 -> 9.5"],
    );
}

#[test]
fn pattern_added_or_changed_is_refused_and_removed_allowed() {
    assert_refused(
        |s| spec_prop(s, "optional")["pattern"] = json!("^a"),
        &[r#"v1: ^.spec.optional: pattern: pattern added : "" -> "^a""#],
    );
    assert_refused(
        |s| spec_prop(s, "name")["pattern"] = json!("^[a-z0-9]+$"),
        &[r#"v1: ^.spec.name: pattern: pattern changed : "^[a-z]+$" -> "^[a-z0-9]+$""#],
    );
    assert_allowed(|s| {
        spec_prop(s, "name").as_object_mut().unwrap().remove("pattern");
    });
}

#[test]
fn nullable_changes_are_refused_both_ways() {
    assert_refused(
        |s| spec_prop(s, "optional")["nullable"] = json!(true),
        &["v1: ^.spec.optional: nullable: nullable added : false -> true"],
    );
    let old = crd_with(
        vec![version("v1", true, true, {
            let mut s = schema();
            spec_prop(&mut s, "optional")["nullable"] = json!(true);
            s
        })],
        &["v1"],
    );
    let new = crd_with(vec![version("v1", true, true, schema())], &["v1"]);
    assert_eq!(
        failures(&old, &new),
        ["v1: ^.spec.optional: nullable: nullable removed : true -> false"]
    );
    // `nullable: false` written out is the same as absent.
    assert_allowed(|s| spec_prop(s, "optional")["nullable"] = json!(false));
}

#[test]
fn unrecognised_changes_are_refused() {
    assert_refused(
        |s| spec_prop(s, "optional")["format"] = json!("email"),
        &[r#"v1: ^.spec.optional: unhandled: unhandled changes found (Format "" -> "email")"#],
    );
    assert_refused(
        |s| {
            let p = spec_prop(s, "optional");
            p["x-kubernetes-validations"] = json!([{"rule": "self.size() > 1"}]);
            p["title"] = json!("Optional");
        },
        &[
            r#"v1: ^.spec.optional: unhandled: unhandled changes found (Title "" -> "Optional"; XValidations nil -> <complex value>)"#,
        ],
    );
    assert_refused(
        |s| spec_prop(s, "optional")["x-kubernetes-preserve-unknown-fields"] = json!(true),
        &["v1: ^.spec.optional: unhandled: unhandled changes found (XPreserveUnknownFields nil -> &true)"],
    );
}

#[test]
fn several_failures_of_one_property_are_all_reported_with_unhandled_last() {
    assert_refused(
        |s| {
            let p = spec_prop(s, "size");
            p["type"] = json!("string");
            p["minimum"] = json!(5);
            p["format"] = json!("int32");
        },
        &[
            "v1: ^.spec.size: minimum: minimum increased : 1 -> 5",
            r#"v1: ^.spec.size: type: type changed : "integer" -> "string""#,
            r#"v1: ^.spec.size: unhandled: unhandled changes found (Format "" -> "int32")"#,
        ],
    );
}

#[test]
fn nested_paths_name_items_and_additional_properties() {
    assert_refused(
        |s| spec_prop(s, "tags")["items"]["type"] = json!("integer"),
        &[r#"v1: ^.spec.tags.items: type: type changed : "string" -> "integer""#],
    );
    assert_refused(
        |s| spec_prop(s, "labels")["additionalProperties"]["type"] = json!("integer"),
        &[r#"v1: ^.spec.labels.additionalProperties: type: type changed : "string" -> "integer""#],
    );
}

#[test]
fn scope_change_is_refused() {
    let old = installed();
    let mut new = installed();
    new.spec.scope = "Cluster".to_string();
    assert_eq!(
        failures(&old, &new),
        [r#"scope: scope changed from "Namespaced" to "Cluster""#]
    );
}

#[test]
fn removing_a_stored_version_is_refused_and_an_unstored_one_allowed() {
    let old = crd_with(
        vec![
            version("v1alpha1", true, false, schema()),
            version("v1", true, true, schema()),
        ],
        &["v1alpha1", "v1"],
    );
    let new = crd_with(vec![version("v1", true, true, schema())], &[]);
    assert_eq!(
        failures(&old, &new),
        ["storedVersionRemoval: stored versions [v1alpha1] removed"]
    );

    let old = crd_with(
        vec![
            version("v1alpha1", true, false, schema()),
            version("v1", true, true, schema()),
        ],
        &["v1"],
    );
    assert_eq!(failures(&old, &new), Vec::<String>::new());
}

#[test]
fn adding_a_version_with_the_same_schema_is_allowed() {
    let new = crd_with(
        vec![
            version("v1", true, false, schema()),
            version("v2", true, true, schema()),
        ],
        &[],
    );
    assert_eq!(failures(&installed(), &new), Vec::<String>::new());
}

fn v2_with_string_size() -> Value {
    let mut s = schema();
    spec_prop(&mut s, "size")["type"] = json!("string");
    s
}

#[test]
fn served_versions_must_be_compatible_without_a_conversion_webhook() {
    let new = crd_with(
        vec![
            version("v1", true, false, schema()),
            version("v2", true, true, v2_with_string_size()),
        ],
        &[],
    );
    assert_eq!(
        failures(&installed(), &new),
        [r#"v1 -> v2: ^.spec.size: type: type changed : "integer" -> "string""#]
    );
    // An unserved version is not compared.
    let new = crd_with(
        vec![
            version("v1", true, true, schema()),
            version("v2", false, false, v2_with_string_size()),
        ],
        &[],
    );
    assert_eq!(failures(&installed(), &new), Vec::<String>::new());
}

#[test]
fn served_version_checks_are_skipped_with_a_conversion_webhook() {
    let mut new = crd_with(
        vec![
            version("v1", true, false, schema()),
            version("v2", true, true, v2_with_string_size()),
        ],
        &[],
    );
    new.spec.conversion = serde_json::from_value(json!({
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://conv.example.com"}}
    }))
    .unwrap();
    assert_eq!(failures(&installed(), &new), Vec::<String>::new());
}

#[test]
fn served_version_issues_the_installed_crd_already_had_are_not_reported() {
    let two_versions = |v2: Value| {
        crd_with(
            vec![
                version("v1", true, false, schema()),
                version("v2", true, true, v2),
            ],
            &["v2"],
        )
    };
    let old = two_versions(v2_with_string_size());
    assert_eq!(
        failures(&old, &two_versions(v2_with_string_size())),
        Vec::<String>::new()
    );

    let mut v2 = v2_with_string_size();
    spec_prop(&mut v2, "optional")["type"] = json!("boolean");
    assert_eq!(
        failures(&old, &two_versions(v2)),
        [
            r#"v2: ^.spec.optional: type: type changed : "string" -> "boolean""#,
            r#"v1 -> v2: ^.spec.optional: type: type changed : "string" -> "boolean""#,
        ]
    );
}

#[test]
fn error_message_has_upstreams_format() {
    let (old, mut new) = upgrade(|s| spec_prop(s, "optional")["type"] = json!("integer"));
    new.spec.scope = "Cluster".to_string();
    let err = check_crd_upgrade(&old, &new).unwrap_err();
    assert_eq!(
        err.to_string(),
        "validating upgrade for CRD \"widgets.example.com\": scope: scope changed from \"Namespaced\" to \"Cluster\"\n\
         v1: ^.spec.optional: type: type changed : \"string\" -> \"integer\""
    );
}

#[test]
fn kube_aware_version_order_matches_apimachinery() {
    let mut names = vec![
        "v2", "v1", "v1beta2", "v1alpha1", "v1beta1", "foo", "v10", "bar", "v2alpha1",
    ];
    names.sort_by(|a, b| compare_kube_aware_versions(a, b));
    assert_eq!(
        names,
        [
            "foo", "bar", "v1alpha1", "v2alpha1", "v1beta1", "v1beta2", "v1", "v2", "v10"
        ]
    );
}
