#!/usr/bin/env bash
# End-to-end test of the installed form of olmv1, with Helm and with the install manifest
# (hack/test.sh runs it after the cargo tests):
#   1. builds the image twice (hack/image.sh) and checks that the digest is the same (reproducible);
#   2. publishes the chart with that image to the local registry as an OCI artifact
#      (hack/chart.sh push) and installs it with the real helm (`helm install olmv1 oci://...`);
#      the Deployments become Available on the kwok node; the ServiceMonitors exist (the cluster
#      serves prometheus-operator's CRDs); every variant of the install manifest (hack/manifest.sh)
#      is accepted by a server-side dry run;
#   3. runs both components from the image under podman (rootful, runc) the way a kubelet would run
#      the Deployments' pods: the Deployment's args, read-only root file system, the image's non-root
#      user, an emptyDir-like cache, the installed ServiceAccount's token and the cluster CA
#      at /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT; catalogd
#      serves TLS with the certificate of the Secret catalogd-service-cert, the controller serves
#      /metrics with that of olmv1-controller-cert and trusts the CA of Secret olmv1-ca (written
#      here in cert-manager's layout: cert-manager itself does not run on the local control plane);
#      /metrics of both answers 401 without a token and 200 to a ServiceAccount bound to
#      olmv1-metrics-reader, the probes answer without one;
#   4. installs the demo operator (hack/demo/) through them and waits for Installed=True;
#   5. `helm upgrade` to the next chart version, published with a second image: the CRDs applied
#      first (`helm pull`, `helm show crds` of the file), both Deployments rolled, the components restarted from them; the
#      installed extension is untouched (same bundle, its Deployment's UID and generation) and
#      reconciled by the new controller;
#   6. `helm upgrade --set` of nodeSelector and tolerations: both pods carry them and run on the
#      kwok node, labelled and tainted for this; a value of the wrong type is refused by the
#      chart's schema and changes nothing;
#   7. `helm uninstall`: olmv1's Deployments, RBAC and Services are gone; the CRDs, the
#      ClusterExtension, its objects and the namespace with the revision records stay;
#   8. installs olmv1 again from the install manifest (`kubectl apply --server-side`), then upgrades
#      it by applying the next image's manifest: the new controller takes the extension over
#      without reinstalling it and reconciles a spec change.
# Fails (never skips) when podman, helm or any other part is missing. Stops everything it started.
#
# Usage: hack/deploy-test.sh          OLMV1_KEEP_ENV=1 keeps the environment's logs on success;
#        OLMV1_IMAGE_BINARY=PATH      the image carries that olmv1 binary (hack/test.sh: the
#                                     tests' debug build) instead of the release build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
source "$here/versions.env"
log() { echo "deploy-test: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
started=$SECONDS

command -v podman >/dev/null || die "podman is not installed (hack/install-deps.sh installs it)"
command -v runc >/dev/null || die "runc is not installed (hack/install-deps.sh installs it)"
sudo=()
((EUID == 0)) || sudo=(sudo -n)

export OLMV1_ENV_DIR
OLMV1_ENV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-deploy-test.XXXXXX")
store="$OLMV1_ENV_DIR/podman"
# A private podman store (vfs: no overlay mounts to clean up), runc (crun refuses hybrid cgroup
# hierarchies), cgroupfs (no systemd needed).
podman_() {
  "${sudo[@]}" podman --root "$store/root" --runroot "$store/run" --tmpdir "$store/tmp" \
    --storage-driver vfs --cgroup-manager cgroupfs --runtime runc --events-backend file "$@"
}
# `podman logs -f` does not end when its container is removed: stop this run's followers.
stop_log_followers() { pkill -f -- "--root $store/root .* logs -f " || true; }
finish() {
  local rc=$?
  podman_ rm -f -t 5 olmv1-controller olmv1-catalogd >/dev/null 2>&1 || true
  stop_log_followers
  if ((rc != 0)); then
    for c in controller catalogd; do
      [[ -f "$OLMV1_ENV_DIR/logs/olmv1-$c.log" ]] || continue
      echo "----- last lines of olmv1 $c (container)" >&2
      tail -n 30 "$OLMV1_ENV_DIR/logs/olmv1-$c.log" >&2
    done
  fi
  podman_ rmi -af >/dev/null 2>&1 || true
  "${sudo[@]}" rm -rf "$store"
  if ((rc == 0)) && [[ "${OLMV1_KEEP_ENV:-}" != 1 ]]; then
    "$here/local-down.sh" "$OLMV1_ENV_DIR" || rc=1
  else
    "$here/local-down.sh" --keep "$OLMV1_ENV_DIR" || true
    log "environment logs kept in $OLMV1_ENV_DIR/logs"
  fi
  exit "$rc"
}
trap finish EXIT

# `kubectl wait` fails at once on a CRD whose status.conditions is still null: retried for 60 s.
wait_established() {
  local deadline=$((SECONDS + 60))
  until kubectl wait --for=condition=Established --timeout=5s "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "not Established after 60s: $*"
    sleep 0.2
  done
}

"$here/local-up.sh" >/dev/null
# shellcheck disable=SC1091
source "$OLMV1_ENV_DIR/env.sh"
api_port=${OLMV1_API_SERVER##*:}
ns=olmv1-system
# helm (hack/build-tools.sh links it beside kubectl, first on PATH) keeps its cache, registry
# logins and release-less state in the environment, not in the user's home.
command -v helm >/dev/null || die "helm is not installed (hack/install-deps.sh builds it)"
export HELM_CACHE_HOME="$OLMV1_ENV_DIR/helm/cache" HELM_CONFIG_HOME="$OLMV1_ENV_DIR/helm/config"
export HELM_DATA_HOME="$OLMV1_ENV_DIR/helm/data"

# 1. The image, built twice from the same inputs.
step=$SECONDS
image=$("$here/image.sh" "$OLMV1_REGISTRY/olmv1:e2e")
again=$("$here/image.sh" "$OLMV1_REGISTRY/olmv1:e2e-again" 2>/dev/null)
[[ ${image#*@} == "${again#*@}" ]] || die "the image is not reproducible: $image then $again"
log "image $image, same digest when rebuilt ($((SECONDS - step))s)"
olmv1=${OLMV1_IMAGE_BINARY:-$repo/target/release/olmv1}

# 2. The chart, published with that image and installed with helm. The chart's Issuers and
# Certificates need cert-manager's CRDs; its ServiceMonitors (created because the cluster serves
# their kind) and the OpenShift variant's PrometheusRule need prometheus-operator's.
step=$SECONDS
cm_dir=$(cd "$OLMV1_ENV_DIR" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
for crd in certificates issuers; do
  kubectl apply --server-side -f "$cm_dir/deploy/crds/cert-manager.io_$crd.yaml" >/dev/null
done
wait_established crd/certificates.cert-manager.io crd/issuers.cert-manager.io
po_dir=$(cd "$OLMV1_ENV_DIR" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
for crd in servicemonitors prometheusrules; do
  kubectl apply --server-side -f "$po_dir/example/prometheus-operator-crd/monitoring.coreos.com_$crd.yaml" >/dev/null
done
wait_established crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com
manifest="$OLMV1_ENV_DIR/olmv1.yaml"
"$here/manifest.sh" "$image" default >"$manifest"
"$here/manifest.sh" "$image" openshift >"$OLMV1_ENV_DIR/olmv1-openshift.yaml"
"$here/manifest.sh" "$image" controller-identity >"$OLMV1_ENV_DIR/olmv1-controller-identity.yaml"
grep -q "image: $image\$" "$manifest" || die "the manifest does not pin $image"
! grep -E '^\s+image: ' "$manifest" | grep -v -q "@sha256:" || die "the manifest has an image not pinned by digest"
# A first install's dry run: the namespace does not exist yet, so the only refusals allowed are of
# namespaced objects for that reason; every variant is dry-run again once it exists.
if ! kubectl apply --server-side --dry-run=server -f "$manifest" >"$OLMV1_ENV_DIR/dry-run.txt" 2>&1; then
  ! grep '^Error' "$OLMV1_ENV_DIR/dry-run.txt" | grep -v -q "namespaces \"$ns\" not found" ||
    die "server-side dry run refused: $(cat "$OLMV1_ENV_DIR/dry-run.txt")"
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)
chart=$("$here/chart.sh" push "oci://$OLMV1_REGISTRY/charts" --image "$image" --plain-http)
[[ $chart == "oci://$OLMV1_REGISTRY/charts/olmv1:$version@sha256:"* ]] || die "hack/chart.sh pushed $chart"
chart_ref="oci://$OLMV1_REGISTRY/charts/olmv1"
# release FIELD: a field of release olmv1 as `helm list` prints it (status, chart, revision).
release() { helm list -o json | python3 -c 'import json,sys; print(*[r[sys.argv[1]] for r in json.load(sys.stdin) if r["name"] == "olmv1"])' "$1"; }
# The published chart carries the image: no image value is given.
helm install olmv1 "$chart_ref" --version "$version" --plain-http >"$OLMV1_ENV_DIR/helm-install.txt" 2>&1 ||
  die "helm install failed: $(cat "$OLMV1_ENV_DIR/helm-install.txt")"
grep -q "never deletes the" "$OLMV1_ENV_DIR/helm-install.txt" || die "helm install printed no NOTES: $(cat "$OLMV1_ENV_DIR/helm-install.txt")"
[[ "$(release status) $(release chart)" == "deployed olmv1-$version" ]] ||
  die "release olmv1 is not deployed from chart $version: $(helm list)"
[[ $(kubectl -n "$ns" get deployment olmv1-controller -o jsonpath='{.spec.template.spec.containers[0].image}') == "$image" ]] ||
  die "the helm-installed controller does not run $image"
kubectl -n "$ns" wait --for=condition=Available --timeout=120s deployment/olmv1-controller deployment/olmv1-catalogd >/dev/null ||
  die "the helm-installed Deployments did not become Available"
# metrics.serviceMonitor.enabled=auto: the cluster serves ServiceMonitors, so they were created.
kubectl -n "$ns" get servicemonitor olmv1-controller olmv1-catalogd >/dev/null ||
  die "helm install created no ServiceMonitors although the cluster serves their kind"
log "chart $chart installed with helm; Deployments Available on the kwok node ($((SECONDS - step))s)"


# What cert-manager would write: Secret olmv1-ca (the CA), catalogd-service-cert and
# olmv1-controller-cert (the serving certificates of the two Services, here also for 127.0.0.1:
# the containers use host networking).
pki="$OLMV1_ENV_DIR/olmv1-pki"
mkdir -p "$pki"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=olmv1-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=catalogd-service \
  -keyout "$pki/tls.key" -out "$pki/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:catalogd-service.olmv1-system.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$pki/ext"
openssl x509 -req -in "$pki/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 1 \
  -extfile "$pki/ext" -out "$pki/tls.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=olmv1-controller-service \
  -keyout "$pki/controller.key" -out "$pki/controller.csr" 2>/dev/null
printf 'subjectAltName=DNS:olmv1-controller-service.olmv1-system.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$pki/controller.ext"
openssl x509 -req -in "$pki/controller.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 1 \
  -extfile "$pki/controller.ext" -out "$pki/controller.crt" 2>/dev/null
kubectl -n "$ns" create secret generic olmv1-ca --type=kubernetes.io/tls \
  --from-file=ca.crt="$pki/ca.crt" --from-file=tls.crt="$pki/ca.crt" --from-file=tls.key="$pki/ca.key" >/dev/null
kubectl -n "$ns" create secret generic catalogd-service-cert --type=kubernetes.io/tls \
  --from-file=ca.crt="$pki/ca.crt" --from-file=tls.crt="$pki/tls.crt" --from-file=tls.key="$pki/tls.key" >/dev/null
kubectl -n "$ns" create secret generic olmv1-controller-cert --type=kubernetes.io/tls \
  --from-file=ca.crt="$pki/ca.crt" --from-file=tls.crt="$pki/controller.crt" --from-file=tls.key="$pki/controller.key" >/dev/null

# 3. The components under podman, as the kubelet would start the helm-installed Deployments' pods.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
catalogd_port=$(free_port) catalogd_metrics=$(free_port) controller_metrics=$(free_port)
catalogd_probes=$(free_port) controller_probes=$(free_port)
# pod_args DEPLOYMENT METRICS PROBES: the container's args from the applied Deployment, one per
# line, with the listen addresses moved to free loopback ports (host networking on a shared machine).
pod_args() {
  kubectl -n "$ns" get deployment "$1" -o jsonpath='{.spec.template.spec.containers[0].args}' |
    python3 -c '
import json, sys
port, metrics, probes = sys.argv[1], sys.argv[2], sys.argv[3]
for arg in json.load(sys.stdin):
    key = arg.split("=", 1)[0]
    arg = {"--catalogs-server-addr": f"{key}=127.0.0.1:{port}", "--external-address": f"{key}=127.0.0.1:{port}",
           "--metrics-bind-address": f"{key}=127.0.0.1:{metrics}",
           "--health-probe-bind-address": f"{key}=127.0.0.1:{probes}"}.get(key, arg)
    print(arg)' "$catalogd_port" "$2" "$3"
}
# secret_volume NAME DIR KEY...: the Secret's keys as files, read back from the API server.
secret_volume() {
  local name=$1 dir=$2 key
  shift 2
  mkdir -p "$dir"
  for key in "$@"; do
    kubectl -n "$ns" get secret "$name" -o "jsonpath={.data.${key//./\\.}}" | base64 -d >"$dir/$key"
  done
  chmod 0755 "$dir" && chmod 0644 "$dir"/*
}
# sa_volume SERVICEACCOUNT DIR: a token of the installed ServiceAccount (TokenRequest), the
# cluster CA and the namespace, as the kubelet projects them.
sa_volume() {
  mkdir -p "$2"
  kubectl -n "$ns" create token "$1" --duration=2h >"$2/token"
  cp "$OLMV1_CA_CERT" "$2/ca.crt"
  printf '%s' "$ns" >"$2/namespace"
  chmod 0755 "$2" && chmod 0644 "$2"/*
}
secret_volume catalogd-service-cert "$OLMV1_ENV_DIR/volumes/serving-cert" tls.crt tls.key
secret_volume olmv1-ca "$OLMV1_ENV_DIR/volumes/catalogd-ca" ca.crt
secret_volume olmv1-controller-cert "$OLMV1_ENV_DIR/volumes/metrics-cert" tls.crt tls.key

# run_component NAME SA CACHE_DIR IMAGE MOUNT...: one container; logs in logs/olmv1-NAME.log.
run_component() {
  local name=$1 sa=$2 cache=$3 ref=$4 deployment args
  shift 4
  deployment="olmv1-$name"
  if [[ $name == catalogd ]]; then
    mapfile -t args < <(pod_args "$deployment" "$catalogd_metrics" "$catalogd_probes")
  else
    mapfile -t args < <(pod_args "$deployment" "$controller_metrics" "$controller_probes")
  fi
  local mounts=(-v "$OLMV1_ENV_DIR/volumes/$sa:/var/run/secrets/kubernetes.io/serviceaccount:ro")
  for m in "$@"; do mounts+=(-v "$m:ro"); done
  podman_ run -d --name "$deployment" --network host --read-only --read-only-tmpfs=false \
    --security-opt no-new-privileges --cap-drop all \
    --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
    --tmpfs "$cache:rw,mode=1777,size=512m" \
    -e KUBERNETES_SERVICE_HOST=127.0.0.1 -e KUBERNETES_SERVICE_PORT="$api_port" \
    -e POD_NAME="$deployment-$starts" -e RUST_LOG=info \
    "${mounts[@]}" "$ref" "${args[@]}" >/dev/null
  # podman's own log follower: the container's output in the environment's logs.
  podman_ logs -f "$deployment" >>"$OLMV1_ENV_DIR/logs/olmv1-$name.log" 2>&1 &
}
# start_components IMAGE: both containers, as pods named olmv1-<component>-<n> for the n-th start
# (the controller's leader lease names the pod), with tokens of the ServiceAccounts installed now.
starts=0
start_components() {
  starts=$((starts + 1))
  sa_volume olmv1-catalogd "$OLMV1_ENV_DIR/volumes/catalogd-sa"
  sa_volume olmv1-controller "$OLMV1_ENV_DIR/volumes/controller-sa"
  podman_ pull --tls-verify=false -q "$1" >/dev/null
  local user
  user=$(podman_ image inspect -f '{{.Config.User}}' "$1")
  [[ $user == 65532:65532 ]] || die "the image runs as '$user', not the non-root 65532:65532"
  run_component catalogd catalogd-sa /var/cache/catalogd "$1" \
    "$OLMV1_ENV_DIR/volumes/serving-cert:/var/run/olmv1/serving-cert"
  run_component controller controller-sa /var/cache/olmv1 "$1" \
    "$OLMV1_ENV_DIR/volumes/catalogd-ca:/var/run/olmv1/catalogd-ca" \
    "$OLMV1_ENV_DIR/volumes/metrics-cert:/var/run/olmv1/metrics-cert"
  local deadline=$((SECONDS + 120)) port
  for port in "$catalogd_probes" "$controller_probes"; do
    until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
      [[ $(podman_ inspect -f '{{.State.Running}}' olmv1-catalogd) == true ]] || die "the catalogd container exited"
      [[ $(podman_ inspect -f '{{.State.Running}}' olmv1-controller) == true ]] || die "the controller container exited"
      ((SECONDS < deadline)) || die "a component did not become ready on 127.0.0.1:$port"
      sleep 1
    done
  done
}
stop_components() {
  podman_ stop -t 30 olmv1-controller olmv1-catalogd >/dev/null
  podman_ rm olmv1-controller olmv1-catalogd >/dev/null
  stop_log_followers
}
step=$SECONDS
start_components "$image"
log "catalogd and controller run from $image under podman, ready ($((SECONDS - step))s)"
# /metrics over HTTPS: refused without a token, served to a ServiceAccount bound to
# olmv1-metrics-reader.
kubectl -n "$ns" create serviceaccount metrics-scraper >/dev/null
kubectl create clusterrolebinding olmv1-deploy-test-metrics-scraper --clusterrole=olmv1-metrics-reader \
  --serviceaccount="$ns:metrics-scraper" >/dev/null
scraper_token=$(kubectl -n "$ns" create token metrics-scraper --duration=1h)
for port in "$catalogd_metrics" "$controller_metrics"; do
  code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" "https://127.0.0.1:$port/metrics")
  [[ $code == 401 ]] || die "/metrics on 127.0.0.1:$port answered $code without a token (expected 401)"
  deadline=$((SECONDS + 60))
  until curl -fsS --cacert "$pki/ca.crt" -H "Authorization: Bearer $scraper_token" "https://127.0.0.1:$port/metrics" |
    grep -q '_reconcile_total'; do
    ((SECONDS < deadline)) || die "/metrics on 127.0.0.1:$port did not serve the metrics reader"
    sleep 1
  done
done
log "/metrics over HTTPS: 401 without a token, served to olmv1-metrics-reader"

# 4. The demo operator, end to end.
step=$SECONDS
"$repo/hack/demo/publish.sh" "$olmv1" "$OLMV1_REGISTRY"
kubectl apply -f "$repo/hack/demo/installer-rbac.yaml" >/dev/null
sed "s|REGISTRY|$OLMV1_REGISTRY|g" "$repo/hack/demo/clustercatalog.yaml" | kubectl apply -f - >/dev/null
kubectl wait --for=condition=Serving --timeout=180s clustercatalog/demo >/dev/null ||
  die "ClusterCatalog demo is not Serving: $(kubectl get clustercatalog demo -o jsonpath='{.status.conditions}')"
base_url=$(kubectl get clustercatalog demo -o jsonpath='{.status.urls.base}')
[[ $base_url == https://127.0.0.1:$catalogd_port/* ]] || die "catalogd does not serve over TLS: $base_url"
curl -fsS --cacert "$pki/ca.crt" "$base_url/api/v1/all" | grep -q '"name":"example-operator"' ||
  die "catalogd's TLS endpoint $base_url does not serve the demo catalog"
kubectl apply -f "$repo/hack/demo/clusterextension.yaml" >/dev/null
kubectl wait --for=condition=Installed --timeout=180s clusterextension/example-operator >/dev/null ||
  die "example-operator not Installed: $(kubectl get clusterextension example-operator -o jsonpath='{.status.conditions}')"
kubectl -n example wait --for=condition=Available --timeout=120s deployment/example-operator-controller >/dev/null
bundle=$(kubectl get clusterextension example-operator -o jsonpath='{.status.install.bundle.name}')
log "example-operator Installed=True ($bundle) through the helm-installed components ($((SECONDS - step))s)"

# The extension as installed; every later step keeps it so.
extension_deployment() { kubectl -n example get deployment example-operator-controller -o jsonpath='{.metadata.uid} {.metadata.generation}'; }
extension_state=$(extension_deployment)
# check_extension_kept WHAT: the extension keeps its bundle, its Deployment (UID and generation).
check_extension_kept() {
  [[ $(kubectl get clusterextension example-operator -o jsonpath='{.status.install.bundle.name}') == "$bundle" ]] ||
    die "the installed bundle changed $1"
  [[ $(extension_deployment) == "$extension_state" ]] ||
    die "the extension's Deployment was recreated or changed $1 ($extension_state, now $(extension_deployment))"
}
# check_taken_over: the components started last hold the controller's lease and keep the
# extension Installed.
check_taken_over() {
  local deadline=$((SECONDS + 120))
  until [[ $(kubectl -n "$ns" get lease olmv1-controller -o jsonpath='{.spec.holderIdentity}') == "olmv1-controller-$starts" ]]; do
    ((SECONDS < deadline)) || die "the new controller did not take the leader lease $1"
    sleep 1
  done
  kubectl wait --for=condition=Installed --timeout=120s clusterextension/example-operator >/dev/null ||
    die "example-operator lost Installed=True $1"
  check_extension_kept "$1"
}
# pods_of DEPLOYMENT: its pods' names.
pods_of() { kubectl -n "$ns" get pods -l "app.kubernetes.io/name=$1" -o jsonpath='{.items[*].metadata.name}'; }
# check_rolled BEFORE: both Deployments rolled out, none of the pods BEFORE is left.
check_rolled() {
  local d pod
  for d in olmv1-controller olmv1-catalogd; do
    kubectl -n "$ns" rollout status --timeout=120s "deployment/$d" >/dev/null || die "$d did not roll out"
  done
  kubectl -n "$ns" wait --for=condition=Available --timeout=120s deployment/olmv1-controller deployment/olmv1-catalogd >/dev/null ||
    die "the Deployments are not Available after the rollout"
  for pod in $1; do
    ! kubectl -n "$ns" get pod "$pod" >/dev/null 2>&1 || die "pod $pod was not replaced"
  done
}

# 5. helm upgrade to the next chart version, published with a new image (another version label,
# so another digest): the CRDs first, as the chart's NOTES say, then the release.
step=$SECONDS
next=$(OLMV1_IMAGE_VERSION=0.0.0-next "$here/image.sh" "$OLMV1_REGISTRY/olmv1:next" 2>/dev/null)
[[ ${next#*@} != "${image#*@}" ]] || die "the next image has the same digest"
OLMV1_CHART_VERSION=0.0.0-next "$here/chart.sh" push "oci://$OLMV1_REGISTRY/charts" --image "$next" --plain-http >/dev/null
before="$(pods_of olmv1-controller) $(pods_of olmv1-catalogd)"
# As README.md says: pulled first (helm before 4.3 prints `Pulled:` on stdout for an oci:// show).
mkdir -p "$OLMV1_ENV_DIR/next-chart"
helm pull "$chart_ref" --version 0.0.0-next --plain-http -d "$OLMV1_ENV_DIR/next-chart" >/dev/null ||
  die "helm pull of the next chart failed"
helm show crds "$OLMV1_ENV_DIR/next-chart/olmv1-0.0.0-next.tgz" | kubectl apply --server-side -f - >/dev/null ||
  die "the next chart's CRDs were not applied"
helm upgrade olmv1 "$chart_ref" --version 0.0.0-next --plain-http --reset-then-reuse-values >/dev/null ||
  die "helm upgrade to the next chart failed"
check_rolled "$before"
for d in olmv1-controller olmv1-catalogd; do
  [[ $(kubectl -n "$ns" get deployment "$d" -o jsonpath='{.spec.template.spec.containers[0].image}') == "$next" ]] ||
    die "$d does not run $next after helm upgrade"
done
stop_components
start_components "$next"
check_taken_over "after helm upgrade"
log "helm upgrade to $next: both Deployments rolled, example-operator kept ($bundle, its Deployment's UID and generation) ($((SECONDS - step))s)"

# 6. Scheduling values reach both pods: the kwok node gets a label and a taint that only pods
# carrying the values would be scheduled with.
step=$SECONDS
kubectl label node "$OLMV1_KWOK_NODE" olmv1.test/pool=olmv1 >/dev/null
kubectl taint node "$OLMV1_KWOK_NODE" olmv1.test/dedicated=olmv1:NoSchedule >/dev/null
cat >"$OLMV1_ENV_DIR/scheduling.yaml" <<'YAML'
nodeSelector:
  olmv1.test/pool: olmv1
tolerations:
  - key: olmv1.test/dedicated
    operator: Equal
    value: olmv1
    effect: NoSchedule
YAML
before="$(pods_of olmv1-controller) $(pods_of olmv1-catalogd)"
helm upgrade olmv1 "$chart_ref" --version 0.0.0-next --plain-http --reuse-values -f "$OLMV1_ENV_DIR/scheduling.yaml" >/dev/null ||
  die "helm upgrade with nodeSelector and tolerations failed"
check_rolled "$before"
for d in olmv1-controller olmv1-catalogd; do
  kubectl -n "$ns" get pods -l "app.kubernetes.io/name=$d" -o json | python3 -c '
import json, sys
node, name = sys.argv[1], sys.argv[2]
pods = json.load(sys.stdin)["items"]
assert pods, f"{name} has no pod"
for pod in pods:
    spec = pod["spec"]
    selector, tolerations, on = spec.get("nodeSelector"), spec.get("tolerations", []), spec.get("nodeName")
    assert selector == {"olmv1.test/pool": "olmv1"}, f"{name}: nodeSelector {selector}"
    toleration = {"key": "olmv1.test/dedicated", "operator": "Equal", "value": "olmv1", "effect": "NoSchedule"}
    assert toleration in tolerations, f"{name}: tolerations {tolerations}"
    assert on == node, f"{name}: on node {on}"
' "$OLMV1_KWOK_NODE" "$d" || die "the pods of $d do not carry the chart's nodeSelector and tolerations"
done
revision=$(release revision)
if helm upgrade olmv1 "$chart_ref" --version 0.0.0-next --plain-http --reuse-values --set controller.replicas=two \
  >"$OLMV1_ENV_DIR/helm-refused.txt" 2>&1; then
  die "helm upgrade accepted controller.replicas=two"
fi
grep -q "at '/controller/replicas': got string, want integer" "$OLMV1_ENV_DIR/helm-refused.txt" ||
  die "the schema's refusal does not name the value: $(cat "$OLMV1_ENV_DIR/helm-refused.txt")"
[[ $(release revision) == "$revision" ]] ||
  die "a refused helm upgrade made a new release revision"
check_extension_kept "after the scheduling upgrade"
# The node as it was: the install manifest of step 8 has no toleration.
kubectl taint node "$OLMV1_KWOK_NODE" olmv1.test/dedicated- >/dev/null
kubectl label node "$OLMV1_KWOK_NODE" olmv1.test/pool- >/dev/null
log "nodeSelector and tolerations on both pods; controller.replicas=two refused by the schema ($((SECONDS - step))s)"

# 7. helm uninstall removes olmv1 and keeps the cluster's state.
step=$SECONDS
# The components (the Deployments' pods) stop first, while their RBAC still lets them release their
# leader Leases. A real uninstall races the two: a pod stopped after its RBAC is gone keeps its
# Lease until it expires, and a reinstall's components wait that long (137 s) to lead.
stop_components
helm uninstall olmv1 >/dev/null || die "helm uninstall failed"
for d in olmv1-controller olmv1-catalogd; do
  kubectl -n "$ns" wait --for=delete --timeout=60s "deployment/$d" >/dev/null 2>&1 || true
  ! kubectl -n "$ns" get deployment "$d" >/dev/null 2>&1 || die "helm uninstall left deployment/$d"
done
for gone in "-n $ns serviceaccount/olmv1-controller" "-n $ns service/catalogd-service" "clusterrole/olmv1-controller" \
  "clusterrolebinding/olmv1-catalogd" "-n $ns servicemonitor/olmv1-controller"; do
  # shellcheck disable=SC2086
  ! kubectl get $gone >/dev/null 2>&1 || die "helm uninstall left $gone"
done
kubectl get crd clusterextensions.olm.operatorframework.io clustercatalogs.olm.operatorframework.io >/dev/null ||
  die "helm uninstall deleted the CRDs"
kubectl get namespace "$ns" >/dev/null || die "helm uninstall deleted namespace $ns"
kubectl wait --for=condition=Installed --timeout=5s clusterextension/example-operator >/dev/null ||
  die "the ClusterExtension is gone or changed after helm uninstall"
check_extension_kept "by helm uninstall"
log "helm uninstall: olmv1 removed; CRDs, ClusterExtension, its Deployment and namespace $ns kept ($((SECONDS - step))s)"

# Every variant of the install manifest is accepted in the kept namespace once helm's objects are
# gone (over helm's Deployments, a dry run of the OpenShift variant would merge its service-CA
# ConfigMap volume into the cert-manager Secret volume helm set, which no install does). The OpenShift variant's Role for the global pull secret lives in
# openshift-config, which every OpenShift cluster has; its ServiceMonitors and PrometheusRule are
# checked against prometheus-operator's CRDs.
kubectl create namespace openshift-config --dry-run=client -o yaml | kubectl apply -f - >/dev/null
for variant in olmv1 olmv1-openshift olmv1-controller-identity; do
  kubectl apply --server-side --dry-run=server -f "$OLMV1_ENV_DIR/$variant.yaml" \
    >"$OLMV1_ENV_DIR/dry-run.txt" 2>&1 || die "$variant.yaml is refused (server-side dry run): $(cat "$OLMV1_ENV_DIR/dry-run.txt")"
done
[[ $(grep -c -- '- --global-pull-secret=openshift-config/pull-secret$' "$OLMV1_ENV_DIR/olmv1-openshift.yaml") == 2 ]] ||
  die "the OpenShift install manifest does not give both components the global pull secret"
grep -q -- '- --install-identity=controller$' "$OLMV1_ENV_DIR/olmv1-controller-identity.yaml" ||
  die "the controller-identity install manifest does not run the controller with --install-identity controller"
! grep -q -- 'name: cluster-admin$' "$manifest" || die "the default install manifest grants cluster-admin"
log "every install manifest variant accepted (server-side dry run)"

# 8. olmv1 installed again from the install manifest over the kept state, then upgraded by
# applying the next image's manifest.
step=$SECONDS
kubectl apply --server-side -f "$manifest" >"$OLMV1_ENV_DIR/apply.txt" ||
  die "server-side apply refused: $(cat "$OLMV1_ENV_DIR/apply.txt")"
kubectl -n "$ns" wait --for=condition=Available --timeout=120s deployment/olmv1-controller deployment/olmv1-catalogd >/dev/null ||
  die "the manifest's Deployments did not become Available"
start_components "$image"
check_taken_over "after the install from the manifest"
before="$(pods_of olmv1-controller) $(pods_of olmv1-catalogd)"
"$here/manifest.sh" "$next" default >"$manifest"
kubectl apply --server-side -f "$manifest" >/dev/null
check_rolled "$before"
[[ $(kubectl -n "$ns" get deployment olmv1-controller -o jsonpath='{.spec.template.spec.containers[0].image}') == "$next" ]] ||
  die "the controller Deployment does not run $next after the manifest upgrade"
stop_components
start_components "$next"
check_taken_over "after the manifest upgrade"
# The upgraded controller reconciles it: a spec change (same bundle, pinned version) is observed.
kubectl patch clusterextension example-operator --type=merge \
  -p '{"spec":{"source":{"catalog":{"version":"1.0.0"}}}}' >/dev/null
generation=$(kubectl get clusterextension example-operator -o jsonpath='{.metadata.generation}')
deadline=$((SECONDS + 120))
until [[ $(kubectl get clusterextension example-operator \
  -o jsonpath='{.status.conditions[?(@.type=="Installed")].observedGeneration}') == "$generation" ]]; do
  ((SECONDS < deadline)) || die "the upgraded controller did not reconcile generation $generation"
  sleep 1
done
kubectl wait --for=condition=Installed --timeout=60s clusterextension/example-operator >/dev/null ||
  die "example-operator is not Installed after the upgraded controller reconciled it"
check_extension_kept "after the reconcile of a spec change"
log "installed from the manifest ($(wc -l <"$OLMV1_ENV_DIR/apply.txt") objects) and upgraded to $next: example-operator kept, reconciled by the new controller ($((SECONDS - step))s)"
log "ok ($((SECONDS - started))s)"
