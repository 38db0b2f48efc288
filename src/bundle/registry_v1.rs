//! Loading registry+v1 bundles: from a directory (an unpacked bundle image) or from the
//! `olm.bundle.object` properties of a catalog bundle, as upstream's `source.FromFS` does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;

use crate::bundle::csv::ClusterServiceVersion;
use crate::catalog::Property;
use crate::confined::{ConfinedDir, ConfinedError, Kind};
use crate::image::UnpackLimits;

/// The annotation holding a CSV's bundle properties (a JSON array of `{type, value}`).
pub const PROPERTIES_ANNOTATION: &str = "olm.properties";
/// The `metadata/annotations.yaml` key naming the bundle's package.
pub const PACKAGE_ANNOTATION: &str = "operators.operatorframework.io.bundle.package.v1";
/// The catalog property type carrying one base64-encoded manifest.
pub const BUNDLE_OBJECT_PROPERTY: &str = "olm.bundle.object";

/// The directory of manifests inside a bundle.
const MANIFESTS_DIR: &str = "manifests";
/// The default largest file read from a bundle directory (`--max-file-bytes` of the controller
/// and `olmv1 render` changes it).
pub const DEFAULT_MAX_FILE_BYTES: u64 = UnpackLimits::BUNDLE.max_file_bytes;
/// Deepest nesting accepted in a manifest. Real CRDs nest under 40 levels; the bound keeps the
/// recursive parsers and the typed CRD conversion well inside a 2 MiB thread stack.
pub const MAX_MANIFEST_DEPTH: usize = 64;

/// Catalog property types that `opm render` derives from the bundle itself (or that carry the
/// manifests); every other catalog property came from the CSV annotation or properties.yaml.
const DERIVED_CATALOG_PROPERTIES: [&str; 8] = [
    "olm.package",
    "olm.gvk",
    "olm.gvk.required",
    "olm.package.required",
    "olm.label.required",
    "olm.constraint",
    BUNDLE_OBJECT_PROPERTY,
    "olm.csv.metadata",
];

/// Why a bundle could not be loaded. Every variant is terminal: the bundle content is wrong and
/// retrying the same bundle cannot succeed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadError {
    /// A file of the bundle could not be read, or was refused.
    #[error("{path:?} in the bundle {cause}")]
    Read {
        /// The file, relative to the bundle's root.
        path: PathBuf,
        /// Why, as the rest of the sentence (e.g. `is a symbolic link, which is not followed`).
        cause: String,
    },
    /// The bundle's layout or content breaks the registry+v1 format (message as upstream).
    #[error("{0}")]
    Invalid(String),
}

impl LoadError {
    /// Always true: a malformed bundle stays malformed.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// A registry+v1 bundle: package name, ClusterServiceVersion, CRDs and the other manifests.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistryV1Bundle {
    /// The package (`operators.operatorframework.io.bundle.package.v1`, or the catalog's).
    pub package_name: String,
    /// The ClusterServiceVersion; its `olm.properties` annotation already holds the merged
    /// properties, as upstream writes it.
    pub csv: ClusterServiceVersion,
    /// CustomResourceDefinitions as JSON, normalised through the `apiextensions.k8s.io/v1` type.
    pub crds: Vec<Value>,
    /// Every other manifest, unchanged, in file order.
    pub others: Vec<Value>,
    /// The bundle properties: the CSV's `olm.properties` annotation merged with
    /// `metadata/properties.yaml` (or the catalog entry's own properties).
    pub properties: Vec<Property>,
}

impl RegistryV1Bundle {
    /// Loads a bundle from a directory laid out as a registry+v1 image: `metadata/annotations.yaml`
    /// (package name), optional `metadata/properties.yaml`, and `manifests/` without
    /// subdirectories holding exactly one ClusterServiceVersion (the last one read wins, as
    /// upstream), CRDs and other objects. No file over [`DEFAULT_MAX_FILE_BYTES`] is read.
    pub fn from_dir(dir: &Path) -> Result<Self, LoadError> {
        Self::from_dir_within(dir, DEFAULT_MAX_FILE_BYTES)
    }

