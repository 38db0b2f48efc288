#!/usr/bin/env bash
# Builds the Go programs the local control plane and the tests run, each from its Go module (no
# downloads outside the Go module proxy), cached by version under $OLMV1_TOOLS_DIR (default
# ~/.cache/olmv1/tools) so that only a fresh machine pays the build. Prints the control plane's
# bin directory on stdout.
#
#   k8s           kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd from
#                 the wrapper module hack/tools (--node: kubelet and kube-proxy too)
#   kwok          `go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION`, and its stage YAMLs
#   pause         (--node) the sandbox's binary: Kubernetes' build/pause/linux/pause.c from the
#                 module, static, gcc
#   helm          `go install helm.sh/helm/v4/cmd/helm@$HELM_VERSION` with its own go.mod (newer
#                 Kubernetes libraries than hack/tools'), in tools/helm-<version>, linked into bin
#
# The builds run side by side, each a job: one `go build` compiles its packages in parallel, but
# waits alone on the module proxy and on each link, where a second build keeps the cores busy. They
# share Go's build cache (GOCACHE), so a package two tools use at the same version compiles once.
# Each job is a phase of $OLMV1_PHASE_LOG (hack/phases.sh), built or cached; a job's output goes to
# stderr when it fails. To add a tool: a build_NAME function (which returns at once when its
# binaries are cached) and its name in `jobs` below.
#
# Usage: hack/build-tools.sh [--node] [--only JOB,...] [--skip JOB,...]
#   --node          a real node's parts too (kubelet, kube-proxy, pause); without it none is built
#   --only, --skip  of those, only (or all but) the named jobs (k8s, kwok, helm, pause)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
source "$here/phases.sh"
node=0 only="" skip=""
while (($#)); do
  case $1 in
    --node) node=1 ;;
    --only) only=" ${2//,/ } "; shift ;;
    --skip) skip=" ${2//,/ } "; shift ;;
    *) echo "build-tools: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift
done

tools_root=${OLMV1_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/tools}
bin="$tools_root/k8s-$KUBE_VERSION-kwok-$KWOK_VERSION/bin"
mkdir -p "$bin"

log() { echo "build-tools: $*" >&2; }
need_go() { command -v go >/dev/null || { log "go is not installed; install Go ${GO_MIN} or newer"; exit 1; }; }

# Each build_NAME prints "cached" when it had nothing to do, else "built".

