//! The one property type, from the catalog reader through the index and the resolver to the
//! bundle loader and the revision record: the value is kept as the JSON text it was read with.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de::DeserializeOwned};
use serde_json::value::RawValue;

/// A property of a bundle, package or channel: a type and a JSON value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Property {
    /// The property type, e.g. `olm.package`, `olm.gvk`, `olm.maxOpenShiftVersion` (shared: the
    /// index holds one copy of each type name).
    #[serde(
        rename = "type",
        serialize_with = "serialize_type",
        deserialize_with = "deserialize_type"
    )]
    pub type_: Arc<str>,
    /// The value, as the JSON text it was read with.
    pub value: PropertyValue,
}

impl Property {
    /// A property of `type_` with `value`.
    pub fn new(type_: &str, value: PropertyValue) -> Self {
        Self {
            type_: Arc::from(type_),
            value,
        }
    }
}

fn serialize_type<S: Serializer>(type_: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(type_)
}

fn deserialize_type<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Arc<str>, D::Error> {
    <std::borrow::Cow<'de, str>>::deserialize(deserializer).map(|t| Arc::from(&*t))
}

/// A property value kept as the JSON text it was read with, as upstream's `json.RawMessage`
/// keeps it: `olm.maxOpenShiftVersion: 4.10` must stay `4.10` (a float would make it `4.1`).
/// Whitespace outside strings is dropped, as Go's encoder compacts a `RawMessage`.
/// Deserializes from JSON only (serde_json); build it from a [`serde_json::Value`] otherwise.
#[derive(Serialize, Clone, Debug)]
#[serde(transparent)]
pub struct PropertyValue(Box<RawValue>);

impl PropertyValue {
    /// The JSON text.
    pub fn raw(&self) -> &str {
        self.0.get()
    }

    /// The value read from JSON text; an error when the text is not one JSON value.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// JSON `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// The value, parsed (numbers become floats: use [`PropertyValue::raw`] where digits matter).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.raw()).unwrap_or(serde_json::Value::Null)
    }

    /// The value read as `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.raw())
    }

    /// The same JSON without whitespace outside strings.
    fn compacted(raw: Box<RawValue>) -> Self {
        let text = raw.get();
        if !text.bytes().any(|b| b.is_ascii_whitespace()) {
            return Self(raw);
        }
        let mut out = String::with_capacity(text.len());
        let (mut in_string, mut escaped) = (false, false);
        for c in text.chars() {
            if in_string {
                out.push(c);
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_string = false,
                    _ => {}
                }
            } else if c == '"' {
                in_string = true;
                out.push(c);
            } else if !c.is_ascii_whitespace() {
                out.push(c);
            }
        }
        Self(RawValue::from_string(out).expect("dropping whitespace between JSON tokens keeps it JSON"))
    }
}

impl<'de> Deserialize<'de> for PropertyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self::compacted)
    }
}

impl From<serde_json::Value> for PropertyValue {
    fn from(value: serde_json::Value) -> Self {
        Self(serde_json::value::to_raw_value(&value).expect("a JSON value always serializes"))
    }
}

impl PartialEq for PropertyValue {
    fn eq(&self, other: &Self) -> bool {
        self.raw() == other.raw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_digits_and_compare_by_text() {
        let a: PropertyValue = serde_json::json!("4.18").into();
        let b = PropertyValue::from_json(r#""4.18""#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, serde_json::json!(4.18).into());
        let property: Property =
            serde_json::from_str(r#"{"type":"olm.maxOpenShiftVersion","value":4.10}"#).unwrap();
        assert_eq!(property.value.raw(), "4.10");
        assert_eq!(
            serde_json::to_string(&property).unwrap(),
            r#"{"type":"olm.maxOpenShiftVersion","value":4.10}"#
        );
    }

    #[test]
    fn whitespace_is_dropped_outside_strings_only() {
        let value = PropertyValue::from_json("{ \"group\" : \"a b\\\" c\",\n \"v\": [1, 2.50] }").unwrap();
        assert_eq!(value.raw(), r#"{"group":"a b\" c","v":[1,2.50]}"#);
        assert_eq!(value.parse::<serde_json::Value>().unwrap()["v"][1], 2.5);
        assert_eq!(PropertyValue::null().raw(), "null");
    }
}
