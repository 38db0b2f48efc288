//! `Meta`: one FBC object (`olm.package`, `olm.channel`, `olm.bundle`, ... or any other schema) as
//! its compact JSON blob plus the three keys every consumer indexes by.

use std::{fmt, sync::Arc};

use bytes::Bytes;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::CatalogError;

/// Schema of a package object.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// Schema of a channel object.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// Schema of a bundle object.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// Schema of a package's deprecation object.
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// One FBC object. Cheap to clone and to keep: the keys are shared strings and the blob is a
/// reference-counted slice (for JSONL input, a slice of the input buffer itself).
#[derive(Clone, PartialEq, Eq)]
pub struct Meta {
    /// The `schema` key (`olm.bundle`, ...).
    pub schema: Arc<str>,
    /// The `package` key; empty for `olm.package` objects (their package is their `name`).
    pub package: Arc<str>,
    /// The `name` key; empty when absent (e.g. `olm.deprecations`).
    pub name: Arc<str>,
    /// The object as one line of compact JSON, without a trailing newline. Objects read from YAML
    /// or JSON files are normalised as catalogd normalises them (keys sorted, no HTML escaping).
    pub blob: Bytes,
    /// Where the object came from: a file path, or the name of a JSONL stream.
    pub origin: Arc<str>,
    /// 1-based position of the object in its origin (the line number for JSONL).
    pub position: u32,
}

impl Meta {
    /// Builds a meta from one JSON object (compact or not; it is kept as given). Errors name the
    /// origin and position.
    pub fn from_json_object(blob: Bytes, origin: Arc<str>, position: u32) -> Result<Meta, CatalogError> {
        let keys = extract_keys(&blob).map_err(|message| CatalogError::Malformed {
            location: format!("{origin}: object #{position}"),
            message,
        })?;
        Ok(Meta {
            schema: intern_schema(keys.schema.as_deref().unwrap_or("")),
            package: Arc::from(keys.package.as_deref().unwrap_or("")),
            name: Arc::from(keys.name.as_deref().unwrap_or("")),
            blob,
            origin,
            position,
        })
    }

    /// Builds a meta from a parsed JSON value, normalising it to compact JSON with sorted keys.
    pub fn from_value(
        value: &serde_json::Value,
        origin: Arc<str>,
        position: u32,
    ) -> Result<Meta, CatalogError> {
        let location = || format!("{origin}: object #{position}");
        if !value.is_object() {
            return Err(CatalogError::Malformed {
                location: location(),
                message: format!("expected an object, found {}", json_kind(value)),
            });
        }
        let blob = normalized_json(value).map_err(|e| CatalogError::Malformed {
            location: location(),
            message: e.to_string(),
        })?;
        Meta::from_json_object(Bytes::from(blob), origin, position)
    }

    /// Where this object is, for error messages: `<origin>: object #N (<schema> "<name>")`.
    pub fn location(&self) -> String {
        if self.name.is_empty() {
            format!("{}: object #{} ({})", self.origin, self.position, self.schema)
        } else {
            format!(
                "{}: object #{} ({} {:?})",
                self.origin, self.position, self.schema, &*self.name
            )
        }
    }

    /// The package this object belongs to: `name` for `olm.package`, else `package`.
    pub fn package_name(&self) -> &str {
        if &*self.schema == SCHEMA_PACKAGE {
            &self.name
        } else {
            &self.package
        }
    }
}

impl fmt::Debug for Meta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meta")
            .field("schema", &self.schema)
            .field("package", &self.package)
            .field("name", &self.name)
            .field("blob_len", &self.blob.len())
            .field("origin", &self.origin)
            .field("position", &self.position)
            .finish()
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Compact JSON with sorted keys, as Go's encoder writes it (it escapes U+2028/U+2029).
pub(crate) fn normalized_json(value: &serde_json::Value) -> Result<Vec<u8>, serde_json::Error> {
    // serde_json's Map is a BTreeMap in this build (no `preserve_order`), so keys come out sorted.
    let out = serde_json::to_vec(value)?;
    if !out
        .windows(3)
        .any(|w| w == [0xE2, 0x80, 0xA8] || w == [0xE2, 0x80, 0xA9])
    {
        return Ok(out);
    }
    let text = String::from_utf8_lossy(&out)
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    Ok(text.into_bytes())
}

fn intern_schema(schema: &str) -> Arc<str> {
    use std::sync::LazyLock;
    static KNOWN: LazyLock<[Arc<str>; 4]> =
        LazyLock::new(|| [SCHEMA_PACKAGE, SCHEMA_CHANNEL, SCHEMA_BUNDLE, SCHEMA_DEPRECATIONS].map(Arc::from));
    KNOWN
        .iter()
        .find(|s| &***s == schema)
        .cloned()
        .unwrap_or_else(|| Arc::from(schema))
}

#[derive(Default)]
struct MetaKeys {
    schema: Option<String>,
    package: Option<String>,
    name: Option<String>,
}

/// Reads `schema`, `package` and `name` (matched case-insensitively, as upstream does) and skips
/// every other value without copying it.
fn extract_keys(blob: &[u8]) -> Result<MetaKeys, String> {
    let mut de = serde_json::Deserializer::from_slice(blob);
    let keys = de.deserialize_map(KeysVisitor).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(keys)
}

struct KeysVisitor;

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = MetaKeys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetaKeys, A::Error> {
        let mut keys = MetaKeys::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let slot = if key.eq_ignore_ascii_case("schema") {
                &mut keys.schema
            } else if key.eq_ignore_ascii_case("package") {
                &mut keys.package
            } else if key.eq_ignore_ascii_case("name") {
                &mut keys.name
            } else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if slot.is_some() {
                return Err(de::Error::custom(format!(
                    "duplicate keys for key {:?}",
                    key.to_lowercase()
                )));
            }
            let value: serde_json::Value = map.next_value()?;
            match value {
                serde_json::Value::String(s) => *slot = Some(s),
                other => {
                    return Err(de::Error::custom(format!(
                        "expected value for key {:?} to be a string, got {}",
                        &*key,
                        json_kind(&other)
                    )));
                }
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_case_insensitively_and_blob_is_kept() {
        let blob = Bytes::from_static(br#"{"Schema":"olm.bundle","package":"p","name":"p.v1","image":"x"}"#);
        let meta = Meta::from_json_object(blob.clone(), Arc::from("t"), 1).unwrap();
        assert_eq!(
            (&*meta.schema, &*meta.package, &*meta.name),
            ("olm.bundle", "p", "p.v1")
        );
        assert_eq!(meta.blob, blob);
    }

    #[test]
    fn non_string_keys_and_non_objects_are_errors_naming_the_object() {
        let err = Meta::from_json_object(Bytes::from_static(br#"{"schema":1}"#), Arc::from("f.json"), 3)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.json: object #3"), "{err}");
        let err = Meta::from_json_object(Bytes::from_static(b"[1]"), Arc::from("f.json"), 1).unwrap_err();
        assert!(err.to_string().contains("f.json: object #1"));
    }

    #[test]
    fn normalisation_sorts_keys() {
        let v: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":{"d":"<&>","c":2}}"#).unwrap();
        assert_eq!(normalized_json(&v).unwrap(), br#"{"a":{"c":2,"d":"<&>"},"b":1}"#);
    }
}
