//! `Upgradeable` on the operator's OperatorCondition, as operators built on operator-lib report
//! it: OLM names the condition object in `OPERATOR_CONDITION_NAME`; the operator reads it from
//! its own namespace, sets `spec.conditions[type=Upgradeable]` and writes the object back with an
//! update (get/update on that one object is all OLM grants it).
//!
//! What it says comes from the ConfigMap [`CONFIGMAP`] in the operator's namespace, so a test can
//! hold upgrades (`upgradeable: "false"`, as an operator does while a data migration runs) and
//! release them again. No ConfigMap, or any other value, is `Upgradeable=True`.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, reflector, reflector::ObjectRef, watcher};
use serde_json::{Value, json};

/// The environment variable OLM sets to the OperatorCondition's name.
pub const CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";
/// The ConfigMap, in the operator's namespace, that says whether upgrades are held.
pub const CONFIGMAP: &str = "webhook-operator-upgradeable";
/// The condition type OLM reads before an upgrade.
pub const UPGRADEABLE: &str = "Upgradeable";
/// The reason when nothing holds upgrades.
pub const REASON_ALLOWED: &str = "UpgradeAllowed";
/// The reason when the ConfigMap holds them and names none.
pub const REASON_HELD: &str = "Migrating";
/// How long after a failed write the condition is written again.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The Upgradeable condition the operator reports (`type`, `status`, `reason`, `message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

/// What the ConfigMap asks for: held when its `upgradeable` is `"false"`, with its `reason` and
/// `message` (defaults naming a data migration); allowed otherwise.
pub fn desired(configmap: Option<&ConfigMap>, bundle_version: &str) -> Desired {
    let data = configmap.and_then(|c| c.data.as_ref());
    let value = |key: &str| data.and_then(|d| d.get(key)).filter(|v| !v.is_empty()).cloned();
    if value("upgradeable").as_deref() == Some("false") {
        Desired {
            status: "False",
            reason: value("reason").unwrap_or_else(|| REASON_HELD.to_string()),
            message: value("message").unwrap_or_else(|| "a data migration is running".to_string()),
        }
    } else {
        Desired {
            status: "True",
            reason: REASON_ALLOWED.to_string(),
            message: format!("webhook-operator {bundle_version} may be upgraded"),
        }
    }
}

/// `conditions` with `desired` set as Kubernetes' `meta.SetStatusCondition` sets it: the
/// transition time kept while the status stays the same. `None` when nothing changes.
pub fn with_condition(conditions: &[Value], desired: &Desired, now: &str) -> Option<Vec<Value>> {
    let mut out = conditions.to_vec();
    match out.iter_mut().find(|c| c["type"] == UPGRADEABLE) {
        Some(c)
            if c["status"] == desired.status
                && c["reason"] == desired.reason.as_str()
                && c["message"] == desired.message.as_str() =>
        {
            return None;
        }
        Some(c) => {
            if c["status"] != desired.status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(desired.status);
            c["reason"] = json!(desired.reason);
            c["message"] = json!(desired.message);
        }
        None => out.push(json!({
            "type": UPGRADEABLE,
            "status": desired.status,
            "reason": desired.reason,
            "message": desired.message,
            "lastTransitionTime": now,
        })),
    }
    Some(out)
}

