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
#      as it ships (installer ServiceAccounts, dependencies checked), again by olmv1 controller in
#      upstream's model (`interop controller-args olmv1-upstream-model`: --install-identity
#      controller --dependencies refuse --operator-conditions off) with upstream v1.11's YAML (no
#      serviceAccount), then by
#      upstream operator-controller with that YAML, against the same catalogs;
#   3. olmv1 catalogd serves; upstream operator-controller installs and upgrades the real operator;
#   4. upstream's outcomes become the records the CI test compares with
#      (test/interop/records/upstream.json, with the upstream commit and the date: commit it), and
#      both olmv1 runs are compared with them field by field, printing the CI test's table: the
#      command fails on any difference that docs/upstream.md does not list with its reason.
# OLMV1_KEEP_ENV=1 leaves the environment running at the end (its env file is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=hack/bench-lib.sh
source "$here/bench-lib.sh" # start_olmv1, stop_olmv1, start_catalogd, free_port
log() { echo "interop: $*" >&2; }
die() { log "error: $*"; exit 1; }

upstream_inputs "$@" # sets upstream_bin, upstream_src
# The records name the commit the binaries came from: the checkout's (at the same commit, as
# UPSTREAM_SRC must be), or UPSTREAM_SRC_COMMIT when the checkout is not a git work tree.
upstream_commit=$(git -C "$upstream_src" rev-parse HEAD 2>/dev/null) ||
  upstream_commit=${UPSTREAM_SRC_COMMIT:?UPSTREAM_SRC is not a git work tree: set UPSTREAM_SRC_COMMIT to the commit of the binaries}

"$here/install-deps.sh"
log "building olmv1 and the interop driver"
(cd "$repo" && cargo build -q --bin olmv1 --example interop)
target=${CARGO_TARGET_DIR:-$repo/target}
olmv1="$target/debug/olmv1"
driver="$target/debug/examples/interop"

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
# The driver's test harness (test/support) uses this environment rather than starting its own.
export OLMV1_TEST_ENV=$env_file
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

log "2. differences table: olmv1 controller as it ships"
"$driver" scenarios --run olmv1 "$work/olmv1.json"
stop_olmv1 controller
log "2. differences table: olmv1 controller in upstream's model, upstream's YAML"
read -ra upstream_model <<<"$("$driver" controller-args olmv1-upstream-model)"
start_olmv1 controller --system-namespace olmv1-system --cache-dir "$work/olmv1-controller-cache" \
  --metrics-bind-address "127.0.0.1:$(free_port)" --health-probe-bind-address 127.0.0.1:0 \
  --ca-file "$UPSTREAM_CA_CERT" "${upstream_model[@]}"
"$driver" scenarios --run olmv1-upstream-model "$work/olmv1-upstream-model.json"
stop_olmv1 controller
log "2. differences table: upstream operator-controller, upstream's YAML"
"$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src" operator-controller
"$driver" scenarios --run upstream "$work/upstream.json"
"$driver" catalogs --delete "$work/plan.json"

log "3. olmv1 catalogd -> upstream operator-controller"
"$here/upstream-up.sh" --stop "$env_file" catalogd
kubectl delete mutatingwebhookconfiguration catalogd-mutating-webhook-configuration >/dev/null
start_catalogd "$work/olmv1-catalogd-cache"
"$driver" real "$work/plan.json" --label upstream
"$here/upstream-up.sh" --stop "$env_file" operator-controller
stop_olmv1 catalogd

log "4. upstream's records: test/interop/records/upstream.json (upstream $upstream_commit)"
"$driver" record "$work/upstream.json" --upstream-commit "$upstream_commit" \
  --out "$repo/test/interop/records/upstream.json"
log "4. comparing: olmv1 as it ships"
"$driver" compare "$work/olmv1.json" --run olmv1 | tee "$work/table-olmv1.txt"
log "4. comparing: olmv1 in upstream's model, like with like"
"$driver" compare "$work/olmv1-upstream-model.json" --run olmv1-upstream-model |
  tee "$work/table-olmv1-upstream-model.txt"
log "ok: both directions install and upgrade; every difference is listed in docs/upstream.md; records refreshed (commit them)"
