//! A replica of a long-running component: its identity, the configuration naming it, a client
//! that stops with its Lease, and the elector (when it elects) on a client of its own.

use kube::{Client, Config};

use crate::leader::{LeaderElector, LeaderTimings, Leadership, identify, replica_identity};

/// A replica's connection to the cluster: its identity, a client that stops with the Lease, and
/// the elector (when it elects) on a client of its own.
pub struct Replica {
    /// The pod name (or host name, or `olmv1-<component>-<pid>`).
    pub identity: String,
    /// The configuration, naming the replica in its User-Agent.
    pub config: Config,
    /// Whether this replica may send requests now.
    pub leadership: Leadership,
    /// The client every reconcile uses: refused while this replica does not lead.
    pub client: Client,
    elector: Option<LeaderElector>,
}

impl Replica {
    /// Connects as `component`; with `elect`, elects on Lease `namespace/lease` with those
    /// timings before leading.
    pub async fn connect(
        component: &str,
        elect: Option<LeaderTimings>,
        namespace: &str,
        lease: &str,
    ) -> Result<Self, String> {
        let identity = replica_identity(component);
        crate::tls_profile::install_default_provider();
        let mut config = Config::infer()
            .await
            .map_err(|e| format!("cannot find a Kubernetes configuration: {e}"))?;
        config.proxy_url = api_server_proxy(config.proxy_url.take());
        identify(&mut config, component, &identity);
        let build_error = |e| format!("cannot build a Kubernetes client: {e}");
        let leadership = if elect.is_some() {
            Leadership::elected()
        } else {
            Leadership::unelected()
        };
        // The reconcilers' client stops with the Lease (see leader.rs); the elector's does not.
        let client = leadership.client(config.clone()).map_err(build_error)?;
        let elector = match elect {
            Some(timings) => {
                let lease_client = Client::try_from(config.clone()).map_err(build_error)?;
                Some(LeaderElector::new(
                    lease_client,
                    namespace,
                    lease,
                    &identity,
                    leadership.clone(),
                    timings,
                ))
            }
            None => None,
        };
        Ok(Self {
            identity,
            config,
            leadership,
            client,
            elector,
        })
    }

    /// Waits until this replica leads (at once when it does not elect).
    pub async fn acquire(&self) -> Result<(), String> {
        let Some(elector) = &self.elector else {
            return Ok(());
        };
        tracing::info!(identity = %self.identity, "waiting for leadership");
        elector.acquire().await.map_err(|e| e.to_string())
    }

    /// Gives the Lease up (a graceful stop, after the last reconcile): another replica takes over
    /// at its next retry. Nothing without election.
    pub async fn release(&self) {
        if let Some(elector) = &self.elector {
            elector.release().await;
        }
    }

    /// Completes with the message to exit with when leadership is lost; never without election.
    pub async fn lost(&self) -> String {
        match &self.elector {
            Some(elector) => format!("{}; exiting so another replica can lead", elector.hold().await),
            None => std::future::pending().await,
        }
    }
}

/// The proxy to the API server: only the one the kubeconfig names (`proxy-url`). kube also
/// takes `HTTPS_PROXY` from the environment, which the Deployments set for registries and
/// catalog servers (see `egress`); in-cluster configuration never has a proxy.
fn api_server_proxy(inferred: Option<http::Uri>) -> Option<http::Uri> {
    inferred?;
    let kubeconfig = kube::config::Kubeconfig::read().ok()?;
    kubeconfig_proxy_url(&kubeconfig)?.parse().ok()
}

/// The `proxy-url` of the current context's cluster.
fn kubeconfig_proxy_url(kubeconfig: &kube::config::Kubeconfig) -> Option<String> {
    let current = kubeconfig.current_context.as_deref()?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)?
        .context
        .as_ref()?;
    let cluster = kubeconfig.clusters.iter().find(|c| c.name == context.cluster)?;
    cluster
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|url| !url.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(current: &str, proxy: Option<&str>) -> kube::config::Kubeconfig {
        let proxy = proxy.map(|p| format!("\n    proxy-url: {p}")).unwrap_or_default();
        let yaml = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443{proxy}\n- name: other\n  cluster:\n    server: https://10.0.0.2:6443\n    proxy-url: http://other-proxy:3128\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\n"
        );
        kube::config::Kubeconfig::from_yaml(&yaml).expect("a valid kubeconfig")
    }

    #[test]
    fn only_the_current_clusters_proxy_url_reaches_the_api_server() {
        assert_eq!(
            kubeconfig_proxy_url(&kubeconfig("ctx", Some("http://proxy.corp:3128"))).as_deref(),
            Some("http://proxy.corp:3128")
        );
        // No proxy-url: none, whatever HTTPS_PROXY says (kube would take it).
        assert_eq!(kubeconfig_proxy_url(&kubeconfig("ctx", None)), None);
        assert_eq!(kubeconfig_proxy_url(&kubeconfig("missing", None)), None);
    }
}
