#!/usr/bin/env bash
# Regenerates config/crd/ from the Rust API types (`olmv1 crd`), one file per CRD.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(cargo run -q -- crd)
mkdir -p config/crd
# The stream holds the ClusterCatalog CRD then the ClusterExtension CRD, each starting with "---".
awk -v dir=config/crd '
  /^---$/ { n++; file = dir "/" (n == 1 ? "olm.operatorframework.io_clustercatalogs.yaml" : "olm.operatorframework.io_clusterextensions.yaml") }
  { print > file }
' <<<"$out"
echo "wrote config/crd/"
