//! The lean per-package index the resolver reads: channels with their upgrade edges (skipRanges
//! parsed once), bundles with name, image, version+release and the small properties, and the
//! package's deprecations. Manifests (`olm.bundle.object`), CSV metadata and icons are skipped
//! while parsing, never copied.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt,
    path::Path,
    sync::Arc,
};

use bytes::Bytes;
use serde::{
    Deserialize,
    de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

use super::{
    CatalogError, Meta,
    meta::{SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE},
    model::{
        ChannelEntry as FullChannelEntry, Deprecation, PROPERTY_BUNDLE_OBJECT, PROPERTY_CSV_METADATA,
        PROPERTY_PACKAGE, parse_typed,
    },
    property::{Property, PropertyValue},
    read,
};
use crate::version::{SkipRange, VersionRelease};

/// One catalog's packages, ready for resolution. Immutable; share it with an `Arc`.
#[derive(Debug, Clone, Default)]
pub struct CatalogIndex {
    packages: BTreeMap<Arc<str>, PackageIndex>,
}

/// One package of a catalog.
#[derive(Debug, Clone)]
pub struct PackageIndex {
    /// The package name.
    pub name: Arc<str>,
    /// The default channel from the `olm.package` object (`None` if the catalog has no
    /// `olm.package` object for the package or it names no channel).
    pub default_channel: Option<Arc<str>>,
    /// Channels in catalog order.
    pub channels: Vec<ChannelIndex>,
    /// Bundles in catalog order.
    pub bundles: Vec<BundleIndex>,
    /// The package's `olm.deprecations` objects in catalog order (resolution uses the first, as
    /// upstream does).
    pub deprecations: Vec<Deprecation>,
    /// The first deprecation object's entries by schema, then name (the first of equal ones), so
    /// that a lookup costs the same with 60,000 entries as with one.
    deprecation_keys: HashMap<String, HashMap<String, usize>>,
    /// Positions in `bundles` by name.
    bundle_keys: HashMap<Arc<str>, usize>,
}

/// One channel of a package.
#[derive(Debug, Clone)]
pub struct ChannelIndex {
    /// The channel name.
    pub name: Arc<str>,
    /// The entries, in catalog order.
    pub entries: Vec<ChannelEntryIndex>,
}

/// One channel entry: a bundle and the upgrade edges into it.
#[derive(Debug, Clone)]
pub struct ChannelEntryIndex {
    /// The bundle name.
    pub name: Arc<str>,
    /// Position of the bundle in [`PackageIndex::bundles`], if the package has it.
    pub bundle: Option<usize>,
    /// The bundle this entry replaces.
    pub replaces: Option<Arc<str>>,
    /// The bundles this entry skips.
    pub skips: Vec<Arc<str>>,
    /// The skipRange as written.
    pub skip_range: Option<Arc<str>>,
    /// The skipRange parsed; `None` when absent or unparsable (an unparsable one matches nothing).
    pub skip_range_parsed: Option<SkipRange>,
}

/// One bundle, without its manifests.
#[derive(Debug, Clone)]
pub struct BundleIndex {
    /// The bundle name.
    pub name: Arc<str>,
    /// The bundle image reference.
    pub image: Arc<str>,
    /// Version and release from the `olm.package` property, or why it could not be read.
    pub version: Result<VersionRelease, Arc<str>>,
    /// Whether the first deprecation object of the package names this bundle.
    pub deprecated: bool,
    /// Every property except `olm.bundle.object` and `olm.csv.metadata`, values as their JSON
    /// text (far less memory than parsed values, and no digit lost), type names shared.
    pub properties: Vec<Property>,
}

impl CatalogIndex {
    /// Builds an index from metas (in catalog order).
    pub fn from_metas<'a>(metas: impl IntoIterator<Item = &'a Meta>) -> Result<CatalogIndex, CatalogError> {
        let mut builder = CatalogIndexBuilder::default();
        for meta in metas {
            builder.add(meta)?;
        }
        builder.finish()
    }

    /// Reads and indexes an FBC directory tree, one file in memory at a time.
    pub fn from_dir(root: &Path) -> Result<CatalogIndex, CatalogError> {
        let mut builder = CatalogIndexBuilder::default();
        read::for_each_dir_meta(root, |meta| builder.add(&meta))?;
        builder.finish()
    }

    /// Indexes a JSONL buffer (catalogd's `/api/v1/all`); a line longer than `max_line_bytes`
    /// is an error.
    pub fn from_jsonl(
        data: Bytes,
        origin: &str,
        max_line_bytes: usize,
    ) -> Result<CatalogIndex, CatalogError> {
        let mut builder = CatalogIndexBuilder::default();
        for meta in read::jsonl_metas(data, Arc::from(origin), max_line_bytes) {
            builder.add(&meta?)?;
        }
        builder.finish()
    }

    /// Indexes JSONL read line by line (a file or a streamed body), never holding it whole;
    /// a line longer than `max_line_bytes` is an error.
    pub fn from_jsonl_reader<R: std::io::BufRead>(
        reader: R,
        origin: &str,
        max_line_bytes: usize,
    ) -> Result<CatalogIndex, CatalogError> {
        let mut builder = CatalogIndexBuilder::default();
        for meta in read::JsonlReader::new(reader, Arc::from(origin), max_line_bytes) {
            builder.add(&meta?)?;
        }
        builder.finish()
    }

    /// The package with this name, if the catalog has it.
    pub fn package(&self, name: &str) -> Option<&PackageIndex> {
        self.packages.get(name)
    }

    /// All packages, by name.
    pub fn packages(&self) -> impl Iterator<Item = &PackageIndex> {
        self.packages.values()
    }

    /// Number of packages.
    pub fn len(&self) -> usize {
        self.packages.len()
    }

    /// Whether the catalog has no package.
    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
    }

    /// An estimate of the heap memory the index holds (shared strings counted once), for
    /// benchmarks and metrics.
    pub fn approx_heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut seen: HashSet<*const u8> = HashSet::new();
        let mut arc = |s: &Arc<str>| if seen.insert(s.as_ptr()) { s.len() + 16 } else { 0 };
        let mut total = 0usize;
        for (key, p) in &self.packages {
            total += arc(key) + size_of::<PackageIndex>() + size_of::<Arc<str>>();
            total += p.default_channel.as_ref().map_or(0, &mut arc);
            for c in &p.channels {
                total += size_of::<ChannelIndex>() + arc(&c.name);
                for e in &c.entries {
                    total += size_of::<ChannelEntryIndex>() + arc(&e.name);
                    total += e.replaces.as_ref().map_or(0, &mut arc);
                    total +=
                        e.skips.iter().map(&mut arc).sum::<usize>() + e.skips.len() * size_of::<Arc<str>>();
                    total += e.skip_range.as_ref().map_or(0, |s| s.len() + 16);
                    total += e.skip_range_parsed.as_ref().map_or(0, |r| r.as_str().len() + 128);
                }
            }
            for b in &p.bundles {
                total += size_of::<BundleIndex>() + arc(&b.name) + arc(&b.image);
                total += b
                    .properties
                    .iter()
                    .map(|pr| size_of::<Property>() + arc(&pr.type_) + pr.value.raw().len())
                    .sum::<usize>();
            }
            total += p
                .deprecations
                .iter()
                .map(|d| serde_json::to_vec(d).map_or(0, |v| v.len() * 2))
                .sum::<usize>();
            // The lookup maps: a hashed slot per key (names shared or counted above).
            total += p.bundle_keys.len() * (size_of::<(Arc<str>, usize)>() + 8);
            total += p
                .deprecation_keys
                .values()
                .flat_map(|names| names.keys())
                .map(|name| name.len() + size_of::<(String, usize)>() + 8)
                .sum::<usize>();
        }
        total
    }
}

