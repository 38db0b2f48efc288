#!/usr/bin/env bash
# Ratios of olmv1 to upstream OLM v1 (issue 15), measured in one run on one local control plane
# with upstream's CRDs, the same registry and the same catalogs, one component at a time.
# Not a test; the figures go to docs/benchmarks.md. Needs root (upstream's in-pod token path,
# resetting a process's peak RSS).
#
# Usage: UPSTREAM_BIN=DIR UPSTREAM_SRC=DIR hack/bench-vs-upstream.sh
#        (or hack/bench-vs-upstream.sh UPSTREAM_BIN UPSTREAM_SRC)
#   UPSTREAM_BIN  a directory holding upstream's `operator-controller` and `catalogd` binaries
#   UPSTREAM_SRC  a checkout of upstream at the same commit: its CRDs are read from it
#   OLMV1_BENCH_SAMPLES       samples of every figure (default 3): the table gives the median and
#                             the spread of each, and the load average of each sample
#   OLMV1_BENCH_IDLE_SECONDS  the idle window (default 600)
#   OLMV1_BENCH_OLMV1         an olmv1 binary to measure instead of this checkout's release build
#                             (e.g. an older build, for a before/after)
#   OLMV1_BENCH_PARTS         which parts to run (default "catalogd controller")
#   OLMV1_BENCH_SIDES         which sides to run (default "olmv1 upstream"; "olmv1" alone needs no
#                             upstream binaries, only UPSTREAM_SRC's CRDs: a before/after of olmv1)
#   OLMV1_BENCH_LEADER_ELECT  1: both controllers elect a leader on a Lease (`--leader-elect`, as
#                             deployed), so that the idle window counts the Lease renewals too
#
# Controller: olmv1 catalogd serves the load catalog (101 one-Deployment packages); each
# controller in turn, as a ServiceAccount bound to cluster-admin (so that the API server counts its
# requests under flow schema `service-accounts`, apart from the control plane's own):
#   one extension apply -> Installed=True (cold image, then warm after a delete), 100 extensions at
#   once -> all Installed=True (CPU seconds, peak RSS), then an idle window (CPU, API requests, RSS).
# Catalogd: each catalogd in turn serves certified-operators-v4.16 (time to Serving, peak RSS, RSS
#   while serving, /api/v1/all MiB/s and /api/v1/metas req/s with 4 clients), then all three shared
#   catalogs at once.
# Upstream runs with its default feature gates, plus APIV1MetasHandler in catalogd (off by default
# upstream; the metas measure needs it). Each sample runs both sides in turn (olmv1 then upstream,
# for catalogd then the controllers), so that a change in the machine's load falls on both. The
# API server's audit log records every request by a service account, which breaks each idle
# window's requests down by kind (watch, list, get... of which resource, with which selector).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=hack/bench-lib.sh
source "$here/bench-lib.sh"
log() { bench_log "$@"; }
die() { bench_die "$@"; }

sides=" ${OLMV1_BENCH_SIDES:-olmv1 upstream} "
if [[ $sides != *" upstream "* ]]; then export UPSTREAM_BINARIES=optional; fi
upstream_inputs "$@" # sets upstream_bin, upstream_src
idle=${OLMV1_BENCH_IDLE_SECONDS:-600}
samples=${OLMV1_BENCH_SAMPLES:-3}
parts=" ${OLMV1_BENCH_PARTS:-catalogd controller} "
elect=()
if [[ ${OLMV1_BENCH_LEADER_ELECT:-0} == 1 ]]; then elect=(--leader-elect); fi

"$here/install-deps.sh"
bench_build

env_file=$(OLMV1_SKIP_CRDS=1 OLMV1_AUDIT_SERVICE_ACCOUNT_READS=1 "$here/local-up.sh")
trap '"$here/local-down.sh" "$env_file" >&2 || true' EXIT
# shellcheck disable=SC1090
source "$env_file"
# The driver's harness (test/support) uses this control plane rather than starting its own.
export OLMV1_TEST_ENV=$env_file
work="$OLMV1_ENV_DIR/bench"
mkdir -p "$work"

# upstream-up.sh installs the CRDs, the system namespace and the PKI; catalogd is started later.
"$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src"
controller_identity "$work/controller.kubeconfig"

