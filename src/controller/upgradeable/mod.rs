//! Owns the Upgradeable condition of the `olm` ClusterOperator (rules in compat, I/O in reconciler).
//! May import api, version, apply (revision records), controller's shared parts; never cmd.
//!
//! Cluster upgrade gating: installed bundles' `olm.maxOpenShiftVersion` -> a condition the
//! cluster-version operator reads, written where no other operator fights over it
//! ([`UpgradeableMode`]):
//!
//! - `cluster-operator` (default): `Upgradeable` on a ClusterOperator olmv1 creates and owns
//!   (`olmv1`), with its `versions`, `relatedObjects` and Available/Progressing/Degraded.
//! - `integrated`: `InstalledOLMOperatorsUpgradeable` on `operator.openshift.io/v1` `OLM` `cluster`,
//!   as cluster-olm-operator writes it; library-go merges it into the `olm` ClusterOperator.
//!
//! ```text
//! ClusterExtensions ─┐
//! revision Secrets  ─┼─ watchers ─> compat::assess (pure) ─> ClusterOperator or OLM status
//! ClusterVersion    ─┘                                    └─> metrics, logs
//! ```
//!
//! [`compat`] holds every rule (parsing, next minor, compatibility, message); [`reconciler`] only
//! reads the cluster and writes the conditions. Without the OpenShift API it needs, the feature
//! idles.

pub mod compat;
pub mod metrics;
pub mod reconciler;

use std::time::Duration;

pub use compat::{MajorMinor, VersionError};
pub use metrics::UpgradeableMetrics;
pub use reconciler::{Error, run};

/// The ClusterOperator olmv1 creates and owns unless configured otherwise.
pub const DEFAULT_CLUSTER_OPERATOR_NAME: &str = "olmv1";

/// Where the verdict goes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpgradeableMode {
    /// `Upgradeable` on a ClusterOperator olmv1 creates and owns (`--cluster-operator-name`).
    #[default]
    ClusterOperator,
    /// `InstalledOLMOperatorsUpgradeable` on `operator.openshift.io/v1` `OLM` `cluster`, for
    /// cluster-olm-operator to merge into the `olm` ClusterOperator.
    Integrated,
}

/// Command-line options of the feature, for `#[command(flatten)]` into `olmv1 controller`'s args.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct UpgradeableArgs {
    /// The cluster's OpenShift version (e.g. 4.18.3; only major.minor count). Overrides
    /// ClusterVersion `version` status.desired.version.
    #[arg(long = "cluster-version", env = "OLMV1_CLUSTER_VERSION")]
    pub cluster_version: Option<String>,
    /// The ClusterOperator olmv1 creates and owns, whose `Upgradeable` condition reports installed
    /// extensions that block the next cluster minor version (mode `cluster-operator`).
    #[arg(long = "cluster-operator-name", env = "OLMV1_CLUSTER_OPERATOR_NAME", default_value = DEFAULT_CLUSTER_OPERATOR_NAME)]
    pub cluster_operator_name: String,
    /// Where the verdict is written: `cluster-operator` (olmv1's own ClusterOperator) or
    /// `integrated` (`InstalledOLMOperatorsUpgradeable` on OLM `cluster`).
    #[arg(
        long = "upgradeable-mode",
        env = "OLMV1_UPGRADEABLE_MODE",
        value_enum,
        default_value = "cluster-operator"
    )]
    pub mode: UpgradeableMode,
}

/// Settings of the Upgradeable reconciler.
#[derive(Clone, Debug, PartialEq)]
pub struct UpgradeableConfig {
    /// Namespace holding the revision record Secrets (the controller's system namespace).
    pub system_namespace: String,
    /// Where the verdict is written.
    pub mode: UpgradeableMode,
    /// Name of the ClusterOperator olmv1 owns (`olmv1`), in mode `cluster-operator`.
    pub cluster_operator_name: String,
    /// The cluster version when given on the command line; `None` reads ClusterVersion `version`.
    pub cluster_version: Option<MajorMinor>,
    /// Recompute this often even without a change (eventual consistency).
    pub resync_interval: Duration,
    /// How often to look again for the `config.openshift.io` API while it is absent, besides on
    /// each CRD or APIService event: a safety net.
    pub api_recheck_interval: Duration,
}

impl UpgradeableConfig {
    /// Defaults: ClusterOperator `olmv1`, version from ClusterVersion, resync every 10 minutes,
    /// API re-checked on CRD and APIService events and every hour.
    pub fn new(system_namespace: impl Into<String>) -> Self {
        Self {
            system_namespace: system_namespace.into(),
            mode: UpgradeableMode::default(),
            cluster_operator_name: DEFAULT_CLUSTER_OPERATOR_NAME.to_owned(),
            cluster_version: None,
            resync_interval: Duration::from_secs(600),
            api_recheck_interval: Duration::from_secs(3600),
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
            mode: args.mode,
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
            cluster_operator_name: "olmv1".into(),
            mode: UpgradeableMode::Integrated,
        };
        let config = UpgradeableConfig::from_args(&args, "olmv1-system").expect("valid");
        assert_eq!(config.cluster_version, Some(MajorMinor::new(4, 18)));
        assert_eq!(config.system_namespace, "olmv1-system");
        assert_eq!(config.mode, UpgradeableMode::Integrated);
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
        assert_eq!(cli.upgradeable.cluster_operator_name, "olmv1");
        assert_eq!(cli.upgradeable.mode, UpgradeableMode::ClusterOperator);
        let cli = Cli::parse_from(["x", "--upgradeable-mode", "integrated"]);
        assert_eq!(cli.upgradeable.mode, UpgradeableMode::Integrated);
    }
}
