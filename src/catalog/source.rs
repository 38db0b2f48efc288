//! Catalogs named on a command line: `[NAME=]DIR|FILE|URL` (an FBC directory, a JSONL or YAML
//! file, a catalog server's base URL) or a catalog image, loaded into indexes. The content stays
//! at hand for commands that need whole bundles (`olmv1 search`).

use std::{
    collections::HashSet,
    path::{Component, Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;

use super::{
    CatalogError, CatalogIndex, DEFAULT_MAX_JSONL_LINE_BYTES, Meta, client::CatalogClient, for_each_dir_meta,
    jsonl_metas, parse_stream,
};
use crate::image::{PullOptions, PulledImage, pull_to_dir};

/// The label naming a catalog image's FBC directory.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// Where a catalog's content is.
#[derive(Debug, Clone)]
pub enum CatalogLocation {
    /// An FBC directory tree.
    Dir(PathBuf),
    /// A JSONL file, or a YAML stream when named `.yaml`/`.yml`.
    File(PathBuf),
    /// A catalog server base URL; `<base>/api/v1/all` is fetched.
    Url(String),
    /// A catalog image reference; pulled, then its configs directory is read.
    Image(String),
}

/// A named catalog from the command line.
#[derive(Debug, Clone)]
pub struct CatalogSpec {
    /// The catalog's name (as a ClusterCatalog's would be).
    pub name: String,
    /// Its content.
    pub location: CatalogLocation,
}

impl CatalogSpec {
    /// Parses `[NAME=]DIR|FILE|URL`. The name defaults to the directory name, the file name
    /// without extension, or the URL's last path segment.
    pub fn parse(flag: &str) -> Result<CatalogSpec, String> {
        let is_url = |s: &str| s.starts_with("http://") || s.starts_with("https://");
        // `NAME=` prefix, unless the whole value is a URL or an existing path.
        let (explicit_name, target) = match flag.split_once('=') {
            Some((n, rest)) if !is_url(flag) && !Path::new(flag).exists() && !n.contains('/') => {
                (Some(n), rest)
            }
            _ => (None, flag),
        };
        let location = if is_url(target) {
            CatalogLocation::Url(target.to_string())
        } else {
            let path = PathBuf::from(target);
            let meta = std::fs::metadata(&path).map_err(|e| format!("catalog {target:?}: {e}"))?;
            if meta.is_dir() {
                CatalogLocation::Dir(path)
            } else {
                CatalogLocation::File(path)
            }
        };
        let default_name = match &location {
            CatalogLocation::Dir(p) => p
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
            CatalogLocation::File(p) => p.file_stem().map(|n| n.to_string_lossy().into_owned()),
            CatalogLocation::Url(u) => url::Url::parse(u)
                .ok()
                .and_then(|u| {
                    u.path_segments()
                        .and_then(|mut s| s.rfind(|x| !x.is_empty()).map(str::to_string))
                })
                .or_else(|| {
                    url::Url::parse(u)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_string))
                }),
            CatalogLocation::Image(_) => None,
        };
        Self::named(explicit_name, default_name, flag, location)
    }

    /// Parses `[NAME=]IMAGE`; the name defaults to the repository's last path segment.
    pub fn parse_image(flag: &str) -> Result<CatalogSpec, String> {
        let (explicit_name, reference) = match flag.split_once('=') {
            Some((n, rest)) if !n.contains('/') && !n.contains(':') => (Some(n), rest),
            _ => (None, flag),
        };
        let repository = reference.split('@').next().unwrap_or(reference);
        let last = repository.rsplit('/').next().unwrap_or(repository);
        let default_name = last
            .split(':')
            .next()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        Self::named(
            explicit_name,
            default_name,
            flag,
            CatalogLocation::Image(reference.to_string()),
        )
    }

    fn named(
        explicit: Option<&str>,
        default: Option<String>,
        flag: &str,
        location: CatalogLocation,
    ) -> Result<CatalogSpec, String> {
        let name = match explicit {
            Some(n) if !n.is_empty() => n.to_string(),
            Some(_) => return Err(format!("catalog {flag:?}: empty name")),
            None => default.ok_or_else(|| format!("catalog {flag:?}: cannot derive a name; use NAME=..."))?,
        };
        Ok(CatalogSpec { name, location })
    }
}

/// A catalog's content as read, for commands that need more than the index.
#[derive(Debug, Clone)]
pub enum CatalogContent {
    /// An FBC directory (a given one, or a pulled image's configs directory).
    Dir(PathBuf),
    /// JSONL text (a file or a catalog server's `/api/v1/all`).
    Jsonl(Bytes),
    /// Objects already parsed (a YAML stream).
    Metas(Arc<Vec<Meta>>),
}