impl PackageIndex {
    /// What a walk over the package visits: its bundles, its channels' entries and their edges
    /// (`replaces`, `skips`, `skipRange`). A meter is charged this before such a walk.
    pub fn items(&self) -> u64 {
        let edges: usize = self
            .channels
            .iter()
            .flat_map(|c| &c.entries)
            .map(|e| {
                1 + e.skips.len() + usize::from(e.replaces.is_some()) + usize::from(e.skip_range.is_some())
            })
            .sum();
        (self.bundles.len() + edges) as u64
    }

    fn new(name: Arc<str>) -> PackageIndex {
        PackageIndex {
            name,
            default_channel: None,
            channels: Vec::new(),
            bundles: Vec::new(),
            deprecations: Vec::new(),
            deprecation_keys: HashMap::new(),
            bundle_keys: HashMap::new(),
        }
    }

    /// The channel with this name.
    pub fn channel(&self, name: &str) -> Option<&ChannelIndex> {
        self.channels.iter().find(|c| &*c.name == name)
    }

    /// The bundle with this name.
    pub fn bundle(&self, name: &str) -> Option<&BundleIndex> {
        self.bundles.get(*self.bundle_keys.get(name)?)
    }

    /// The deprecation object resolution and status use (the first one).
    pub fn deprecation(&self) -> Option<&Deprecation> {
        self.deprecations.first()
    }

