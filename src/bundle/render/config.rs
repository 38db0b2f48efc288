//! `spec.config.inline` of a ClusterExtension for a registry+v1 bundle: `watchNamespace` and
//! `deploymentConfig`, validated as upstream's JSON schema (built from the CSV's install modes)
//! validates them, with upstream's messages (`config.formatSchemaError`).

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::bundle::csv::{
    ClusterServiceVersion, INSTALL_MODE_ALL_NAMESPACES, INSTALL_MODE_OWN_NAMESPACE,
    INSTALL_MODE_SINGLE_NAMESPACE,
};

const WATCH_NAMESPACE: &str = "watchNamespace";
const DEPLOYMENT_CONFIG: &str = "deploymentConfig";
const NAMESPACE_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const NAMESPACE_MAX_LENGTH: usize = 63;

/// A validated bundle configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BundleConfig {
    /// The namespace to watch; `None` means the bundle's default (all namespaces).
    pub watch_namespace: Option<String>,
    /// Customisations of the CSV's deployments (OLM v0 `SubscriptionConfig` parity).
    pub deployment_config: Option<DeploymentConfig>,
}

/// `deploymentConfig`: what OLM v0's `SubscriptionConfig` could change in an operator Deployment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeploymentConfig {
    /// Environment variables set on every container (replacing same-named ones).
    pub env: Vec<EnvVar>,
    /// `envFrom` sources appended to every container (duplicates skipped).
    pub env_from: Vec<EnvFromSource>,
    /// Pod volumes (replacing same-named ones).
    pub volumes: Vec<Volume>,
    /// Volume mounts of every container (replacing same-named ones).
    pub volume_mounts: Vec<VolumeMount>,
    /// Tolerations appended (duplicates skipped).
    pub tolerations: Vec<Toleration>,
    /// Resources replacing every container's.
    pub resources: Option<ResourceRequirements>,
    /// Node selector replacing the pod's.
    pub node_selector: Option<std::collections::BTreeMap<String, String>>,
    /// Affinity merged as OLM v0 does (`{}` erases).
    pub affinity: Option<Affinity>,
    /// Annotations added to the Deployment and its pod template where not already set.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Which `watchNamespace` the CSV's install modes allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WatchNamespaceRule {
    /// AllNamespaces only (or none of Own/Single): the field does not exist.
    Absent,
    /// AllNamespaces plus Own and/or Single: optional, `null` allowed.
    Optional(NamespaceFormat),
    /// Own and/or Single without AllNamespaces: required.
    Required(NamespaceFormat),
}

/// Upstream's custom `format` on `watchNamespace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NamespaceFormat {
    /// Any namespace name.
    Any,
    /// OwnNamespace only: must equal the install namespace.
    OwnNamespace,
    /// SingleNamespace only: must differ from the install namespace.
    SingleNamespace,
}

fn watch_namespace_rule(csv: &ClusterServiceVersion) -> WatchNamespaceRule {
    let own = csv.supports(INSTALL_MODE_OWN_NAMESPACE);
    let single = csv.supports(INSTALL_MODE_SINGLE_NAMESPACE);
    if !own && !single {
        return WatchNamespaceRule::Absent;
    }
    let format = match (own, single) {
        (true, false) => NamespaceFormat::OwnNamespace,
        (false, true) => NamespaceFormat::SingleNamespace,
        _ => NamespaceFormat::Any,
    };
    if csv.supports(INSTALL_MODE_ALL_NAMESPACES) {
        WatchNamespaceRule::Optional(format)
    } else {
        WatchNamespaceRule::Required(format)
    }
}

