#!/usr/bin/env bash
# Renders olmv1's install manifest: one YAML stream with the namespace, both CRDs, RBAC, both
# Deployments, catalogd's Service and TLS, PodDisruptionBudgets and NetworkPolicies, with the image
# pinned by digest (kustomize's image transformer over config/<overlay>, through `kubectl kustomize`).
#
# Usage: hack/manifest.sh IMAGE@sha256:DIGEST [default|openshift|controller-identity] > olmv1.yaml
#   default     Kubernetes; catalogd's serving certificate from cert-manager (config/default)
#   openshift   OpenShift; the service CA issues it and the controller trusts it (config/openshift)
#   controller-identity  as default, in upstream v1.11's model: the controller installs bundles
#               with its own identity, bound to cluster-admin (config/controller-identity); not
#               least privilege
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "manifest: error: $*" >&2; exit 1; }

image=${1:-}
overlay=${2:-default}
[[ $image =~ ^([^@]+)@(sha256:[0-9a-f]{64})$ ]] ||
  die "the image must be pinned by digest (REPO@sha256:<64 hex>), got ${image:-nothing}"
name=${BASH_REMATCH[1]} digest=${BASH_REMATCH[2]}
[[ -f "$repo/config/$overlay/kustomization.yaml" ]] || die "no overlay config/$overlay (default, openshift or controller-identity)"

kubectl=$(command -v kubectl || true)
[[ -n $kubectl ]] || kubectl="$("$here/build-tools.sh")/kubectl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work" "$repo/config/$overlay")
images:
  - name: olmv1
    newName: $name
    digest: $digest
YAML
"$kubectl" kustomize "$work"