log "publishing the load catalog and the shared catalogs"
"$driver" bench-publish "$work/plan.json"
"$driver" bench-namespaces
load_catalog=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["load_catalog"])' "$work/plan.json")

# One sample: catalogd, each in turn (nothing else of OLM runs meanwhile), then the controllers,
# each in turn, with olmv1 catalogd serving the load catalog. Results in $1/.
sample() {
  local out=$1
  mkdir -p "$out"
  if [[ $parts == *" catalogd "* ]]; then sample_catalogd "$out"; fi
  if [[ $parts == *" controller "* ]]; then sample_controller "$out"; fi
  python3 - "$out" >"$out/results.json" <<'EOF'
import json, os, sys
w = sys.argv[1]
r = lambda f: json.load(open(f"{w}/{f}")) if os.path.exists(f"{w}/{f}") else {}
print(json.dumps({side: {"controller": r(f"{side}-controller.json"), "catalogd": r(f"{side}-catalogd.json")}
                  for side in ("olmv1", "upstream")}))
EOF
  # Caches are not kept between samples: each starts as cold as the first.
  rm -rf "${out:?}"/olmv1-*-cache* "$OLMV1_ENV_DIR/upstream/operator-controller-cache"
}

sample_catalogd() {
  local out=$1
  log "$(basename "$out"): catalogd: olmv1 (uptime: $(uptime))"
  start_catalogd "$out/olmv1-catalogd-cache"
  sleep 2
  "$driver" bench-catalogd "$work/plan.json" --pid "$(pid_of olmv1@catalogd)" "$out/olmv1-catalogd.json"
  stop_olmv1 catalogd
  [[ $sides == *" upstream "* ]] || return 0
  log "$(basename "$out"): catalogd: upstream (uptime: $(uptime))"
  UPSTREAM_CATALOGD_ARGS=--feature-gates=APIV1MetasHandler=true \
    "$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src" catalogd
  "$driver" bench-catalogd "$work/plan.json" --pid "$(pid_of catalogd@upstream)" \
    --ca "$OLMV1_ENV_DIR/upstream/pki/ca.crt" "$out/upstream-catalogd.json"
  "$here/upstream-up.sh" --stop "$env_file" catalogd
  kubectl delete mutatingwebhookconfiguration catalogd-mutating-webhook-configuration >/dev/null
}

sample_controller() {
  local out=$1
  start_catalogd "$out/olmv1-catalogd-cache-2"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata: {name: bench-load}
spec: {source: {type: Image, image: {ref: "$load_catalog"}}}
EOF
  kubectl wait --for=condition=Serving clustercatalog/bench-load --timeout=300s >/dev/null

  log "$(basename "$out"): controller: olmv1 (uptime: $(uptime))"
  KUBECONFIG="$work/controller.kubeconfig" start_olmv1 controller --system-namespace olmv1-system \
    --cache-dir "$out/olmv1-controller-cache" --metrics-bind-address "127.0.0.1:$(free_port)" \
    --health-probe-bind-address 127.0.0.1:0 "${elect[@]}"
  "$driver" bench-controller --pid "$(pid_of olmv1@controller)" --idle-seconds "$idle" \
    --audit-log "$OLMV1_ENV_DIR/logs/audit.log" "$out/olmv1-controller.json"
  "$driver" bench-clean
  stop_olmv1 controller

  if [[ $sides == *" upstream "* ]]; then
    log "$(basename "$out"): controller: upstream (uptime: $(uptime))"
    UPSTREAM_OPERATOR_CONTROLLER_ARGS="${elect[*]}" \
      "$here/upstream-up.sh" "$env_file" "$upstream_bin" "$upstream_src" operator-controller
    "$driver" bench-controller --pid "$(pid_of operator-controller@upstream)" --idle-seconds "$idle" \
      --audit-log "$OLMV1_ENV_DIR/logs/audit.log" "$out/upstream-controller.json"
    "$driver" bench-clean
    "$here/upstream-up.sh" --stop "$env_file" operator-controller
  fi
  kubectl delete clustercatalog bench-load --wait=true >/dev/null
  stop_olmv1 catalogd
}

results=()
for ((i = 1; i <= samples; i++)); do
  sample "$work/sample-$i"
  results+=("$work/sample-$i/results.json")
done

echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC'), olmv1 $profile build ($olmv1), $samples sample(s), idle window ${idle} s, on $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$driver" bench-table "${results[@]}"
