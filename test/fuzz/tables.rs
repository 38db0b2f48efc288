//! Part B's family: catalogs that make tables large. Every channel lists every bundle, each
//! bundle's requirements carry a long failure message, and each channel's head skips many long
//! names: before part B, a bundle's REQUIRES cell was printed on each of its channel rows and
//! every continuation line of a wide cell was padded to the columns before it (a 68 KB catalog
//! printed 38 MB). Now a value shows at most 4,096 characters, a wide cell follows its row once,
//! a bundle's REQUIRES is shown on its first row, and the writer stops at 1 MiB.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::{Case, Family, check_family};

/// Wide tables: `bundles` bundles in each of `channels` channels, each with a 1 KB failure
/// message, each channel's head skipping `skips` names of 64 characters.
pub const WIDE_TABLES: Family = Family {
    name: "wide tables",
    cases: |scale| {
        (
            10..scale.pick(100, 600),
            2..scale.pick(30, 120),
            100..scale.pick(500, 1500),
        )
            .prop_map(move |(bundles, channels, skips)| {
                // Each channel lists every bundle (60 bytes) and its head's skips (70 bytes);
                // each bundle carries a 1 KB failure message.
                let channels = scale.fit(channels, bundles * 60 + skips * 70, 0.8);
                let name = |i: usize| format!("app.v1.0.{i}");
                let skipped: Vec<String> = (0..skips).map(|s| format!("{s:0>64}")).collect();
                let mut lines = vec![json!({"schema": "olm.package", "name": "app", "defaultChannel": "c0"})];
                for c in 0..channels {
                    let entries: Vec<Value> = (0..bundles)
                        .map(|i| match i {
                            0 => json!({"name": name(0)}),
                            i if i + 1 == bundles => {
                                json!({"name": name(i), "replaces": name(i - 1), "skips": skipped})
                            }
                            i => json!({"name": name(i), "replaces": name(i - 1)}),
                        })
                        .collect();
                    lines.push(json!({"schema": "olm.channel", "package": "app", "name": format!("c{c}"), "entries": entries}));
                }
                let failure = "f".repeat(1024);
                for i in 0..bundles {
                    lines.push(json!({"schema": "olm.bundle", "package": "app", "name": name(i),
                        "image": format!("registry.test/app:v1.0.{i}"), "properties": [
                        {"type": "olm.package", "value": {"packageName": "app", "version": format!("1.0.{i}")}},
                        {"type": "olm.constraint", "value": {"failureMessage": failure,
                            "package": {"packageName": "dep", "versionRange": ">=9.0.0"}}}]}));
                }
                Case::new("app", lines).installed("app.v1.0.0", "1.0.0")
            })
            .boxed()
    },
};

#[test]
fn fuzz_wide_tables() {
    check_family(&WIDE_TABLES);
}
