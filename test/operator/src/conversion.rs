//! The conversion webhook (`/convert`, ConversionReview `apiextensions.k8s.io/v1`): Widgets
//! between `v1alpha1` (`spec.size`) and `v1` (`spec.replicas`), both ways. Pure: a review in, a
//! review out.
//!
//! A size says less than a replica count, so v1 -> v1alpha1 keeps the exact count in an
//! annotation when the size alone would lose it, and v1alpha1 -> v1 uses that annotation when it
//! still agrees with the size (a user who changed the size meant the size).

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::{Map, Value};

use crate::widget::{
    API_VERSION_V1, API_VERSION_V1ALPHA1, REPLICAS_ANNOTATION, replicas_for_size, size_for_replicas,
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    #[error("the body is not a ConversionReview: {0}")]
    NotAReview(String),
    #[error("the ConversionReview has no request")]
    NoRequest,
    #[error(
        "cannot convert to {0:?}: this webhook converts Widgets between {API_VERSION_V1ALPHA1} and {API_VERSION_V1}"
    )]
    UnknownDesiredVersion(String),
    #[error("object {index}: apiVersion {api_version:?} is not a Widget version this webhook knows")]
    UnknownObjectVersion { index: usize, api_version: String },
    #[error("object {index} ({name}): {reason}")]
    InvalidObject {
        index: usize,
        name: String,
        reason: String,
    },
}

/// Answers one ConversionReview. `Err` only when the body is not a review with a request (the
/// handler answers 400: there is no uid to answer to); a Widget that cannot be converted is a
/// review whose result is a failure naming it, which the API server reports to its caller.
pub fn review(body: &[u8]) -> Result<ConversionReview, ConversionError> {
    let review: ConversionReview =
        serde_json::from_slice(body).map_err(|e| ConversionError::NotAReview(e.to_string()))?;
    let request = ConversionRequest::from_review(review).map_err(|_| ConversionError::NoRequest)?;
    let converted: Result<Vec<Value>, ConversionError> = request
        .objects
        .iter()
        .enumerate()
        .map(|(index, object)| convert_object(index, object, &request.desired_api_version))
        .collect();
    let response = ConversionResponse::for_request(request.clone());
    let response = match converted {
        Ok(objects) => response.success(objects),
        Err(e) => response.failure(Status::failure(&e.to_string(), "Invalid")),
    };
    Ok(response.into_review())
}

/// Converts the `index`th object of a review to `desired` (an apiVersion).
pub fn convert_object(index: usize, object: &Value, desired: &str) -> Result<Value, ConversionError> {
    if desired != API_VERSION_V1 && desired != API_VERSION_V1ALPHA1 {
        return Err(ConversionError::UnknownDesiredVersion(desired.to_string()));
    }
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if from != API_VERSION_V1 && from != API_VERSION_V1ALPHA1 {
        return Err(ConversionError::UnknownObjectVersion {
            index,
            api_version: from.to_string(),
        });
    }
    let mut out = object.clone();
    if from == desired {
        return Ok(out);
    }
    let invalid = |reason: String| ConversionError::InvalidObject {
        index,
        name: object_name(object),
        reason,
    };
    let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) else {
        return Err(invalid("no spec".into()));
    };
    let annotation = if desired == API_VERSION_V1 {
        let size = spec.remove("size");
        let size = size
            .as_ref()
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("spec.size is missing or not a string".into()))?;
        let by_size = replicas_for_size(size)
            .ok_or_else(|| invalid(format!("spec.size {size:?} is not small or large")))?;
        let kept = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(REPLICAS_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|r| r.parse::<i64>().ok())
            .filter(|r| size_for_replicas(*r) == size);
        spec.insert("replicas".into(), Value::from(kept.unwrap_or(by_size)));
        None
    } else {
        let replicas = spec.remove("replicas");
        let replicas = replicas
            .as_ref()
            .and_then(Value::as_i64)
            .ok_or_else(|| invalid("spec.replicas is missing or not an integer".into()))?;
        let size = size_for_replicas(replicas);
        spec.insert("size".into(), Value::from(size));
        // Only a count the size does not already say is kept.
        (replicas_for_size(size) != Some(replicas)).then(|| replicas.to_string())
    };
    set_replicas_annotation(&mut out, annotation);
    out["apiVersion"] = Value::from(desired);
    Ok(out)
}

/// Sets or removes the replicas annotation; an annotation map left empty is removed.
fn set_replicas_annotation(object: &mut Value, value: Option<String>) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        if let Some(value) = value {
            object["metadata"] = serde_json::json!({"annotations": {REPLICAS_ANNOTATION: value}});
        }
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(map) = annotations.as_object_mut() {
        match value {
            Some(v) => {
                map.insert(REPLICAS_ANNOTATION.into(), Value::from(v));
            }
            None => {
                map.remove(REPLICAS_ANNOTATION);
            }
        }
        if map.is_empty() {
            metadata.remove("annotations");
        }
    }
}

