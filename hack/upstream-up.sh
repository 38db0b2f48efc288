#!/usr/bin/env bash
# Starts upstream OLM v1 (`catalogd`, `operator-controller`: binaries the caller provides; this
# repository does not build them) as plain processes against a local control plane started by hack/local-up.sh, with what they need:
#   - their CRDs from the same source tree (ClusterCatalog and the experimental ClusterExtension,
#     the flavour with spec.config that olmv1's own CRD matches), Established;
#   - the system namespace `olmv1-system` and a ServiceAccount per component, whose token is placed
#     at the in-pod path they read it from (/var/run/secrets/kubernetes.io/serviceaccount/token) in
#     a private mount namespace: a tmpfs over /run seen by that process only (needs root);
#   - a CA and a serving certificate for 127.0.0.1: catalogd serves catalogs and its mutating
#     webhook over TLS with it, operator-controller trusts the CA (--catalogd-cas-dir), and the
#     webhook is registered with the API server so ClusterCatalogs get their name label;
#   - a containers-registries.conf marking the local registry insecure (plain HTTP).
# Every flag is explained in docs/upstream.md.
#
# Usage: hack/upstream-up.sh ENV_FILE UPSTREAM_BIN UPSTREAM_SRC [catalogd] [operator-controller]
#        hack/upstream-up.sh --stop ENV_FILE [catalogd] [operator-controller]
# UPSTREAM_CATALOGD_ARGS / UPSTREAM_OPERATOR_CONTROLLER_ARGS: extra flags (e.g. --feature-gates=...).
# ENV_FILE is hack/local-up.sh's; UPSTREAM_BIN the directory of both binaries; UPSTREAM_SRC a
# checkout of upstream at their commit (its CRDs). Pid files go to the
# environment's pids/ (hack/local-down.sh stops them with the rest), logs to its logs/, and
# $OLMV1_ENV_DIR/upstream/env.sh gets UPSTREAM_CATALOGD_URL and UPSTREAM_CA_CERT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "upstream-up: $*" >&2; }
die() { log "error: $*"; exit 1; }

stop=0
if [[ ${1:-} == --stop ]]; then stop=1; shift; fi
env_file=${1:?usage: hack/upstream-up.sh ENV_FILE UPSTREAM_BIN UPSTREAM_SRC [catalogd] [operator-controller]}
shift
# shellcheck disable=SC1090
source "$env_file"
dir=$OLMV1_ENV_DIR
pids="$dir/pids" logs="$dir/logs" state="$dir/upstream"

stop_component() { # NAME: SIGTERM, then wait for the process to exit
  local pid_file="$pids/$1@upstream.pid" pid
  [[ -f "$pid_file" ]] || return 0
  pid=$(cat "$pid_file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pid_file"
  log "stopped upstream $1"
}
if ((stop)); then
  for c in "$@"; do stop_component "$c"; done
  exit 0
fi

bin=${1:?UPSTREAM_BIN}
src=${2:?UPSTREAM_SRC}
shift 2
((EUID == 0)) || die "starting upstream needs root: it reads its token from a fixed in-pod path, placed in a private mount namespace"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"
timeout_s=${OLMV1_START_TIMEOUT:-90}
mkdir -p "$state/pki" "$state/cas"
namespace=olmv1-system

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ossl() { openssl "$@" >/dev/null 2>&1 || die "openssl $1 failed"; }

# CRDs from the same source as the binaries.
crds=(
  "$src/helm/olmv1/base/catalogd/crd/experimental/olm.operatorframework.io_clustercatalogs.yaml"
  "$src/helm/olmv1/base/operator-controller/crd/experimental/olm.operatorframework.io_clusterextensions.yaml"
  "$src/helm/olmv1/base/operator-controller/crd/experimental/olm.operatorframework.io_clusterobjectsets.yaml"
)
for f in "${crds[@]}"; do
  [[ -f $f ]] || die "$f is missing: is $src an operator-controller checkout?"
  kubectl apply --server-side --force-conflicts -f "$f" >/dev/null
done
# Retried: `kubectl wait` fails at once on a CRD whose status.conditions is still null.
deadline=$((SECONDS + timeout_s))
until kubectl wait --for=condition=Established --timeout=5s \
  crd/clusterextensions.olm.operatorframework.io crd/clustercatalogs.olm.operatorframework.io >/dev/null 2>&1; do
  ((SECONDS < deadline)) || die "upstream's CRDs are not Established after ${timeout_s}s"
  sleep 0.2
done

# The system namespace and a ServiceAccount per component, bound to cluster-admin (upstream's
# operator-controller installs with its own identity, which its chart makes that broad). Each
# process acts as its ServiceAccount: the API server counts their requests apart from the control
# plane's own (flow schema `service-accounts`), as hack/bench-vs-upstream.sh measures them.
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
for sa in catalogd operator-controller; do
  kubectl -n "$namespace" create serviceaccount "$sa" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create clusterrolebinding "olmv1-upstream-$sa" --clusterrole=cluster-admin \
    --serviceaccount="$namespace:$sa" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
done

# PKI: one CA; a serving certificate for 127.0.0.1/localhost.
if [[ ! -f "$state/pki/tls.crt" ]]; then
  ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$state/pki/ca.key" -out "$state/pki/ca.crt" \
    -subj "/CN=olmv1-upstream-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$state/pki/serving.ext"
  ossl req -newkey rsa:2048 -nodes -keyout "$state/pki/tls.key" -out "$state/pki/tls.csr" -subj "/CN=catalogd"
  ossl x509 -req -in "$state/pki/tls.csr" -CA "$state/pki/ca.crt" -CAkey "$state/pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$state/pki/serving.ext" -out "$state/pki/tls.crt"
  cp "$state/pki/ca.crt" "$state/cas/ca.crt"
fi
cat >"$state/registries.conf" <<EOF
[[registry]]
location = "$OLMV1_REGISTRY"
insecure = true
EOF

# run_in_pod_ns NAME SA BIN ARGS...: starts BIN as if in a pod of ServiceAccount SA.
run_in_pod_ns() {
  local name=$1 sa=$2
  shift 2
  kubectl -n "$namespace" create token "$sa" --duration=48h >"$state/$sa.token"
  cat >"$state/$sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$OLMV1_API_SERVER", certificate-authority: "$OLMV1_CA_CERT"}}]