    /// The message of [`PackageIndex::deprecation`]'s entry for `schema` and `name` (the package
    /// itself is `olm.package` with an empty name), found by key.
    pub fn deprecation_message(&self, schema: &str, name: &str) -> Option<&str> {
        let i = *self.deprecation_keys.get(schema)?.get(name)?;
        Some(&self.deprecation()?.entries[i].message)
    }
}

/// Builds a [`CatalogIndex`] from metas one at a time; checks duplicates as `opm validate` does.
#[derive(Default)]
pub struct CatalogIndexBuilder {
    packages: BTreeMap<Arc<str>, PackageIndex>,
    package_objects: HashSet<Arc<str>>,
    /// (package, channel) pairs seen, so a duplicate is found in constant time.
    channels: HashSet<(Arc<str>, Arc<str>)>,
    /// Shared name strings, so repeated names (entries, replaces, bundles) are stored once.
    names: HashSet<Arc<str>>,
}

impl CatalogIndexBuilder {
    /// Adds one meta. Objects of unknown schemas are ignored by the index.
    pub fn add(&mut self, meta: &Meta) -> Result<(), CatalogError> {
        match &*meta.schema {
            SCHEMA_PACKAGE => self.add_package(meta),
            SCHEMA_CHANNEL => self.add_channel(meta),
            SCHEMA_BUNDLE => self.add_bundle(meta),
            SCHEMA_DEPRECATIONS => self.add_deprecation(meta),
            "" => Err(CatalogError::Malformed {
                location: meta.location(),
                message: "object is missing root schema field".to_string(),
            }),
            _ => Ok(()),
        }
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(existing) = self.names.get(s) {
            return existing.clone();
        }
        let arc: Arc<str> = Arc::from(s);
        self.names.insert(arc.clone());
        arc
    }

    fn package_mut(&mut self, name: &str) -> &mut PackageIndex {
        let key = self.intern(name);
        self.packages
            .entry(key.clone())
            .or_insert_with(|| PackageIndex::new(key))
    }

    fn add_package(&mut self, meta: &Meta) -> Result<(), CatalogError> {
        let pkg: LeanPackage = parse_typed(meta)?;
        if pkg.name.is_empty() {
            return Err(CatalogError::Invalid(
                "config contains package with no name".to_string(),
            ));
        }
        let name = self.intern(&pkg.name);
        if !self.package_objects.insert(name.clone()) {
            return Err(CatalogError::Invalid(format!("duplicate package {:?}", &*name)));
        }
        let default_channel = (!pkg.default_channel.is_empty()).then(|| self.intern(&pkg.default_channel));
        self.package_mut(&name).default_channel = default_channel;
        Ok(())
    }

    fn add_channel(&mut self, meta: &Meta) -> Result<(), CatalogError> {
        let ch: LeanChannel = parse_typed(meta)?;
        if ch.package.is_empty() {
            return Err(CatalogError::Invalid(format!(
                "package name must be set for channel {:?}",
                ch.name
            )));
        }
        if ch.name.is_empty() {
            return Err(CatalogError::Invalid(format!(
                "package {:?} contains channel with no name",
                ch.package
            )));
        }
        let mut seen = HashSet::with_capacity(ch.entries.len());
        let mut entries = Vec::with_capacity(ch.entries.len());
        for e in ch.entries {
            if !seen.insert(e.name.clone()) {
                return Err(CatalogError::Invalid(format!(
                    "invalid package {:?}, channel {:?}: duplicate entry {:?}",
                    ch.package, ch.name, e.name
                )));
            }
            let skip_range_parsed = if e.skip_range.is_empty() {
                None
            } else {
                SkipRange::parse(&e.skip_range).ok()
            };
            entries.push(ChannelEntryIndex {
                name: self.intern(&e.name),
                bundle: None,
                replaces: (!e.replaces.is_empty()).then(|| self.intern(&e.replaces)),
                skips: e.skips.iter().map(|s| self.intern(s)).collect(),
                skip_range: (!e.skip_range.is_empty()).then(|| Arc::from(e.skip_range.as_str())),
                skip_range_parsed,
            });
        }
        let name = self.intern(&ch.name);
        let package = self.intern(&ch.package);
        if !self.channels.insert((package.clone(), name.clone())) {
            return Err(CatalogError::Invalid(format!(
                "package {:?} has duplicate channel {:?}",
                &*package, &*name
            )));
        }
        let pkg = self.package_mut(&package);
        pkg.channels.push(ChannelIndex { name, entries });
        Ok(())
    }

