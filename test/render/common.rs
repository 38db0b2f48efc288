//! Shared helpers of the render tests.

use std::path::{Path, PathBuf};

use olmv1::bundle::registry_v1::RegistryV1Bundle;
use serde_json::Value;

/// `test/fixtures/bundles/<name>`.
pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test/fixtures/bundles")
        .join(name)
}

/// Loads a fixture bundle, failing the test with the loader's message.
pub fn load_fixture(name: &str) -> RegistryV1Bundle {
    RegistryV1Bundle::from_dir(&fixture_dir(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// `kind/name` of each object, in order.
pub fn kinds_and_names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| format!("{}/{}", str_at(o, "/kind"), str_at(o, "/metadata/name")))
        .collect()
}

/// The string at a JSON pointer, or "".
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The only object of `kind`, failing the test when there is not exactly one.
pub fn only<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| str_at(o, "/kind") == kind).collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind}, got {}: {:?}",
        found.len(),
        kinds_and_names(objects)
    );
    found[0]
}

/// All objects of `kind`.
pub fn all<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| str_at(o, "/kind") == kind).collect()
}
