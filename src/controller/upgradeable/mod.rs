//! Owns the Upgradeable condition of the `olm` ClusterOperator (rules in compat, I/O in reconciler).
//! May import api, version, apply (revision records), controller's shared parts; never cmd.
//!
//! Cluster upgrade gating: installed bundles' `olm.maxOpenShiftVersion` -> condition `Upgradeable`
//! on the `olm` ClusterOperator (`config.openshift.io/v1`).
//!
//! ```text
//! ClusterExtensions ─┐
//! revision Secrets  ─┼─ watchers ─> compat::assess (pure) ─> ClusterOperator status (Upgradeable only)
//! ClusterVersion    ─┘                                    └─> metrics, logs
//! ```
//!
//! [`compat`] holds every rule (parsing, next minor, compatibility, message); [`reconciler`] only
//! reads the cluster and writes the one condition. Without the `config.openshift.io` API the
//! feature idles.

pub mod compat;
pub mod metrics;
pub mod reconciler;

use std::time::Duration;

pub use compat::{MajorMinor, VersionError};
pub use metrics::UpgradeableMetrics;
pub use reconciler::{Error, run};

/// The ClusterOperator that receives the condition unless configured otherwise.
pub const DEFAULT_CLUSTER_OPERATOR_NAME: &str = "olm";

/// Command-line options of the feature, for `#[command(flatten)]` into `olmv1 controller`'s args.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct UpgradeableArgs {
    /// The cluster's OpenShift version (e.g. 4.18.3; only major.minor count). Overrides
    /// ClusterVersion `version` status.desired.version.
    #[arg(long = "cluster-version", env = "OLMV1_CLUSTER_VERSION")]
    pub cluster_version: Option<String>,
    /// The ClusterOperator whose `Upgradeable` condition reports installed extensions that block
    /// the next cluster minor version.
    #[arg(long = "cluster-operator-name", env = "OLMV1_CLUSTER_OPERATOR_NAME", default_value = DEFAULT_CLUSTER_OPERATOR_NAME)]
    pub cluster_operator_name: String,
}

/// Settings of the Upgradeable reconciler.
#[derive(Clone, Debug, PartialEq)]
pub struct UpgradeableConfig {
    /// Namespace holding the revision record Secrets (the controller's system namespace).
    pub system_namespace: String,
    /// Name of the ClusterOperator to write (`olm`).
    pub cluster_operator_name: String,
    /// The cluster version when given on the command line; `None` reads ClusterVersion `version`.
    pub cluster_version: Option<MajorMinor>,
    /// Recompute this often even without a change (eventual consistency).
    pub resync_interval: Duration,
    /// How often to look again for the `config.openshift.io` API while it is absent.
    pub api_recheck_interval: Duration,
}

impl UpgradeableConfig {
    /// Defaults: ClusterOperator `olm`, version from ClusterVersion, resync every 10 minutes,
    /// API re-checked every 5 minutes.
    pub fn new(system_namespace: impl Into<String>) -> Self {
        Self {
            system_namespace: system_namespace.into(),
            cluster_operator_name: DEFAULT_CLUSTER_OPERATOR_NAME.to_owned(),
            cluster_version: None,
            resync_interval: Duration::from_secs(600),
            api_recheck_interval: Duration::from_secs(300),
        }
    }

    /// Settings from the command line; a `--cluster-version` that is not a version is an error.
    pub fn from_args(
        args: &UpgradeableArgs,
        system_namespace: impl Into<String>,
    ) -> Result<Self, VersionError> {
        let cluster_version = args
            .cluster_version
            .as_deref()
            .map(compat::parse_cluster_version)
            .transpose()?;
        Ok(Self {
            cluster_operator_name: args.cluster_operator_name.clone(),
            cluster_version,
            ..Self::new(system_namespace)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_become_a_config() {
        let args = UpgradeableArgs {
            cluster_version: Some("4.18.0-rc1".into()),
            cluster_operator_name: "olm".into(),
        };
        let config = UpgradeableConfig::from_args(&args, "olmv1-system").expect("valid");
        assert_eq!(config.cluster_version, Some(MajorMinor::new(4, 18)));
        assert_eq!(config.system_namespace, "olmv1-system");
        let bad = UpgradeableArgs {
            cluster_version: Some("latest".into()),
            ..args
        };
        let err = UpgradeableConfig::from_args(&bad, "ns").expect_err("invalid");
        assert!(err.to_string().contains("\"latest\""), "{err}");
    }

    #[test]
    fn the_flag_is_parsed_by_clap() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            upgradeable: UpgradeableArgs,
        }
        let cli = Cli::parse_from(["x", "--cluster-version", "4.17.2"]);
        assert_eq!(cli.upgradeable.cluster_version.as_deref(), Some("4.17.2"));
        assert_eq!(cli.upgradeable.cluster_operator_name, "olm");
    }
}