/// Validates `config` (the inline JSON; `None` is read as `{}`) for a bundle with this CSV.
/// The error is the text after `invalid configuration: `.
pub fn parse_bundle_config(
    config: Option<&Value>,
    csv: &ClusterServiceVersion,
    install_namespace: &str,
) -> Result<BundleConfig, String> {
    let empty = Value::Object(Map::new());
    let config = config.unwrap_or(&empty);
    let rule = watch_namespace_rule(csv);
    let Value::Object(object) = config else {
        return Err(format!("invalid type: got {}, want object", json_type(config)));
    };

    let mut errors = Vec::new();
    let required = matches!(rule, WatchNamespaceRule::Required(_));
    if required && !object.contains_key(WATCH_NAMESPACE) {
        errors.push(format!("required field {WATCH_NAMESPACE:?} is missing"));
    }
    let mut unknown: Vec<&str> = Vec::new();
    let mut watch_namespace = None;
    let mut deployment_config = None;
    for (key, value) in object {
        match key.as_str() {
            WATCH_NAMESPACE if rule != WatchNamespaceRule::Absent => {
                match check_watch_namespace(value, rule, install_namespace) {
                    Ok(ns) => watch_namespace = ns,
                    Err(mut e) => errors.append(&mut e),
                }
            }
            DEPLOYMENT_CONFIG => match parse_deployment_config(value) {
                Ok(dc) => deployment_config = dc,
                Err(mut e) => errors.append(&mut e),
            },
            other => unknown.push(other),
        }
    }
    if let Some(first) = unknown.iter().min() {
        errors.push(format!("unknown field {first:?}"));
    }
    match errors.len() {
        0 => Ok(BundleConfig {
            watch_namespace,
            deployment_config,
        }),
        1 => Err(errors.remove(0)),
        _ => Err(format!("multiple errors found:\n  - {}", errors.join("\n  - "))),
    }
}

/// Validates a `watchNamespace` value, returning every message the schema library would give.
fn check_watch_namespace(
    value: &Value,
    rule: WatchNamespaceRule,
    install_namespace: &str,
) -> Result<Option<String>, Vec<String>> {
    let field = format!("{WATCH_NAMESPACE:?}");
    match rule {
        WatchNamespaceRule::Absent => Ok(None),
        WatchNamespaceRule::Required(format) => match value {
            Value::Null => Err(vec![format!("required field {field} is missing")]),
            Value::String(s) => {
                let errs = string_errors(s, format, install_namespace);
                if errs.is_empty() {
                    Ok(Some(s.clone()))
                } else {
                    Err(errs)
                }
            }
            other => Err(vec![format!(
                "invalid type for field {field}: got {}, want string",
                json_type(other)
            )]),
        },
        WatchNamespaceRule::Optional(format) => match value {
            Value::Null => Ok(None),
            other => {
                // anyOf [null, string]: the anyOf failure, then each branch's failures.
                let string_branch = match other {
                    Value::String(s) => string_errors(s, format, install_namespace),
                    _ => vec![format!(
                        "invalid type for field {field}: got {}, want string",
                        json_type(other)
                    )],
                };
                if string_branch.is_empty() {
                    return Ok(other.as_str().map(str::to_string));
                }
                let mut errs = vec![
                    format!("invalid value for field {field}"),
                    format!(
                        "invalid type for field {field}: got {}, want null",
                        json_type(other)
                    ),
                ];
                errs.extend(string_branch);
                Err(errs)
            }
        },
    }
}

