//! The one configuration of every watch the components hold. Idle, a watch costs the API server
//! one request each time it ends and is started again: kube's default ends it after 290 s, so a
//! dozen watches made ~25 requests per idle 10 minutes (docs/benchmarks.md). Here each watch asks
//! for a long server-side timeout, drawn once per watch between [`MIN_TIMEOUT`] and twice that so
//! that watches started together do not end together, with bookmarks on (a resumed watch starts
//! from the last bookmark's resourceVersion instead of listing again; the API server sends one
//! about every minute, which also keeps the connection's idle timer from firing).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use kube::runtime::watcher;

/// The shortest server-side timeout of a watch; each watch draws its own in `[MIN, 2 * MIN)`.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A watch's configuration: long jittered timeout, bookmarks.
pub fn config() -> watcher::Config {
    watcher::Config::default().timeout(jittered_timeout_secs())
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
