# Shell shared by the benchmark scripts (hack/bench-vs-upstream.sh, hack/bench-scale.sh) and
# hack/interop.sh; source it after setting `here` (this directory) and `repo`. Not a script of its
# own.
# shellcheck shell=bash disable=SC2034,SC2154 # variables set for and by the sourcing script
# shellcheck source=hack/versions.env
source "$here/versions.env"

bench_log() { echo "$(basename "$0" .sh): $*" >&2; }
bench_die() { bench_log "error: $*"; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The upstream inputs of hack/interop.sh and hack/bench-vs-upstream.sh, which this repository does
# not build: UPSTREAM_BIN, a directory holding upstream's `operator-controller` and `catalogd`
# binaries, and UPSTREAM_SRC, a checkout of upstream at the same commit, read only for its CRDs
# (helm/olmv1/base/.../crd/experimental). Both from the environment or $1 $2; sets `upstream_bin` and
# `upstream_src` (absolute), or fails naming what is missing. docs/upstream.md says which commit.
upstream_inputs() {
  upstream_bin=${1:-${UPSTREAM_BIN:-}}
  upstream_src=${2:-${UPSTREAM_SRC:-}}
  local usage="usage: UPSTREAM_BIN=DIR UPSTREAM_SRC=DIR $0 (or $0 UPSTREAM_BIN UPSTREAM_SRC): DIR of upstream's operator-controller and catalogd binaries, and a checkout of upstream at the commit docs/upstream.md names (for its CRDs); this repository does not build upstream"
  [[ -n $upstream_bin ]] || bench_die "UPSTREAM_BIN is not set; $usage"
  [[ -n $upstream_src ]] || bench_die "UPSTREAM_SRC is not set; $usage"
  local b
  # UPSTREAM_BINARIES=optional (bench-vs-upstream.sh measuring olmv1 alone): only the CRDs are read.
  if [[ ${UPSTREAM_BINARIES:-} != optional ]]; then
    for b in operator-controller catalogd; do
      [[ -x "$upstream_bin/$b" && -f "$upstream_bin/$b" ]] ||
        bench_die "UPSTREAM_BIN=$upstream_bin has no executable $b; $usage"
    done
  else
    mkdir -p "$upstream_bin"
  fi
  [[ -f "$upstream_src/helm/olmv1/base/operator-controller/crd/experimental/olm.operatorframework.io_clusterextensions.yaml" ]] ||
    bench_die "UPSTREAM_SRC=$upstream_src has no helm/olmv1/base/operator-controller/crd/experimental/olm.operatorframework.io_clusterextensions.yaml (not an operator-controller checkout of the pinned commit?); $usage"
  upstream_bin=$(cd "$upstream_bin" && pwd) upstream_src=$(cd "$upstream_src" && pwd)
  # The figures in docs/ were measured against UPSTREAM_COMMIT; say so when the checkout is elsewhere.
  local head
  if head=$(git -C "$upstream_src" rev-parse HEAD 2>/dev/null) && [[ $head != "$UPSTREAM_COMMIT" ]]; then
    bench_log "note: UPSTREAM_SRC is at $head, not at $UPSTREAM_COMMIT (hack/versions.env), which docs/upstream.md's figures are from"
  fi
}

# Builds olmv1 ($OLMV1_BENCH_PROFILE: release, or `debug` for an upper bound) and the benchmark
# driver (the `interop` example, debug); sets `profile`, `olmv1` and `driver`.
bench_build() {
  profile=${OLMV1_BENCH_PROFILE:-release}
  bench_log "building olmv1 ($profile) and the driver"
  if [[ $profile == release && -z ${OLMV1_BENCH_OLMV1:-} ]]; then
    (cd "$repo" && cargo build -q --release --bin olmv1)
  fi
  (cd "$repo" && cargo build -q --bin olmv1 --example interop)
  olmv1=${OLMV1_BENCH_OLMV1:-"$repo/target/$profile/olmv1"}
  [[ -x $olmv1 ]] || bench_die "OLMV1_BENCH_OLMV1=$olmv1 is not an executable"
  driver="$repo/target/debug/examples/interop"
}

# The controller's identity: ServiceAccount olmv1-system/olmv1-controller bound to cluster-admin,
# so that the API server counts its requests under flow schema `service-accounts` (apart from the
# control plane's own) and its audit entries carry its name. Writes the kubeconfig to $1.
controller_identity() {
  kubectl get namespace olmv1-system >/dev/null 2>&1 || kubectl create namespace olmv1-system >/dev/null
  kubectl -n olmv1-system create serviceaccount olmv1-controller >/dev/null
  kubectl create clusterrolebinding olmv1-bench-controller --clusterrole=cluster-admin \
    --serviceaccount=olmv1-system:olmv1-controller >/dev/null
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$OLMV1_API_SERVER", certificate-authority: "$OLMV1_CA_CERT"}}]
users: [{name: controller, user: {token: "$(kubectl -n olmv1-system create token olmv1-controller --duration=24h)"}}]
contexts: [{name: local, context: {cluster: local, user: controller}}]
current-context: local
EOF
}

# `olmv1 ROLE ARGS...` in the background, its log and pid file in the environment's directory.
start_olmv1() {
  local role=$1
  shift
  "$olmv1" "$role" "$@" >>"$OLMV1_ENV_DIR/logs/olmv1-$role.log" 2>&1 </dev/null &
  echo $! >"$OLMV1_ENV_DIR/pids/olmv1@$role.pid"
}
stop_olmv1() {
  local pid_file="$OLMV1_ENV_DIR/pids/olmv1@$1.pid"
  kill "$(cat "$pid_file")" 2>/dev/null || true
  wait "$(cat "$pid_file")" 2>/dev/null || true
  rm -f "$pid_file"
}
pid_of() { cat "$OLMV1_ENV_DIR/pids/$1.pid"; }

# olmv1 catalogd as the cluster admin, on free ports, caching in $1; with the allocator settings
# its Deployment has (charts/olmv1/templates/catalogd.yaml), so that the figures are those of the
# product.
start_catalogd() {
  local port tunables
  port=$(free_port)
  tunables=$(grep -A1 'name: GLIBC_TUNABLES' "$repo/charts/olmv1/templates/catalogd.yaml" | sed -n 's/^ *value: //p')
  [[ -n $tunables ]] || bench_die "charts/olmv1/templates/catalogd.yaml sets no GLIBC_TUNABLES"
  GLIBC_TUNABLES=$tunables start_olmv1 catalogd --catalogs-server-addr "127.0.0.1:$port" \
    --external-address "127.0.0.1:$port" --cache-dir "$1" --metrics-bind-address "127.0.0.1:$(free_port)" \
    --health-probe-bind-address 127.0.0.1:0
}

# The load average and the time, for the figures' captions.
load_note() { echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"; }
