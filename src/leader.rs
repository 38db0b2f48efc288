//! Owns leader election on a coordination.k8s.io Lease, so that only one replica reconciles.
//! May import api_requests only (a bottom layer beside image), and third-party crates.
//!
//! The leader stops writing before any other replica may take over: every client of a leading
//! process passes through a [`Leadership`] guard that refuses requests once the last successful
//! renewal is the renew deadline old, while another replica only takes the Lease once its
//! `renewTime` is the lease duration old. The margin between the two absorbs clock skew and a
//! request in flight. A process paused (SIGSTOP, a partition) past the deadline finds its guard
//! closed when it resumes, and [`LeaderElector::hold`] returns so that it exits and restarts.
//! The durations ([`LeaderTimings`]) default to upstream's (137 s, 107 s, 26 s): a renewal every
//! 26 s is one request, where client-go's defaults (15 s, 10 s, 2 s) cost thirteen.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client, Config,
    api::{ObjectMeta, PostParams},
    client::ClientBuilder,
};
use tracing::{info, warn};

/// How long a Lease is valid, how long its leader keeps writing without renewing it, and how often
/// the leader renews it (and candidates retry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderTimings {
    /// How long a lease is valid without renewal, for the replicas waiting to take over.
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal.
    pub renew_deadline: Duration,
    /// How often the leader renews and candidates retry.
    pub retry_period: Duration,
}

impl LeaderTimings {
    /// Upstream operator-controller's and catalogd's: a 137 s lease, a 107 s renew deadline, a
    /// renewal every 26 s (about 140 requests an hour, where client-go's 2 s costs 1,800).
    pub const UPSTREAM: Self = Self {
        lease_duration: Duration::from_secs(137),
        renew_deadline: Duration::from_secs(107),
        retry_period: Duration::from_secs(26),
    };

    /// These timings, if the leader renews before it must stop (`retry_period <
    /// renew_deadline`) and stops before a candidate may take over (`renew_deadline <
    /// lease_duration`).
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, LeaderError> {
        if retry_period.is_zero() || retry_period >= renew_deadline || renew_deadline >= lease_duration {
            return Err(LeaderError::Timings {
                lease_duration,
                renew_deadline,
                retry_period,
            });
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

impl Default for LeaderTimings {
    fn default() -> Self {
        Self::UPSTREAM
    }
}

/// The leader election's durations as command-line flags (with `--leader-elect`); upstream's
/// by default.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderTimingArgs {
    /// Seconds a Lease is valid without renewal: how long the other replicas wait before one
    /// takes over from a leader that stopped renewing.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_LEASE_DURATION_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.lease_duration.as_secs())]
    pub leader_election_lease_duration_seconds: u64,
    /// Seconds the leader keeps reconciling after its last successful renewal; shorter than the
    /// lease duration, so that it stops before another replica may start.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.renew_deadline.as_secs())]
    pub leader_election_renew_deadline_seconds: u64,
    /// Seconds between the leader's renewals (one request each) and between the other replicas'
    /// reads of the Lease; shorter than the renew deadline.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.retry_period.as_secs())]
    pub leader_election_retry_period_seconds: u64,
}

impl LeaderTimingArgs {
    /// With `elect`, the timings these flags describe, if the leader stops before another may
    /// take over; `None` without election.
    pub fn election(&self, elect: bool) -> Result<Option<LeaderTimings>, LeaderError> {
        if !elect {
            return Ok(None);
        }
        let s = Duration::from_secs;
        LeaderTimings::new(
            s(self.leader_election_lease_duration_seconds),
            s(self.leader_election_renew_deadline_seconds),
            s(self.leader_election_retry_period_seconds),
        )
        .map(Some)
    }
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be read or written.
    #[error("leader election on Lease {namespace}/{name} failed: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Another replica holds the Lease now.
    #[error("lost the Lease {namespace}/{name} to {holder:?}")]
    Taken {
        namespace: String,
        name: String,
        holder: String,
    },
    /// The Lease could not be renewed within the renew deadline.
    #[error("could not renew the Lease {namespace}/{name} within {deadline:?}; stepped down")]
    NotRenewed {
        namespace: String,
        name: String,
        deadline: Duration,
    },
    /// Timings under which the leader could still write after another replica took over.
    #[error(
        "leader election needs a retry period ({retry_period:?}) shorter than the renew deadline \
         ({renew_deadline:?}), itself shorter than the lease duration ({lease_duration:?})"
    )]
    Timings {
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    },
}

