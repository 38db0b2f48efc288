//! Leader election on a coordination.k8s.io Lease, so that only one replica reconciles.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use tracing::{info, warn};

/// How long a lease is valid without renewal.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the leader renews (well inside the duration).
const RENEW_EVERY: Duration = Duration::from_secs(5);

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
}

/// A Lease-based leader elector.
pub struct LeaderElector {
    leases: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
}

impl LeaderElector {
    /// Elects on Lease `namespace/name` as `identity` (e.g. the pod name).
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            leases: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
        }
    }

    /// Waits until this process holds the lease.
    pub async fn acquire(&self) -> Result<(), LeaderError> {
        loop {
            if self.try_acquire_or_renew().await? {
                info!(lease = %self.name, identity = %self.identity, "became leader");
                return Ok(());
            }
            tokio::time::sleep(RENEW_EVERY).await;
        }
    }

    /// Renews the lease until it is lost; returns when leadership is lost.
    pub async fn hold(&self) {
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => {}
                Ok(false) => {
                    warn!(lease = %self.name, "lost leadership");
                    return;
                }
                Err(e) => warn!(error = %e, "failed to renew the lease; retrying"),
            }
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<bool, LeaderError> {
        let api_err = |source| LeaderError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        };
        let now = Timestamp::now();
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
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(e) => Err(api_err(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let renewed = spec
            .renew_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let duration = spec
            .lease_duration_seconds
            .unwrap_or(LEASE_DURATION.as_secs() as i32);
        let expired = now.as_second() > renewed.as_second() + i64::from(duration);
        if holder != self.identity && !expired {
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
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(api_err(e)),
        }
    }

    fn spec(&self, acquired: Timestamp, transitions: i32, now: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}
