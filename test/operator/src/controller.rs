//! The Widget controller: writes each v1 Widget's status (observed generation, ready, a message
//! naming the bundle version). It needs only what the bundle's CSV asks for: get/list/watch on
//! widgets and patch on widgets/status.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};

use crate::widget::{MAX_REPLICAS, Widget, WidgetStatus};

/// How long after a failed status write the Widget is tried again: short, as the usual cause (the
/// API server restarting, a conflict) passes quickly; kube's watch backoff covers longer outages.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("Widget {name:?} has no namespace")]
    NoNamespace { name: String },
    #[error("writing the status of Widget {namespace}/{name}: {source}")]
    WriteStatus {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// The status a Widget should have: pure, so tests and the reconciler agree on it.
pub fn status_for(widget: &Widget, bundle_version: &str) -> WidgetStatus {
    let replicas = widget.spec.replicas;
    let (ready, message) = if (0..=MAX_REPLICAS).contains(&replicas) {
        (
            true,
            format!("{replicas} replicas reconciled by webhook-operator {bundle_version}"),
        )
    } else {
        // Only reachable when the validating webhook was bypassed.
        (
            false,
            format!("spec.replicas {replicas} is outside 0 to {MAX_REPLICAS}: nothing is run"),
        )
    };
    WidgetStatus {
        observed_generation: widget.metadata.generation,
        ready,
        message,
        bundle_version: bundle_version.to_string(),
    }
}

struct Context {
    client: Client,
    bundle_version: String,
}

async fn reconcile(widget: Arc<Widget>, ctx: Arc<Context>) -> Result<Action, ControllerError> {
    let name = widget.name_any();
    let namespace = widget
        .namespace()
        .ok_or_else(|| ControllerError::NoNamespace { name: name.clone() })?;
    let desired = status_for(&widget, &ctx.bundle_version);
    // Writing an unchanged status would wake this controller again, forever.
    if widget.status.as_ref() == Some(&desired) {
        return Ok(Action::await_change());
    }
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = Patch::Merge(serde_json::json!({"status": desired}));
    api.patch_status(&name, &PatchParams::default(), &patch)
        .await
        .map_err(|source| ControllerError::WriteStatus {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;
    tracing::info!(%namespace, %name, message = %desired.message, "status written");
    Ok(Action::await_change())
}

fn error_policy(_widget: Arc<Widget>, error: &ControllerError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    Action::requeue(RETRY_AFTER)
}

/// Runs the controller over Widgets in all namespaces until `shutdown` resolves; sets `synced`
/// once the first list has been read (the readiness probe waits for it).
pub async fn run(
    client: Client,
    bundle_version: String,
    synced: Arc<AtomicBool>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<Widget> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    // The controller's own watch, seen on the way: `InitDone` ends each full list. Once listed,
    // the pod stays ready through later re-lists (the webhooks still serve meanwhile).
    let widgets = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) && !synced.swap(true, Ordering::SeqCst) {
                tracing::info!("widgets listed: controller synced");
            }
        })
        .touched_objects();
    let ctx = Arc::new(Context {
        client,
        bundle_version,
    });
    Controller::for_stream(widgets, reader)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widget::WidgetSpec;

    fn widget(replicas: i64, generation: i64) -> Widget {
        let mut w = Widget::new("w", WidgetSpec { replicas });
        w.metadata.generation = Some(generation);
        w
    }

    #[test]
    fn the_status_names_the_generation_and_the_bundle_version() {
        assert_eq!(
            status_for(&widget(3, 4), "0.2.0"),
            WidgetStatus {
                observed_generation: Some(4),
                ready: true,
                message: "3 replicas reconciled by webhook-operator 0.2.0".into(),
                bundle_version: "0.2.0".into(),
            }
        );
        let status = serde_json::to_value(status_for(&widget(0, 1), "0.1.0")).unwrap();
        assert_eq!(
            status,
            serde_json::json!({"observedGeneration": 1, "ready": true, "bundleVersion": "0.1.0",
                "message": "0 replicas reconciled by webhook-operator 0.1.0"})
        );
    }

    #[test]
    fn a_widget_the_webhook_would_refuse_is_not_ready() {
        let status = status_for(&widget(MAX_REPLICAS + 1, 1), "0.1.0");
        assert!(!status.ready);
        assert_eq!(
            status.message,
            "spec.replicas 11 is outside 0 to 10: nothing is run"
        );
    }
}
