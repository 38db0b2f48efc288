//! What `explain` and `upgrades` resolve: a ClusterExtension of the cluster (as the controller
//! would read it) or a package, with the command line's overrides, against catalogs loaded by
//! [`CatalogSources`]; `--installed` is looked up in those catalogs.

use olmv1_api::v1::UpgradeConstraintPolicy;

use super::{
    cluster::{self, ClusterError, SourcedCatalog, check_readable},
    sources::{self, CatalogSources, SourcesError},
};
use crate::resolve::{CatalogInput, CatalogSelector, InstalledBundle, ResolveError, ResolveRequest};

/// Why the request could not be built or its catalogs loaded.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The catalogs could not be loaded, or no client built.
    #[error(transparent)]
    Sources(#[from] SourcesError),
    /// The ClusterExtension could not be read, or a catalog consulted is unreadable.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The ClusterExtension is not a valid resolution request.
    #[error("ClusterExtension {extension:?}: {source}")]
    Invalid {
        /// The ClusterExtension.
        extension: String,
        /// Why.
        #[source]
        source: Box<ResolveError>,
    },
    /// Neither a ClusterExtension nor a package was named.
    #[error("--package is required without an EXTENSION")]
    NoPackage,
    /// The request's catalog selector is invalid (Kubernetes' words).
    #[error("desired catalog selector is invalid: {0}")]
    Selector(String),
    /// `--installed` names no bundle of the package.
    #[error(
        "--installed {spec:?}: no bundle of package {package:?} has that name or version (a bundle \
         the catalogs no longer carry is given as BUNDLE_NAME@VERSION)"
    )]
    UnknownInstalled {
        /// What `--installed` said.
        spec: String,
        /// The package.
        package: String,
    },
}

impl RequestError {
    /// Terminal when the cause is in what the command was given; the cluster and the catalog
    /// servers may answer later.
    pub fn is_terminal(&self) -> bool {
        match self {
            RequestError::Sources(_) | RequestError::Cluster(_) => false,
            RequestError::Invalid { .. }
            | RequestError::NoPackage
            | RequestError::Selector(_)
            | RequestError::UnknownInstalled { .. } => true,
        }
    }
}

/// What the command line sets over the ClusterExtension it names (or over a bare package).
#[derive(Debug, Clone, Default)]
pub struct RequestOverrides {
    /// The package (required without a ClusterExtension).
    pub package: Option<String>,
    /// The installed bundle: a version of the package, a bundle name, or `BUNDLE_NAME@VERSION`.
    pub installed: Option<String>,
    /// A version range.
    pub version: Option<String>,
    /// Channels (none: keep the ClusterExtension's).
    pub channels: Vec<String>,
    /// Whether upgrades must follow catalog edges.
    pub upgrade_constraint_policy: Option<UpgradeConstraintPolicy>,
}

/// Loads the catalogs and builds the request, its catalog selector valid and every catalog it
/// consults readable.
pub async fn load_request(
    extension: Option<&str>,
    overrides: &RequestOverrides,
    sources: &CatalogSources,
) -> Result<(ResolveRequest, Vec<CatalogInput>), RequestError> {
    let catalogs = sources.load().await?;
    let request = build_request(extension, overrides, &catalogs).await?;
    let selector = CatalogSelector::new(request.selector.as_ref()).map_err(RequestError::Selector)?;
    check_readable(&catalogs, |c| selector.matches(&c.labels))?;
    Ok((request, catalogs.into_iter().map(|c| c.input).collect()))
}

/// Builds the request: from the ClusterExtension `extension` (read from the cluster) when given,
/// then the overrides; `--installed` is looked up in the catalogs.
pub async fn build_request(
    extension: Option<&str>,
    overrides: &RequestOverrides,
    catalogs: &[SourcedCatalog],
) -> Result<ResolveRequest, RequestError> {
    let mut request = match extension {
        Some(name) => {
            let client = sources::kube_client().await?;
            let ext = cluster::cluster_extension(&client, name).await?;
            ResolveRequest::from_cluster_extension(&ext, cluster::installed_bundle(&ext)).map_err(
                |source| RequestError::Invalid {
                    extension: name.to_string(),
                    source: Box::new(source),
                },
            )?
        }
        None => ResolveRequest {
            package: overrides.package.clone().ok_or(RequestError::NoPackage)?,
            version_range: None,
            channels: Vec::new(),
            selector: None,
            upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
            installed: None,
        },
    };
    if let Some(p) = &overrides.package {
        request.package = p.clone();
    }
    if let Some(v) = &overrides.version {
        request.version_range = Some(v.clone());
    }
    if !overrides.channels.is_empty() {
        request.channels = overrides.channels.clone();
    }
    if let Some(policy) = &overrides.upgrade_constraint_policy {
        request.upgrade_constraint_policy = *policy;
    }
    if let Some(spec) = &overrides.installed {
        request.installed = Some(find_installed(&request.package, spec, catalogs)?);
    }
    Ok(request)
}

/// `--installed`: `NAME@VERSION`, a bundle name, or a version of the package.
pub fn find_installed(
    package: &str,
    spec: &str,
    catalogs: &[SourcedCatalog],
) -> Result<InstalledBundle, RequestError> {
    if let Some((name, version)) = spec
        .split_once('@')
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
    {
        return Ok(InstalledBundle {
            name: name.into(),
            version: version.into(),
            release: None,
        });
    }
    for c in catalogs {
        let Some(p) = c.input.index.package(package) else {
            continue;
        };
        for b in &p.bundles {
            let Ok(v) = &b.version else { continue };
            if *b.name == *spec || v.status_version() == spec {
                return Ok(InstalledBundle {
                    name: b.name.to_string(),
                    version: v.status_version(),
                    release: None,
                });
            }
        }
    }
    Err(RequestError::UnknownInstalled {
        spec: spec.to_string(),
        package: package.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bare_request_needs_a_package() {
        let err = build_request(None, &RequestOverrides::default(), &[])
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "--package is required without an EXTENSION");
        assert!(err.is_terminal());
    }

    #[tokio::test]
    async fn overrides_make_the_request_and_installed_as_name_at_version_needs_no_catalog() {
        let overrides = RequestOverrides {
            package: Some("etcd".into()),
            installed: Some("etcdoperator.v0.9.2@0.9.2".into()),
            version: Some(">=0.9".into()),
            channels: vec!["alpha".into()],
            upgrade_constraint_policy: Some(UpgradeConstraintPolicy::SelfCertified),
        };
        let request = build_request(None, &overrides, &[]).await.unwrap();
        assert_eq!(request.package, "etcd");
        assert_eq!(request.version_range.as_deref(), Some(">=0.9"));
        assert_eq!(request.channels, vec!["alpha".to_string()]);
        assert_eq!(
            request.upgrade_constraint_policy,
            UpgradeConstraintPolicy::SelfCertified
        );
        let installed = request.installed.unwrap();
        assert_eq!(
            (installed.name.as_str(), installed.version.as_str()),
            ("etcdoperator.v0.9.2", "0.9.2")
        );
    }

    #[test]
    fn an_installed_bundle_no_catalog_carries_is_named_with_what_to_give_instead() {
        let err = find_installed("etcd", "0.9.9", &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--installed \"0.9.9\": no bundle of package \"etcd\" has that name or version (a bundle \
             the catalogs no longer carry is given as BUNDLE_NAME@VERSION)"
        );
        assert!(err.is_terminal());
    }
}
