//! Errors of the ClusterExtension reconciler: one variant per step, each knowing whether it is
//! terminal (Progressing=False) or retried (Progressing=True/Retrying), and its condition reason.

use std::time::Duration;

use olmv1_api::v1::conditions::{REASON_BLOCKED, REASON_RETRYING};

use super::dependencies::DependencyCheckError;
use crate::{
    apply::{ApplyError, identity::IdentityError, preflight::PreflightError, revision::RecordError},
    bundle::{registry_v1::LoadError, render::RenderError},
    catalog::cache::CatalogCacheError,
    image::ImageError,
    resolve::ResolveError,
};

/// A step of the pipeline failed; the reconcile reports it in status.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The revision record could not be read.
    #[error(transparent)]
    ReadInstalled(RecordError),
    /// The ClusterCatalogs could not be listed.
    #[error("error listing catalogs: {0}")]
    ListCatalogs(#[source] kube::Error),
    /// A selected catalog's content could not be read: upstream stops the whole resolution.
    #[error("error walking catalogs: error getting package {package:?} from catalog {catalog:?}: {source}")]
    ReadCatalog {
        package: String,
        catalog: String,
        #[source]
        source: Box<CatalogCacheError>,
    },
    /// No bundle could be resolved, with upstream's message.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The service account cannot be used.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// A step on the resolved bundle failed, with upstream's prefix naming the bundle.
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Bundle {
        bundle: String,
        version: String,
        #[source]
        source: Box<BundleError>,
    },
    /// The revision record could not be written.
    #[error(transparent)]
    WriteRecord(RecordError),
    /// An upgrade needs the installed bundle's OperatorCondition, and the watch has not listed
    /// them yet (the controller just started).
    #[error("waiting for the OperatorConditions to be listed before an upgrade")]
    OperatorConditionsNotListed,
    /// The extension was deleted or released while the reconcile wrote its content: it stopped
    /// writing, and the next reconcile (uninstall, or letting go) takes over. Not a failure.
    #[error(transparent)]
    LetGo(ApplyError),
}

/// What went wrong with the resolved bundle, by step.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle image could not be pulled or unpacked.
    #[error(transparent)]
    Pull(#[from] ImageError),
    /// The bundle is not a loadable registry+v1 bundle.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The bundle cannot be rendered (unsupported, invalid, or a bad configuration).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// A preflight refused the apply; nothing was applied.
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// Applying, pruning or checking objects failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The bundle's dependencies are not satisfied, or installing it would break a dependent.
    #[error(transparent)]
    Dependencies(#[from] DependencyCheckError),
}

impl BundleError {
    fn is_terminal(&self) -> bool {
        match self {
            Self::Pull(e) => e.is_terminal(),
            Self::Load(e) => e.is_terminal(),
            Self::Render(e) => e.is_terminal(),
            Self::Preflight(e) => e.is_terminal(),
            Self::Apply(e) => e.is_terminal(),
            Self::Dependencies(e) => e.is_terminal(),
        }
    }
}

impl StepError {
    /// Whether only a change by the admin (or a catalog) can fix it.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::ReadInstalled(_) | Self::WriteRecord(_) | Self::OperatorConditionsNotListed => false,
            Self::LetGo(_) => false,
            Self::ListCatalogs(_) | Self::ReadCatalog { .. } => false,
            Self::Resolve(e) => e.is_terminal(),
            Self::Identity(e) => e.is_terminal(),
            Self::Bundle { source, .. } => source.is_terminal(),
        }
    }

    /// The Progressing reason: upstream's `Retrying`, `Blocked`, or the error's own.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Bundle { source, .. } if let BundleError::Render(e) = source.as_ref() => e.reason(),
            _ if self.is_terminal() => REASON_BLOCKED,
            _ => REASON_RETRYING,
        }
    }

    /// A stable PascalCase name for metrics labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::ReadInstalled(_) => "ReadInstalledFailed",
            Self::WriteRecord(_) => "WriteRecordFailed",
            Self::ListCatalogs(_) | Self::ReadCatalog { .. } | Self::Resolve(_) => "ResolutionFailed",
            Self::Identity(_) => "ServiceAccountUnavailable",
            Self::OperatorConditionsNotListed => "OperatorConditionsNotListed",
            Self::LetGo(_) => "LetGo",
            Self::Bundle { source, .. } => match source.as_ref() {
                BundleError::Pull(_) => "PullFailed",
                BundleError::Load(_) | BundleError::Render(_) => "InvalidBundle",
                BundleError::Preflight(_) => "PreflightFailed",
                BundleError::Apply(_) => "ApplyFailed",
                BundleError::Dependencies(_) => "DependenciesUnsatisfied",
            },
        }
    }

    /// Whether it waits on other extensions (or the cluster's APIs) to change: a dependency
    /// that is not installed, or a dependent an upgrade would break.
    pub fn waits_on_other_extensions(&self) -> bool {
        matches!(self, Self::Bundle { source, .. }
            if matches!(source.as_ref(), BundleError::Dependencies(e) if e.waits_on_others()))
    }

    /// How soon to try again.
    pub fn retry_after(&self) -> Duration {
        match self {
            // Waiting for the admin to create or grant the account: no need to hammer.
            Self::Identity(_) => Duration::from_secs(15),
            Self::Bundle { source, .. } if matches!(source.as_ref(), BundleError::Preflight(_)) => {
                Duration::from_secs(15)
            }
            // Waiting for the admin to remove an object someone else owns.
            Self::Bundle { source, .. }
                if matches!(source.as_ref(), BundleError::Apply(ApplyError::OwnedByOthers(_))) =>
            {
                Duration::from_secs(15)
            }
            _ => Duration::from_secs(10),
        }
    }
}

/// Why a reconcile itself failed (beyond what status reports).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A step failed outside the status-reporting path (finalizer cleanup).
    #[error(transparent)]
    Step(Box<StepError>),
    /// Writing status failed.
    #[error("failed to write ClusterExtension status: {0}")]
    StatusWrite(#[source] kube::Error),
    /// Adding or removing the finalizer failed (the install's and the cleanup's own errors are
    /// reported as themselves).
    // NB: boxed, since finalizer::Error wraps this type.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    /// A stable name for the failures metric.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Step(step) => step.category(),
            Self::StatusWrite(_) => "StatusWriteFailed",
            Self::Finalizer(_) => "FinalizerFailed",
        }
    }
}
