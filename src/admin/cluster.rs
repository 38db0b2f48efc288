//! The cluster as the admin commands read it: ClusterCatalogs as resolution inputs, their content
//! fetched from `<status.urls.base>/api/v1/all` exactly as the controller fetches it,
//! ClusterExtensions with their installed bundles, and whether the controller keeps
//! OperatorConditions.

use std::{collections::BTreeMap, sync::Arc};

use kube::{Api, Client, ResourceExt, api::ListParams};
use olmv1_api::v1::{AvailabilityMode, ClusterCatalog, ClusterExtension, conditions::LABEL_CATALOG_NAME};

use crate::{
    catalog::{CatalogIndex, cache::served_source, client::CatalogClient, source::CatalogContent},
    controller::cluster_extension::operator_conditions::{self, OperatorConditionsMode},
    resolve::{CatalogInput, InstalledBundle},
};

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The API server refused or could not be reached.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A catalog's content could not be fetched or parsed.
    #[error("catalog {catalog:?}: {message}")]
    Catalog {
        /// The ClusterCatalog.
        catalog: String,
        /// Why.
        message: String,
    },
}

impl ClusterError {
    /// Never terminal: the cluster may answer later.
    pub fn is_terminal(&self) -> bool {
        false
    }
}

/// A ClusterCatalog as resolution sees it, with its content when it was read.
#[derive(Debug, Clone)]
pub struct SourcedCatalog {
    /// The resolution input (an empty index when the catalog is unavailable or unread).
    pub input: CatalogInput,
    /// The content, when fetched.
    pub content: Option<CatalogContent>,
    /// Why the content could not be had (not served, fetch failed), if so.
    pub problem: Option<String>,
}

/// Lists every ClusterCatalog and fetches the content of each available one.
pub async fn cluster_catalogs(
    client: &Client,
    http: &CatalogClient,
) -> Result<Vec<SourcedCatalog>, ClusterError> {
    let list = Api::<ClusterCatalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ClusterError::Api {
            what: "listing ClusterCatalogs".into(),
            source,
        })?;
    let mut tasks = Vec::new();
    for catalog in list.items {
        let http = http.clone();
        tasks.push(tokio::spawn(async move { read_catalog(&catalog, &http).await }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.map_err(|e| ClusterError::Catalog {
            catalog: String::new(),
            message: e.to_string(),
        })?);
    }
    out.sort_by(|a, b| a.input.name.cmp(&b.input.name));
    Ok(out)
}

async fn read_catalog(catalog: &ClusterCatalog, http: &CatalogClient) -> SourcedCatalog {
    let name = catalog.name_any();
    // catalogd labels every catalog with its own name; selectors rely on it.
    let mut labels: BTreeMap<String, String> = catalog.labels().clone();
    labels.insert(LABEL_CATALOG_NAME.into(), name.clone());
    let available = catalog.spec.availability_mode != AvailabilityMode::Unavailable;
    let mut input = CatalogInput {
        name: name.clone(),
        priority: catalog.spec.priority,
        labels,
        available,
        index: Arc::new(CatalogIndex::default()),
    };
    if !available {
        return SourcedCatalog {
            input,
            content: None,
            problem: None,
        };
    }
    let fetched = async {
        let (_, base) = served_source(catalog, &name).map_err(|e| e.to_string())?;
        let body = http.fetch_all(&base).await.map_err(|e| e.to_string())?;
        let content = CatalogContent::Jsonl(body);
        let index = tokio::task::spawn_blocking({
            let content = content.clone();
            let name = name.clone();
            move || content.index(&name).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok::<_, String>((content, index))
    }
    .await;
    match fetched {
        Ok((content, index)) => {
            input.index = Arc::new(index);
            SourcedCatalog {
                input,
                content: Some(content),
                problem: None,
            }
        }
        Err(problem) => SourcedCatalog {
            input,
            content: None,
            problem: Some(problem),
        },
    }
}

/// Reads one ClusterExtension.
pub async fn cluster_extension(client: &Client, name: &str) -> Result<ClusterExtension, ClusterError> {
    Api::<ClusterExtension>::all(client.clone())
        .get(name)
        .await
        .map_err(|source| ClusterError::Api {
            what: format!("reading ClusterExtension {name:?}"),
            source,
        })
}

/// Lists every ClusterExtension, by name.
pub async fn cluster_extensions(client: &Client) -> Result<Vec<ClusterExtension>, ClusterError> {
    let mut items = Api::<ClusterExtension>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ClusterError::Api {
            what: "listing ClusterExtensions".into(),
            source,
        })?
        .items;
    items.sort_by_key(|e| e.name_any());
    Ok(items)
}

/// The installed bundle as status reports it.
pub fn installed_bundle(ext: &ClusterExtension) -> Option<InstalledBundle> {
    let install = ext.status.as_ref()?.install.as_ref()?;
    Some(InstalledBundle {
        name: install.bundle.name.clone(),
        version: install.bundle.version.clone(),
        release: install.bundle.release.clone(),
    })
}

/// The inputs resolution for `selector_matches` may consult must all be readable, as upstream:
/// the first selected, available catalog whose content could not be had is an error.
pub fn check_readable(
    catalogs: &[SourcedCatalog],
    consulted: impl Fn(&CatalogInput) -> bool,
) -> Result<(), ClusterError> {
    match catalogs
        .iter()
        .find(|c| c.input.available && consulted(&c.input) && c.problem.is_some())
    {
        Some(c) => Err(ClusterError::Catalog {
            catalog: c.input.name.clone(),
            message: c.problem.clone().unwrap_or_default(),
        }),
        None => Ok(()),
    }
}

/// Whether the controller keeps OperatorConditions, as the admin commands render for it: as
/// `told` (the controller's `--operator-conditions`), else as its default decides (when the CRD
/// is served).
pub async fn operator_conditions_kept(
    client: &Client,
    told: Option<OperatorConditionsMode>,
) -> Result<bool, ClusterError> {
    match told {
        Some(OperatorConditionsMode::Off) => Ok(false),
        Some(OperatorConditionsMode::Install | OperatorConditionsMode::Use) => Ok(true),
        None => operator_conditions::served(client)
            .await
            .map_err(|source| ClusterError::Api {
                what: "discovering operators.coreos.com/v2".into(),
                source,
            }),
    }
}
