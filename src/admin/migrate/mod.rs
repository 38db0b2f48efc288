//! Owns the way out of OLM classic (`olmv1 migrate`): reading classic's objects
//! (`operators.coreos.com`), judging each Subscription (`check`), making ClusterCatalogs
//! from CatalogSources (`catalogs`), taking a Subscription over in place and giving it back
//! (`convert`), whether cert-manager keeps a serving certificate classic issued (`certificate`),
//! convert's orchestration over one or every Subscription (`run`), and the text forms of check
//! and catalogs (`report`).
//! Part of admin: imports api, bundle, catalog, image, admin's cluster reader, sources, installer
//! and install (run), and apply's owner labels and revision store (convert); never controller or
//! cmd.

pub mod catalogs;
pub mod certificate;
pub mod check;
pub mod classic;
pub mod convert;
pub mod read;
pub mod report;
pub mod run;

/// Why a migration command could not read or write the cluster.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The API server refused or could not be reached.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// An object could not be read as its kind.
    #[error("{what}: {message}")]
    Decode {
        /// The object.
        what: String,
        /// Why.
        message: String,
    },
    /// The ClusterCatalogs could not be listed.
    #[error("{0}")]
    Catalogs(String),
    /// How bundle images or catalogs are reached is misconfigured.
    #[error(transparent)]
    Sources(#[from] crate::admin::sources::SourcesError),
}
