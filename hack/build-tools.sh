#!/usr/bin/env bash
# Builds the Go programs the local control plane and the tests run, all from one Go module
# (hack/tools; no downloads outside the Go module proxy), cached under $OLMV1_TOOLS_DIR (default
# ~/.cache/olmv1/tools) by the module's sources and hack/versions.env, so that only a fresh machine
# pays the build. Prints the bin directory on stdout.
#
#   tools   one `go build` in hack/tools of every missing binary: kube-apiserver,
#           kube-controller-manager, kube-scheduler, kubectl and etcd, kwok, helm; with --node also
#           kubelet, kube-proxy and cert-manager's controller, webhook and cainjector (our mains in
#           hack/tools/cmd; cert-manager runs on the real node, hack/cert-manager.sh); and kwok's
#           stage YAMLs from its module
#   pause   (--node) the sandbox's binary: Kubernetes' build/pause/linux/pause.c from the module,
#           static, gcc
#
# One module and one build: the tools share most of their code (Kubernetes' k8s.io/* libraries,
# grpc, protobuf, golang.org/x/*, ...). In one module Go picks one version of each, so each shared
# package compiles once (separate modules resolving any dependency to another version compile it
# again: Go's build cache keys a package by the exact versions of all it imports), and one
# `go build` of all the mains keeps both cores busy, links beside compiles (measured in
# docs/local-control-plane.md). A caller that comes while another builds (a test, while
# hack/test.sh's build runs) waits for it and then finds the binaries. Each job is a phase of
# $OLMV1_PHASE_LOG (hack/phases.sh), built or cached; a job's output goes to stderr when it fails.
#
# Usage: hack/build-tools.sh [--node] [--only JOB,...] [--skip JOB,...]
#   --node          a real node's parts too (kubelet, kube-proxy, cert-manager, pause); without it
#                   none is built
#   --only, --skip  of those, only (or all but) the named jobs (tools, pause)
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
# The cache key: the module's sources (go.mod, go.sum, our mains, the vcert stand-in) and the
# versions (the link stamps them into the binaries), so that a change to any of them builds once.
src_hash=$(cd "$here" && { find tools -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; sha256sum versions.env; } |
  sha256sum | cut -c1-12)
bin="$tools_root/k8s-$KUBE_VERSION-$src_hash/bin"
mkdir -p "$bin"

log() { echo "build-tools: $*" >&2; }
need_go() { command -v go >/dev/null || { log "go is not installed; install Go ${GO_MIN} or newer"; exit 1; }; }

# Each build_NAME prints "cached" when it had nothing to do, else "built".

# The binaries of hack/tools: name (as `go build -o DIR/` writes it) and package.
declare -A package=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [etcd]=go.etcd.io/etcd/server/v3
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [helm]=helm.sh/helm/v4/cmd/helm
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [cert-manager-controller]=./cmd/cert-manager-controller
  [cert-manager-webhook]=./cmd/cert-manager-webhook
  [cert-manager-cainjector]=./cmd/cert-manager-cainjector
)

build_tools() {
  local wanted=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm) need=() b
  ((node)) && wanted+=(kubelet kube-proxy cert-manager-controller cert-manager-webhook cert-manager-cainjector)
  local result=cached
  # One build at a time: a second caller waits here, then builds only what is still missing.
  exec {lock}>"$bin/../.lock"
  flock "$lock"
  for b in "${wanted[@]}"; do
    [[ -x "$bin/$b" ]] || need+=("$b")
  done
  if ((${#need[@]})); then
    need_go
    check_versions
    local minor=${KUBE_VERSION#v1.}
    minor=${minor%%.*}
    # One set of -X for all the binaries: the link ignores a variable of a package that a binary
    # does not link (helm's version in kubectl); component-base's, which kwok, helm and
    # cert-manager link too, says the control plane's version in them as well.
    local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
    ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
    ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
    ldflags+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
    ldflags+=" -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION"
    local pkgs=()
    for b in "${need[@]}"; do pkgs+=("${package[$b]}"); done
    log "building ${need[*]}; a cold build takes several minutes"
    local start=$SECONDS tmp
    tmp=$(mktemp -d "$bin/../.build.XXXXXX")
    (cd "$here/tools" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" \
      go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}") || { rm -rf "$tmp"; exit 1; }
    # `go build -o dir/` names the etcd binary after its module path without the major version
    # suffix ("server" for go.etcd.io/etcd/server/v3).
    if [[ -f "$tmp/server" ]]; then mv "$tmp/server" "$tmp/etcd"; fi
    mv "$tmp"/* "$bin/"
    rmdir "$tmp"
    log "built ${need[*]} in $((SECONDS - start))s"
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
    moddir=$(cd "$here/tools" && go mod download -json sigs.k8s.io/kwok | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp "$moddir/kustomize/stage/node/fast/node-initialize.yaml" "$stages/"
    cp "$moddir/kustomize/stage/node/heartbeat/node-heartbeat.yaml" "$stages/"
    for s in pod-ready pod-complete pod-delete; do
      cp "$moddir/kustomize/stage/pod/fast/$s.yaml" "$stages/"
    done
  fi
  flock -u "$lock"
  echo "$result"
}

# check_versions: hack/tools' go.mod holds the versions hack/versions.env names (one is changed
# with the other: `go get MODULE@VERSION` in hack/tools, then `go mod tidy -e`).
check_versions() {
  local want have
  want="github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION
helm.sh/helm/v4 $HELM_VERSION
k8s.io/kubernetes $KUBE_VERSION
sigs.k8s.io/kwok $KWOK_VERSION"
  have=$(cd "$here/tools" && go list -m github.com/cert-manager/cert-manager helm.sh/helm/v4 k8s.io/kubernetes sigs.k8s.io/kwok)
  [[ $have == "$want" ]] || { log "hack/tools/go.mod and hack/versions.env disagree: go.mod has"$'\n'"$have"$'\n'"versions.env has"$'\n'"$want"; exit 1; }
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

wanted=(tools)
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
