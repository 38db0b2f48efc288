//! `olmv1 search [TEXT]`: packages across catalogs, with what an admin needs to know before
//! installing: the default channel's newest bundle (the resolver's answer with nothing installed),
//! its install modes, webhooks, APIServices, dependencies, `olm.maxOpenShiftVersion`, the
//! package's deprecations, and whether olmv1 installs it (the resolver's verdict under
//! `--dependencies`, then the renderer's own): with `check`, a bundle with dependencies installs
//! once they are installed; with `refuse`, upstream's refusal.

use std::collections::HashMap;

use serde::Serialize;

use super::{
    Report, Reporter,
    cluster::SourcedCatalog,
    dependencies::BundleRequirements,
    table::{Table, Tone},
    terminal::escape_value,
};
use crate::{
    bundle::{registry_v1::RegistryV1Bundle, render::render},
    catalog::{
        Bundle, CatalogError, PROPERTY_BUNDLE_OBJECT, PROPERTY_MAX_OPENSHIFT_VERSION, PackageIndex,
        SCHEMA_BUNDLE, SCHEMA_PACKAGE, source::CatalogContent,
    },
    image::{PullOptions, pull_and_read},
    meter::{Meter, Refused, Work},
    resolve::{CatalogInput, DependencyMode, ResolveError, ResolveRequest},
};

/// One package of one catalog.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageSummary {
    /// The package.
    pub package: String,
    /// The catalog.
    pub catalog: String,
    /// The default channel.
    pub default_channel: Option<String>,
    /// The bundle installed with no version and the default channel (resolver's answer).
    pub newest_bundle: Option<String>,
    /// Its version.
    pub newest_version: Option<String>,
    /// Its image.
    pub newest_image: Option<String>,
    /// Where its manifests were read: `catalog` (`olm.bundle.object` properties), `image` (the
    /// bundle image, pulled), or `none` (not read: install modes and verdict unknown).
    pub manifests_from: ManifestSource,
    /// Install modes the newest bundle supports (`AllNamespaces`, `OwnNamespace`, ...).
    pub install_modes: Vec<String>,
    /// Whether the newest bundle has webhooks (needs cert-manager or the OpenShift service CA).
    pub webhooks: bool,
    /// Owned APIServices of the newest bundle (OLM v1 refuses them).
    pub api_services: usize,
    /// `olm.maxOpenShiftVersion` of the newest bundle.
    pub max_openshift_version: Option<String>,
    /// The package's deprecation message.
    pub deprecated: Option<String>,
    /// Number of deprecated channels and bundles.
    pub deprecated_entries: usize,
    /// Whether olmv1 installs the newest bundle with the default configuration (with
    /// `--dependencies=check`, once what it requires is installed).
    pub installable: bool,
    /// Why not (the resolver's or renderer's message), when not.
    pub not_installable_reason: Option<String>,
    /// What the newest bundle requires (`requires`, `requiresError`).
    #[serde(flatten)]
    pub requirements: BundleRequirements,
}

/// Where a summary's manifests were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ManifestSource {
    /// The catalog's `olm.bundle.object` properties.
    Catalog,
    /// The pulled bundle image.
    Image,
    /// Not read.
    None,
}

