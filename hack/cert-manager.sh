#!/usr/bin/env bash
# Runs cert-manager (controller, webhook, cainjector) on the local control plane, built from its Go
# module at CERT_MANAGER_VERSION (hack/versions.env):
#   1. has hack/build-tools.sh --node build the three binaries (our entry points over
#      cert-manager's root module, in hack/tools/cmd, built with the other Go tools), cached;
#   2. pushes each as an image without a base image (the static binary and /etc/passwd, user
#      1000) with `olmv1 image push` to $OLMV1_REGISTRY/cert-manager/<component>:<version>;
#      reproducible: the same binary gives the same digest;
#   3. applies cert-manager's CRDs (all of deploy/crds) and our manifests (hack/cert-manager/
#      cert-manager.yaml: namespace, ServiceAccounts, the chart's RBAC, the webhook's Service and
#      webhook configurations with the CA injected by cainjector, the Deployments with the chart's
#      args, tolerating the real node's taint and selecting it), images pinned by digest;
#   4. waits (unless --no-wait) until the three Deployments are Available, the webhook answers a
#      server-side dry run of an Issuer, and a self-signed Issuer's Certificate is Ready with its
#      Secret; then prints one summary line on stdout.
# Idempotent: a second run rebuilds nothing, pushes the same digests and re-applies unchanged
# objects (server-side apply).
#
# Usage: source ENV/env.sh; hack/cert-manager.sh [--no-wait] [--build-only]
#   --no-wait      apply and stop: on kwok's fake node the pods never run, so nothing would answer
#   --build-only   build the binaries and print their directory (no cluster needed)
# Environment: KUBECONFIG, OLMV1_REGISTRY (from env.sh); OLMV1_CERT_MANAGER_TIMEOUT (seconds for
# each wait, default 180); OLMV1_BIN (the olmv1 binary; default target/debug/olmv1, else
# target/release/olmv1, under $CARGO_TARGET_DIR or the repository); OLMV1_TOOLS_DIR as for
# hack/build-tools.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
source "$here/versions.env"
source "$here/phases.sh"
log() { echo "cert-manager: $*" >&2; }
die() { log "error: $*"; exit 1; }
started=$SECONDS

wait_for=1 build_only=0
for arg in "$@"; do
  case $arg in
    --no-wait) wait_for=0 ;;
    --build-only) build_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $arg (see --help)" ;;
  esac
done
timeout_s=${OLMV1_CERT_MANAGER_TIMEOUT:-180}
ns=cert-manager
components=(controller webhook cainjector)

# ---------------------------------------------------------------------------------------------
# 1. Binaries: hack/build-tools.sh builds them with the real node's parts (cached; a caller that
# comes while another builds waits for it).
((build_only)) || phase_begin "cert-manager: build"
build_log=$(mktemp "${TMPDIR:-/tmp}/cert-manager-build.XXXXXX")
bin=$(OLMV1_PHASE_LOG='' "$here/build-tools.sh" --node --only tools 2>"$build_log") ||
  { cat "$build_log" >&2; rm -f "$build_log"; die "hack/build-tools.sh failed"; }
build_result=cached
grep -q '^build-tools: built ' "$build_log" && build_result=built
grep -v '^go: downloading' "$build_log" >&2 || true
rm -f "$build_log"
if ((build_only)); then
  echo "$bin"
  exit 0
fi

phase_end "cert-manager: build" "$build_result"
phase_begin "cert-manager: images, apply, ready"
[[ -n "${KUBECONFIG:-}" && -n "${OLMV1_REGISTRY:-}" ]] ||
  die "KUBECONFIG and OLMV1_REGISTRY are not set: source the env.sh that hack/local-up.sh printed"
[[ -n "${OLMV1_TOOLS_BIN:-}" ]] && export PATH="$OLMV1_TOOLS_BIN:$PATH"
command -v kubectl >/dev/null || die "kubectl is not on PATH (OLMV1_TOOLS_BIN)"
target=${CARGO_TARGET_DIR:-$repo/target}
olmv1=${OLMV1_BIN:-}
if [[ -z $olmv1 ]]; then
  for b in "$target/debug/olmv1" "$target/release/olmv1"; do
    [[ -x $b ]] && { olmv1=$b; break; }
  done
fi
[[ -n $olmv1 && -x $olmv1 ]] || die "no olmv1 binary (cargo build, or set OLMV1_BIN)"

