//! The one configuration of every watch the components hold. Idle, a watch costs the API server
//! one request each time it ends and is started again: kube's default ends it after 290 s, so a
//! dozen watches made ~25 requests per idle 10 minutes (docs/benchmarks.md). Here each watch asks
//! for a long server-side timeout, drawn once per watch between [`MIN_TIMEOUT`] and twice that so
//! that watches started together do not end together, with bookmarks on (a resumed watch starts
//! from the last bookmark's resourceVersion instead of listing again; the API server sends one
//! about every minute, which also keeps the connection's idle timer from firing).

use std::fmt::Debug;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use kube::{
    Api, Resource,
    runtime::{Controller, WatchStreamExt, reflector, utils::Backoff, watcher},
};
use serde::de::DeserializeOwned;

/// The shortest server-side timeout of a watch; each watch draws its own in `[MIN, 2 * MIN)`.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A watch's configuration: long jittered timeout, bookmarks.
pub fn config() -> watcher::Config {
    watcher::Config::default().timeout(jittered_timeout_secs())
}

/// A Controller of `api`'s objects (watched with `config`) whose trigger streams each back off on
/// their own. kube-runtime's `Controller::new` puts one backoff over all its trigger streams
/// together, so an error of any one of them (each watch refused in turn while a restarted API
/// server fills its authorization caches, then each told its resourceVersion is too old) paused
/// every one, the controller's own watch included, for up to 30 s each: after an API server
/// restart, a changed ClusterExtension went unseen for over 5 minutes. Every trigger stream added
/// to it must back off itself (`default_backoff`).
pub fn controller<K>(api: Api<K>, config: watcher::Config) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    let (reader, writer) = reflector::store();
    let own = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(own, reader).trigger_backoff(EachStreamBacksOff)
}

/// The backoff over a Controller's trigger streams taken together: none, each backs off itself.
struct EachStreamBacksOff;

impl Iterator for EachStreamBacksOff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl Backoff for EachStreamBacksOff {
    fn reset(&mut self) {}
}

/// A timeout in `[MIN_TIMEOUT, 2 * MIN_TIMEOUT)` seconds, different for each call.
fn jittered_timeout_secs() -> u32 {
    let min = MIN_TIMEOUT.as_secs();
    (min + random() % min) as u32
}

/// A period in `[period, 1.2 * period)`, different for each call: periodic work of many objects
/// (or replicas) started together does not stay together.
pub fn jittered(period: Duration) -> Duration {
    let spread = (period.as_millis() / 5).max(1) as u64;
    period + Duration::from_millis(random() % spread)
}

fn random() -> u64 {
    // A fresh RandomState is randomly keyed: enough for jitter, no extra dependency.
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_long_and_spread() {
        let timeouts: std::collections::BTreeSet<u32> = (0..64).map(|_| jittered_timeout_secs()).collect();
        let min = MIN_TIMEOUT.as_secs() as u32;
        assert!(
            timeouts.iter().all(|t| (min..2 * min).contains(t)),
            "{timeouts:?}"
        );
        assert!(
            timeouts.len() > 32,
            "64 draws gave {} distinct timeouts",
            timeouts.len()
        );
        let period = Duration::from_secs(100);
        let periods: std::collections::BTreeSet<Duration> = (0..64).map(|_| jittered(period)).collect();
        assert!(
            periods.iter().all(|p| (period..period * 6 / 5).contains(p)),
            "{periods:?}"
        );
        assert!(periods.len() > 32);
        let config = config();
        assert!(config.bookmarks);
        assert!(config.timeout.is_some_and(|t| t >= min));
    }
}
