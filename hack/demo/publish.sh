#!/usr/bin/env bash
# Publishes the demo's example-operator to a registry with `olmv1 image push` (no Docker): the
# bundle image, then the catalog image whose bundle references point at it.
# Usage: hack/demo/publish.sh OLMV1_BINARY REGISTRY      (REGISTRY is host:port)
set -euo pipefail
demo=$(cd "$(dirname "$0")" && pwd)
olmv1=$1 registry=$2
bundle_ref="$registry/demo/example-operator-bundle:v1.0.0"
"$olmv1" image push "$demo/bundles/v1.0.0" "$bundle_ref" \
  --label operators.operatorframework.io.bundle.mediatype.v1=registry+v1 >/dev/null
configs=$(mktemp -d)
trap 'rm -rf "$configs"' EXIT
cp -r "$demo/catalog/." "$configs/"
sed -i "s|REGISTRY|$registry|g" "$configs/example-operator/catalog.yaml"
"$olmv1" image push "$configs" "$registry/demo/catalog:latest" --prefix /configs \
  --label operators.operatorframework.io.index.configs.v1=/configs >/dev/null
echo "published $bundle_ref and $registry/demo/catalog:latest" >&2
