#!/usr/bin/env bash
# Runs the product end to end on the local control plane:
#   1. installs what is missing and starts the local control plane with the CRDs (hack/local-up.sh),
#      or reuses the one already running in the demo directory;
#   2. publishes the demo's example-operator bundle and its catalog to the local registry with
#      `olmv1 image push` (no Docker; hack/demo/publish.sh);
#   3. starts `olmv1 catalogd` (serving ClusterCatalogs over HTTP) and `olmv1 controller`;
#   4. creates the install namespace, applies a ClusterCatalog, and runs `olmv1 install --yes`:
#      it creates the installer ServiceAccount `example-operator-installer` with exactly the
#      permissions the bundle needs (what `olmv1 rbac` prints), then the ClusterExtension; waits
#      until the extension is Installed=True.
# With OLMV1_NODE=real (a real node: kubelet + containerd, docs/local-control-plane.md) the example
# is olmv1's test operator (test/operator: webhooks, a CRD with two versions), whose container really
# runs: cert-manager is started on the node first (hack/cert-manager.sh), the operator is built and
# published (hack/test-operator.sh), and `olmv1 install webhook-operator` waits until its pod is
# Ready. The demo's own example-operator has no runnable image: it is for kwok's node.
# The environment keeps running afterwards: `source .local/demo/env.sh` to use kubectl against it.
#
# Usage: hack/demo.sh [up]     bring it up (default)
#        hack/demo.sh down     stop everything the demo started
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
demo="$here/demo"
export OLMV1_ENV_DIR=${OLMV1_ENV_DIR:-$repo/.local/demo}
log() { echo "demo: $*" >&2; }

running() { # the env file exists and its API server answers
  [[ -f "$OLMV1_ENV_DIR/env.sh" ]] || return 1
  (source "$OLMV1_ENV_DIR/env.sh" && "$OLMV1_KUBECTL" get --raw /readyz >/dev/null 2>&1)
}

olmv1="$repo/target/debug/olmv1"

# start_olmv1 ROLE ARGS...: runs `olmv1 ARGS...` in the background, logs in logs/olmv1@ROLE.log;
# hack/local-down.sh stops it with the rest (pid file pids/olmv1@ROLE.pid).
start_olmv1() {
  local role=$1
  shift
  local pid_file="$OLMV1_ENV_DIR/pids/olmv1@$role.pid"
  if [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    kill "$(cat "$pid_file")" 2>/dev/null || true
    sleep 1
  fi
  "$olmv1" "$@" >"$OLMV1_ENV_DIR/logs/olmv1@$role.log" 2>&1 </dev/null &
  echo $! >"$pid_file"
}

up() {
  "$here/install-deps.sh"
  if running; then
    log "reusing the environment in $OLMV1_ENV_DIR"
  else
    [[ -d "$OLMV1_ENV_DIR" ]] && "$here/local-down.sh" "$OLMV1_ENV_DIR" 2>/dev/null || true
    "$here/local-up.sh" >/dev/null
  fi
  # shellcheck disable=SC1091
  source "$OLMV1_ENV_DIR/env.sh"
  (cd "$repo" && cargo build -q --bin olmv1)

  "$demo/publish.sh" "$olmv1" "$OLMV1_REGISTRY" 2>&1 | sed 's/^/demo: /' >&2
  kubectl create namespace olmv1-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  local catalogd_port
  catalogd_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  start_olmv1 catalogd catalogd --catalogs-server-addr "127.0.0.1:$catalogd_port" \
    --external-address "127.0.0.1:$catalogd_port" --cache-dir "$OLMV1_ENV_DIR/catalogd-cache" \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0
  start_olmv1 controller controller --system-namespace olmv1-system --cache-dir "$OLMV1_ENV_DIR/controller-cache" \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0
  log "started olmv1 catalogd (http://127.0.0.1:$catalogd_port) and olmv1 controller; logs in $OLMV1_ENV_DIR/logs"

  if [[ ${OLMV1_NODE:-kwok} == real ]]; then
    up_real
    return
  fi
  kubectl create namespace example --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  sed "s|REGISTRY|$OLMV1_REGISTRY|g" "$demo/clustercatalog.yaml" | kubectl apply -f -
  kubectl wait --for=condition=Serving --timeout=180s clustercatalog/demo >/dev/null
  # The installer's RBAC and the ClusterExtension, from the catalog catalogd now serves.
  "$olmv1" install example-operator -n example --channel stable --yes
  wait_installed example-operator
  kubectl get clustercatalogs,clusterextensions
  kubectl -n example get deployments,serviceaccounts,configmaps
  kubectl get clusterroles,clusterrolebindings -l olmv1.operatorframework.io/installer-for=example-operator
  log "up: example-operator is Installed=True. Use it with: source $OLMV1_ENV_DIR/env.sh   Stop it with: hack/demo.sh down"
}

wait_installed() {
  if ! kubectl wait --for=condition=Installed "clusterextension/$1" --timeout=300s >/dev/null; then
    kubectl get clusterextension "$1" -o yaml >&2
    tail -n 20 "$OLMV1_ENV_DIR/logs/olmv1@controller.log" >&2
    log "the ClusterExtension did not reach Installed=True"
    exit 1
  fi
}

# The real node's example: cert-manager, then the test operator from its own catalog.
up_real() {
  OLMV1_BIN=$olmv1 "$here/cert-manager.sh" 2>&1 | sed 's/^/demo: /' >&2
  local catalog
  catalog=$(OLMV1_BIN=$olmv1 "$here/test-operator.sh" 2> >(sed 's/^/demo: /' >&2) | tail -n 1)
  sed "s|REF|$catalog|" "$demo/webhook-operator.clustercatalog.yaml" | kubectl apply -f -
  kubectl wait --for=condition=Serving --timeout=180s clustercatalog/webhook-operator >/dev/null
  kubectl create namespace webhook-operator --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  # 0.2.0: the channel's head, 0.3.0, is the broken bundle the tests report.
  "$olmv1" install webhook-operator -n webhook-operator --version 0.2.0 --yes
  wait_installed webhook-operator
  kubectl get clustercatalogs,clusterextensions
  kubectl -n webhook-operator get deployments,pods -o wide
  log "up: webhook-operator is Installed=True, its pod running on $OLMV1_REAL_NODE. Use it with: source $OLMV1_ENV_DIR/env.sh   Stop it with: hack/demo.sh down"
}

case ${1:-up} in
  up) up ;;
  down) "$here/local-down.sh" "$OLMV1_ENV_DIR" ;;
  *) echo "usage: hack/demo.sh [up|down]" >&2; exit 2 ;;
esac
