#!/usr/bin/env bash
# Builds and publishes olmv1's test operator (test/operator, docs/test-operator.md) to the local
# registry with `olmv1 image push` (no Docker):
#   1. the binary, as the tests' build makes it (dev profile, this machine's target: `cargo test
#      --workspace --no-run` builds it for its integration test with the dependencies every other
#      test uses, so it costs no compile of its own), in an image with no base:
#      /usr/local/bin/webhook-operator, the loader and the libraries it links (hack/rootfs-libs.sh),
#      run as 65532:65532; same sources, toolchain and libraries -> same digest;
#   2. three registry+v1 bundles from test/operator/bundle, the image pinned by digest:
#        0.1.0, 0.2.0 (replaces 0.1.0), 0.3.0 (replaces 0.2.0; broken: --fail-at-start, exits 1);
#      and three of the aggregated API server from test/operator/bundle-api (the same image,
#      --mode aggregated-api), each owning an APIService per version it serves:
#        0.1.0 (v1alpha1), 0.2.0 (v1alpha1, v1; replaces 0.1.0), 0.3.0 (v1; replaces 0.2.0);
#      each checked with `olmv1 render` before it is pushed;
#   3. a file-based catalog: packages webhook-operator and gadget-operator, channel stable, the
#      bundles by digest.
# Everything it pushed goes to stderr; the last line on stdout is the catalog's digest reference.
#
# Usage: source ENV/env.sh; hack/test-operator.sh
#        hack/test-operator.sh --build-only   step 1's build alone (no registry needed)
# Environment: OLMV1_REGISTRY (host:port, required: the registry pushed to);
#   OLMV1_NODE_REGISTRY  the same registry as the node's container runtime reaches it, written into
#                        the CSVs (default: OLMV1_REGISTRY);
#   OLMV1_BIN            the olmv1 binary (default: target/debug/olmv1, built when missing);
#   CARGO_TARGET_DIR     as cargo reads it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
source "$here/phases.sh"
source "$here/rootfs-libs.sh"
log() { echo "test-operator: $*" >&2; }
die() { log "error: $*"; exit 1; }

# The real node's label and taint (hack/local-up.sh with OLMV1_NODE=kwok+real sets both, value
# "true"): the operator's pods select the one and tolerate the other.
NODE_LABEL=olmv1.dev/real-node
NODE_TAINT=olmv1.dev/real-node
PACKAGE=webhook-operator
CHANNEL=stable
# Repository prefix of everything pushed.
PREFIX=test-operator
# version:replaces:extra container args (a JSON array tail)
BUNDLES=(
  '0.1.0::'
  '0.2.0:0.1.0:'
  '0.3.0:0.2.0:, "--fail-at-start"'
)
# The aggregated API server: version:replaces:API versions served (comma-separated).
GADGET_PACKAGE=gadget-operator
GADGET_GROUP=gadgets.test.olmv1.dev
GADGET_BUNDLES=(
  '0.1.0::v1alpha1'
  '0.2.0:0.1.0:v1alpha1,v1'
  '0.3.0:0.2.0:v1'
)

