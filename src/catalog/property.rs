//! Bundle properties as installed bundles keep them: the value as the JSON text it was written with.

use serde::{Deserialize, Serialize};

/// A bundle property: a type and an arbitrary JSON value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BundleProperty {
    /// The property type, e.g. `olm.maxOpenShiftVersion`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The property value, as the JSON text it was written with.
    pub value: PropertyValue,
}

/// A property value kept as the JSON text it was written with, as upstream's `json.RawMessage`
/// keeps it: `olm.maxOpenShiftVersion: 4.20` must stay `4.20` (a float would make it `4.2`).
/// Deserializes from JSON only (serde_json); build it from a [`serde_json::Value`] otherwise.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(transparent)]
pub struct PropertyValue(Box<serde_json::value::RawValue>);

impl PropertyValue {
    /// The JSON text.
    pub fn raw(&self) -> &str {
        self.0.get()
    }

    /// The value, parsed (numbers become floats: use [`PropertyValue::raw`] where digits matter).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.raw()).unwrap_or(serde_json::Value::Null)
    }
}

impl From<serde_json::Value> for PropertyValue {
    fn from(value: serde_json::Value) -> Self {
        let raw = serde_json::value::to_raw_value(&value).expect("a JSON value always serializes");
        Self(raw)
    }
}

impl From<super::Property> for BundleProperty {
    fn from(property: super::Property) -> Self {
        Self {
            type_: property.type_,
            value: property.value.into(),
        }
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
    fn values_built_from_json_values_compare_by_text() {
        let a: PropertyValue = serde_json::json!("4.18").into();
        let b: PropertyValue = serde_json::from_str(r#""4.18""#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, serde_json::json!(4.18).into());
    }
}
