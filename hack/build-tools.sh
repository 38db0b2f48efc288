#!/usr/bin/env bash
# Builds the local control plane's binaries from Go modules (no downloads outside the Go module
# proxy): kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd from the wrapper
# module in hack/tools, kwok and helm with `go install`. Binaries are cached by version under
# $OLMV1_TOOLS_DIR (default ~/.cache/olmv1/tools/<version>) so only a fresh machine pays the build.
# Prints the bin directory on stdout (helm is linked into it from its own versioned directory).
#
# Usage: hack/build-tools.sh [--node]
#   --node  also kubelet and kube-proxy (same module and version) and the sandbox's `pause`
#           (Kubernetes' build/pause/linux/pause.c from the module, static, gcc): a real node's
#           parts. Without it (kwok only) none of them is built.
set -euo pipefail
node=0
[[ "${1:-}" == --node ]] && node=1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"

tools_root=${OLMV1_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/tools}
bin="$tools_root/k8s-$KUBE_VERSION-kwok-$KWOK_VERSION/bin"
mkdir -p "$bin"

log() { echo "build-tools: $*" >&2; }

need=()
wanted=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)
((node)) && wanted+=(kubelet kube-proxy)
for b in "${wanted[@]}"; do
  [[ -x "$bin/$b" ]] || need+=("$b")
done

if ((${#need[@]})); then
  command -v go >/dev/null || { log "go is not installed; install Go ${GO_MIN} or newer"; exit 1; }
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  pkgs=()
  for b in "${need[@]}"; do
    case $b in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  log "building ${need[*]} ($KUBE_VERSION); a cold build takes several minutes"
  start=$SECONDS
  tmp=$(mktemp -d)
  (cd "$here/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  # `go build -o dir/` names the etcd binary after its module path without the major version
  # suffix ("server" for go.etcd.io/etcd/server/v3).
  if [[ -f "$tmp/server" ]]; then mv "$tmp/server" "$tmp/etcd"; fi
  mv "$tmp"/* "$bin/"
  rmdir "$tmp"
  log "built in $((SECONDS - start))s"
fi

if [[ ! -x "$bin/kwok" ]]; then
  log "building kwok $KWOK_VERSION"
  start=$SECONDS
  GOBIN="$bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  log "built kwok in $((SECONDS - start))s"
fi

# helm from its own module (its go.mod, not hack/tools: it needs newer Kubernetes libraries), in a
# directory of its version, linked into the bin directory so that a version change rebuilds it.
helm_dir="$tools_root/helm-$HELM_VERSION"
if [[ ! -x "$helm_dir/helm" ]]; then
  log "building helm $HELM_VERSION"
  start=$SECONDS
  mkdir -p "$helm_dir"
  GOBIN="$helm_dir" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  log "built helm in $((SECONDS - start))s"
fi
[[ $(readlink "$bin/helm" 2>/dev/null) == "$helm_dir/helm" ]] || ln -sfn "$helm_dir/helm" "$bin/helm"

# kwok's standalone binary has no built-in stages: keep the stage YAMLs from its module beside it.
# The node heartbeat (every 20-45 s) keeps the fake node inside the controller-manager's 50 s grace
# period: without it the node lifecycle controller marks every pod on it not Ready, for good.
stages="$bin/../kwok-stages"
if [[ ! -f "$stages/pod-ready.yaml" || ! -f "$stages/node-heartbeat.yaml" ]]; then
  mkdir -p "$stages"
  moddir=$(cd "$here/tools" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp "$moddir/kustomize/stage/node/fast/node-initialize.yaml" "$stages/"
  cp "$moddir/kustomize/stage/node/heartbeat/node-heartbeat.yaml" "$stages/"
  for s in pod-ready pod-complete pod-delete; do
    cp "$moddir/kustomize/stage/pod/fast/$s.yaml" "$stages/"
  done
fi
# The sandbox (pause) container's only binary: Kubernetes' own pause.c from the module, static so
# that the image needs nothing else (no base image, no download).
if ((node)) && [[ ! -x "$bin/pause" ]]; then
  command -v gcc >/dev/null || { log "gcc is not installed (run hack/install-deps.sh)"; exit 1; }
  moddir=$(cd "$here/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  gcc -Os -Wall -Werror -static -DVERSION="$KUBE_VERSION-olmv1" -o "$bin/pause.tmp" \
    "$moddir/build/pause/linux/pause.c"
  mv "$bin/pause.tmp" "$bin/pause"
  log "built pause from $moddir/build/pause/linux/pause.c"
fi
echo "$bin"