build_only=0
[[ ${1:-} == --build-only ]] && build_only=1
((build_only)) || [[ -n "${OLMV1_REGISTRY:-}" ]] || die "OLMV1_REGISTRY is not set (source an env.sh of hack/local-up.sh)"
node_registry=${OLMV1_NODE_REGISTRY:-${OLMV1_REGISTRY:-}}
[[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
target_dir=${CARGO_TARGET_DIR:-$repo/target}
cd "$repo"

olmv1=${OLMV1_BIN:-$target_dir/debug/olmv1}
if ((!build_only)) && [[ ! -x $olmv1 ]]; then
  log "building olmv1"
  cargo build -q --bin olmv1
fi

# 1. The binary and its image. Built by the tests' own command with the test that runs it
#    (test/operator/tests/webhook_operator.rs): after `cargo test --workspace --no-run` (as
#    hack/test.sh runs it) nothing is compiled here; after a change to the operator only it is.
started=$SECONDS
phase "test operator: build$( ((build_only)) && echo " only")" \
  cargo test -q --workspace --no-run --locked --test webhook_operator >&2
binary="$target_dir/debug/webhook-operator"
[[ -x $binary ]] || die "cargo built no $binary"
log "binary ready in $((SECONDS - started))s"
((build_only)) && exit 0

work=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-test-operator.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
install -D -m 0755 "$binary" "$rootfs/usr/local/bin/webhook-operator"
strip "$rootfs/usr/local/bin/webhook-operator"
copy_shared_libs "$binary" "$rootfs" || die "the shared libraries of $binary cannot be copied"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' test/operator/Cargo.toml | head -n1)
image=$("$olmv1" image push "$rootfs" "$OLMV1_REGISTRY/$PREFIX/webhook-operator:v$version" \
  --entrypoint /usr/local/bin/webhook-operator --user 65532:65532 \
  --label org.opencontainers.image.title=webhook-operator \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.base.name=scratch)
log "image $image ($(du -sb --apparent-size "$rootfs" | cut -f1) bytes unpacked; libraries from ${shared_lib_packages[*]})"
node_image="$node_registry/${image#*/}"

# 2. The bundles.
# publish_bundle PACKAGE TEMPLATE VERSION REPLACES [SED ARGS...]: the CSV template filled in (the
# common placeholders, then the SED ARGS), checked with olmv1 render and pushed; prints its
# digest reference.
publish_bundle() {
  local package=$1 template=$2 v=$3 replaces=$4
  shift 4
  local dir="$work/bundles/$package/$v"
  mkdir -p "$dir"
  cp -r "$template/." "$dir/"
  local csv="$dir/manifests/$package.clusterserviceversion.yaml"
  [[ -n $replaces ]] || sed -i '/^  replaces: /d' "$csv"
  sed -i -e "s|__VERSION__|$v|g" -e "s|__REPLACES__|$replaces|g" -e "s|__IMAGE__|$node_image|g" \
    -e "s|__NODE_LABEL__|$NODE_LABEL|g" -e "s|__NODE_TAINT__|$NODE_TAINT|g" "$@" "$csv"
  ! grep -n '__[A-Z_]*__' "$csv" >&2 || die "placeholders left in the $package $v CSV"
  "$olmv1" render --bundle "$dir" --namespace "$package-system" >/dev/null ||
    die "olmv1 render refused bundle $package $v"
  "$olmv1" image push "$dir" "$OLMV1_REGISTRY/$PREFIX/$package-bundle:v$v" \
    --label operators.operatorframework.io.bundle.mediatype.v1=registry+v1
}
declare -A bundle_refs gadget_refs
for entry in "${BUNDLES[@]}"; do
  IFS=: read -r v replaces extra <<<"$entry"
  bundle_refs[$v]=$(publish_bundle "$PACKAGE" test/operator/bundle "$v" "$replaces" -e "s|__EXTRA_ARGS__|$extra|g")
  log "bundle $v ${bundle_refs[$v]}"
done
for entry in "${GADGET_BUNDLES[@]}"; do
  IFS=: read -r v replaces versions <<<"$entry"
  owned=""
  for api_version in ${versions//,/ }; do
    owned+="${owned:+, }{name: gadgets, group: $GADGET_GROUP, version: $api_version, kind: Gadget, displayName: Gadget, deploymentName: gadget-operator-server, containerPort: 5443}"
  done
  gadget_refs[$v]=$(publish_bundle "$GADGET_PACKAGE" test/operator/bundle-api "$v" "$replaces" \
    -e "s|__API_VERSIONS__|$versions|g" -e "s|__API_SERVICES__|[$owned]|g")
  log "bundle $GADGET_PACKAGE $v ${gadget_refs[$v]}"
done

# 3. The catalog.
configs="$work/configs/$PACKAGE"
mkdir -p "$configs"
{
  printf 'schema: olm.package\nname: %s\ndefaultChannel: %s\n' "$PACKAGE" "$CHANNEL"
  printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n' "$PACKAGE" "$CHANNEL"
  for entry in "${BUNDLES[@]}"; do
    IFS=: read -r v replaces _ <<<"$entry"
    printf '  - name: %s.v%s\n' "$PACKAGE" "$v"
    [[ -z $replaces ]] || printf '    replaces: %s.v%s\n' "$PACKAGE" "$replaces"
  done
  for entry in "${BUNDLES[@]}"; do
    IFS=: read -r v _ _ <<<"$entry"
    printf -- '---\nschema: olm.bundle\nname: %s.v%s\npackage: %s\nimage: %s\n' "$PACKAGE" "$v" "$PACKAGE" "${bundle_refs[$v]}"
    printf 'properties:\n  - type: olm.package\n    value:\n      packageName: %s\n      version: %s\n' "$PACKAGE" "$v"
    for gvk_version in v1 v1alpha1; do
      printf '  - type: olm.gvk\n    value:\n      group: test.olmv1.dev\n      kind: Widget\n      version: %s\n' "$gvk_version"
    done
  done
} >"$configs/catalog.yaml"
gadget_configs="$work/configs/$GADGET_PACKAGE"
mkdir -p "$gadget_configs"
{
  printf 'schema: olm.package\nname: %s\ndefaultChannel: %s\n' "$GADGET_PACKAGE" "$CHANNEL"
  printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n' "$GADGET_PACKAGE" "$CHANNEL"
  for entry in "${GADGET_BUNDLES[@]}"; do
    IFS=: read -r v replaces _ <<<"$entry"
    printf '  - name: %s.v%s\n' "$GADGET_PACKAGE" "$v"
    [[ -z $replaces ]] || printf '    replaces: %s.v%s\n' "$GADGET_PACKAGE" "$replaces"
  done
  for entry in "${GADGET_BUNDLES[@]}"; do
    IFS=: read -r v _ versions <<<"$entry"
    printf -- '---\nschema: olm.bundle\nname: %s.v%s\npackage: %s\nimage: %s\n' "$GADGET_PACKAGE" "$v" "$GADGET_PACKAGE" "${gadget_refs[$v]}"
    printf 'properties:\n  - type: olm.package\n    value:\n      packageName: %s\n      version: %s\n' "$GADGET_PACKAGE" "$v"
    for api_version in ${versions//,/ }; do
      printf '  - type: olm.gvk\n    value:\n      group: %s\n      kind: Gadget\n      version: %s\n' "$GADGET_GROUP" "$api_version"
    done
  done
} >"$gadget_configs/catalog.yaml"
catalog=$("$olmv1" image push "$work/configs" "$OLMV1_REGISTRY/$PREFIX/catalog:latest" --prefix /configs \
  --label operators.operatorframework.io.index.configs.v1=/configs)
log "catalog $catalog (channel $CHANNEL: package $PACKAGE ${BUNDLES[*]%%:*}, package $GADGET_PACKAGE ${GADGET_BUNDLES[*]%%:*})"
echo "$catalog"
