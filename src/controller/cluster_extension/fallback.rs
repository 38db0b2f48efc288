//! Upstream's rules for a failed resolution (`handleResolutionError`): when may the installed
//! bundle be kept and re-applied, and when is the error reported and retried. Pure.

use olmv1_api::v1::ClusterCatalog;

/// What the ClusterCatalog list says about catalogs matching the extension's selector (upstream's
/// `CheckCatalogsExist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchingCatalogs {
    /// At least one ClusterCatalog matches the selector, whatever its availability.
    Exist,
    /// None matches, or the ClusterCatalog CRD itself is absent (catalogd not installed).
    None,
    /// The list failed otherwise: nothing can be concluded.
    Unknown,
}

impl MatchingCatalogs {
    /// From the list of ClusterCatalogs (or its error) and whether one catalog matches.
    pub fn of_list(
        listed: &Result<Vec<ClusterCatalog>, kube::Error>,
        matches: impl Fn(&ClusterCatalog) -> bool,
    ) -> Self {
        match listed {
            Ok(catalogs) if catalogs.iter().any(matches) => Self::Exist,
            Ok(_) => Self::None,
            Err(e) if is_resource_absent(e) => Self::None,
            Err(_) => Self::Unknown,
        }
    }
}

/// A list answered 404: the API server does not serve the resource (its CRD is absent), as
/// upstream's `IsNoMatchError` finds through discovery. A collection itself is never "not found".
fn is_resource_absent(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// What to do after resolution failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterResolutionFailure {
    /// Report the error and retry; what is installed stays installed.
    Retry,
    /// Keep the installed bundle and re-apply it (its catalogs are gone).
    KeepInstalled,
}

/// Upstream's decision, in its order: (1) nothing installed: retry; (2) a version other than the
/// installed one is pinned: retry; (3) whether catalogs match cannot be told: retry; (4) matching
/// catalogs exist (they may be updating): retry; (5) none match (deleted, or catalogd absent):
/// keep the installed bundle.
pub fn after_resolution_failure(
    installed_version: Option<&str>,
    pinned_version: Option<&str>,
    catalogs: MatchingCatalogs,
) -> AfterResolutionFailure {
    let Some(installed) = installed_version else {
        return AfterResolutionFailure::Retry;
    };
    if pinned_version.is_some_and(|pinned| !pinned.is_empty() && pinned != installed) {
        return AfterResolutionFailure::Retry;
    }
    match catalogs {
        MatchingCatalogs::Unknown | MatchingCatalogs::Exist => AfterResolutionFailure::Retry,
        MatchingCatalogs::None => AfterResolutionFailure::KeepInstalled,
    }
}

#[cfg(test)]
mod tests {
    use super::{AfterResolutionFailure::*, MatchingCatalogs::*, *};

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: "the server could not find the requested resource".into(),
            ..Default::default()
        }))
    }

    fn catalog(name: &str) -> ClusterCatalog {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1",
            "kind": "ClusterCatalog",
            "metadata": {"name": name},
            "spec": {"source": {"type": "Image", "image": {"ref": "registry/catalog:latest"}}},
        }))
        .expect("a valid ClusterCatalog")
    }

    #[test]
    fn nothing_installed_retries_whatever_the_catalogs() {
        for catalogs in [Exist, None, Unknown] {
            assert_eq!(
                after_resolution_failure(Option::None, Option::None, catalogs),
                Retry
            );
        }
    }

    #[test]
    fn another_pinned_version_retries_even_without_catalogs() {
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Some("1.1.0"), None),
            Retry
        );
        // The installed version pinned, or no pin at all, lets the catalogs decide.
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Some("1.0.0"), None),
            KeepInstalled
        );
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Some(""), None),
            KeepInstalled
        );
    }

    #[test]
    fn a_failed_catalog_check_retries_keeping_what_is_installed() {
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Option::None, Unknown),
            Retry
        );
    }

    #[test]
    fn matching_catalogs_retry_since_they_may_be_updating() {
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Option::None, Exist),
            Retry
        );
    }

    #[test]
    fn no_matching_catalog_keeps_the_installed_bundle() {
        assert_eq!(
            after_resolution_failure(Some("1.0.0"), Option::None, None),
            KeepInstalled
        );
    }

    #[test]
    fn the_list_says_whether_catalogs_match() {
        let listed = Ok(vec![catalog("a"), catalog("b")]);
        assert_eq!(
            MatchingCatalogs::of_list(&listed, |c| c.metadata.name.as_deref() == Some("b")),
            Exist
        );
        assert_eq!(MatchingCatalogs::of_list(&listed, |_| false), None);
        assert_eq!(MatchingCatalogs::of_list(&Ok(vec![]), |_| true), None);
    }

    #[test]
    fn an_absent_catalog_crd_counts_as_no_catalogs_and_other_list_errors_as_unknown() {
        assert_eq!(MatchingCatalogs::of_list(&Err(api_error(404)), |_| true), None);
        assert_eq!(MatchingCatalogs::of_list(&Err(api_error(503)), |_| true), Unknown);
        assert_eq!(MatchingCatalogs::of_list(&Err(api_error(403)), |_| true), Unknown);
    }
}
