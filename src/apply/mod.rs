//! Owns server-side apply as the service account, the revision record and its store, preflights.
//! May import api, version, catalog (bundle properties); never resolve, bundle, controller or cmd.
//!
//! Server-side apply as the ClusterExtension's service account, the revision record, preflights.

pub mod identity;
pub mod lookups;
pub mod objects;
pub mod ownership;
pub mod preflight;
pub mod revision;

/// Errors applying, pruning or checking a revision's objects.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An object of the bundle is not a valid Kubernetes object.
    #[error("{0}")]
    InvalidObject(String),
    /// The API server does not serve the object's kind.
    #[error("the API server does not serve {gvk}: {source}")]
    Discovery {
        gvk: String,
        #[source]
        source: kube::Error,
    },
    /// Objects exist that belong to something else; nothing was applied.
    #[error("{} already exist and cannot be managed by olmv1: they are not owned by this ClusterExtension", .0.join(", "))]
    OwnedByOthers(Vec<String>),
    /// Reading an object failed.
    #[error("failed to read {object}: {source}")]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// Applying an object failed.
    #[error("failed to apply {object}: {source}")]
    Write {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// Deleting an object failed.
    #[error("failed to delete {object}: {source}")]
    Delete {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// An object is not ready yet.
    #[error("{0}")]
    NotReady(String),
    /// The owner let go of its objects (deleted, or released) while they were written.
    #[error(
        "ClusterExtension {0} let go of its objects while they were applied (it is being deleted, or was released): nothing more is written"
    )]
    LetGo(String),
}

impl ApplyError {
    /// An invalid object cannot pass on retry; everything else may. Objects owned by others
    /// are retried (as upstream): nothing watches them, and the admin may remove them any time.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::InvalidObject(_))
    }
}