/// Why `search` stopped.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A catalog's content could not be read.
    #[error("catalog {catalog:?}: {source}")]
    Catalog {
        /// The catalog.
        catalog: String,
        /// Why.
        #[source]
        source: CatalogError,
    },
    /// The command's meter ran out (one sentence naming what and the limit).
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl SearchError {
    /// Malformed catalog content does not mend on retry; the same catalog costs the same again.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// `olmv1 search`'s rows: the packages matching `text` of every catalog whose content was read,
/// by package then catalog. With `pull`, the bundle image of each newest bundle whose catalog
/// carries no manifests is pulled and read; a failed pull is reported as a warning (its row then
/// says the manifests were not read). Within `meter` (the command's): every catalog's search is
/// charged to it.
pub async fn search_catalogs(
    catalogs: &[SourcedCatalog],
    text: &str,
    dependencies: DependencyMode,
    pull: Option<&PullOptions>,
    meter: &mut Meter,
    report: Reporter<'_>,
) -> Result<Vec<PackageSummary>, SearchError> {
    let mut rows: Vec<PackageSummary> = Vec::new();
    for c in catalogs {
        let Some(content) = &c.content else { continue };
        rows.extend(search(&c.input, content, text, dependencies, meter)?);
    }
    if let Some(pull) = pull {
        for row in rows
            .iter_mut()
            .filter(|r| r.manifests_from == ManifestSource::None)
        {
            let Some(image) = row.newest_image.clone() else {
                continue;
            };
            match pull_and_read(&image, pull, RegistryV1Bundle::from_dir).await {
                Ok((_, loaded)) => match loaded {
                    Ok(bundle) => describe_bundle(row, &bundle, ManifestSource::Image),
                    Err(e) => row.not_installable_reason = Some(format!("bundle image {image:?}: {e}")),
                },
                Err(e) => report(Report::Warning(format!(
                    "warning: pulling bundle image {image:?}: {}",
                    escape_value(&e.to_string())
                ))),
            }
        }
    }
    rows.sort_by(|a, b| a.package.cmp(&b.package).then_with(|| a.catalog.cmp(&b.catalog)));
    Ok(rows)
}

/// Whether `package` matches `text` (case-insensitive substring of its name; empty matches all).
pub fn matches(package: &str, text: &str) -> bool {
    text.is_empty() || package.to_lowercase().contains(&text.to_lowercase())
}

/// The summaries of the packages of `catalog` matching `text`, resolved as `dependencies`
/// says. `content` is read once for the newest bundles' manifests. Within `meter`: every
/// resolution, requirement, deprecation scan and manifest read is charged.
pub fn search(
    catalog: &CatalogInput,
    content: &CatalogContent,
    text: &str,
    dependencies: DependencyMode,
    meter: &mut Meter,
) -> Result<Vec<PackageSummary>, SearchError> {
    let inputs = std::slice::from_ref(catalog);
    let mut rows = Vec::new();
    let mut wanted: HashMap<String, usize> = HashMap::new();
    for package in catalog.index.packages().filter(|p| matches(&p.name, text)) {
        let request = ResolveRequest {
            package: package.name.to_string(),
            version_range: None,
            channels: package.default_channel.iter().map(|c| c.to_string()).collect(),
            selector: None,
            upgrade_constraint_policy: Default::default(),
            installed: None,
        };
        let (newest, reason) = match dependencies.resolve_within(&request, inputs, meter) {
            Ok(r) => (Some((r.bundle.name, r.bundle.status_version)), None),
            Err(ResolveError::Exhausted { package, exhausted }) => {
                return Err(Refused::new(format!("resolving package {package:?}"), exhausted).into());
            }
            Err(e) => {
                // A bundle refused for its dependencies is still the newest one to describe.
                let newest = newest_in_default_channel(package).map(|b| {
                    (
                        b.name.to_string(),
                        b.version.as_ref().map(|v| v.status_version()).unwrap_or_default(),
                    )
                });
                (newest, Some(e.to_string()))
            }
        };
        let mut row = summary_without_manifests(&catalog.name, package, newest.as_ref(), meter)?;
        row.not_installable_reason = reason;
        // With `check`, the controller refuses a bundle whose requirements cannot be read.
        if let (DependencyMode::Check, None, Some(e)) = (
            dependencies,
            &row.not_installable_reason,
            &row.requirements.requires_error,
        ) {
            row.not_installable_reason = Some(format!("its requirements cannot be read: {e}"));
        }
        if let Some((name, _)) = &newest {
            wanted.insert(name.clone(), rows.len());
        }
        rows.push(row);
    }
    if wanted.is_empty() {
        return Ok(rows);
    }
    let mut refused = None;
    content
        .for_each_meta(|meta| {
            if refused.is_some() {
                return Ok(());
            }
            if let Err(e) = meter.charge(Work::Visit, 1) {
                refused = Some(Refused::new(format!("reading catalog {:?}", catalog.name), e));
                return Ok(());
            }
            if &*meta.schema != SCHEMA_BUNDLE {
                return Ok(());
            }
            let Some(&row) = wanted.get(&*meta.name) else {
                return Ok(());
            };
            if rows[row].package != *meta.package {
                return Ok(());
            }
            // Its manifests are read and rendered.
            if let Err(e) = meter.charge(Work::Parse, meta.blob.len() as u64) {
                refused = Some(Refused::new(
                    format!("bundle {:?}: reading its manifests", meta.name),
                    e,
                ));
                return Ok(());
            }
            let bundle: Bundle = serde_json::from_slice(&meta.blob).map_err(|e| CatalogError::Malformed {
                location: meta.location(),
                message: e.to_string(),
            })?;
            describe_catalog_bundle(&mut rows[row], &bundle);
            Ok(())
        })
        .map_err(|source| SearchError::Catalog {
            catalog: catalog.name.to_string(),
            source,
        })?;
    if let Some(refused) = refused {
        return Err(refused.into());
    }
    for row in &mut rows {
        row.installable = row.not_installable_reason.is_none() && row.manifests_from != ManifestSource::None;
    }
    Ok(rows)
}

fn newest_in_default_channel(package: &PackageIndex) -> Option<&crate::catalog::BundleIndex> {
    let channel = package.channel(package.default_channel.as_deref()?)?;
    channel
        .entries
        .iter()
        .filter_map(|e| e.bundle.map(|i| &package.bundles[i]))
        .filter(|b| b.version.is_ok())
        .max_by(|a, b| crate::resolve::rank(b, a))
}

fn summary_without_manifests(
    catalog: &str,
    package: &PackageIndex,
    newest: Option<&(String, String)>,
    meter: &mut Meter,
) -> Result<PackageSummary, Refused> {
    let deprecation = package.deprecation();
    let newest_index = newest.and_then(|(name, _)| package.bundle(name));
    // Its deprecation entries are scanned, its properties read.
    let scanned = deprecation.map_or(0, |d| d.entries.len()) + newest_index.map_or(0, |b| b.properties.len());
    meter
        .charge(Work::Visit, scanned as u64)
        .map_err(|e| Refused::new(format!("summarising package {:?}", package.name), e))?;
    let requirements = match newest_index {
        Some(b) => BundleRequirements::of(b, meter)?,
        None => BundleRequirements::default(),
    };
    Ok(PackageSummary {
        package: package.name.to_string(),
        catalog: catalog.to_string(),
        default_channel: package.default_channel.as_ref().map(|c| c.to_string()),
        newest_bundle: newest.map(|(n, _)| n.clone()),
        newest_version: newest.map(|(_, v)| v.clone()),
        newest_image: newest_index.map(|b| b.image.to_string()),
        manifests_from: ManifestSource::None,
        install_modes: Vec::new(),
        webhooks: false,
        api_services: 0,
        max_openshift_version: newest_index.and_then(|b| {
            b.properties
                .iter()
                .find(|p| &*p.type_ == PROPERTY_MAX_OPENSHIFT_VERSION)
                // A string shows unquoted; any other value as written (4.10 stays 4.10).
                .map(|p| {
                    p.value
                        .parse::<String>()
                        .unwrap_or_else(|_| p.value.raw().to_owned())
                })
        }),
        deprecated: deprecation.and_then(|d| {
            d.entries
                .iter()
                .find(|e| e.reference.schema == SCHEMA_PACKAGE)
                .map(|e| e.message.clone())
        }),
        deprecated_entries: deprecation.map_or(0, |d| {
            d.entries
                .iter()
                .filter(|e| e.reference.schema != SCHEMA_PACKAGE)
                .count()
        }),
        installable: false,
        requirements,
        not_installable_reason: None,
    })
}

/// Describes the newest bundle from the catalog's `olm.bundle.object` properties, when it has
/// them (catalogs that only name images leave the row for [`describe_bundle`]).
fn describe_catalog_bundle(row: &mut PackageSummary, bundle: &Bundle) {
    if !bundle
        .properties
        .iter()
        .any(|p| &*p.type_ == PROPERTY_BUNDLE_OBJECT)
    {
        return;
    }
    match RegistryV1Bundle::from_catalog_bundle(&bundle.package, &bundle.name, &bundle.properties) {
        Ok(loaded) => describe_bundle(row, &loaded, ManifestSource::Catalog),
        Err(e) => {
            row.manifests_from = ManifestSource::Catalog;
            row.not_installable_reason.get_or_insert(e.to_string());
        }
    }
}

/// Fills install modes, webhooks and APIServices from the bundle's manifests, and asks the
/// renderer whether it installs with the default configuration (the controller's own verdict).
pub fn describe_bundle(row: &mut PackageSummary, loaded: &RegistryV1Bundle, from: ManifestSource) {
    let spec = &loaded.csv.spec;
    row.manifests_from = from;
    row.install_modes = spec
        .install_modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.type_.clone())
        .collect();
    row.webhooks = !spec.webhookdefinitions.is_empty();
    row.api_services = spec.apiservicedefinitions.owned.len();
    if row.not_installable_reason.is_none()
        && let Err(e) = render(loaded, "olmv1-search", None)
    {
        row.not_installable_reason = Some(e.to_string());
    }
    row.installable = row.not_installable_reason.is_none();
}