users: [{name: $sa, user: {token: "$(cat "$state/$sa.token")"}}]
contexts: [{name: local, context: {cluster: local, user: $sa}}]
current-context: local
EOF
  KUBECONFIG="$state/$sa.kubeconfig" CONTAINERS_REGISTRIES_CONF="$state/registries.conf" \
    unshare --mount --propagation private sh -c '
      set -e
      mount -t tmpfs -o size=1m,mode=0755 tmpfs /run
      d=/run/secrets/kubernetes.io/serviceaccount
      mkdir -p "$d"
      cp "$1" "$d/token"
      printf %s "$2" >"$d/namespace"
      cp "$3" "$d/ca.crt"
      shift 3
      exec "$@"' sh "$state/$sa.token" "$namespace" "$OLMV1_CA_CERT" "$@" \
    >"$logs/upstream-$name.log" 2>&1 </dev/null &
  echo $! >"$pids/$name@upstream.pid"
}

wait_http() { # NAME URL: until URL answers, failing early if the process died
  local name=$1 url=$2 deadline=$((SECONDS + timeout_s))
  until curl -fsS --cacert "$state/pki/ca.crt" "$url" >/dev/null 2>&1; do
    kill -0 "$(cat "$pids/$name@upstream.pid")" 2>/dev/null || {
      tail -n 20 "$logs/upstream-$name.log" >&2
      die "upstream $name exited (log: $logs/upstream-$name.log)"
    }
    ((SECONDS < deadline)) || die "upstream $name: no answer from $url after ${timeout_s}s (log: $logs/upstream-$name.log)"
    sleep 0.3
  done
}

start_catalogd() {
  stop_component catalogd
  local catalogs_port probe_port metrics_port webhook_port
  catalogs_port=$(free_port) probe_port=$(free_port) metrics_port=$(free_port) webhook_port=$(free_port)
  run_in_pod_ns catalogd catalogd "$bin/catalogd" \
    --system-namespace="$namespace" \
    --catalogs-server-addr="127.0.0.1:$catalogs_port" \
    --external-address="127.0.0.1:$catalogs_port" \
    --cache-dir="$state/catalogd-cache" \
    --tls-cert="$state/pki/tls.crt" --tls-key="$state/pki/tls.key" \
    --metrics-bind-address="127.0.0.1:$metrics_port" \
    --health-probe-bind-address="127.0.0.1:$probe_port" \
    --webhook-server-port="$webhook_port" \
    --pull-cas-dir="$state/cas" ${UPSTREAM_CATALOGD_ARGS:-}
  wait_http catalogd "http://127.0.0.1:$probe_port/readyz"
  # The name-label webhook, as upstream's chart registers it, but at the process's address.
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: catalogd-mutating-webhook-configuration
webhooks:
  - name: inject-metadata-name.olm.operatorframework.io
    admissionReviewVersions: [v1]
    clientConfig:
      url: https://127.0.0.1:$webhook_port/mutate-olm-operatorframework-io-v1-clustercatalog
      caBundle: $(base64 -w0 <"$state/pki/ca.crt")
    failurePolicy: Fail
    rules:
      - apiGroups: [olm.operatorframework.io]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [clustercatalogs]
    sideEffects: None
    timeoutSeconds: 10
    matchConditions:
      - name: MissingOrIncorrectMetadataNameLabel
        expression: "'name' in object.metadata && (!has(object.metadata.labels) || !('olm.operatorframework.io/metadata.name' in object.metadata.labels) || object.metadata.labels['olm.operatorframework.io/metadata.name'] != object.metadata.name)"
EOF
  {
    echo "export UPSTREAM_CATALOGD_URL='https://127.0.0.1:$catalogs_port'"
    echo "export UPSTREAM_CATALOGD_METRICS='https://127.0.0.1:$metrics_port/metrics'"
    echo "export UPSTREAM_CA_CERT='$state/pki/ca.crt'"
  } >"$state/catalogd.env"
  log "upstream catalogd serving on https://127.0.0.1:$catalogs_port (log: $logs/upstream-catalogd.log)"
}

start_operator_controller() {
  stop_component operator-controller
  local probe_port
  probe_port=$(free_port)
  run_in_pod_ns operator-controller operator-controller "$bin/operator-controller" \
    --system-namespace="$namespace" \
    --cache-path="$state/operator-controller-cache" \
    --catalogd-cas-dir="$state/cas" \
    --pull-cas-dir="$state/cas" \
    --health-probe-bind-address="127.0.0.1:$probe_port" \
    --pprof-bind-address=0 ${UPSTREAM_OPERATOR_CONTROLLER_ARGS:-}
  wait_http operator-controller "http://127.0.0.1:$probe_port/readyz"
  log "upstream operator-controller running (log: $logs/upstream-operator-controller.log)"
}

for c in "$@"; do
  case $c in
    catalogd) start_catalogd ;;
    operator-controller) start_operator_controller ;;
    *) die "unknown component $c (catalogd, operator-controller)" ;;
  esac
done
