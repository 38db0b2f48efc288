//! Kubernetes API requests counted per reconcile: the reconciler runs its work in a span
//! ([`count`]), and the clients that send the requests note each one ([`note`]; the leader's
//! guard does, see `leader::Leadership::client`). Below both, so neither imports the other.

use std::sync::Mutex;

/// The API requests counted so far for each reconcile in flight, by its tracing span. The span,
/// not a task-local, carries the count: kube's client sends requests from a worker task, which
/// enters the caller's span.
static API_REQUESTS: std::sync::LazyLock<Mutex<std::collections::HashMap<tracing::span::Id, u32>>> =
    std::sync::LazyLock::new(Mutex::default);

/// Runs `work` in a `reconcile{extension}` span and counts the Kubernetes API requests it makes
/// through clients that [`note`] each request.
pub async fn count<F: std::future::Future>(extension: &str, work: F) -> (F::Output, u32) {
    use tracing::Instrument;
    // ERROR level: the span (and so the count) exists under any log filter.
    let span = tracing::error_span!("reconcile", extension);
    let Some(id) = span.id() else {
        return (work.await, 0);
    };
    lock(&API_REQUESTS).insert(id.clone(), 0);
    let output = work.instrument(span).await;
    let count = lock(&API_REQUESTS).remove(&id).unwrap_or_default();
    (output, count)
}

/// Notes one API request for the reconcile whose span is current, if any.
pub fn note() {
    if let Some(id) = tracing::Span::current().id()
        && let Some(count) = lock(&API_REQUESTS).get_mut(&id)
    {
        *count += 1;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
