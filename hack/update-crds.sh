#!/usr/bin/env bash
# Regenerates the chart's CRDs (charts/olmv1/crds/) from the Rust API types (`olmv1 crd`), one file
# per CRD.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(cargo run -q -- crd)
mkdir -p charts/olmv1/crds
# The stream holds the ClusterCatalog CRD then the ClusterExtension CRD, each starting with "---".
awk -v dir=charts/olmv1/crds '
  /^---$/ { n++; file = dir "/" (n == 1 ? "olm.operatorframework.io_clustercatalogs.yaml" : "olm.operatorframework.io_clusterextensions.yaml") }
  { print > file }
' <<<"$out"
echo "wrote charts/olmv1/crds/"
