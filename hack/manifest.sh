#!/usr/bin/env bash
# Renders olmv1's install manifest: one YAML stream with the namespace, both CRDs, RBAC, both
# Deployments, catalogd's Service and TLS, PodDisruptionBudgets and NetworkPolicies, with the image
# pinned by digest. Its one source is the chart in charts/olmv1: `helm template` renders it with
# the variant's values, then `kubectl kustomize` lays the objects out as kubectl applies them
# (kinds in apply order, keys sorted, no comments).
#
# Usage: hack/manifest.sh IMAGE@sha256:DIGEST [VARIANT] [HELM_ARGS...] > olmv1.yaml
#   default     Kubernetes; catalogd's serving certificate from cert-manager (the chart's defaults)
#   openshift   OpenShift; the service CA issues it and the controller trusts it, the global pull
#               secret, monitoring by the platform Prometheus (--set openshift.enabled=true)
#   controller-identity  as default, in upstream v1.11's model: the controller installs bundles
#               with its own identity, bound to cluster-admin (--set installIdentity=controller);
#               not least privilege
#   HELM_ARGS   more values for `helm template`, e.g. --set nodeSelector.role=infra or -f my.yaml
#               (charts/olmv1/README.md lists them)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "manifest: error: $*" >&2; exit 1; }

image=${1:-}
variant=${2:-default}
shift $(($# < 2 ? $# : 2))
[[ $image =~ ^([^@]+)@(sha256:[0-9a-f]{64})$ ]] ||
  die "the image must be pinned by digest (REPO@sha256:<64 hex>), got ${image:-nothing}"
name=${BASH_REMATCH[1]} digest=${BASH_REMATCH[2]}
case $variant in
  default) values=() ;;
  openshift) values=(--set openshift.enabled=true) ;;
  controller-identity) values=(--set installIdentity=controller) ;;
  *) die "no variant $variant (default, openshift or controller-identity)" ;;
esac

tool() { # NAME: from PATH, else the one hack/build-tools.sh builds
  command -v "$1" 2>/dev/null || echo "$("$here/build-tools.sh")/$1"
}
helm=$(tool helm)
kubectl=$(tool kubectl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$helm" template olmv1 "$repo/charts/olmv1" --include-crds \
  --set image.repository="$name" --set image.digest="$digest" "${values[@]}" "$@" >"$work/olmv1.yaml"
printf 'resources:\n  - olmv1.yaml\n' >"$work/kustomization.yaml"
"$kubectl" kustomize "$work"