build_k8s() {
  local need=() wanted=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd) b
  ((node)) && wanted+=(kubelet kube-proxy)
  for b in "${wanted[@]}"; do
    [[ -x "$bin/$b" ]] || need+=("$b")
  done
  if ((${#need[@]} == 0)); then echo cached; return; fi
  need_go
  local minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  local pkgs=()
  for b in "${need[@]}"; do
    case $b in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  log "building ${need[*]} ($KUBE_VERSION); a cold build takes several minutes"
  local start=$SECONDS tmp
  tmp=$(mktemp -d "$bin/../.build-k8s.XXXXXX")
  (cd "$here/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  # `go build -o dir/` names the etcd binary after its module path without the major version
  # suffix ("server" for go.etcd.io/etcd/server/v3).
  if [[ -f "$tmp/server" ]]; then mv "$tmp/server" "$tmp/etcd"; fi
  mv "$tmp"/* "$bin/"
  rmdir "$tmp"
  log "built ${need[*]} in $((SECONDS - start))s"
  echo built
}

build_kwok() {
  local result=cached
  if [[ ! -x "$bin/kwok" ]]; then
    need_go
    log "building kwok $KWOK_VERSION"
    local start=$SECONDS tmp
    tmp=$(mktemp -d "$bin/../.build-kwok.XXXXXX")
    GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    mv "$tmp/kwok" "$bin/kwok"
    rmdir "$tmp"
    log "built kwok in $((SECONDS - start))s"
    result=built
  fi
  # kwok's standalone binary has no built-in stages: keep the stage YAMLs from its module beside
  # it. The node heartbeat (every 20-45 s) keeps the fake node inside the controller-manager's
  # 50 s grace period: without it the node lifecycle controller marks every pod on it not Ready,
  # for good.
  local stages="$bin/../kwok-stages"
  if [[ ! -f "$stages/pod-ready.yaml" || ! -f "$stages/node-heartbeat.yaml" ]]; then
    need_go
    mkdir -p "$stages"
    local moddir s
    moddir=$(cd "$here/tools" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp "$moddir/kustomize/stage/node/fast/node-initialize.yaml" "$stages/"
    cp "$moddir/kustomize/stage/node/heartbeat/node-heartbeat.yaml" "$stages/"
    for s in pod-ready pod-complete pod-delete; do
      cp "$moddir/kustomize/stage/pod/fast/$s.yaml" "$stages/"
    done
  fi
  echo "$result"
}

# helm from its own module (its go.mod, not hack/tools: it needs newer Kubernetes libraries), in a
# directory of its version, linked into the bin directory so that a version change rebuilds it.
build_helm() {
  local result=cached helm_dir="$tools_root/helm-$HELM_VERSION"
  if [[ ! -x "$helm_dir/helm" ]]; then
    need_go
    log "building helm $HELM_VERSION"
    local start=$SECONDS tmp
    mkdir -p "$helm_dir"
    tmp=$(mktemp -d "$helm_dir/.build.XXXXXX")
    GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
    mv "$tmp/helm" "$helm_dir/helm"
    rmdir "$tmp"
    log "built helm in $((SECONDS - start))s"
    result=built
  fi
  [[ $(readlink "$bin/helm" 2>/dev/null) == "$helm_dir/helm" ]] || ln -sfn "$helm_dir/helm" "$bin/helm"
  echo "$result"
}

# The sandbox (pause) container's only binary: Kubernetes' own pause.c from the module, static so
# that the image needs nothing else (no base image, no download).
build_pause() {
  if [[ -x "$bin/pause" ]]; then echo cached; return; fi
  need_go
  command -v gcc >/dev/null || { log "gcc is not installed (run hack/install-deps.sh)"; exit 1; }
  local moddir
  # `go mod download`, not `go list -m`: on a fresh machine the k8s job beside this one may not
  # have fetched the module yet, and `go list -m` then prints an empty directory (a cold CI run
  # failed so: "/build/pause/linux/pause.c: No such file or directory").
  moddir=$(cd "$here/tools" && go mod download -json k8s.io/kubernetes | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -f "$moddir/build/pause/linux/pause.c" ]] || { log "k8s.io/kubernetes's module has no build/pause/linux/pause.c (its directory: '$moddir')"; exit 1; }
  gcc -Os -Wall -Werror -static -DVERSION="$KUBE_VERSION-olmv1" -o "$bin/pause.tmp" \
    "$moddir/build/pause/linux/pause.c"
  mv "$bin/pause.tmp" "$bin/pause"
  log "built pause from $moddir/build/pause/linux/pause.c"
  echo built
}

wanted=(k8s kwok helm)
((node)) && wanted+=(pause)
jobs=()
for job in "${wanted[@]}"; do
  [[ -n $only && $only != *" $job "* ]] && continue
  [[ $skip == *" $job "* ]] && continue
  jobs+=("$job")
done

# Each job in the background, its output in a file; then each waited for, in order.
work=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-build-tools.XXXXXX")
trap 'rm -rf "$work"' EXIT
declare -A pids=()
for job in "${jobs[@]}"; do
  # A plain command, not an `if` condition: errexit stays on inside build_NAME.
  (
    phase_begin "go: $job"
    trap 'rc=$?; ((rc == 0)) || phase_end "go: $job" FAILED "exit $rc"' EXIT
    "build_$job" >"$work/$job.result" 2>"$work/$job.log"
    phase_end "go: $job" "$(tail -n 1 "$work/$job.result")"
  ) &
  pids[$job]=$!
done
failed=()
for job in "${jobs[@]}"; do
  if ! wait "${pids[$job]}"; then
    failed+=("$job")
    sed "s/^/build-tools: $job: /" "$work/$job.log" >&2
  elif [[ $(tail -n 1 "$work/$job.result") == built ]]; then
    grep -v '^go: downloading' "$work/$job.log" >&2 || true
  fi
done
((${#failed[@]} == 0)) || { log "failed: ${failed[*]}"; exit 1; }
echo "$bin"