    /// [`RegistryV1Bundle::from_dir`], reading no file larger than `max_file_bytes`.
    pub fn from_dir_within(dir: &Path, max_file_bytes: u64) -> Result<Self, LoadError> {
        // Bundle directories are untrusted: nothing is read through a link or from a
        // non-regular file, and every read is bounded before it allocates.
        let root = ConfinedDir::open(dir).map_err(|e| match e {
            ConfinedError::NotFound { .. } => {
                LoadError::Invalid(format!("bundle directory {dir:?} does not exist"))
            }
            e => LoadError::Invalid(format!("bundle directory {dir:?}: {e}")),
        })?;
        let annotations_rel = Path::new("metadata/annotations.yaml");
        let annotations_text = read_text(&root, annotations_rel, max_file_bytes)?;
        let package_name = package_from_annotations(&annotations_text)
            .map_err(|e| LoadError::Invalid(format!("parsing {annotations_rel:?} in the bundle: {e}")))?;

        let manifests = root
            .open_dir(Path::new(MANIFESTS_DIR))
            .map_err(|e| read_error(Path::new(MANIFESTS_DIR), &e))?;
        // fs.WalkDir visits entries in lexical order; so does `entries`.
        let entries = manifests
            .entries()
            .map_err(|e| read_error(Path::new(MANIFESTS_DIR), &e))?;

        let mut objects = Vec::new();
        for (name, kind) in entries {
            let rel = format!("{MANIFESTS_DIR}/{}", name.to_string_lossy());
            if kind == Kind::Dir {
                return Err(LoadError::Invalid(format!(
                    "subdirectories are not allowed within the {MANIFESTS_DIR:?} directory of the bundle \
                     image filesystem: found {rel:?}"
                )));
            }
            let bytes = manifests
                .read_file(Path::new(&name), max_file_bytes)
                .map_err(|e| read_error(Path::new(&rel), &e))?;
            let text = utf8(Path::new(&rel), bytes)?;
            let docs = parse_manifest_stream(&text)
                .map_err(|e| LoadError::Invalid(format!("error parsing objects in {rel:?}: {e}")))?;
            objects.extend(docs.into_iter().map(|doc| (rel.clone(), doc)));
        }

        let extra_properties = match root.read_file(Path::new("metadata/properties.yaml"), max_file_bytes) {
            Ok(bytes) if bytes.is_empty() => Vec::new(),
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    LoadError::Invalid("failed to unmarshal metadata/properties.yaml: not UTF-8 text".into())
                })?;
                properties_from_yaml(&text).map_err(|e| {
                    LoadError::Invalid(format!("failed to unmarshal metadata/properties.yaml: {e}"))
                })?
            }
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => {
                return Err(LoadError::Invalid(format!(
                    "failed to read properties.yaml file: {e}"
                )));
            }
        };
        assemble(package_name, objects, extra_properties)
    }

    /// Loads a bundle from its catalog entry: `package` is the entry's `package`, `properties` its
    /// properties. Every `olm.bundle.object` property (`{"data": <base64 JSON manifest>}`) is one
    /// manifest. Catalog properties that `opm render` does not derive from the manifests (such as
    /// `olm.maxOpenShiftVersion`) are added to the CSV's `olm.properties` annotation, standing in
    /// for the image's `metadata/properties.yaml`.
    pub fn from_catalog_bundle(
        package: &str,
        bundle_name: &str,
        properties: &[Property],
    ) -> Result<Self, LoadError> {
        let mut objects = Vec::new();
        for (i, property) in properties
            .iter()
            .filter(|p| &*p.type_ == BUNDLE_OBJECT_PROPERTY)
            .enumerate()
        {
            let place = format!("bundle {bundle_name:?} olm.bundle.object #{i}");
            let value = property.value.to_value();
            let data = value
                .get("data")
                .and_then(Value::as_str)
                .ok_or_else(|| LoadError::Invalid(format!("{place}: value has no base64 \"data\" string")))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| LoadError::Invalid(format!("{place}: invalid base64: {e}")))?;
            let object: Value = serde_json::from_slice(&bytes)
                .map_err(|e| LoadError::Invalid(format!("{place}: invalid JSON manifest: {e}")))?;
            if json_depth(&object) > MAX_MANIFEST_DEPTH {
                return Err(LoadError::Invalid(format!(
                    "{place}: manifest nests deeper than {MAX_MANIFEST_DEPTH} levels"
                )));
            }
            for doc in flatten_lists(object) {
                check_object_header(&doc).map_err(|e| LoadError::Invalid(format!("{place}: {e}")))?;
                objects.push((place.clone(), doc));
            }
        }
        if objects.is_empty() {
            return Err(LoadError::Invalid(format!(
                "bundle {bundle_name:?} has no {BUNDLE_OBJECT_PROPERTY} properties to render from"
            )));
        }
        let extra: Vec<Property> = properties
            .iter()
            .filter(|p| !DERIVED_CATALOG_PROPERTIES.contains(&&*p.type_))
            .cloned()
            .collect();
        let mut bundle = assemble(package.to_string(), objects, Vec::new())?;
        let missing: Vec<Property> = extra
            .into_iter()
            .filter(|p| !bundle.properties.contains(p))
            .collect();
        if !missing.is_empty() {
            bundle.properties.extend(missing);
            set_properties_annotation(&mut bundle.csv, &bundle.properties)?;
        }
        Ok(bundle)
    }

    /// The bundle's name: the CSV's name.
    pub fn name(&self) -> &str {
        self.csv.name()
    }
}