    fn add_bundle(&mut self, meta: &Meta) -> Result<(), CatalogError> {
        let b: LeanBundle = parse_typed(meta)?;
        if b.package.is_empty() {
            return Err(CatalogError::Invalid(format!(
                "package name must be set for bundle {:?}",
                b.name
            )));
        }
        let version = bundle_version(&b.name, &b.properties.0);
        let properties = b
            .properties
            .0
            .into_iter()
            .map(|p| Property {
                type_: self.intern(&p.type_),
                value: p.value,
            })
            .collect();
        let name = self.intern(&b.name);
        let image: Arc<str> = Arc::from(b.image.as_str());
        let pkg = self.package_mut(&b.package);
        pkg.bundles.push(BundleIndex {
            name,
            image,
            version,
            deprecated: false,
            properties,
        });
        Ok(())
    }

    fn add_deprecation(&mut self, meta: &Meta) -> Result<(), CatalogError> {
        let d: Deprecation = parse_typed(meta)?;
        if d.package.is_empty() {
            return Err(CatalogError::Malformed {
                location: meta.location(),
                message: "package name must be set for deprecation".to_string(),
            });
        }
        let package = d.package.clone();
        self.package_mut(&package).deprecations.push(d);
        Ok(())
    }

    /// Links channel entries to bundles, marks deprecated bundles and checks duplicate bundles.
    pub fn finish(self) -> Result<CatalogIndex, CatalogError> {
        let mut packages = self.packages;
        for pkg in packages.values_mut() {
            let mut by_name: HashMap<Arc<str>, usize> = HashMap::with_capacity(pkg.bundles.len());
            for (i, b) in pkg.bundles.iter().enumerate() {
                if by_name.insert(b.name.clone(), i).is_some() {
                    return Err(CatalogError::Invalid(format!(
                        "package {:?} has duplicate bundle {:?}",
                        &*pkg.name, &*b.name
                    )));
                }
            }
            for ch in &mut pkg.channels {
                for e in &mut ch.entries {
                    e.bundle = by_name.get(&e.name).copied();
                }
            }
            pkg.bundle_keys = by_name;
            if let Some(dep) = pkg.deprecations.first() {
                for (at, entry) in dep.entries.iter().enumerate() {
                    pkg.deprecation_keys
                        .entry(entry.reference.schema.clone())
                        .or_default()
                        .entry(entry.reference.name.clone())
                        .or_insert(at);
                    if entry.reference.schema == SCHEMA_BUNDLE
                        && let Some(&i) = pkg.bundle_keys.get(entry.reference.name.as_str())
                    {
                        pkg.bundles[i].deprecated = true;
                    }
                }
            }
        }
        Ok(CatalogIndex { packages })
    }
}

