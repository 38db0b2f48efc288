//! Where the admin commands' catalogs come from: the cluster's ClusterCatalogs (read through
//! catalogd's HTTP API, as the controller reads them), or catalogs and catalog images named on
//! the command line (`catalog::source`); and how bundle images are pulled for them.
//! `cmd::sources::SourceArgs` (the flags) converts into [`CatalogSources`].

use std::{collections::BTreeMap, path::PathBuf};

use kube::Client;
use olmv1_api::v1::conditions::LABEL_CATALOG_NAME;

use super::cluster::{self, ClusterError, SourcedCatalog};
use crate::{
    catalog::{
        CatalogError,
        client::CatalogClient,
        source::{CatalogSpec, load_catalogs},
    },
    image::{PullOptions, RegistriesConf, mirrors::RegistriesConfError},
    resolve::CatalogInput,
};

/// Why catalogs could not be loaded (or a client built to load them).
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    /// A CA file could not be read.
    #[error("reading CA file {}: {source}", path.display())]
    CaFile {
        /// The file named by `--ca-file`.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No Kubernetes configuration (KUBECONFIG, in-cluster) was found.
    #[error("cannot find a Kubernetes configuration: {0}")]
    KubeConfig(#[source] kube::config::InferConfigError),
    /// The configuration found could not make a client.
    #[error("cannot build a Kubernetes client: {0}")]
    KubeClient(#[source] kube::Error),
    /// The catalog server's HTTP client could not be built.
    #[error(transparent)]
    CatalogClient(#[from] CatalogError),
    /// The cluster's ClusterCatalogs could not be read.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A named catalog is malformed or could not be loaded (`catalog::source` words it).
    #[error("{0}")]
    Catalog(String),
    /// A priority is not `NAME=N`.
    #[error("--priority must be NAME=N, got {0:?}")]
    PriorityForm(String),
    /// A priority's number is not a 32-bit integer.
    #[error("--priority {flag:?}: {value:?} is not a 32-bit integer")]
    PriorityValue {
        /// The whole `NAME=N`.
        flag: String,
        /// The `N`.
        value: String,
    },
    /// A priority names no catalog of the command line.
    #[error("--priority names unknown catalog {0:?}")]
    UnknownPriority(String),
    /// The registries configuration is unreadable or invalid.
    #[error(transparent)]
    RegistriesConf(#[from] RegistriesConfError),
}

/// Where catalogs come from, as the admin commands' flags. With neither `--catalog` nor
/// `--image`, the cluster's ClusterCatalogs (KUBECONFIG), read through catalogd's HTTP API as the
/// controller reads them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CatalogSources {
    /// A catalog: `[NAME=]DIR|FILE|URL` (FBC directory, JSONL file, or catalog server base URL).
    /// Repeatable.
    #[arg(long = "catalog", value_name = "[NAME=]DIR|FILE|URL")]
    pub catalogs: Vec<String>,

    /// A catalog image, `[NAME=]REFERENCE`, pulled from its registry. Repeatable.
    #[arg(long = "image", value_name = "[NAME=]IMAGE")]
    pub images: Vec<String>,

    /// A priority for a `--catalog`/`--image` catalog, `NAME=N` (default 0). Repeatable.
    #[arg(long = "priority", value_name = "NAME=N")]
    pub priorities: Vec<String>,

    /// Registry hosts reached over plain HTTP (loopback registries always are).
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,

    /// Extra CA certificates (PEM) for catalog servers and registries.
    #[arg(long = "ca-file", value_name = "PATH")]
    pub ca_files: Vec<PathBuf>,

    /// Where pulled images are cached.
    #[arg(long, value_name = "DIR", env = "OLMV1_IMAGE_CACHE")]
    pub cache_dir: Option<PathBuf>,

    /// containers-registries.conf(5) file: registry mirrors, remapped, blocked and insecure
    /// registries for image pulls (default: /etc/containers/registries.conf when present).
    #[arg(long, value_name = "PATH", env = "CONTAINERS_REGISTRIES_CONF")]
    pub registries_conf: Option<PathBuf>,
}

impl CatalogSources {
    /// Whether the catalogs come from the command line rather than the cluster.
    pub fn offline(&self) -> bool {
        !self.catalogs.is_empty() || !self.images.is_empty()
    }

    /// Loads the catalogs: the named ones, or every ClusterCatalog of the cluster.
    pub async fn load(&self) -> Result<Vec<SourcedCatalog>, SourcesError> {
        let ca_pems = self.ca_pems()?;
        if !self.offline() {
            let client = kube_client().await?;
            let http = CatalogClient::new(&ca_pems)?;
            return Ok(cluster::cluster_catalogs(&client, &http).await?);
        }
        let mut specs = Vec::new();
        for c in &self.catalogs {
            specs.push(CatalogSpec::parse(c).map_err(SourcesError::Catalog)?);
        }
        for i in &self.images {
            specs.push(CatalogSpec::parse_image(i).map_err(SourcesError::Catalog)?);
        }
        let priorities = parse_priorities(&self.priorities)?;
        for name in priorities.keys() {
            if !specs.iter().any(|s| &s.name == name) {
                return Err(SourcesError::UnknownPriority(name.clone()));
            }
        }
        let pull = self.pull_options_checked()?;
        let loaded = load_catalogs(&specs, &pull)
            .await
            .map_err(SourcesError::Catalog)?;
        Ok(loaded
            .into_iter()
            .map(|c| SourcedCatalog {
                input: CatalogInput {
                    priority: priorities.get(&c.name).copied().unwrap_or(0),
                    labels: BTreeMap::from([(LABEL_CATALOG_NAME.to_string(), c.name.clone())]),
                    available: true,
                    name: c.name,
                    index: c.index,
                },
                content: Some(c.content),
                problem: None,
            })
            .collect())
    }

    /// How images are pulled (cache, insecure registries, CAs, registries.conf); unreadable CA
    /// files and an unreadable or invalid registries.conf are an error.
    pub fn pull_options_checked(&self) -> Result<PullOptions, SourcesError> {
        let mut pull = PullOptions::new(self.cache_dir());
        pull.registry.insecure_registries = self.insecure_registries.clone();
        pull.registry.registries_conf = RegistriesConf::configured(self.registries_conf.as_deref())?;
        for file in &self.ca_files {
            pull.registry
                .add_ca_path(file)
                .map_err(|source| SourcesError::CaFile {
                    path: file.clone(),
                    source,
                })?;
        }
        Ok(pull)
    }

    /// [`CatalogSources::pull_options_checked`] after the sources loaded (CA files already read).
    pub fn pull_options(&self) -> PullOptions {
        self.pull_options_checked()
            .unwrap_or_else(|_| PullOptions::new(self.cache_dir()))
    }

    /// A catalog server client trusting the CA files too.
    pub fn catalog_client(&self) -> Result<CatalogClient, SourcesError> {
        Ok(CatalogClient::new(&self.ca_pems()?)?)
    }

    fn ca_pems(&self) -> Result<Vec<Vec<u8>>, SourcesError> {
        self.ca_files
            .iter()
            .map(|file| {
                std::fs::read(file).map_err(|source| SourcesError::CaFile {
                    path: file.clone(),
                    source,
                })
            })
            .collect()
    }

    fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }
}

/// `NAME=N` priorities.
pub fn parse_priorities(flags: &[String]) -> Result<BTreeMap<String, i32>, SourcesError> {
    flags
        .iter()
        .map(|f| {
            let (name, n) = f
                .split_once('=')
                .ok_or_else(|| SourcesError::PriorityForm(f.clone()))?;
            let n: i32 = n.parse().map_err(|_| SourcesError::PriorityValue {
                flag: f.clone(),
                value: n.to_string(),
            })?;
            Ok((name.to_string(), n))
        })
        .collect()
}

/// `$XDG_CACHE_HOME/olmv1/images` (or `~/.cache/...`).
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("olmv1").join("images")
}

/// A client from KUBECONFIG or the in-cluster configuration.
pub async fn kube_client() -> Result<Client, SourcesError> {
    crate::tls_profile::install_default_provider();
    let config = kube::Config::infer().await.map_err(SourcesError::KubeConfig)?;
    Client::try_from(config).map_err(SourcesError::KubeClient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_name_equals_a_32_bit_integer() {
        let parsed = parse_priorities(&["a=5".into(), "b=-3".into()]).unwrap();
        assert_eq!(parsed, BTreeMap::from([("a".into(), 5), ("b".into(), -3)]));
        assert_eq!(
            parse_priorities(&["a".into()]).unwrap_err().to_string(),
            r#"--priority must be NAME=N, got "a""#
        );
        assert_eq!(
            parse_priorities(&["a=99999999999".into()])
                .unwrap_err()
                .to_string(),
            r#"--priority "a=99999999999": "99999999999" is not a 32-bit integer"#
        );
    }

    #[tokio::test]
    async fn a_priority_must_name_a_catalog_of_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let sources = CatalogSources {
            catalogs: vec![format!("here={}", dir.path().display())],
            priorities: vec!["elsewhere=1".into()],
            ..CatalogSources::default()
        };
        assert_eq!(
            sources.load().await.unwrap_err().to_string(),
            r#"--priority names unknown catalog "elsewhere""#
        );
    }

    #[tokio::test]
    async fn an_unreadable_ca_file_is_named() {
        let sources = CatalogSources {
            catalogs: vec!["x=/nonexistent".into()],
            ca_files: vec![PathBuf::from("/nonexistent/ca.pem")],
            ..CatalogSources::default()
        };
        let e = sources.load().await.unwrap_err().to_string();
        assert!(e.starts_with("reading CA file /nonexistent/ca.pem: "), "{e}");
    }
}
