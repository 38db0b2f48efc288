//! Owns the one retry backoff of the crate: exponential from a first delay, capped.
//! May import nothing of the crate (a bottom layer), only std.

use std::time::Duration;

/// Exponential backoff: `first`, twice that, four times that, ... never more than `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// A backoff from `first` doubling up to `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self { first, max }
    }

    /// The delay after `failures` failures in a row (1 for the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first.saturating_mul(1u32 << doublings).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_first_and_stop_at_the_cap() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let delays: Vec<u64> = [0, 1, 2, 3, 9, 10, 50, u32::MAX]
            .into_iter()
            .map(|n| backoff.delay(n).as_secs())
            .collect();
        assert_eq!(delays, [1, 1, 2, 4, 256, 300, 300, 300]);
        let fast = Backoff::new(Duration::from_millis(250), Duration::MAX);
        assert_eq!(fast.delay(3), Duration::from_millis(1000));
    }
}
