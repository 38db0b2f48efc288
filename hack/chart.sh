#!/usr/bin/env bash
# Packages olmv1's chart (charts/olmv1) and publishes it as an OCI artifact. Its version and
# appVersion are the crate's version (Cargo.toml). With --image, the packaged chart carries that
# image (image.repository and image.digest in its values.yaml), so `helm install` needs no
# --set image...; without it, installs must set the image.
#
# Usage: hack/chart.sh package [--image IMAGE@sha256:DIGEST] [OUT_DIR]   prints the .tgz path
#        hack/chart.sh push REF [--image IMAGE@sha256:DIGEST] [HELM_PUSH_ARGS...]
#          REF is the repository the chart goes under, e.g. oci://registry.example.com/charts (the
#          chart is then oci://registry.example.com/charts/olmv1, tag VERSION); HELM_PUSH_ARGS go
#          to `helm push` (e.g. --plain-http for a registry without TLS, --registry-config FILE).
#          Prints the pushed reference (oci://.../olmv1:VERSION@sha256:...).
# Environment: OLMV1_CHART_VERSION overrides the version (e.g. a release candidate's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "chart: error: $*" >&2; exit 1; }
log() { echo "chart: $*" >&2; }

command=${1:-}
shift || true
ref=
if [[ $command == push ]]; then
  ref=${1:-}
  shift || true
  [[ $ref == oci://* ]] || die "push needs an oci:// repository reference, got ${ref:-nothing}"
elif [[ $command != package ]]; then
  die "usage: hack/chart.sh package [--image IMAGE@sha256:DIGEST] [OUT_DIR] | push oci://REGISTRY/REPO [--image IMAGE@sha256:DIGEST] [HELM_PUSH_ARGS...]"
fi
image=
if [[ ${1:-} == --image ]]; then
  image=${2:-}
  shift 2 || die "--image needs IMAGE@sha256:DIGEST"
  [[ $image =~ ^([^@]+)@(sha256:[0-9a-f]{64})$ ]] ||
    die "the image must be pinned by digest (REPO@sha256:<64 hex>), got ${image:-nothing}"
fi

version=${OLMV1_CHART_VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)}
[[ -n $version ]] || die "no version in Cargo.toml"
helm=$(command -v helm 2>/dev/null || echo "$("$here/build-tools.sh")/helm")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$repo/charts/olmv1" "$work/olmv1"
if [[ -n $image ]]; then
  # The two lines of values.yaml's image block; checked, so a reformatted values.yaml fails here.
  values="$work/olmv1/values.yaml"
  sed -i -e "s|^  repository: \"\"$|  repository: ${BASH_REMATCH[1]}|" \
    -e "s|^  digest: \"\"$|  digest: ${BASH_REMATCH[2]}|" "$values"
  grep -q "^  repository: ${BASH_REMATCH[1]}$" "$values" && grep -q "^  digest: ${BASH_REMATCH[2]}$" "$values" ||
    die "charts/olmv1/values.yaml has no empty image.repository and image.digest lines to set"
fi

if [[ $command == package ]]; then
  out=${1:-.}
  mkdir -p "$out"
  "$helm" package "$work/olmv1" --version "$version" --app-version "$version" -d "$out" >/dev/null
  echo "$(cd "$out" && pwd)/olmv1-$version.tgz"
  exit 0
fi
"$helm" package "$work/olmv1" --version "$version" --app-version "$version" -d "$work" >/dev/null
"$helm" push "$work/olmv1-$version.tgz" "$ref" "$@" >"$work/push.txt" 2>&1 ||
  die "helm push to $ref failed: $(cat "$work/push.txt")"
digest=$(sed -n 's/^Digest: //p' "$work/push.txt")
[[ -n $digest ]] || die "helm push printed no digest: $(cat "$work/push.txt")"
log "pushed olmv1 chart $version${image:+ with image $image}"
echo "${ref%/}/olmv1:$version@$digest"