impl LeaderError {
    /// Losing leadership always ends the process; a failed read while waiting is retried.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Self::Api { .. })
    }
}

/// A request refused because this process does not (or no longer) lead.
#[derive(Debug, thiserror::Error)]
#[error("not the leader: the Lease was not renewed within its renew deadline, requests are refused")]
pub struct NotLeader;

/// Whether this process may talk to the API server as the leader: a deadline that each
/// successful renewal pushes forward. Shared by the elector and every client it guards.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// `None`: no election (a single replica), always allowed.
    valid_until: Option<Arc<Mutex<Option<Instant>>>>,
}

impl Leadership {
    /// No election: every request is allowed.
    pub fn unelected() -> Self {
        Self { valid_until: None }
    }

    /// Elected: nothing is allowed until the Lease is acquired.
    pub fn elected() -> Self {
        Self {
            valid_until: Some(Arc::new(Mutex::new(None))),
        }
    }

    /// Whether requests may be sent now.
    pub fn holds(&self) -> bool {
        match &self.valid_until {
            None => true,
            Some(until) => until
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|until| Instant::now() < until),
        }
    }

    /// How long requests may still be sent (zero when they may not).
    fn remaining(&self) -> Duration {
        match &self.valid_until {
            None => Duration::MAX,
            Some(until) => until
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map_or(Duration::ZERO, |until| {
                    until.saturating_duration_since(Instant::now())
                }),
        }
    }

    fn set(&self, until: Option<Instant>) {
        if let Some(slot) = &self.valid_until {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = until;
        }
    }

    /// A client from `config` whose requests are refused with [`NotLeader`] while this process
    /// does not hold the lease. Each request it sends is counted for the reconcile that makes it
    /// ([`crate::api_requests::count`]).
    pub fn client(&self, config: Config) -> Result<Client, kube::Error> {
        Ok(ClientBuilder::try_from(config)?.with_layer(&self.guard()).build())
    }

    /// The layer that refuses requests with [`NotLeader`] while this process does not hold the
    /// lease, and counts those it lets through (see [`Leadership::client`]).
    pub fn guard<R>(
        &self,
    ) -> tower::filter::FilterLayer<impl Fn(R) -> Result<R, NotLeader> + Clone + use<R>> {
        let leadership = self.clone();
        tower::filter::FilterLayer::new(move |request| {
            if leadership.holds() {
                crate::api_requests::note();
                Ok(request)
            } else {
                Err(NotLeader)
            }
        })
    }
}

/// Names this replica in every request's User-Agent, so that the API server's audit log tells
/// replicas apart: `olmv1-<component>/<version> (<identity>)`.
pub fn identify(config: &mut Config, component: &str, identity: &str) {
    let agent = format!("olmv1-{component}/{} ({identity})", env!("CARGO_PKG_VERSION"));
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
}

/// This replica's identity: the pod name, else the host name, else the process id.
pub fn replica_identity(component: &str) -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("olmv1-{component}-{}", std::process::id()))
}

/// A Lease-based leader elector.
pub struct LeaderElector {
    leases: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    leadership: Leadership,
    timings: LeaderTimings,
    /// The Lease as this replica last wrote it, while it holds it: a renewal replaces it
    /// without reading it first (one request, not two), and falls back to reading it on a
    /// conflict (someone else wrote it since).
    held: Mutex<Option<Lease>>,
    /// Set by [`LeaderElector::release`]: a renewal under way then writes nothing more.
    released: std::sync::atomic::AtomicBool,
}