# ---------------------------------------------------------------------------------------------
# 2. Images: the binary and a passwd naming its user, nothing else.
declare -A image=()
rootfs=$(mktemp -d "${TMPDIR:-/tmp}/cert-manager-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
for c in "${components[@]}"; do
  dir="$rootfs/$c"
  install -D -m 0755 "$bin/cert-manager-$c" "$dir/usr/local/bin/cert-manager-$c"
  install -d "$dir/etc"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\ncert-manager:x:1000:1000:cert-manager:/nonexistent:/usr/sbin/nologin\n' >"$dir/etc/passwd"
  printf 'root:x:0:\ncert-manager:x:1000:\n' >"$dir/etc/group"
  chmod 0644 "$dir/etc/passwd" "$dir/etc/group"
  image[$c]=$("$olmv1" image push "$dir" "$OLMV1_REGISTRY/cert-manager/$c:$CERT_MANAGER_VERSION" \
    --entrypoint "/usr/local/bin/cert-manager-$c" --user 1000:1000 \
    --label "org.opencontainers.image.title=cert-manager-$c" \
    --label "org.opencontainers.image.version=$CERT_MANAGER_VERSION" \
    --label "org.opencontainers.image.source=https://github.com/cert-manager/cert-manager" \
    --label "org.opencontainers.image.base.name=scratch") || die "pushing the $c image failed"
  log "image ${image[$c]}"
done

# ---------------------------------------------------------------------------------------------
# 3. CRDs from the module, then our manifests.
command -v go >/dev/null || die "go is not installed (it finds cert-manager's module for its CRDs)"
moddir=$(cd "$here/tools" && go mod download -json github.com/cert-manager/cert-manager |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
apply() { kubectl apply --server-side --field-manager=olmv1-cert-manager --force-conflicts "$@" >/dev/null; }
apply -f "$moddir/deploy/crds/"
crds=()
for f in "$moddir"/deploy/crds/*.yaml; do
  name=$(basename "$f" .yaml)
  crds+=("crd/${name#*_}.${name%%_*}")
done
deadline=$((SECONDS + timeout_s))
# `kubectl wait` fails at once on a CRD whose status.conditions is still null: retried.
until kubectl wait --for=condition=Established --timeout=5s "${crds[@]}" >/dev/null 2>&1; do
  ((SECONDS < deadline)) || die "CRDs not Established after ${timeout_s}s: ${crds[*]}"
  sleep 0.5
done
manifest=$(sed -e "s|@CONTROLLER_IMAGE@|${image[controller]}|" -e "s|@WEBHOOK_IMAGE@|${image[webhook]}|" \
  -e "s|@CAINJECTOR_IMAGE@|${image[cainjector]}|" -e "s|@VERSION@|$CERT_MANAGER_VERSION|g" \
  "$here/cert-manager/cert-manager.yaml")
! grep -q '@[A-Z_]*@' <<<"$manifest" || die "cert-manager.yaml has a placeholder this script does not fill"
apply -f - <<<"$manifest"
log "applied ${#crds[@]} CRDs and $(grep -c '^kind:' <<<"$manifest") objects ($((SECONDS - started))s)"

if ((!wait_for)); then
  phase_end "cert-manager: images, apply, ready" ok "not waited for"
  echo "cert-manager $CERT_MANAGER_VERSION applied (not waited for): ${image[controller]} ${image[webhook]} ${image[cainjector]}"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# 4. Running: Available, the webhook answering, a Certificate issued.
step=$SECONDS
kubectl -n "$ns" wait --for=condition=Available --timeout="${timeout_s}s" \
  deployment/cert-manager deployment/cert-manager-webhook deployment/cert-manager-cainjector >/dev/null ||
  die "the Deployments are not Available after ${timeout_s}s: $(kubectl -n "$ns" get pods -o wide 2>&1)"
log "Deployments Available ($((SECONDS - step))s)"
check="$here/cert-manager/check.yaml"
step=$SECONDS
deadline=$((SECONDS + timeout_s))
# The webhook is called for every cert-manager object: once its CA is injected and its serving
# certificate made, a dry run passes through it.
until out=$(kubectl apply --server-side --dry-run=server -f "$check" 2>&1); do
  ((SECONDS < deadline)) || die "the webhook does not answer after ${timeout_s}s: $out"
  sleep 1
done
log "webhook answers ($((SECONDS - step))s)"
step=$SECONDS
apply -f "$check"
kubectl -n "$ns" wait --for=condition=Ready --timeout="${timeout_s}s" certificate/olmv1-selfsigned-check >/dev/null ||
  die "Certificate olmv1-selfsigned-check not Ready after ${timeout_s}s: $(kubectl -n "$ns" describe certificate olmv1-selfsigned-check 2>&1 | tail -n 20)"
crt=$(kubectl -n "$ns" get secret olmv1-selfsigned-check -o jsonpath='{.data.tls\.crt}') ||
  die "Certificate Ready but its Secret olmv1-selfsigned-check is missing"
[[ -n $crt ]] || die "Secret olmv1-selfsigned-check has no tls.crt"
log "Certificate issued ($((SECONDS - step))s)"
phase_end "cert-manager: images, apply, ready" ok
echo "cert-manager $CERT_MANAGER_VERSION running: controller, webhook, cainjector Available; webhook answers; Certificate $ns/olmv1-selfsigned-check Ready ($((SECONDS - started))s)"
