//! Upstream's records: what upstream's operator-controller reported for every scenario in the last
//! `hack/interop.sh` run with its binaries, kept in the repository (`records/upstream.json`) with
//! the upstream commit and the date. Facts observed, not upstream's code: the CI test compares
//! olmv1's runs with them where upstream's binaries are not at hand.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compare::{self, Table};
use crate::scenarios::{self, Outcome, Run};

/// Where the records are kept, from the repository root.
pub const RECORDS_FILE: &str = "test/interop/records/upstream.json";

/// The page listing the differences on purpose, from the repository root.
pub const DOCS_FILE: &str = "docs/upstream.md";

/// What the records file says about itself.
const ABOUT: &str = "What upstream operator-controller reported for each scenario of \
     test/interop/scenarios.rs (hack/interop.sh step 2, upstream v1.11's YAML), written by \
     hack/interop.sh; the local registry's host:port is <registry>.";

/// The records file.
#[derive(Debug, Serialize, Deserialize)]
pub struct Records {
    pub about: String,
    /// The operator-controller commit the binaries were built from.
    pub upstream_commit: String,
    /// The day of the run (UTC, YYYY-MM-DD).
    pub recorded: String,
    /// Scenario name -> what upstream reported.
    pub scenarios: BTreeMap<String, Outcome>,
}

impl Records {
    pub fn new(upstream_commit: String, recorded: String, scenarios: BTreeMap<String, Outcome>) -> Self {
        Self {
            about: ABOUT.into(),
            upstream_commit,
            recorded,
            scenarios,
        }
    }

    pub fn read(path: &Path) -> Records {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) {
        let mut text = serde_json::to_string_pretty(self).unwrap();
        text.push('\n');
        std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}

/// The table of olmv1's run `run` against upstream's records, with the differences listed on
/// the page `docs` (docs/upstream.md's text): what `hack/interop.sh` prints and the CI test checks.
pub fn table(run: Run, olmv1: &BTreeMap<String, Outcome>, records: &Records, docs: &str) -> Table {
    let title = format!(
        "{} vs upstream (records of {}, {})",
        run.label(),
        short(&records.upstream_commit),
        records.recorded
    );
    compare::compare(
        title,
        &scenarios::all(),
        olmv1,
        &records.scenarios,
        &compare::listed_for(docs, run),
    )
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
