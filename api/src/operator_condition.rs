//! OLM classic's OperatorCondition (`operators.coreos.com/v2`), which olmv1 keeps for each
//! installed bundle when the CRD is served: the object an operator sets `Upgradeable` on (named
//! in its `OPERATOR_CONDITION_NAME`), the admin's `spec.overrides`, and classic's two rules over
//! them: the status mirror of `spec.conditions` and the verdict before an upgrade. Also the CRD
//! olmv1 installs when asked (`--operator-conditions=install`): classic's group, names, versions
//! and schema, so that either one can replace the other with every object still valid.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The API group.
pub const GROUP: &str = "operators.coreos.com";
/// The version olmv1 reads and writes (classic's storage version).
pub const VERSION: &str = "v2";
/// `apiVersion` of the objects olmv1 writes.
pub const API_VERSION: &str = "operators.coreos.com/v2";
/// The kind.
pub const KIND: &str = "OperatorCondition";
/// The resource.
pub const PLURAL: &str = "operatorconditions";
/// The CRD's name.
pub const CRD_NAME: &str = "operatorconditions.operators.coreos.com";
/// The condition type OLM reads before an upgrade.
pub const TYPE_UPGRADEABLE: &str = "Upgradeable";
/// The environment variable naming the OperatorCondition in each container of the bundle's
/// Deployments (operator-lib reads it).
pub const ENV_OPERATOR_CONDITION_NAME: &str = "OPERATOR_CONDITION_NAME";

/// `spec`: what OLM lists for the operator, what the operator reports, what the admin overrides.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    namespaced,
    status = "OperatorConditionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// The operator's ServiceAccounts (granted access to this object).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// The operator's Deployments (given `OPERATOR_CONDITION_NAME`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
    /// The admin's word, which wins over the operator's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<ConditionEntry>,
    /// The operator's word.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionEntry>,
}

/// `status`: `spec.conditions` as OLM mirrored them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorConditionStatus {
    /// The mirrored conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionEntry>,
}

/// One condition (metav1.Condition's fields; overrides may lack a transition time). Read
/// leniently: this is the operator's and the admin's text.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionEntry {
    /// The type, e.g. `Upgradeable`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Whether an upgrade may replace the bundle an OperatorCondition speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upgradeability {
    /// Nothing holds it (no Upgradeable condition, or it is not False, or an override says True).
    Allowed,
    /// Held, and by what.
    Held(Hold),
}

/// Why an upgrade is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// `spec.overrides` says Upgradeable is not True (the admin's word).
    Override {
        /// Its status.
        status: String,
        /// Its reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// The operator says Upgradeable=False.
    Operator {
        /// Its reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// The mirrored Upgradeable condition was set for an older generation of the object.
    Outdated {
        /// Its status.
        status: String,
        /// The generation it was set for.
        observed: i64,
        /// The object's generation.
        generation: i64,
    },
}

impl OperatorCondition {
    /// `status.conditions` after classic's mirror of `spec.conditions` (each spec condition set
    /// with the object's generation as its observed generation, unless the status already has
    /// that type with the same status for this generation), with `now` as the transition time
    /// of a condition that names none. `None` when the mirror changes nothing.
    pub fn mirrored_status(&self, now: &str) -> Option<Vec<ConditionEntry>> {
        let generation = self.metadata.generation.unwrap_or_default();
        let mut status = self
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let mut changed = false;
        for condition in &self.spec.conditions {
            let mut wanted = condition.clone();
            wanted.observed_generation = Some(generation);
            match status.iter_mut().find(|c| c.type_ == condition.type_) {
                Some(c)
                    if c.status == condition.status
                        && c.observed_generation.unwrap_or_default() == generation => {}
                Some(c) => {
                    // Kubernetes' meta.SetStatusCondition.
                    if c.status != wanted.status {
                        c.status = wanted.status.clone();
                        c.last_transition_time = Some(
                            wanted
                                .last_transition_time
                                .clone()
                                .unwrap_or_else(|| now.to_string()),
                        );
                    }
                    c.reason = wanted.reason;
                    c.message = wanted.message;
                    c.observed_generation = wanted.observed_generation;
                    changed = true;
                }
                None => {
                    if wanted.last_transition_time.is_none() {
                        wanted.last_transition_time = Some(now.to_string());
                    }
                    status.push(wanted);
                    changed = true;
                }
            }
        }
        changed.then_some(status)
    }

    /// Classic's verdict before an upgrade, over the status as its mirror leaves it: an
    /// `Upgradeable` override wins (True allows, anything else holds); else the mirrored
    /// `Upgradeable` condition holds when it is False or was set for another generation.
    pub fn upgradeability(&self) -> Upgradeability {
        if let Some(o) = self.spec.overrides.iter().find(|c| c.type_ == TYPE_UPGRADEABLE) {
            if o.status == "True" {
                return Upgradeability::Allowed;
            }
            return Upgradeability::Held(Hold::Override {
                status: o.status.clone(),
                reason: o.reason.clone(),
                message: o.message.clone(),
            });
        }
        let status = self.mirrored_status("").unwrap_or_else(|| {
            self.status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
        });
        let Some(c) = status.iter().find(|c| c.type_ == TYPE_UPGRADEABLE) else {
            return Upgradeability::Allowed;
        };
        let generation = self.metadata.generation.unwrap_or_default();
        let observed = c.observed_generation.unwrap_or_default();
        if observed != generation {
            return Upgradeability::Held(Hold::Outdated {
                status: c.status.clone(),
                observed,
                generation,
            });
        }
        if c.status == "False" {
            return Upgradeability::Held(Hold::Operator {
                reason: c.reason.clone(),
                message: c.message.clone(),
            });
        }
        Upgradeability::Allowed
    }
}

impl std::fmt::Display for Hold {
    /// What holds the upgrade, in a sentence fragment after the OperatorCondition's name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hold::Override {
                status,
                reason,
                message,
            } => write!(
                f,
                "its spec.overrides say Upgradeable={status} ({reason}): {message}"
            ),
            Hold::Operator { reason, message } => {
                write!(f, "the operator says Upgradeable=False ({reason}): {message}")
            }
            Hold::Outdated {
                status,
                observed,
                generation,
            } => write!(
                f,
                "its Upgradeable={status} was set for generation {observed}, not the current {generation}"
            ),
        }
    }
}

