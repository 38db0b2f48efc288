//! The CustomResourceDefinitions of both kinds, generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::v1::{ClusterCatalog, ClusterExtension};

/// Both CRDs, ClusterCatalog first (ClusterExtensions read catalogs).
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![finish(ClusterCatalog::crd()), finish(ClusterExtension::crd())]
}

/// Both CRDs as one YAML stream, each document starting with `---`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| {
            let yaml = serde_saphyr::to_string(crd).expect("a CRD always serializes to YAML");
            format!("---\n{yaml}")
        })
        .collect()
}

/// Brings the derived schema in line with upstream's controller-gen output where the derive
/// differs: optional fields are omitted rather than nullable, label selectors and their lists
/// are atomic, and conditions carry metav1.Condition's own validation.
fn finish(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(crd).expect("a CRD always serializes to JSON");
    for version in value["spec"]["versions"].as_array_mut().into_iter().flatten() {
        let schema = &mut version["schema"]["openAPIV3Schema"];
        strip_nullable(schema);
        if let Some(conditions) = schema.pointer_mut("/properties/status/properties/conditions/items") {
            *conditions = condition_schema();
        }
        if let Some(selector) =
            schema.pointer_mut("/properties/spec/properties/source/properties/catalog/properties/selector")
        {
            selector["x-kubernetes-map-type"] = json!("atomic");
            if let Some(expressions) = selector.pointer_mut("/properties/matchExpressions") {
                expressions["x-kubernetes-list-type"] = json!("atomic");
                expressions["items"]["properties"]["values"]["x-kubernetes-list-type"] = json!("atomic");
            }
        }
    }
    serde_json::from_value(value).expect("the adjusted CRD is still a CRD")
}

fn strip_nullable(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("nullable");
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// The schema of `metav1.Condition` as the Kubernetes API defines it.
fn condition_schema() -> Value {
    json!({
        "description": "Condition contains details for one aspect of the current state of this API Resource.",
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time",
                "description": "lastTransitionTime is the last time the condition transitioned from one status to another."},
            "message": {"type": "string", "maxLength": 32768,
                "description": "message is a human readable message indicating details about the transition."},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                "description": "observedGeneration represents the .metadata.generation that the condition was set based upon."},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition."},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                "description": "status of the condition, one of True, False, Unknown."},
            "type": {"type": "string", "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                "description": "type of condition in CamelCase or in foo.example.com/CamelCase."}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_fields_are_not_nullable() {
        assert!(!crds_yaml().contains("nullable"));
    }

    #[test]
    fn conditions_are_a_map_keyed_by_type_with_condition_validation() {
        for crd in crds() {
            let value = serde_json::to_value(&crd).unwrap();
            let conditions = value
                .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/conditions")
                .unwrap();
            assert_eq!(conditions["x-kubernetes-list-type"], "map");
            assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
            assert_eq!(
                conditions["items"]["properties"]["status"]["enum"],
                json!(["True", "False", "Unknown"])
            );
        }
    }
}
