#!/usr/bin/env bash
# Rewrites every snapshot file from the current code: test/snapshots/cli (olmv1 versions and
# upgrades of every package of ../shared/catalogs), test/snapshots/render (the pinned real
# bundles' renderings), test/snapshots/catalogs (resolution of every real package),
# test/snapshots/dependencies (the plan of every real bundle with dependencies) and
# test/snapshots/rbac (`olmv1 rbac` of a hand-checked sample of real bundles). The tests
# only compare; this is the one way to write. Review the diff before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
for binary in cli render resolve rbac; do
  # Each test binary's writer is its ignored test `write_snapshots` (the module path differs).
  cargo test --test "$binary" -- --ignored write_snapshots
done
git diff --stat -- test/snapshots
