#!/usr/bin/env bash
# olmv1 side by side with upstream operator-controller and catalogd (issue 15). Not part of
# hack/test.sh: it needs upstream's binaries, which this repository does not build (see
# docs/upstream.md).
#
# Usage: UPSTREAM_BIN=DIR UPSTREAM_SRC=DIR hack/interop.sh   (or hack/interop.sh UPSTREAM_BIN UPSTREAM_SRC)
#   UPSTREAM_BIN  a directory holding upstream's `operator-controller` and `catalogd` binaries
#   UPSTREAM_SRC  a checkout of upstream at the same commit: its CRDs are read from it
#
# On one local control plane with upstream's CRDs, one controller at a time:
#   1. upstream catalogd serves; olmv1 controller installs a real operator from the shared
#      catalogs (rebuilt from olm.bundle.object) and upgrades it along the catalog's edge;
#   2. the differences table: every scenario (test/interop/scenarios.rs) run by olmv1 controller
#      (with installer ServiceAccounts), again by olmv1 controller in upstream's model
#      (--install-identity controller) with upstream v1.11's YAML (no serviceAccount), then by
#      upstream operator-controller with that YAML, against the same catalogs;
#   3. olmv1 catalogd serves; upstream operator-controller installs and upgrades the real operator;
#   4. the records are compared field by field, both olmv1 runs against upstream's: the command
#      fails on any difference that docs/upstream.md does not list with its reason.
# OLMV1_KEEP_ENV=1 leaves the environment running at the end (its env file is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=hack/bench-lib.sh
source "$here/bench-lib.sh" # start_olmv1, stop_olmv1, start_catalogd, free_port
log() { echo "interop: $*" >&2; }
die() { log "error: $*"; exit 1; }

upstream_inputs "$@" # sets upstream_bin, upstream_src

"$here/install-deps.sh"
log "building olmv1 and the interop driver"
(cd "$repo" && cargo build -q --bin olmv1 --example interop)
olmv1="$repo/target/debug/olmv1"
driver="$repo/target/debug/examples/interop"

env_file=$(OLMV1_SKIP_CRDS=1 "$here/local-up.sh")
finish() {
  local rc=$?
  if [[ ${OLMV1_KEEP_ENV:-} == 1 ]]; then
    log "environment kept: source $env_file"
  else
    "$here/local-down.sh" "$env_file" >&2 || true
  fi
  ((rc == 0)) || log "failed (logs in $OLMV1_ENV_DIR/logs)"
}
trap finish EXIT
# shellcheck disable=SC1090
source "$env_file"
work="$OLMV1_ENV_DIR/interop"
mkdir -p "$work"

"$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src" catalogd
# shellcheck disable=SC1091
source "$OLMV1_ENV_DIR/upstream/catalogd.env"
"$driver" publish "$work/plan.json"
"$driver" catalogs "$work/plan.json"

log "1. upstream catalogd -> olmv1 controller"
start_olmv1 controller --system-namespace olmv1-system --cache-dir "$work/olmv1-controller-cache" \
  --metrics-bind-address "127.0.0.1:$(free_port)" --health-probe-bind-address 127.0.0.1:0 --ca-file "$UPSTREAM_CA_CERT"
"$driver" real "$work/plan.json" --label olmv1

log "2. differences table: olmv1 controller"
"$driver" scenarios "$work/olmv1.json"
stop_olmv1 controller
log "2. differences table: olmv1 controller --install-identity controller, upstream's YAML"
start_olmv1 controller --system-namespace olmv1-system --cache-dir "$work/olmv1-controller-cache" \
  --metrics-addr "127.0.0.1:$(free_port)" --ca-file "$UPSTREAM_CA_CERT" --install-identity controller
"$driver" scenarios --without-service-account "$work/olmv1-controller-identity.json"
stop_olmv1 controller
log "2. differences table: upstream operator-controller, upstream's YAML"
"$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src" operator-controller
"$driver" scenarios --without-service-account "$work/upstream.json"
"$driver" catalogs --delete "$work/plan.json"

log "3. olmv1 catalogd -> upstream operator-controller"
"$here/upstream-up.sh" --stop "$env_file" catalogd
kubectl delete mutatingwebhookconfiguration catalogd-mutating-webhook-configuration >/dev/null
start_catalogd "$work/olmv1-catalogd-cache"
"$driver" real "$work/plan.json" --label upstream
"$here/upstream-up.sh" --stop "$env_file" operator-controller
stop_olmv1 catalogd

log "4. comparing"
"$driver" compare "$work/olmv1.json" "$work/upstream.json" --docs "$repo/docs/upstream.md" | tee "$work/table.txt"
log "4. comparing: olmv1 in upstream's model, like with like"
"$driver" compare "$work/olmv1-controller-identity.json" "$work/upstream.json" --docs "$repo/docs/upstream.md" |
  tee "$work/table-controller-identity.txt"
log "ok: both directions install and upgrade; every difference is listed in docs/upstream.md"
