#!/usr/bin/env bash
# Rewrites test/snapshots/cli/*.txt (olmv1 versions and upgrades of every package of
# ../shared/catalogs) from the current code. Review the diff before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test cli -- --ignored --exact snapshots::write_snapshots
git diff --stat -- test/snapshots/cli
