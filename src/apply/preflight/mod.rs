//! Owns the CRD upgrade-safety and permission preflights (pure rules plus the review calls).
//! May import api and apply's siblings (objects, lookups); nothing above apply.
//!
//! Preflights run before anything of a bundle is applied, so that an apply that would fail half-way
//! fails before it starts:
//!
//! - **CRD upgrade safety** ([`check_crd_upgrade`], [`check_crd_upgrades`]): every CRD the bundle
//!   applies that already exists must be a safe replacement of the installed one, with upstream's
//!   rules and messages (see [`crd_upgrade`]). Skipped by the caller when the ClusterExtension sets
//!   `install.preflight.crdUpgradeSafety.enforcement: None`.
//! - **Permissions** ([`check_permissions`]): every request the apply (and the pruning of what the
//!   new bundle dropped) will make as the service account is reviewed with SubjectAccessReview, and
//!   all that is missing is reported in one error ([`MissingPermissions`]).
//!
//! Pure parts ([`check_crd_upgrade`], [`required_access`], [`AccessPlan::missing`]) hold the logic;
//! the async functions only read from the API server.

pub mod crd_upgrade;
pub mod permissions;
mod review;

pub use crd_upgrade::{CrdUpgradeError, check_crd_upgrade};
pub(crate) use permissions::combined;
pub use permissions::{
    Access, AccessPlan, AccessPolicy, AccessTarget, MissingPermissions, RbacRefusal, Requirement,
    ResourceInfo, ResourceTable, RoleRef, ServiceAccountRef, covers, grouped, owner_finalizers_access,
    required_access, rule_accesses,
};
pub use review::{
    MAX_CONCURRENT_REVIEWS, check_crd_upgrades, check_permissions, discover_resources, review_access,
};

use crate::go_format::go_quote;

/// Why a preflight refused an apply, or could not decide.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// One or more CRDs of the bundle would be unsafe upgrades of the installed ones.
    #[error("{}", join_lines(.0))]
    CrdUpgradeUnsafe(Vec<CrdUpgradeError>),
    /// The installed CRD could not be read.
    #[error("getting existing resource for CRD {}: {source}", go_quote(.name))]
    ReadExistingCrd {
        /// The CRD's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A CRD in the bundle is not a valid CustomResourceDefinition.
    #[error("converting object {} to a CustomResourceDefinition: {reason}", go_quote(.name))]
    InvalidCrd {
        /// The object's name.
        name: String,
        /// Why it does not decode.
        reason: String,
    },
    /// The service account lacks permissions.
    #[error(transparent)]
    MissingPermissions(#[from] MissingPermissions),
    /// An object of the bundle lacks what identifies it.
    #[error("bundle object {index} cannot be applied: {reason}")]
    InvalidObject {
        /// Its position in the list of objects.
        index: usize,
        /// What is missing.
        reason: String,
    },
    /// A Role, ClusterRole or binding of the bundle does not decode.
    #[error("{kind} {} in the bundle is invalid: {reason}", go_quote(.name))]
    InvalidRbacObject {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why it does not decode.
        reason: String,
    },
    /// The API server serves no resource for an object's kind (and the bundle defines no CRD for it).
    #[error("no resource type is served for kind {} in apiVersion {} (object {})", go_quote(.kind), go_quote(.api_version), go_quote(.name))]
    UnknownKind {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
    },
    /// API discovery failed.
    #[error("discovering the API server's resource types: {0}")]
    Discovery(#[source] kube::Error),
    /// A SubjectAccessReview, or reading a role a binding refers to, failed.
    #[error("checking permissions of service account {}: {source}", go_quote(.service_account))]
    AccessReview {
        /// `namespace/name` of the service account.
        service_account: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl PreflightError {
    /// Whether retrying cannot help until the bundle changes (which triggers a reconcile anyway):
    /// true only for bundle content that is malformed. Missing permissions, unsafe CRD upgrades
    /// (the installed CRD or RBAC may be fixed by an admin, and nothing else would trigger a
    /// reconcile) and API errors are retried, as upstream does.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            PreflightError::InvalidCrd { .. }
                | PreflightError::InvalidObject { .. }
                | PreflightError::InvalidRbacObject { .. }
        )
    }
}

fn join_lines(errors: &[CrdUpgradeError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