/// Version and release of a bundle from its first `olm.package` property (upstream
/// `GetVersionAndRelease`, release gate off).
fn bundle_version(bundle: &str, properties: &[Property]) -> Result<VersionRelease, Arc<str>> {
    let Some(p) = properties.iter().find(|p| &*p.type_ == PROPERTY_PACKAGE) else {
        return Err(Arc::from(format!(
            "no package property found in bundle {bundle:?}"
        )));
    };
    let value = p.value.to_value();
    let version = value.get("version").and_then(|v| v.as_str()).ok_or_else(|| {
        Arc::from(format!(
            "error unmarshalling package property: missing version in bundle {bundle:?}"
        ))
    })?;
    VersionRelease::parse_legacy(version).map_err(|e| Arc::from(e.to_string()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanPackage {
    #[serde(default)]
    name: String,
    #[serde(default)]
    default_channel: String,
}

#[derive(Deserialize)]
struct LeanChannel {
    #[serde(default)]
    name: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    entries: Vec<FullChannelEntry>,
}

#[derive(Deserialize)]
struct LeanBundle {
    #[serde(default)]
    name: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    properties: LeanProperties,
}

/// Properties without the large ones: their values are skipped by the parser, not copied.
#[derive(Default)]
struct LeanProperties(Vec<Property>);

fn is_large_property(type_: &str) -> bool {
    type_ == PROPERTY_BUNDLE_OBJECT || type_ == PROPERTY_CSV_METADATA
}

impl<'de> Deserialize<'de> for LeanProperties {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SeqV;
        impl<'de> Visitor<'de> for SeqV {
            type Value = LeanProperties;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of properties")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LeanProperties, A::Error> {
                let mut out = Vec::new();
                while let Some(LeanProperty(p)) = seq.next_element()? {
                    out.extend(p);
                }
                Ok(LeanProperties(out))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LeanProperties, E> {
                Ok(LeanProperties::default())
            }
        }
        d.deserialize_any(SeqV)
    }
}

struct LeanProperty(Option<Property>);

impl<'de> Deserialize<'de> for LeanProperty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapV;
        impl<'de> Visitor<'de> for MapV {
            type Value = LeanProperty;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a property {type, value}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LeanProperty, A::Error> {
                let mut type_: Option<String> = None;
                let mut value: Option<PropertyValue> = None;
                let mut skip = false;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "type" => {
                            let t: String = map.next_value()?;
                            skip = is_large_property(&t);
                            if skip {
                                value = None;
                            }
                            type_ = Some(t);
                        }
                        // Normalised blobs sort keys, so `type` comes first and large values
                        // are skipped without being built.
                        "value" if skip => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        "value" => value = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let type_ = type_.ok_or_else(|| de::Error::missing_field("type"))?;
                if skip {
                    return Ok(LeanProperty(None));
                }
                Ok(LeanProperty(Some(Property {
                    type_: Arc::from(type_),
                    value: value.unwrap_or_else(PropertyValue::null),
                })))
            }
        }
        d.deserialize_map(MapV)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(objects: &[&str]) -> Result<CatalogIndex, CatalogError> {
        let metas: Vec<Meta> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("t.json"), i as u32 + 1)
            })
            .collect::<Result<_, _>>()?;
        CatalogIndex::from_metas(&metas)
    }

    #[test]
    fn duplicates_are_errors_worded_as_opm_validate() {
        let pkg = r#"{"schema":"olm.package","name":"p"}"#;
        assert_eq!(
            index(&[pkg, pkg]).unwrap_err().to_string(),
            r#"duplicate package "p""#
        );
        let ch = r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"b"}]}"#;
        assert_eq!(
            index(&[ch, ch]).unwrap_err().to_string(),
            r#"package "p" has duplicate channel "c""#
        );
        let dup_entry =
            r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"b"},{"name":"b"}]}"#;
        assert_eq!(
            index(&[dup_entry]).unwrap_err().to_string(),
            r#"invalid package "p", channel "c": duplicate entry "b""#
        );
        let b = r#"{"schema":"olm.bundle","package":"p","name":"b","image":"i"}"#;
        assert_eq!(
            index(&[b, b]).unwrap_err().to_string(),
            r#"package "p" has duplicate bundle "b""#
        );
    }

    #[test]
    fn large_properties_are_not_kept_and_versions_are_read() {
        let b = r#"{"image":"img","name":"p.v1","package":"p","properties":[{"type":"olm.bundle.object","value":{"data":"AAAA"}},{"type":"olm.package","value":{"packageName":"p","version":"1.0.0+2"}},{"value":{"annotations":{}},"type":"olm.csv.metadata"},{"type":"olm.maxOpenShiftVersion","value":"4.19"}],"schema":"olm.bundle"}"#;
        let idx = index(&[b]).unwrap();
        let bundle = idx.package("p").unwrap().bundle("p.v1").unwrap();
        let types: Vec<&str> = bundle.properties.iter().map(|p| &*p.type_).collect();
        assert_eq!(types, ["olm.package", "olm.maxOpenShiftVersion"]);
        assert_eq!(bundle.version.as_ref().unwrap().status_version(), "1.0.0+2");
        assert!(idx.approx_heap_bytes() > 0);
    }

    #[test]
    fn malformed_objects_name_origin_and_object() {
        let err =
            index(&[r#"{"schema":"olm.bundle","package":"p","name":"b","properties":"nope"}"#]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"t.json: object #1 (olm.bundle "b"): "#),
            "{err}"
        );
        let err = index(&[r#"{"name":"x"}"#]).unwrap_err();
        assert!(err.to_string().contains("missing root schema field"), "{err}");
    }
}
