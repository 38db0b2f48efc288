//! The validating webhook (`/validate-widget`, AdmissionReview `admission.k8s.io/v1`). Pure: a
//! review in, a review out. The bundle registers it for `v1` Widgets with the default
//! `matchPolicy: Equivalent`, so a `v1alpha1` request reaches it converted by `/convert` first.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::widget::{API_VERSION_V1, API_VERSION_V1ALPHA1, MAX_REPLICAS, replicas_for_size};

pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdmissionError {
    #[error("the body is not an AdmissionReview: {0}")]
    NotAReview(String),
    #[error("the AdmissionReview is {0:?}, not {ADMISSION_API_VERSION}")]
    WrongVersion(String),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionReview {
    api_version: String,
    request: Option<AdmissionRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionRequest {
    uid: String,
    /// Absent on DELETE.
    object: Option<Value>,
}

/// Answers one AdmissionReview: allowed, or refused with the reason as the status message (the
/// API server shows it as `admission webhook "..." denied the request: <message>`). `Err` only
/// when the body is not a v1 review with a request: the handler answers 400.
pub fn review(body: &[u8]) -> Result<Value, AdmissionError> {
    let review: AdmissionReview =
        serde_json::from_slice(body).map_err(|e| AdmissionError::NotAReview(e.to_string()))?;
    if review.api_version != ADMISSION_API_VERSION {
        return Err(AdmissionError::WrongVersion(review.api_version));
    }
    let request = review.request.ok_or(AdmissionError::NoRequest)?;
    let verdict = request.object.as_ref().map_or(Ok(()), validate_widget);
    let response = match verdict {
        Ok(()) => json!({"uid": request.uid, "allowed": true}),
        Err(message) => json!({
            "uid": request.uid,
            "allowed": false,
            "status": {"code": 422, "reason": "Invalid", "message": message},
        }),
    };
    Ok(json!({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}))
}

/// Why `widget` is refused, if it is: a v1 Widget asking for more than `MAX_REPLICAS` replicas (or
/// fewer than none), a v1alpha1 Widget whose size is neither small nor large.
pub fn validate_widget(widget: &Value) -> Result<(), String> {
    let name = widget
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let refuse = |reason: String| Err(format!("Widget {name:?} is refused: {reason}"));
    match widget.get("apiVersion").and_then(Value::as_str) {
        Some(API_VERSION_V1) => match widget.pointer("/spec/replicas").and_then(Value::as_i64) {
            Some(n) if n > MAX_REPLICAS => refuse(format!(
                "spec.replicas {n} is more than {MAX_REPLICAS}, the most this operator runs"
            )),
            Some(n) if n < 0 => refuse(format!("spec.replicas {n} is negative")),
            Some(_) => Ok(()),
            None => refuse("spec.replicas is missing or not an integer".into()),
        },
        Some(API_VERSION_V1ALPHA1) => {
            let size = widget.pointer("/spec/size").and_then(Value::as_str).unwrap_or("");
            match replicas_for_size(size) {
                Some(_) => Ok(()),
                None => refuse(format!("spec.size {size:?} is not small or large")),
            }
        }
        other => refuse(format!(
            "apiVersion {:?} is not a Widget version",
            other.unwrap_or("")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_of(object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": ADMISSION_API_VERSION,
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "test.olmv1.dev", "version": "v1", "kind": "Widget"},
                "resource": {"group": "test.olmv1.dev", "version": "v1", "resource": "widgets"},
                "name": "w", "namespace": "ns", "operation": "CREATE",
                "userInfo": {"username": "admin"},
                "object": object,
            },
        }))
        .unwrap()
    }

    fn v1(replicas: Value) -> Value {
        json!({"apiVersion": API_VERSION_V1, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": replicas}})
    }

    #[test]
    fn a_widget_within_the_limit_is_allowed() {
        for replicas in [0, 1, MAX_REPLICAS] {
            let out = review(&review_of(v1(json!(replicas)))).unwrap();
            assert_eq!(
                out,
                json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true},
                })
            );
        }
    }

    #[test]
    fn too_many_replicas_are_refused_with_the_reason() {
        let out = review(&review_of(v1(json!(MAX_REPLICAS + 1)))).unwrap();
        assert_eq!(out["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 422);
        assert_eq!(
            out["response"]["status"]["message"],
            "Widget \"w\" is refused: spec.replicas 11 is more than 10, the most this operator runs"
        );
        assert_eq!(
            validate_widget(&v1(json!(-1))).unwrap_err(),
            "Widget \"w\" is refused: spec.replicas -1 is negative"
        );
        assert_eq!(
            validate_widget(&v1(json!("3"))).unwrap_err(),
            "Widget \"w\" is refused: spec.replicas is missing or not an integer"
        );
    }

    #[test]
    fn v1alpha1_sizes_are_checked_too() {
        let alpha = |size: &str| json!({"apiVersion": API_VERSION_V1ALPHA1, "metadata": {"name": "a"}, "spec": {"size": size}});
        assert_eq!(validate_widget(&alpha("large")), Ok(()));
        assert_eq!(
            validate_widget(&alpha("huge")).unwrap_err(),
            "Widget \"a\" is refused: spec.size \"huge\" is not small or large"
        );
    }

    #[test]
    fn a_delete_has_no_object_and_is_allowed() {
        let mut body: Value = serde_json::from_slice(&review_of(Value::Null)).unwrap();
        body["request"].as_object_mut().unwrap().remove("object");
        body["request"]["operation"] = json!("DELETE");
        let out = review(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(out["response"]["allowed"], true);
    }

    #[test]
    fn what_is_not_a_v1_review_with_a_request_is_refused() {
        assert_eq!(
            review(br#"{"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"x"}}"#).unwrap_err(),
            AdmissionError::WrongVersion("admission.k8s.io/v1beta1".into())
        );
        assert_eq!(
            review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#).unwrap_err(),
            AdmissionError::NoRequest
        );
        assert!(matches!(review(b"[]"), Err(AdmissionError::NotAReview(_))));
    }
}
