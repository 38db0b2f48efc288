#!/usr/bin/env bash
# Runs the product end to end on the local control plane:
#   1. installs what is missing and starts the local control plane with the CRDs (hack/local-up.sh),
#      or reuses the one already running in the demo directory;
#   2. (later issues) starts `olmv1 catalogd` and `olmv1 controller` against it;
#   3. creates the sample's namespace and installer ServiceAccount, applies a sample ClusterCatalog
#      and ClusterExtension from config/samples, and shows them.
# The environment keeps running afterwards: `source .local/demo/env.sh` to use kubectl against it.
#
# Usage: hack/demo.sh [up]     bring it up (default)
#        hack/demo.sh down     stop everything the demo started
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export OLMV1_ENV_DIR=${OLMV1_ENV_DIR:-$repo/.local/demo}
log() { echo "demo: $*" >&2; }

catalog_sample="$repo/config/samples/olm_v1_clustercatalog.yaml"
extension_sample="$repo/config/samples/olm_v1_clusterextension.yaml"

running() { # the env file exists and its API server answers
  [[ -f "$OLMV1_ENV_DIR/env.sh" ]] || return 1
  (source "$OLMV1_ENV_DIR/env.sh" && "$OLMV1_KUBECTL" get --raw /readyz >/dev/null 2>&1)
}

# start_olmv1 ROLE ARGS...: runs `olmv1 ARGS...` in the background, logs in logs/olmv1@ROLE.log;
# hack/local-down.sh stops it with the rest (pid file pids/olmv1@ROLE.pid).
start_olmv1() {
  local role=$1
  shift
  (cd "$repo" && cargo build -q --bin olmv1)
  "$repo/target/debug/olmv1" "$@" >"$OLMV1_ENV_DIR/logs/olmv1@$role.log" 2>&1 </dev/null &
  echo $! >"$OLMV1_ENV_DIR/pids/olmv1@$role.pid"
}

up() {
  "$here/install-deps.sh"
  if running; then
    log "reusing the environment in $OLMV1_ENV_DIR"
  else
    # A stale directory (e.g. after a reboot): clear it first.
    if [[ -d "$OLMV1_ENV_DIR" ]]; then "$here/local-down.sh" "$OLMV1_ENV_DIR" 2>/dev/null || true; fi
    "$here/local-up.sh" >/dev/null
  fi
  # shellcheck disable=SC1091
  source "$OLMV1_ENV_DIR/env.sh"

  # The controllers join here as their issues land, e.g.:
  #   start_olmv1 catalogd catalogd --kubeconfig "$KUBECONFIG" ...
  #   start_olmv1 controller controller --kubeconfig "$KUBECONFIG" ...

  # What the documentation asks an admin to prepare: the install namespace and a ServiceAccount
  # the extension is installed with (cluster-admin here for brevity; the docs show narrower RBAC).
  local ns sa
  ns=$(sed -n 's/^  namespace: *//p' "$extension_sample")
  sa=$(sed -n '/serviceAccount:/,/name:/s/^ *name: *//p' "$extension_sample")
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n "$ns" create serviceaccount "$sa" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create clusterrolebinding "$sa-installer" --clusterrole=cluster-admin \
    --serviceaccount="$ns:$sa" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

  kubectl apply -f "$catalog_sample" -f "$extension_sample"
  kubectl get clustercatalogs,clusterextensions
  log "up. Use it with: source $OLMV1_ENV_DIR/env.sh   Stop it with: hack/demo.sh down"
}

case ${1:-up} in
  up) up ;;
  down) "$here/local-down.sh" "$OLMV1_ENV_DIR" ;;
  *) echo "usage: hack/demo.sh [up|down]" >&2; exit 2 ;;
esac