/// The CRD olmv1 installs when asked: classic's group, names (short name `condition`, category
/// `olm`), scope and versions (`v1` served, `v2` served and stored, no conversion: their schemas
/// differ only in `v2`'s `spec.conditions`), each with the status subresource.
pub fn crd() -> CustomResourceDefinition {
    let version = |name: &str, storage: bool| {
        let mut spec = json!({
            "type": "object",
            "description": "What OLM lists for the operator and what the cluster admin overrides.",
            "properties": {
                "deployments": string_list("The operator's Deployments."),
                "serviceAccounts": string_list("The operator's ServiceAccounts."),
                "overrides": {
                    "type": "array",
                    "description": "Conditions the cluster admin sets; they win over the operator's.",
                    "items": condition(false),
                },
            },
        });
        if storage {
            spec["properties"]["conditions"] = json!({
                "type": "array",
                "description": "Conditions the operator reports.",
                "items": condition(true),
            });
        }
        json!({
            "name": name,
            "served": true,
            "storage": storage,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "description": "An operator's conditions as OLM reads them (Upgradeable holds upgrades).",
                "required": ["metadata"],
                "properties": {
                    "apiVersion": {"type": "string", "description": "The versioned schema of this object."},
                    "kind": {"type": "string", "description": "The kind of this object."},
                    "metadata": {"type": "object"},
                    "spec": spec,
                    "status": {
                        "type": "object",
                        "description": "spec.conditions as OLM mirrored them.",
                        "properties": {"conditions": {
                            "type": "array",
                            "description": "The mirrored conditions.",
                            "items": condition(true),
                        }},
                    },
                },
            }},
        })
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {"app.kubernetes.io/managed-by": "olmv1"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": "OperatorConditionList",
                "plural": PLURAL,
                "singular": "operatorcondition",
                "shortNames": ["condition"],
                "categories": ["olm"],
            },
            "scope": "Namespaced",
            "versions": [version("v1", false), version("v2", true)],
        },
    }))
    .expect("the OperatorCondition CRD is a CRD")
}

fn string_list(description: &str) -> Value {
    json!({"type": "array", "description": description, "items": {"type": "string"}})
}

