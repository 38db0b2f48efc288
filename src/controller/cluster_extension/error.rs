//! Errors of the ClusterExtension reconciler: one variant per step, each knowing whether it is
//! terminal (Progressing=False) or retried (Progressing=True/Retrying), and its condition reason.

use std::time::Duration;

use olmv1_api::v1::conditions::{REASON_BLOCKED, REASON_RETRYING};

use crate::{
    apply::{ApplyError, identity::IdentityError, preflight::PreflightError, revision::RecordError},
    bundle::{registry_v1::LoadError, render::RenderError},
    image::ImageError,
};

/// A step of the pipeline failed; the reconcile reports it in status.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The revision record could not be read or written.
    #[error(transparent)]
    ReadInstalled(RecordError),
    /// No bundle could be resolved, with upstream's message.
    #[error("{message}")]
    Resolve { message: String, terminal: bool },
    /// The service account cannot be used.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The bundle image could not be pulled or unpacked.
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Pull {
        bundle: String,
        version: String,
        #[source]
        source: ImageError,
    },
    /// The bundle is not a loadable registry+v1 bundle.
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Load {
        bundle: String,
        version: String,
        #[source]
        source: LoadError,
    },
    /// The bundle cannot be rendered (unsupported, invalid, or a bad configuration).
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Render {
        bundle: String,
        version: String,
        #[source]
        source: RenderError,
    },
    /// A preflight refused the apply; nothing was applied.
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Preflight {
        bundle: String,
        version: String,
        #[source]
        source: PreflightError,
    },
    /// Applying, pruning or checking objects failed.
    #[error("error for resolved bundle {bundle:?} with version {version:?}: {source}")]
    Apply {
        bundle: String,
        version: String,
        #[source]
        source: ApplyError,
    },
}

impl StepError {
    /// Whether only a change by the admin (or a catalog) can fix it.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::ReadInstalled(_) => false,
            Self::Resolve { terminal, .. } => *terminal,
            Self::Identity(e) => e.is_terminal(),
            Self::Pull { source, .. } => source.is_terminal(),
            Self::Load { source, .. } => source.is_terminal(),
            Self::Render { source, .. } => source.is_terminal(),
            Self::Preflight { source, .. } => source.is_terminal(),
            Self::Apply { source, .. } => source.is_terminal(),
        }
    }

    /// The Progressing reason: upstream's `Retrying`, `Blocked`, or the error's own.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Render { source, .. } => source.reason(),
            _ if self.is_terminal() => REASON_BLOCKED,
            _ => REASON_RETRYING,
        }
    }

    /// A stable PascalCase name for metrics labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::ReadInstalled(_) => "ReadInstalledFailed",
            Self::Resolve { .. } => "ResolutionFailed",
            Self::Identity(_) => "ServiceAccountUnavailable",
            Self::Pull { .. } => "PullFailed",
            Self::Load { .. } | Self::Render { .. } => "InvalidBundle",
            Self::Preflight { .. } => "PreflightFailed",
            Self::Apply { .. } => "ApplyFailed",
        }
    }

    /// How soon to try again.
    pub fn retry_after(&self) -> Duration {
        match self {
            // Waiting for the admin to create or grant the account: no need to hammer.
            Self::Identity(_) | Self::Preflight { .. } => Duration::from_secs(15),
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
    /// The finalizer helper failed (adding/removing the finalizer, or the cleanup).
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