/// Sorts parsed objects into CSV, CRDs and others, and merges properties into the CSV annotation.
fn assemble(
    package_name: String,
    objects: Vec<(String, Value)>,
    extra_properties: Vec<Property>,
) -> Result<RegistryV1Bundle, LoadError> {
    let mut csv = None;
    let mut crds = Vec::new();
    let mut others = Vec::new();
    for (place, object) in objects {
        match object.get("kind").and_then(Value::as_str) {
            Some("ClusterServiceVersion") => {
                let parsed: ClusterServiceVersion = serde_json::from_value(object).map_err(|e| {
                    LoadError::Invalid(format!(
                        "error parsing objects in {place:?}: ClusterServiceVersion: {e}"
                    ))
                })?;
                csv = Some(parsed);
            }
            Some("CustomResourceDefinition") => crds.push(normalise_crd(object).map_err(|e| {
                LoadError::Invalid(format!(
                    "error parsing objects in {place:?}: CustomResourceDefinition: {e}"
                ))
            })?),
            _ => others.push(object),
        }
    }
    let mut csv = csv
        .ok_or_else(|| LoadError::Invalid(format!("no ClusterServiceVersion found in {MANIFESTS_DIR:?}")))?;

    let mut properties = csv_properties(&csv)?;
    if !extra_properties.is_empty() {
        properties.extend(extra_properties);
        set_properties_annotation(&mut csv, &properties)?;
    }
    Ok(RegistryV1Bundle {
        package_name,
        csv,
        crds,
        others,
        properties,
    })
}

/// The properties in the CSV's `olm.properties` annotation.
fn csv_properties(csv: &ClusterServiceVersion) -> Result<Vec<Property>, LoadError> {
    match csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROPERTIES_ANNOTATION))
    {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            LoadError::Invalid(format!(
                "failed to unmarshal csv.metadata.annotations['olm.properties']: {e}"
            ))
        }),
    }
}

/// Writes `properties` as the CSV's `olm.properties` annotation (compact JSON, as Go marshals).
fn set_properties_annotation(
    csv: &mut ClusterServiceVersion,
    properties: &[Property],
) -> Result<(), LoadError> {
    let json = serde_json::to_string(properties)
        .map_err(|e| LoadError::Invalid(format!("failed to marshal registry+v1 properties to json: {e}")))?;
    csv.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(PROPERTIES_ANNOTATION.to_string(), json);
    Ok(())
}

/// Round-trips a `apiextensions.k8s.io/v1` CRD through its typed form, dropping unknown fields as
/// upstream's typed conversion does; other versions are kept as written.
fn normalise_crd(object: Value) -> Result<Value, String> {
    if object.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1") {
        return Ok(object);
    }
    let typed: CustomResourceDefinition = serde_json::from_value(object).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Parses a manifest file: a YAML (or JSON) stream of objects; `List` objects are flattened into