fn operator_conditions(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// Writes `desired` into OperatorCondition `name` (get, then update, as operator-lib does).
async fn write(api: &Api<DynamicObject>, name: &str, desired: &Desired) -> Result<bool, kube::Error> {
    let mut condition = api.get(name).await?;
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
        .to_string();
    let current = condition.data["spec"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(conditions) = with_condition(&current, desired, &now) else {
        return Ok(false);
    };
    if !condition.data["spec"].is_object() {
        condition.data["spec"] = json!({});
    }
    condition.data["spec"]["conditions"] = json!(conditions);
    api.replace(name, &PostParams::default(), &condition).await?;
    Ok(true)
}

/// Reports `Upgradeable` on the OperatorCondition OLM named, following the ConfigMap, until the
/// process ends. Without `OPERATOR_CONDITION_NAME` (an OLM that keeps no OperatorConditions) it
/// reports nothing.
pub async fn run(client: Client, bundle_version: String) {
    let Some(name) = std::env::var(CONDITION_NAME_ENV).ok().filter(|n| !n.is_empty()) else {
        tracing::info!("{CONDITION_NAME_ENV} is not set: Upgradeable is not reported");
        return;
    };
    let namespace = client.default_namespace().to_string();
    let conditions = operator_conditions(&client, &namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP}"));
    let (reader, writer) = reflector::store();
    let mut changes = std::pin::pin!(watcher(configmaps, config).default_backoff().reflect(writer));
    let key = ObjectRef::new(CONFIGMAP).within(&namespace);
    let mut listed = false;
    let mut written: Option<Desired> = None;
    loop {
        // The next change; after a failed write, at most RETRY_AFTER later, a retry.
        let next = if written.is_some() || !listed {
            Some(changes.next().await)
        } else {
            tokio::time::timeout(RETRY_AFTER, changes.next()).await.ok()
        };
        match next {
            Some(None) => return,
            Some(Some(Ok(watcher::Event::InitDone))) => listed = true,
            Some(Some(Err(e))) => tracing::warn!(error = %e, "watching ConfigMap {CONFIGMAP}"),
            _ => {}
        }
        if !listed {
            continue;
        }
        let want = desired(reader.get(&key).as_deref(), &bundle_version);
        if written.as_ref() == Some(&want) {
            continue;
        }
        match write(&conditions, &name, &want).await {
            Ok(changed) => {
                tracing::info!(operator_condition = %name, status = want.status, reason = %want.reason, changed, "Upgradeable reported");
                written = Some(want);
            }
            Err(e) => {
                tracing::warn!(operator_condition = %name, error = %e, "writing Upgradeable failed; retrying");
                written = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(pairs: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_configmap_holds_upgrades_only_when_it_says_false() {
        assert_eq!(desired(None, "0.1.0").status, "True");
        assert_eq!(
            desired(None, "0.1.0").message,
            "webhook-operator 0.1.0 may be upgraded"
        );
        assert_eq!(
            desired(Some(&configmap(&[("upgradeable", "true")])), "0.1.0").status,
            "True"
        );
        assert_eq!(
            desired(Some(&configmap(&[("upgradeable", "false")])), "0.1.0"),
            Desired {
                status: "False",
                reason: "Migrating".into(),
                message: "a data migration is running".into()
            }
        );
        let own = configmap(&[
            ("upgradeable", "false"),
            ("reason", "Rebalancing"),
            ("message", "3 of 7 shards moved"),
        ]);
        assert_eq!(desired(Some(&own), "0.1.0").message, "3 of 7 shards moved");
        assert_eq!(desired(Some(&own), "0.1.0").reason, "Rebalancing");
    }

    #[test]
    fn the_condition_is_set_as_set_status_condition_sets_it() {
        let held = desired(Some(&configmap(&[("upgradeable", "false")])), "0.1.0");
        let other = json!({"type": "Other", "status": "True"});
        let set = with_condition(std::slice::from_ref(&other), &held, "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(set[0], other);
        assert_eq!(
            set[1],
            json!({"type": "Upgradeable", "status": "False", "reason": "Migrating",
                "message": "a data migration is running", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        );
        // The same again: nothing to write.
        assert_eq!(with_condition(&set, &held, "2026-01-02T00:00:00Z"), None);
        // A new message keeps the transition time; a new status moves it.
        let mut again = held.clone();
        again.message = "almost done".into();
        let moved = with_condition(&set, &again, "2026-01-02T00:00:00Z").unwrap();
        assert_eq!(moved[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        let allowed = desired(None, "0.1.0");
        let flipped = with_condition(&moved, &allowed, "2026-01-03T00:00:00Z").unwrap();
        assert_eq!(flipped[1]["lastTransitionTime"], "2026-01-03T00:00:00Z");
        assert_eq!(flipped[1]["status"], "True");
    }
}