/// metav1.Condition's schema; `lastTransitionTime` is not required of overrides.
fn condition(transition_required: bool) -> Value {
    let mut required = vec!["message", "reason", "status", "type"];
    if transition_required {
        required.insert(0, "lastTransitionTime");
    }
    json!({
        "type": "object",
        "required": required,
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time",
                "description": "When the status last changed."},
            "message": {"type": "string", "maxLength": 32768, "description": "For humans."},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                "description": "The generation the condition was set for."},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                "description": "A CamelCase reason."},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                "description": "True, False or Unknown."},
            "type": {"type": "string", "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                "description": "The condition type, e.g. Upgradeable."},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(spec: Value, status: Value, generation: i64) -> OperatorCondition {
        serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "op.v1", "namespace": "ns", "generation": generation},
            "spec": spec, "status": status,
        }))
        .unwrap()
    }

    fn upgradeable(status: &str, reason: &str, message: &str, generation: Option<i64>) -> Value {
        let mut c = json!({"type": "Upgradeable", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        if let Some(g) = generation {
            c["observedGeneration"] = json!(g);
        }
        c
    }

    #[test]
    fn nothing_said_allows_and_the_operators_false_holds() {
        assert_eq!(
            condition(json!({}), json!({}), 1).upgradeability(),
            Upgradeability::Allowed
        );
        let held = condition(
            json!({"conditions": [upgradeable("False", "Migrating", "moving data", None)]}),
            json!({}),
            2,
        );
        assert_eq!(
            held.upgradeability(),
            Upgradeability::Held(Hold::Operator {
                reason: "Migrating".into(),
                message: "moving data".into()
            })
        );
        let released = condition(
            json!({"conditions": [upgradeable("True", "Done", "", None)]}),
            json!({"conditions": [upgradeable("False", "Migrating", "moving data", Some(2))]}),
            3,
        );
        assert_eq!(released.upgradeability(), Upgradeability::Allowed);
    }

    #[test]
    fn an_override_wins_either_way() {
        let spec = |override_status: &str, operator: &str| {
            json!({
                "overrides": [{"type": "Upgradeable", "status": override_status, "reason": "Admin", "message": "admin says"}],
                "conditions": [upgradeable(operator, "Op", "operator says", None)],
            })
        };
        assert_eq!(
            condition(spec("True", "False"), json!({}), 1).upgradeability(),
            Upgradeability::Allowed
        );
        let held = condition(spec("False", "True"), json!({}), 1).upgradeability();
        let Upgradeability::Held(hold) = held else {
            panic!("held")
        };
        assert_eq!(
            hold.to_string(),
            "its spec.overrides say Upgradeable=False (Admin): admin says"
        );
    }

    #[test]
    fn a_status_only_condition_set_for_another_generation_is_outdated() {
        // An operator that writes status directly, as classic reads it.
        let stale = condition(
            json!({}),
            json!({"conditions": [upgradeable("True", "Ok", "", Some(1))]}),
            2,
        );
        let Upgradeability::Held(hold) = stale.upgradeability() else {
            panic!("held")
        };
        assert_eq!(
            hold.to_string(),
            "its Upgradeable=True was set for generation 1, not the current 2"
        );
        let current = condition(
            json!({}),
            json!({"conditions": [upgradeable("False", "Busy", "busy", Some(2))]}),
            2,
        );
        assert!(matches!(
            current.upgradeability(),
            Upgradeability::Held(Hold::Operator { .. })
        ));
    }

    #[test]
    fn the_mirror_sets_spec_conditions_into_status_as_classic_does() {
        let oc = condition(
            json!({"conditions": [upgradeable("False", "Migrating", "moving data", None),
                {"type": "Other", "status": "True", "reason": "R", "message": ""}]}),
            json!({"conditions": [upgradeable("True", "Ok", "fine", Some(1)),
                {"type": "Kept", "status": "True", "reason": "K", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}),
            2,
        );
        let status = oc.mirrored_status("2026-02-02T00:00:00Z").unwrap();
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!([
                {"type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "moving data",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2},
                {"type": "Kept", "status": "True", "reason": "K", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "Other", "status": "True", "reason": "R", "message": "",
                    "lastTransitionTime": "2026-02-02T00:00:00Z", "observedGeneration": 2},
            ])
        );
        // Mirrored: nothing more to do.
        let mut done = oc.clone();
        done.status = Some(OperatorConditionStatus { conditions: status });
        assert_eq!(done.mirrored_status("2026-03-03T00:00:00Z"), None);
    }

    fn without_descriptions(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("description");
                map.values_mut().for_each(without_descriptions);
            }
            Value::Array(items) => items.iter_mut().for_each(without_descriptions),
            _ => {}
        }
    }

    /// OLM classic's own CRD (`../shared/classic-api`, read at test time): olmv1's has the same
    /// names, scope and versions, and each version the same schema but for the prose.
    #[test]
    fn the_crd_is_classics_but_for_its_descriptions() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/classic-api/operators.coreos.com_operatorconditions.yaml"
        );
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("classic's CRD at {path}: {e} (see ../shared/classic-api/README.md)"));
        let mut classic: Value = serde_saphyr::from_str(&text).unwrap();
        let mut ours = serde_json::to_value(crd()).unwrap();
        without_descriptions(&mut classic["spec"]);
        without_descriptions(&mut ours["spec"]);
        assert_eq!(difference(&ours["spec"], &classic["spec"], "spec"), None);
    }

    /// The first place where `ours` and `theirs` differ, with both values.
    fn difference(ours: &Value, theirs: &Value, at: &str) -> Option<String> {
        match (ours, theirs) {
            (Value::Object(a), Value::Object(b)) => a.keys().chain(b.keys()).find_map(|k| {
                difference(
                    &a.get(k).cloned().unwrap_or_default(),
                    &b.get(k).cloned().unwrap_or_default(),
                    &format!("{at}.{k}"),
                )
            }),
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| difference(x, y, &format!("{at}[{i}]"))),
            _ if ours == theirs => None,
            // The typed CRD keeps `minimum` as a float: 0.0 is YAML's 0.
            (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
            _ => Some(format!("{at}: ours {ours}, classic's {theirs}")),
        }
    }

    #[test]
    fn the_crd_is_classics_shape() {
        let crd = serde_json::to_value(crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], CRD_NAME);
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["condition"]));
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(
            versions
                .iter()
                .map(|v| (v["name"].clone(), v["served"].clone(), v["storage"].clone()))
                .collect::<Vec<_>>(),
            [
                (json!("v1"), json!(true), json!(false)),
                (json!("v2"), json!(true), json!(true))
            ]
        );
        let v2 = &versions[1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert!(v2.get("conditions").is_some());
        assert!(
            versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .get("conditions")
                .is_none()
        );
    }
}