/// The text form's table: one row per package and catalog (REQUIRES only when a newest bundle
/// declares dependencies).
pub fn table(rows: &[PackageSummary]) -> Table {
    // REQUIRES only when a newest bundle declares dependencies.
    let requires = rows.iter().any(|r| !r.requirements.is_empty());
    let mut header = vec![
        "PACKAGE",
        "CATALOG",
        "CHANNEL",
        "NEWEST",
        "MODES",
        "WEBHOOKS",
        "MAX OCP",
        "DEPRECATED",
        "OLM V1",
    ];
    if requires {
        header.push("REQUIRES");
    }
    let mut t = Table::new(&header);
    for r in rows {
        let modes: Vec<&str> = r
            .install_modes
            .iter()
            .map(|m| match m.as_str() {
                "AllNamespaces" => "All",
                "SingleNamespace" => "Single",
                "OwnNamespace" => "Own",
                "MultiNamespace" => "Multi",
                other => other,
            })
            .collect();
        let deprecated = match (&r.deprecated, r.deprecated_entries) {
            (Some(_), _) => ("package".to_string(), Tone::Warn),
            (None, 0) => ("-".to_string(), Tone::Plain),
            (None, n) => (format!("{n} entries"), Tone::Warn),
        };
        let verdict = match &r.not_installable_reason {
            None if r.manifests_from == ManifestSource::None => {
                ("unknown (manifests not read)".to_string(), Tone::Warn)
            }
            // `--dependencies=check`: installs once what REQUIRES names is installed.
            None if !r.requirements.is_empty() => {
                ("yes, once REQUIRES are installed".to_string(), Tone::Good)
            }
            None => ("yes".to_string(), Tone::Good),
            // The whole reason, cut as every shown value is (after its row when long).
            Some(reason) => (format!("no: {reason}"), Tone::Bad),
        };
        let mut row = vec![
            (r.package.clone(), Tone::Plain),
            (r.catalog.clone(), Tone::Plain),
            (
                r.default_channel.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                r.newest_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                if modes.is_empty() {
                    "-".into()
                } else {
                    modes.join(",")
                },
                Tone::Plain,
            ),
            (if r.webhooks { "yes".into() } else { "-".into() }, Tone::Plain),
            (
                r.max_openshift_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            deprecated,
            verdict,
        ];
        if requires {
            let tone = match r.requirements.requires_error {
                Some(_) => Tone::Bad,
                None => Tone::Plain,
            };
            row.push((r.requirements.cell(), tone));
        }
        t.toned_row(row);
    }
    t
}