impl LeaderElector {
    /// Elects on Lease `namespace/name` as `identity` (e.g. the pod name) with `timings`,
    /// opening and closing `leadership`. `client` must not be guarded by `leadership` itself.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        leadership: Leadership,
        timings: LeaderTimings,
    ) -> Self {
        Self {
            leases: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            leadership,
            timings,
            held: Mutex::new(None),
            released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Waits until this process holds the lease.
    pub async fn acquire(&self) -> Result<(), LeaderError> {
        loop {
            let attempt = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    self.leadership.set(Some(attempt + self.timings.renew_deadline));
                    info!(lease = %self.name, identity = %self.identity, "became leader");
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) => warn!(error = %e, "cannot read the Lease; retrying"),
            }
            tokio::time::sleep(self.timings.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns why leadership was lost, after closing
    /// the guard. Never returns while leading.
    pub async fn hold(&self) -> LeaderError {
        let lost = loop {
            tokio::time::sleep(self.timings.retry_period).await;
            let attempt = Instant::now();
            let remaining = self.leadership.remaining();
            if remaining.is_zero() {
                break self.not_renewed();
            }
            // A renewal that hangs past the deadline is as good as a failed one.
            match tokio::time::timeout(remaining, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => self.leadership.set(Some(attempt + self.timings.renew_deadline)),
                Ok(Ok(false)) => break self.taken().await,
                Ok(Err(e)) => warn!(error = %e, "failed to renew the lease; retrying until the deadline"),
                Err(_) => break self.not_renewed(),
            }
        };
        self.leadership.set(None);
        warn!(lease = %self.name, error = %lost, "lost leadership");
        lost
    }

    /// Gives the Lease up on a graceful stop, once this replica wrote its last: closes the guard,
    /// then writes the Lease with no holder, as client-go's `ReleaseOnCancel`, so that another
    /// replica takes it at its next retry instead of waiting out the lease duration. A failure is
    /// only logged: the others then wait for the lease to run out.
    pub async fn release(&self) {
        self.released.store(true, std::sync::atomic::Ordering::SeqCst);
        self.leadership.set(None);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        // A renewal under way when the stop came has the Lease as last written (and, if it lands
        // after this read, makes the write below conflict): read it again, a few times.
        for _ in 0..3 {
            let mut lease = match held.take() {
                Some(lease) => lease,
                None => match self.leases.get_opt(&self.name).await {
                    Ok(Some(lease)) if self.holds(&lease) => lease,
                    Ok(_) => return,
                    Err(e) => {
                        warn!(lease = %self.name, error = %e, "could not release the Lease; the others wait for it to expire");
                        return;
                    }
                },
            };
            let now = MicroTime(Timestamp::now());
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                spec.acquire_time = Some(now.clone());
                spec.renew_time = Some(now);
            }
            match self
                .leases
                .replace(&self.name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => {
                    info!(lease = %self.name, identity = %self.identity, "released the Lease");
                    return;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => {
                    warn!(lease = %self.name, error = %e, "could not release the Lease; the others wait for it to expire");
                    return;
                }
            }
        }
        warn!(lease = %self.name, "could not release the Lease: it kept changing; the others wait for it to expire");
    }

    /// Whether `lease` names this replica as its holder.
    fn holds(&self, lease: &Lease) -> bool {
        lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(self.identity.as_str())
    }

    fn not_renewed(&self) -> LeaderError {
        LeaderError::NotRenewed {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            deadline: self.timings.renew_deadline,
        }
    }

    async fn taken(&self) -> LeaderError {
        let holder = match self.leases.get_opt(&self.name).await {
            Ok(Some(lease)) => lease.spec.and_then(|s| s.holder_identity).unwrap_or_default(),
            _ => String::new(),
        };
        LeaderError::Taken {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            holder,
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<bool, LeaderError> {
        let api_err = |source| LeaderError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        };
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(false);
        }
        let now = Timestamp::now();
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut lease) = held {
            // The fast path of a renewal: our last write's resourceVersion makes it a
            // compare-and-swap, as below.
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(MicroTime(now));
            }
            match self
                .leases
                .replace(&self.name, &PostParams::default(), &lease)
                .await
            {
                Ok(written) => return Ok(self.hold_written(written)),
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(api_err(e)),
            }
        }
        // Released meanwhile (the conflict may be the release itself): never take it back.
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(false);
        }
        let existing = self.leases.get_opt(&self.name).await.map_err(api_err)?;
        let Some(mut lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(now, 0, now)),
            };
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(written) => Ok(self.hold_written(written)),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(e) => Err(api_err(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        // A Lease released (no holder) is free at once.
        if !holder.is_empty() && holder != self.identity && !expired(&spec, now, self.timings.lease_duration)
        {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or_default() + i32::from(holder != self.identity);
        let acquired = if holder == self.identity {
            spec.acquire_time.map(|t| t.0).unwrap_or(now)
        } else {
            now
        };
        lease.spec = Some(self.spec(acquired, transitions, now));
        // The resourceVersion in `lease` makes this a compare-and-swap.
        match self
            .leases
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => Ok(self.hold_written(written)),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(api_err(e)),
        }
    }

    /// Keeps the Lease just written (this replica holds it) for the next renewal's fast path.
    fn hold_written(&self, written: Lease) -> bool {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(written);
        true
    }

    fn spec(&self, acquired: Timestamp, transitions: i32, now: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                self.timings
                    .lease_duration
                    .as_secs()
                    .try_into()
                    .unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

/// Whether the holder's lease ran out: `renewTime` more than `leaseDurationSeconds` ago (`own`
/// when the Lease names none).
fn expired(spec: &LeaseSpec, now: Timestamp, own: Duration) -> bool {
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let duration = spec
        .lease_duration_seconds
        .map_or(own.as_secs() as i64, i64::from);
    now.as_millisecond() > renewed.as_millisecond() + duration * 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unelected_process_always_holds() {
        assert!(Leadership::unelected().holds());
    }

    #[test]
    fn an_elected_process_holds_only_until_its_deadline() {
        let leadership = Leadership::elected();
        assert!(
            !leadership.holds(),
            "nothing is allowed before the Lease is acquired"
        );
        leadership.set(Some(Instant::now() + Duration::from_secs(60)));
        assert!(leadership.holds());
        let copy = leadership.clone();
        leadership.set(Some(Instant::now() - Duration::from_millis(1)));
        assert!(!copy.holds(), "a renewal deadline in the past closes every clone");
        assert_eq!(copy.remaining(), Duration::ZERO);
    }

    #[test]
    fn a_lease_expires_after_its_duration_from_the_last_renewal() {
        let renewed = Timestamp::from_second(1_000_000).unwrap();
        let spec = LeaseSpec {
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(15),
            ..Default::default()
        };
        let at = |ms: i64| Timestamp::from_millisecond(1_000_000_000 + ms).unwrap();
        let own = LeaderTimings::UPSTREAM.lease_duration;
        assert!(
            !expired(&spec, at(15_000), own),
            "the Lease's own duration counts"
        );
        assert!(expired(&spec, at(15_001), own));
        assert!(
            expired(&LeaseSpec::default(), at(0), own),
            "a Lease never renewed is free"
        );
    }

    #[test]
    fn timings_under_which_a_leader_could_outlive_its_lease_are_refused() {
        let s = Duration::from_secs;
        assert_eq!(LeaderTimings::default(), LeaderTimings::UPSTREAM);
        assert_eq!(
            LeaderTimings::new(s(137), s(107), s(26)).unwrap(),
            LeaderTimings::UPSTREAM
        );
        assert!(LeaderTimings::new(s(15), s(10), s(2)).is_ok());
        for (lease, renew, retry) in [(10, 10, 2), (15, 20, 2), (15, 10, 10), (15, 10, 0)] {
            let error = LeaderTimings::new(s(lease), s(renew), s(retry)).unwrap_err();
            assert!(
                matches!(error, LeaderError::Timings { .. }) && error.is_terminal(),
                "{lease} {renew} {retry}: {error}"
            );
        }
    }
}