/// The errors of the namespace string schema: format first (it stops validation), then minLength,
/// maxLength and pattern.
fn string_errors(s: &str, format: NamespaceFormat, install_namespace: &str) -> Vec<String> {
    let field = format!("{WATCH_NAMESPACE:?}");
    if !install_namespace.is_empty() {
        match format {
            NamespaceFormat::OwnNamespace if s != install_namespace => {
                return vec![format!(
                    "invalid format for field {field}: {s:?} is not valid ownNamespaceInstallMode: invalid value {s:?}: \
                     must be {install_namespace:?} (the namespace where the operator is installed) because this \
                     operator only supports OwnNamespace install mode"
                )];
            }
            NamespaceFormat::SingleNamespace if s == install_namespace => {
                return vec![format!(
                    "invalid format for field {field}: {s:?} is not valid singleNamespaceInstallMode: invalid value \
                     {s:?}: must be different from {install_namespace:?} (the install namespace) because this \
                     operator uses SingleNamespace install mode to watch a different namespace"
                )];
            }
            _ => {}
        }
    }
    let mut errs = Vec::new();
    let len = s.chars().count();
    if len < 1 {
        errs.push(format!("field {field} must have minimum length of 1 (len={len})"));
    }
    if len > NAMESPACE_MAX_LENGTH {
        errs.push(format!(
            "field {field} must have maximum length of {NAMESPACE_MAX_LENGTH} (len={len})"
        ));
    }
    if !is_dns1123_label_chars(s) {
        errs.push(format!("field {field} must match pattern {NAMESPACE_PATTERN:?}"));
    }
    errs
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` without a regex.
pub(crate) fn is_dns1123_label_chars(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// Validates and reads `deploymentConfig`.
fn parse_deployment_config(value: &Value) -> Result<Option<DeploymentConfig>, Vec<String>> {
    let object = match value {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => {
            return Err(vec![format!(
                "invalid type for field \"deploymentConfig\": got {}, want object",
                json_type(other)
            )]);
        }
    };
    let mut errors = Vec::new();
    let mut config = DeploymentConfig::default();
    let mut unknown = Vec::new();
    for (key, value) in object {
        let path = format!("deploymentConfig.{key}");
        match key.as_str() {
            "env" => config.env = list_of(value, &path, &mut errors),
            "envFrom" => config.env_from = list_of(value, &path, &mut errors),
            "volumes" => config.volumes = list_of(value, &path, &mut errors),
            "volumeMounts" => config.volume_mounts = list_of(value, &path, &mut errors),
            "tolerations" => config.tolerations = list_of(value, &path, &mut errors),
            "resources" => config.resources = object_of(value, &path, &mut errors),
            "affinity" => config.affinity = object_of(value, &path, &mut errors),
            "nodeSelector" => config.node_selector = string_map(value, &path, &mut errors),
            "annotations" => config.annotations = string_map(value, &path, &mut errors).unwrap_or_default(),
            other => unknown.push(other.to_string()),
        }
    }
    if let Some(first) = unknown.iter().min() {
        errors.push(format!("unknown field {first:?}"));
    }
    if errors.is_empty() {
        Ok(Some(config))
    } else {
        Err(errors)
    }
}

fn list_of<T: DeserializeOwned>(value: &Value, path: &str, errors: &mut Vec<String>) -> Vec<T> {
    let Value::Array(items) = value else {
        errors.push(format!(
            "invalid type for field {path:?}: got {}, want array",
            json_type(value)
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match serde_json::from_value::<T>(item.clone()) {
            Ok(v) if item.is_object() => out.push(v),
            Ok(_) => errors.push(format!(
                "invalid type for field \"{path}.{i}\": got {}, want object",
                json_type(item)
            )),
            Err(e) => errors.push(format!("invalid value for field \"{path}.{i}\": {e}")),
        }
    }
    out
}

fn object_of<T: DeserializeOwned>(value: &Value, path: &str, errors: &mut Vec<String>) -> Option<T> {
    if !value.is_object() {
        errors.push(format!(
            "invalid type for field {path:?}: got {}, want object",
            json_type(value)
        ));
        return None;
    }
    serde_json::from_value(value.clone())
        .map_err(|e| errors.push(format!("invalid value for field {path:?}: {e}")))
        .ok()
}

fn string_map(
    value: &Value,
    path: &str,
    errors: &mut Vec<String>,
) -> Option<std::collections::BTreeMap<String, String>> {
    let Value::Object(map) = value else {
        errors.push(format!(
            "invalid type for field {path:?}: got {}, want object",
            json_type(value)
        ));
        return None;
    };
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in map {
        match v {
            Value::String(s) => {
                out.insert(k.clone(), s.clone());
            }
            other => errors.push(format!(
                "invalid type for field \"{path}.{k}\": got {}, want string",
                json_type(other)
            )),
        }
    }
    Some(out)
}

/// JSON Schema type names, as the schema library reports them.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::bundle::csv::InstallMode;

    fn csv(modes: &[&str]) -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::default();
        csv.spec.install_modes = modes
            .iter()
            .map(|m| InstallMode {
                type_: (*m).to_string(),
                supported: true,
            })
            .collect();
        csv
    }

    #[test]
    fn all_namespaces_only_has_no_watch_namespace() {
        let c = csv(&["AllNamespaces"]);
        assert_eq!(parse_bundle_config(None, &c, "ns"), Ok(BundleConfig::default()));
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": "x"})), &c, "ns"),
            Err("unknown field \"watchNamespace\"".to_string())
        );
        assert_eq!(
            parse_bundle_config(Some(&json!({"unknownField": "value"})), &c, "ns"),
            Err("unknown field \"unknownField\"".to_string())
        );
        assert_eq!(
            parse_bundle_config(Some(&json!(true)), &c, "ns"),
            Err("invalid type: got boolean, want object".into())
        );
    }

    #[test]
    fn own_namespace_only_requires_the_install_namespace() {
        let c = csv(&["OwnNamespace"]);
        assert_eq!(
            parse_bundle_config(None, &c, "ns"),
            Err("required field \"watchNamespace\" is missing".to_string())
        );
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": "ns"})), &c, "ns").map(|c| c.watch_namespace),
            Ok(Some("ns".to_string()))
        );
        let err = parse_bundle_config(
            Some(&json!({"watchNamespace": "wrong-namespace"})),
            &c,
            "correct-namespace",
        )
        .unwrap_err();
        assert!(err.starts_with("invalid format for field \"watchNamespace\": \"wrong-namespace\" is not valid ownNamespaceInstallMode: invalid value \"wrong-namespace\": must be \"correct-namespace\" (the namespace where the operator is installed)"), "{err}");
    }

    #[test]
    fn single_namespace_only_refuses_the_install_namespace_and_bad_names() {
        let c = csv(&["SingleNamespace"]);
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": null})), &c, "ns"),
            Err("required field \"watchNamespace\" is missing".to_string())
        );
        let err = parse_bundle_config(Some(&json!({"watchNamespace": "ns"})), &c, "ns").unwrap_err();
        assert!(
            err.contains("not valid singleNamespaceInstallMode")
                && err.contains("watch a different namespace")
        );
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": 123})), &c, "ns"),
            Err("invalid type for field \"watchNamespace\": got integer, want string".to_string())
        );
        let both = csv(&["SingleNamespace", "OwnNamespace"]);
        let err =
            parse_bundle_config(Some(&json!({"watchNamespace": "A".repeat(64)})), &both, "ns").unwrap_err();
        assert_eq!(
            err,
            "multiple errors found:\n  - field \"watchNamespace\" must have maximum length of 63 (len=64)\n  - field \"watchNamespace\" must match pattern \"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$\""
        );
    }

    #[test]
    fn all_and_own_namespace_make_watch_namespace_optional() {
        let c = csv(&["AllNamespaces", "OwnNamespace"]);
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": null})), &c, "ns"),
            Ok(BundleConfig::default())
        );
        assert_eq!(
            parse_bundle_config(Some(&json!({"watchNamespace": "ns"})), &c, "ns").map(|c| c.watch_namespace),
            Ok(Some("ns".to_string()))
        );
        let err = parse_bundle_config(Some(&json!({"watchNamespace": "other"})), &c, "ns").unwrap_err();
        assert!(
            err.starts_with("multiple errors found:\n  - invalid value for field \"watchNamespace\""),
            "{err}"
        );
    }

    #[test]
    fn deployment_config_is_read_and_checked() {
        let c = csv(&["AllNamespaces"]);
        let cfg = parse_bundle_config(
            Some(&json!({"deploymentConfig": {"env": [{"name": "A", "value": "1"}], "nodeSelector": {"a": "b"}}})),
            &c,
            "ns",
        )
        .expect("valid")
        .deployment_config
        .expect("present");
        assert_eq!(cfg.env[0].name, "A");
        assert_eq!(
            parse_bundle_config(
                Some(&json!({"deploymentConfig": {"env": "not-an-array"}})),
                &c,
                "ns"
            ),
            Err("invalid type for field \"deploymentConfig.env\": got string, want array".to_string())
        );
        assert_eq!(
            parse_bundle_config(
                Some(&json!({"deploymentConfig": {"bogusUnknownField": 1}})),
                &c,
                "ns"
            ),
            Err("unknown field \"bogusUnknownField\"".to_string())
        );
    }
}