fn object_name(object: &Value) -> String {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget(api_version: &str, spec: Value, annotations: Option<Value>) -> Value {
        let mut w = json!({
            "apiVersion": api_version,
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u-1", "generation": 2},
            "spec": spec,
            "status": {"ready": true, "message": "kept", "observedGeneration": 2, "bundleVersion": "0.1.0"},
        });
        if let Some(a) = annotations {
            w["metadata"]["annotations"] = a;
        }
        w
    }

    fn review_of(desired: &str, objects: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "req-1", "desiredAPIVersion": desired, "objects": objects},
        }))
        .unwrap()
    }

    fn answer(body: &[u8]) -> Value {
        serde_json::to_value(review(body).unwrap()).unwrap()
    }

    #[test]
    fn sizes_become_replicas_and_back_keeping_metadata_and_status() {
        let out = answer(&review_of(
            API_VERSION_V1,
            vec![
                widget(API_VERSION_V1ALPHA1, json!({"size": "small"}), None),
                widget(
                    API_VERSION_V1ALPHA1,
                    json!({"size": "large"}),
                    Some(json!({"a": "b"})),
                ),
            ],
        ));
        assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(out["kind"], "ConversionReview");
        let response = &out["response"];
        assert_eq!(response["uid"], "req-1");
        assert_eq!(response["result"]["status"], "Success");
        let objects = response["convertedObjects"].as_array().unwrap();
        assert_eq!(
            objects[0],
            widget(API_VERSION_V1, json!({"replicas": 1}), None),
            "metadata and status pass unchanged"
        );
        assert_eq!(
            objects[1],
            widget(API_VERSION_V1, json!({"replicas": 3}), Some(json!({"a": "b"})))
        );

        let back = answer(&review_of(API_VERSION_V1ALPHA1, objects.clone()));
        let back = back["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(
            back[0],
            widget(API_VERSION_V1ALPHA1, json!({"size": "small"}), None)
        );
        assert_eq!(
            back[1],
            widget(
                API_VERSION_V1ALPHA1,
                json!({"size": "large"}),
                Some(json!({"a": "b"}))
            )
        );
    }

    #[test]
    fn a_count_the_size_cannot_say_survives_the_round_trip() {
        for replicas in [0, 2, 5, 10] {
            let v1 = widget(API_VERSION_V1, json!({"replicas": replicas}), None);
            let alpha = convert_object(0, &v1, API_VERSION_V1ALPHA1).unwrap();
            assert_eq!(alpha["spec"], json!({"size": size_for_replicas(replicas)}));
            assert_eq!(
                alpha["metadata"]["annotations"][REPLICAS_ANNOTATION],
                replicas.to_string(),
                "{replicas}"
            );
            assert_eq!(
                convert_object(0, &alpha, API_VERSION_V1).unwrap(),
                v1,
                "{replicas}"
            );
        }
    }

    #[test]
    fn a_changed_size_wins_over_a_stale_kept_count() {
        // v1alpha1 client edited size small -> large, leaving the annotation of 0 replicas.
        let alpha = widget(
            API_VERSION_V1ALPHA1,
            json!({"size": "large"}),
            Some(json!({REPLICAS_ANNOTATION: "0"})),
        );
        let v1 = convert_object(0, &alpha, API_VERSION_V1).unwrap();
        assert_eq!(v1, widget(API_VERSION_V1, json!({"replicas": 3}), None));
    }

    #[test]
    fn the_same_version_is_returned_unchanged() {
        let v1 = widget(API_VERSION_V1, json!({"replicas": 7}), None);
        assert_eq!(convert_object(0, &v1, API_VERSION_V1).unwrap(), v1);
    }

    #[test]
    fn what_cannot_be_converted_is_a_failed_result_naming_the_object() {
        let out = answer(&review_of(
            API_VERSION_V1ALPHA1,
            vec![
                widget(API_VERSION_V1, json!({"replicas": 1}), None),
                widget(API_VERSION_V1, json!({"replicas": "many"}), None),
            ],
        ));
        let response = &out["response"];
        assert_eq!(response["uid"], "req-1");
        assert_eq!(response["result"]["status"], "Failure");
        assert_eq!(
            response["result"]["message"],
            "object 1 (ns/w): spec.replicas is missing or not an integer"
        );
        assert_eq!(response["convertedObjects"], json!([]));

        let out = answer(&review_of(
            "test.olmv1.dev/v2",
            vec![widget(API_VERSION_V1, json!({}), None)],
        ));
        assert_eq!(
            out["response"]["result"]["message"],
            "cannot convert to \"test.olmv1.dev/v2\": this webhook converts Widgets between \
             test.olmv1.dev/v1alpha1 and test.olmv1.dev/v1"
        );
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(
            convert_object(3, &other, API_VERSION_V1).unwrap_err().to_string(),
            "object 3: apiVersion \"v1\" is not a Widget version this webhook knows"
        );
        let bad_size = widget(API_VERSION_V1ALPHA1, json!({"size": "huge"}), None);
        assert_eq!(
            convert_object(0, &bad_size, API_VERSION_V1)
                .unwrap_err()
                .to_string(),
            "object 0 (ns/w): spec.size \"huge\" is not small or large"
        );
    }

    #[test]
    fn a_body_that_is_not_a_review_with_a_request_is_refused() {
        assert_eq!(
            review(b"{}").unwrap_err(),
            ConversionError::NotAReview("missing field `apiVersion` at line 1 column 2".into())
        );
        let no_request = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#;
        assert_eq!(review(no_request).unwrap_err(), ConversionError::NoRequest);
    }
}