/// their items and empty documents skipped, as `resource.NewLocalBuilder().Flatten()` does.
pub fn parse_manifest_stream(text: &str) -> Result<Vec<Value>, String> {
    // Large CRDs are deep and big: allow more than the parser's defaults (64 levels, 250k
    // nodes), still bounded (the file itself is at most the reader's file limit).
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_MANIFEST_DEPTH,
            max_nodes: 20_000_000,
            max_events: 50_000_000,
            max_documents: 100_000,
        },
    };
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for doc in docs {
        if doc.is_null() {
            continue;
        }
        for object in flatten_lists(doc) {
            check_object_header(&object)?;
            out.push(object);
        }
    }
    Ok(out)
}

/// Nesting depth of a JSON value (scalars 0), computed without recursion.
fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

/// Expands `kind: ...List` objects with `items` into their items.
fn flatten_lists(object: Value) -> Vec<Value> {
    let is_list = object
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && object.get("items").is_some_and(Value::is_array);
    if !is_list {
        return vec![object];
    }
    match object {
        Value::Object(mut map) => match map.remove("items") {
            Some(Value::Array(items)) => items.into_iter().flat_map(flatten_lists).collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Checks that a manifest is an object with a kind and an apiVersion.
fn check_object_header(object: &Value) -> Result<(), String> {
    if !object.is_object() {
        return Err("a manifest is not an object".to_string());
    }
    if object
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("Object 'Kind' is missing".to_string());
    }
    if object
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("Object 'apiVersion' is missing".to_string());
    }
    Ok(())
}

/// Reads the package name out of `metadata/annotations.yaml`.
fn package_from_annotations(text: &str) -> Result<String, String> {
    #[derive(Deserialize, Default)]
    struct AnnotationsFile {
        #[serde(default, deserialize_with = "crate::bundle::csv::null_as_default")]
        annotations: BTreeMap<String, Value>,
    }
    let file: AnnotationsFile = if text.trim().is_empty() {
        AnnotationsFile::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())?
    };
    Ok(file
        .annotations
        .get(PACKAGE_ANNOTATION)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// Reads `properties: [{type, value}]` from `metadata/properties.yaml`.
fn properties_from_yaml(text: &str) -> Result<Vec<Property>, String> {
    #[derive(Deserialize, Default)]
    struct PropertiesFile {
        #[serde(default, deserialize_with = "crate::bundle::csv::null_as_default")]
        properties: Vec<YamlProperty>,
    }
    // YAML values go through JSON values, as upstream's YAML-to-JSON conversion does.
    #[derive(Deserialize, Default)]
    struct YamlProperty {
        #[serde(rename = "type")]
        type_: String,
        value: Value,
    }
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let file: PropertiesFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    Ok(file
        .properties
        .into_iter()
        .map(|p| Property {
            type_: p.type_.into(),
            value: p.value.into(),
        })
        .collect())
}

fn read_text(root: &ConfinedDir, rel: &Path, max_file_bytes: u64) -> Result<String, LoadError> {
    let bytes = root
        .read_file(rel, max_file_bytes)
        .map_err(|e| read_error(rel, &e))?;
    utf8(rel, bytes)
}

fn utf8(rel: &Path, bytes: Vec<u8>) -> Result<String, LoadError> {
    String::from_utf8(bytes).map_err(|_| LoadError::Read {
        path: rel.to_path_buf(),
        cause: "is not UTF-8 text".to_string(),
    })
}

/// The refusal of bundle file `rel` (named inside the bundle, never by where it was unpacked).
fn read_error(rel: &Path, e: &ConfinedError) -> LoadError {
    let cause = match e {
        ConfinedError::NotFound { .. } => "does not exist".to_string(),
        ConfinedError::Symlink { .. } => "is a symbolic link, which is not followed".to_string(),
        ConfinedError::NotRegular { .. } => {
            "is not a regular file (a device, FIFO or socket is never read)".to_string()
        }
        ConfinedError::NotDirectory { .. } => "is not a directory".to_string(),
        ConfinedError::Escapes { .. } => "leaves the bundle directory".to_string(),
        ConfinedError::TooLarge { limit, .. } => format!("is over the limit of {limit} bytes per file"),
        ConfinedError::Io { source, .. } => format!("cannot be read: {source}"),
    };
    LoadError::Read {
        path: rel.to_path_buf(),
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_flattened_and_empty_documents_skipped() {
        let text = "---\n---\napiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"c\"}}\n";
        let objects = parse_manifest_stream(text).expect("parses");
        let names: Vec<&str> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn csv_properties_keep_the_json_text_of_their_values() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
        std::fs::create_dir_all(dir.path().join("metadata")).unwrap();
        std::fs::write(
            dir.path().join("metadata/annotations.yaml"),
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n",
        )
        .unwrap();
        let csv = r#"{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "p.v1.0.0", "annotations": {"olm.properties":
                "[{\"type\": \"olm.maxOpenShiftVersion\", \"value\": 4.20}]"}},
            "spec": {"version": "1.0.0", "installModes": [{"type": "AllNamespaces", "supported": true}],
                     "install": {"strategy": "deployment", "spec": {"deployments": []}}}}"#;
        std::fs::write(dir.path().join("manifests/p.csv.yaml"), csv).unwrap();
        let bundle = RegistryV1Bundle::from_dir(dir.path()).unwrap();
        let max: Vec<&str> = bundle
            .properties
            .iter()
            .filter(|p| &*p.type_ == "olm.maxOpenShiftVersion")
            .map(|p| p.value.raw())
            .collect();
        assert_eq!(
            max,
            ["4.20"],
            "4.20 stays minor 20, as upstream reads the raw bytes"
        );
    }

    /// A CRD whose schema nests `properties` `levels` times, as YAML.
    fn deep_crd(levels: usize) -> String {
        let mut text = String::from(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: deep.example.com}\n\
             spec:\n  group: example.com\n  names: {kind: Deep, plural: deep}\n  scope: Namespaced\n  versions:\n  \
             - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n",
        );
        let mut indent = "        ".to_string();
        for i in 0..levels {
            text.push_str(&format!(
                "{indent}type: object\n{indent}properties:\n{indent}  p{i}:\n"
            ));
            indent.push_str("    ");
        }
        text.push_str(&format!("{indent}type: string\n"));
        text
    }

    #[test]
    fn deep_and_large_manifests_parse_on_a_default_stack() {
        // 28 schema levels nest 62 deep, just inside the limit, and load (YAML, then the typed
        // CRD round trip) on a 2 MiB test thread in a debug build.
        let objects = parse_manifest_stream(&deep_crd(28)).expect("deep CRD parses");
        let crd = normalise_crd(objects.into_iter().next().expect("one object")).expect("typed round trip");
        assert_eq!(crd["metadata"]["name"], "deep.example.com");
        let mut wide = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wide}\nwide:\n");
        for i in 0..300_000 {
            wide.push_str(&format!("- {i}\n"));
        }
        let objects = parse_manifest_stream(&wide).expect("wide manifest parses");
        assert_eq!(objects[0]["wide"].as_array().map(Vec::len), Some(300_000));
    }

    #[test]
    fn nesting_beyond_the_limit_is_an_error_not_a_crash() {
        let err = parse_manifest_stream(&deep_crd(40)).expect_err("too deep");
        assert!(!err.is_empty());
        let mut deep = serde_json::json!("leaf");
        for _ in 0..100 {
            deep = serde_json::json!({ "a": deep });
        }
        assert_eq!(json_depth(&deep), 100);
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": deep});
        let data = base64::engine::general_purpose::STANDARD.encode(object.to_string());
        let props = [Property {
            type_: BUNDLE_OBJECT_PROPERTY.into(),
            value: serde_json::json!({"data": data}).into(),
        }];
        let err = RegistryV1Bundle::from_catalog_bundle("p", "p.v1", &props).expect_err("too deep");
        assert_eq!(
            err.to_string(),
            "bundle \"p.v1\" olm.bundle.object #0: manifest nests deeper than 64 levels"
        );
    }

    #[test]
    fn objects_without_kind_are_refused() {
        let err = parse_manifest_stream("apiVersion: v1\nmetadata: {name: a}\n").unwrap_err();
        assert_eq!(err, "Object 'Kind' is missing");
    }

    #[test]
    fn package_name_comes_from_the_package_annotation() {
        let text = "annotations:\n  operators.operatorframework.io.bundle.package.v1: etcd\n  operators.operatorframework.io.bundle.channels.v1: alpha\n";
        assert_eq!(package_from_annotations(text).as_deref(), Ok("etcd"));
        assert_eq!(package_from_annotations("annotations: {}\n").as_deref(), Ok(""));
    }
}