impl CatalogContent {
    /// Visits every object of the catalog in order.
    pub fn for_each_meta(
        &self,
        mut f: impl FnMut(Meta) -> Result<(), CatalogError>,
    ) -> Result<(), CatalogError> {
        match self {
            CatalogContent::Dir(dir) => for_each_dir_meta(dir, f),
            CatalogContent::Jsonl(body) => {
                for meta in jsonl_metas(body.clone(), Arc::from("catalog"), DEFAULT_MAX_JSONL_LINE_BYTES) {
                    f(meta?)?;
                }
                Ok(())
            }
            CatalogContent::Metas(metas) => metas.iter().cloned().try_for_each(f),
        }
    }

    /// Indexes the content.
    pub fn index(&self, origin: &str) -> Result<CatalogIndex, CatalogError> {
        match self {
            CatalogContent::Dir(dir) => CatalogIndex::from_dir(dir),
            CatalogContent::Jsonl(body) => {
                CatalogIndex::from_jsonl(body.clone(), origin, DEFAULT_MAX_JSONL_LINE_BYTES)
            }
            CatalogContent::Metas(metas) => CatalogIndex::from_metas(metas.iter()),
        }
    }
}

/// A catalog loaded from a [`CatalogSpec`].
#[derive(Debug, Clone)]
pub struct LoadedCatalog {
    /// Its name.
    pub name: String,
    /// Its index.
    pub index: Arc<CatalogIndex>,
    /// Its content.
    pub content: CatalogContent,
}

/// Loads every catalog (in parallel); names must be unique. `pull` is used for images.
pub async fn load_catalogs(specs: &[CatalogSpec], pull: &PullOptions) -> Result<Vec<LoadedCatalog>, String> {
    let mut seen = HashSet::new();
    for s in specs {
        if !seen.insert(&s.name) {
            return Err(format!(
                "two catalogs are named {:?}; name them with NAME=",
                s.name
            ));
        }
    }
    let client = if specs
        .iter()
        .any(|s| matches!(s.location, CatalogLocation::Url(_)))
    {
        Some(CatalogClient::new(&[]).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut handles = Vec::new();
    for spec in specs.iter().cloned() {
        let client = client.clone();
        let pull = pull.clone();
        handles.push(tokio::spawn(async move {
            let content = match &spec.location {
                CatalogLocation::Url(url) => {
                    let client = client.ok_or_else(|| "no HTTP client".to_string())?;
                    CatalogContent::Jsonl(client.fetch_all(url).await.map_err(|e| e.to_string())?)
                }
                CatalogLocation::Dir(path) => CatalogContent::Dir(path.clone()),
                CatalogLocation::File(path) => read_file(path)?,
                CatalogLocation::Image(reference) => {
                    let pulled = pull_to_dir(reference, &pull)
                        .await
                        .map_err(|e| format!("catalog image {reference:?}: {e}"))?;
                    CatalogContent::Dir(configs_dir(&pulled)?)
                }
            };
            let name = spec.name.clone();
            let index = tokio::task::spawn_blocking({
                let content = content.clone();
                move || content.index(&name).map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| e.to_string())??;
            Ok::<_, String>(LoadedCatalog {
                name: spec.name,
                index: Arc::new(index),
                content,
            })
        }));
    }
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.map_err(|e| e.to_string())??);
    }
    Ok(out)
}

/// A file is JSONL unless it is named `.yaml`/`.yml` (then it is an FBC YAML stream).
fn read_file(path: &Path) -> Result<CatalogContent, String> {
    let data = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    if yaml {
        let origin = path.display().to_string();
        let metas = parse_stream(&data, Arc::from(origin.as_str())).map_err(|e| e.to_string())?;
        Ok(CatalogContent::Metas(Arc::new(metas)))
    } else {
        Ok(CatalogContent::Jsonl(Bytes::from(data)))
    }
}

/// The FBC directory of a pulled catalog image, from its configs label.
pub fn configs_dir(pulled: &PulledImage) -> Result<PathBuf, String> {
    let label = pulled
        .labels
        .get(CONFIGS_LABEL)
        .ok_or_else(|| format!("catalog image is missing the required label {CONFIGS_LABEL:?}"))?;
    let relative = Path::new(label.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "catalog image label {CONFIGS_LABEL:?} has an invalid path {label:?}"
        ));
    }
    // Opened without following links: a configs directory that is a link (to the host or
    // elsewhere in the image) is refused.
    let opened = crate::confined::ConfinedDir::open(&pulled.dir).and_then(|root| root.open_dir(relative));
    if let Err(e) = opened {
        return Err(format!(
            "catalog image {} label {CONFIGS_LABEL:?} names {label:?}, which is not a directory in the image: {e}",
            pulled.digest_ref
        ));
    }
    Ok(pulled.dir.join(relative))
}
