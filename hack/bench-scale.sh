#!/usr/bin/env bash
# olmv1 at scale (issue 14), on the local control plane with the kwok fake node; not a test, the
# figures go to docs/benchmarks.md. Needs root (resetting a process's peak RSS).
#
# Usage: hack/bench-scale.sh [controller|catalogd|all]   (default all; each part on its own
#        control plane)
#   OLMV1_BENCH_EXTENSIONS (default 1000), OLMV1_BENCH_CATALOGS (default 5),
#   OLMV1_BENCH_IDLE_SECONDS (default 1800), OLMV1_BENCH_COPIES (default 10),
#   OLMV1_BENCH_PROFILE (release, or debug), OLMV1_BENCH_OUT (where the JSON results and the
#   reports go; default .local/bench-scale/).
#
# controller: olmv1 catalogd (as the cluster admin) serves N one-Deployment packages pushed
#   with `olmv1 image push` into C catalogs; the controller runs as a ServiceAccount bound to
#   cluster-admin (its requests and audit entries apart from the control plane's).
#   1. install: all N ClusterExtensions applied at once -> all Installed=True; the controller's
#      CPU seconds and peak RSS (/proc), API requests per reconcile (its metric
#      olmv1_clusterextension_reconcile_api_requests, and the API server's count).
#   2. idle: 60 s after, a window of OLMV1_BENCH_IDLE_SECONDS: CPU, RSS every 30 s (first, last,
#      max, least-squares slope), reconciles and API requests.
#   3. restart: the controller stopped and started again: time until every extension is
#      re-verified (its installed_bundle metric has all N), then 60 s more; the writes in the API
#      server's audit log by the controller and the installers it acts as (leases and events left
#      out), and the objects whose resourceVersion changed.
# catalogd: the three shared catalogs plus one generated from the largest with
#   OLMV1_BENCH_COPIES copies of each package (hack/generate-catalog.sh), applied at once: time to
#   Serving, peak RSS, RSS while serving.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=hack/bench-lib.sh
source "$here/bench-lib.sh"

part=${1:-all}
case $part in
  controller | catalogd) ;;
  all)
    "$0" controller
    exec "$0" catalogd
    ;;
  *) bench_die "usage: hack/bench-scale.sh [controller|catalogd|all]" ;;
esac
extensions=${OLMV1_BENCH_EXTENSIONS:-1000}
catalogs=${OLMV1_BENCH_CATALOGS:-5}
idle=${OLMV1_BENCH_IDLE_SECONDS:-1800}
copies=${OLMV1_BENCH_COPIES:-10}
shared=$repo/../shared/catalogs
[[ -d $shared ]] || bench_die "the shared catalogs are missing: $shared"

"$here/install-deps.sh"
bench_build

env_file=$(OLMV1_NODE_PODS=$((extensions + 100)) "$here/local-up.sh")
trap '"$here/local-down.sh" "$env_file" >&2 || true' EXIT
# shellcheck disable=SC1090
source "$env_file"
# The driver's harness (test/support) uses this control plane rather than starting its own.
export OLMV1_TEST_ENV=$env_file
work="$OLMV1_ENV_DIR/bench"
out=${OLMV1_BENCH_OUT:-$repo/.local/bench-scale}
mkdir -p "$work" "$out"

if [[ $part == catalogd ]]; then
  largest=$(du -s "$shared"/*/ | sort -n | tail -1 | cut -f2)
  largest=${largest%/}
  generated="$work/$(basename "$largest")-x$copies"
  bench_log "generating $generated ($copies copies of each package of $(basename "$largest"))"
  "$here/generate-catalog.sh" "$largest" "$copies" "$generated"
  bench_log "pushing the catalogs ($(du -sh "$generated" | cut -f1) generated)"
  "$driver" scale-publish-catalogs "$work/catalogs.json" "$shared"/*/ "$generated"
  start_catalogd "$work/catalogd-cache"
  bench_log "catalogd: all catalogs at once ($(load_note))"
  "$driver" scale-catalogd "$work/catalogs.json" --pid "$(pid_of olmv1@catalogd)" "$out/catalogd.json"
  stop_olmv1 catalogd
  rm -rf "$generated"
else
  controller_identity "$work/controller.kubeconfig"
  bench_log "publishing $extensions packages in $catalogs catalogs"
  "$driver" scale-publish --extensions "$extensions" --catalogs "$catalogs" "$work/plan.json"
  "$driver" scale-namespaces "$work/plan.json"
  start_catalogd "$work/catalogd-cache"

  metrics_port=$(free_port)
  metrics="http://127.0.0.1:$metrics_port/metrics"
  start_controller() {
    KUBECONFIG="$work/controller.kubeconfig" start_olmv1 controller --system-namespace olmv1-system \
      --cache-dir "$work/controller-cache" --metrics-bind-address "127.0.0.1:$metrics_port" \
      --health-probe-bind-address 127.0.0.1:0
  }
  start_controller
  bench_log "install: $extensions extensions ($(load_note))"
  "$driver" scale-install "$work/plan.json" --pid "$(pid_of olmv1@controller)" --metrics "$metrics" \
    "$out/install.json"
  bench_log "idle: ${idle} s ($(load_note))"
  "$driver" scale-idle --pid "$(pid_of olmv1@controller)" --metrics "$metrics" --seconds "$idle" \
    "$out/idle.json"

  bench_log "restart ($(load_note))"
  "$driver" scale-snapshot "$work/before-restart.json"
  stop_olmv1 controller
  audit_from=$(stat -c %s "$OLMV1_ENV_DIR/logs/audit.log")
  started=$(date +%s.%N)
  start_controller
  "$driver" scale-restart --pid "$(pid_of olmv1@controller)" --metrics "$metrics" --started "$started" \
    --audit-log "$OLMV1_ENV_DIR/logs/audit.log" --audit-from "$audit_from" \
    --before "$work/before-restart.json" --expected "$extensions" "$out/restart.json"
  stop_olmv1 controller
  stop_olmv1 catalogd
fi

echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC'), olmv1 $profile build, on $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee -a "$out/report-$part.md"
"$driver" scale-report "$out" | tee -a "$out/report-$part.md"
