#!/usr/bin/env bash
# Starts the local control plane as plain processes on free loopback ports:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (one fake Node), a
#   docker-registry (plain HTTP, delete enabled) and a second one requiring Basic auth (htpasswd),
#   and, when asked for, a real node (containerd, kubelet, kube-proxy: hack/real-node.sh),
# then installs the project's CRDs and waits until they are Established.
#
# Usage: hack/local-up.sh            (environment in $OLMV1_ENV_DIR, or a new temp dir)
# Prints the path of the environment file (sourceable `export K='V'` lines) as its last line on
# stdout; everything else goes to stderr. Stop it with `hack/local-down.sh <dir or env file>`.
#
# Environment knobs:
#   OLMV1_ENV_DIR       where certificates, data, logs and pid files go (default: mktemp -d)
#   OLMV1_SKIP_CRDS=1   do not install the project's CRDs
#   OLMV1_START_TIMEOUT seconds to wait for each part to become ready (default 90)
#   OLMV1_NODE_PODS     how many pods the fake Node takes (default 250)
#   OLMV1_NODE          kwok (default): only kwok's fake node kwok-node-0;
#                       real: only a real node real-node-0 (hack/demo.sh);
#                       kwok+real: both, the real node tainted olmv1.dev/real-node=true:NoSchedule
#                       so that only pods tolerating it run there (hack/test.sh).
#                       Needs root; see docs/local-control-plane.md "The real node".
#   OLMV1_BIN           the olmv1 binary that pushes the real node's pause image (default
#                       $CARGO_TARGET_DIR/debug/olmv1, else built with cargo)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
source "$here/versions.env"

started=$SECONDS
log() { echo "local-up: $*" >&2; }
die() { log "error: $*"; exit 1; }

timeout_s=${OLMV1_START_TIMEOUT:-90}
node_mode=${OLMV1_NODE:-kwok}
case $node_mode in
  kwok) want_kwok=1 want_real=0 ;;
  real) want_kwok=0 want_real=1 ;;
  kwok+real) want_kwok=1 want_real=1 ;;
  *) die "OLMV1_NODE must be kwok, real or kwok+real, not '$node_mode' (env files name the nodes OLMV1_KWOK_NODE and OLMV1_REAL_NODE)" ;;
esac
# Only the bin directory: hack/install-deps.sh's build is the phase that counts (hack/phases.sh).
if ((want_real)); then
  bin=$(OLMV1_PHASE_LOG='' "$here/build-tools.sh" --node)
  source "$here/real-node.sh"
else
  bin=$(OLMV1_PHASE_LOG='' "$here/build-tools.sh")
fi
command -v docker-registry >/dev/null || die "docker-registry is not installed (run hack/install-deps.sh)"
command -v openssl >/dev/null || die "openssl is not installed (run hack/install-deps.sh)"
command -v curl >/dev/null || die "curl is not installed (run hack/install-deps.sh)"
command -v htpasswd >/dev/null || die "htpasswd is not installed (run hack/install-deps.sh)"

dir=${OLMV1_ENV_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/olmv1-env.XXXXXX")}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[[ -e "$dir/pids" && -n "$(ls -A "$dir/pids" 2>/dev/null)" ]] &&
  die "$dir already has running parts (pids/); stop them with hack/local-down.sh $dir"
pki="$dir/pki" logs="$dir/logs" pids="$dir/pids"
mkdir -p "$pki" "$logs" "$pids"

# On any failure stop what was started, so a failed start leaves nothing running.
cleanup_on_error() {
  local rc=$?
  if ((rc != 0)); then
    log "start-up failed; stopping what was started (logs kept in $logs)"
    "$here/local-down.sh" --keep "$dir" >&2 || true
  fi
}
trap cleanup_on_error EXIT

# The real node's network comes first: kube-apiserver advertises its host-side address.
# Addresses of the kubernetes Service and the Service range (the slot's on a real node).
svc_cidr=10.0.0.0/24 svc_ip=10.0.0.1
if ((want_real)); then
  real_node_claim "$dir"
  svc_cidr=$node_svc_cidr svc_ip=$node_svc_ip
  log "real node: slot $node_slot, network namespace $node_netns, node IP $node_ip, pods $node_pod_cidr, services $node_svc_cidr"
fi

# ---------------------------------------------------------------------------------------------
# Ports: random ports below the kernel's ephemeral range, checked free by a connect attempt, never
# handed out twice in one run. A clash with another process is caught at start-up and retried.
declare -A used_ports=()
free_port() { # VAR...: sets each VAR to a distinct free port
  local var p
  for var in "$@"; do
    for _ in $(seq 200); do
      p=$((20000 + RANDOM % 12000))
      [[ -n "${used_ports[$p]:-}" ]] && continue
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
      used_ports[$p]=1
      printf -v "$var" '%s' "$p"
      continue 2
    done
    die "found no free loopback port"
  done
}

# start NAME CMD...: runs CMD in the background with its output in logs/NAME.log, pid in pids/NAME.pid
start() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$pids/$name.pid"
}

alive() { kill -0 "$(cat "$pids/$1.pid")" 2>/dev/null; }

# wait_ready NAME WHAT CMD...: polls CMD until it succeeds; fails early when NAME's process died.
# Returns 2 when the process died of a port clash (the caller retries on other ports).
wait_ready() {
  local name=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout_s))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$name"; then
      if grep -q -i 'address already in use' "$logs/$name.log"; then
        rm -f "$pids/$name.pid"
        return 2
      fi
      tail -n 30 "$logs/$name.log" >&2
      die "$name exited before $what (log: $logs/$name.log)"
    fi
    ((SECONDS < deadline)) || {
      tail -n 30 "$logs/$name.log" >&2
      die "$name: timed out after ${timeout_s}s waiting for $what (log: $logs/$name.log)"
    }
    sleep 0.2
  done
}

# ---------------------------------------------------------------------------------------------
# Certificates: a serving CA + a serving cert for 127.0.0.1/localhost, a client CA + an admin client
# cert in system:masters, the service-account signing key, and the aggregation layer's front proxy:
# its own CA and the client cert (CN front-proxy-client) kube-apiserver presents to aggregated API
# servers, which trust the user it names in X-Remote-* headers only on that cert.
ossl() { openssl "$@" >/dev/null 2>&1 || die "openssl $1 failed"; }
make_pki() {
  ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$pki/ca.key" -out "$pki/ca.crt" \
    -subj "/CN=olmv1-local-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
  ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$pki/client-ca.key" -out "$pki/client-ca.crt" \
    -subj "/CN=olmv1-local-client-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
  cat >"$pki/serving.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$svc_ip${node_host_ip:+,IP:$node_host_ip},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
  ossl req -newkey rsa:2048 -nodes -keyout "$pki/serving.key" -out "$pki/serving.csr" -subj "/CN=kube-apiserver"
  ossl x509 -req -in "$pki/serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$pki/serving.ext" -out "$pki/serving.crt"
  cat >"$pki/client.ext" <<'EOF'
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
EOF
  ossl req -newkey rsa:2048 -nodes -keyout "$pki/admin.key" -out "$pki/admin.csr" -subj "/O=system:masters/CN=olmv1-admin"
  ossl x509 -req -in "$pki/admin.csr" -CA "$pki/client-ca.crt" -CAkey "$pki/client-ca.key" -CAcreateserial \
    -days 3650 -extfile "$pki/client.ext" -out "$pki/admin.crt"
  if ((want_real)); then
    # The kubelet as the Node authorizer knows it, and kube-proxy (system:node-proxier is bound
    # to system:kube-proxy by default).
    ossl req -newkey rsa:2048 -nodes -keyout "$pki/node.key" -out "$pki/node.csr" \
      -subj "/O=system:nodes/CN=system:node:$REAL_NODE_NAME"
    ossl x509 -req -in "$pki/node.csr" -CA "$pki/client-ca.crt" -CAkey "$pki/client-ca.key" -CAcreateserial \
      -days 3650 -extfile "$pki/client.ext" -out "$pki/node.crt"
    ossl req -newkey rsa:2048 -nodes -keyout "$pki/kube-proxy.key" -out "$pki/kube-proxy.csr" -subj "/CN=system:kube-proxy"
    ossl x509 -req -in "$pki/kube-proxy.csr" -CA "$pki/client-ca.crt" -CAkey "$pki/client-ca.key" -CAcreateserial \
      -days 3650 -extfile "$pki/client.ext" -out "$pki/kube-proxy.crt"
  fi
  ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$pki/front-proxy-ca.key" -out "$pki/front-proxy-ca.crt" \
    -subj "/CN=olmv1-local-front-proxy-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
  ossl req -newkey rsa:2048 -nodes -keyout "$pki/front-proxy-client.key" -out "$pki/front-proxy-client.csr" \
    -subj "/CN=front-proxy-client"
  ossl x509 -req -in "$pki/front-proxy-client.csr" -CA "$pki/front-proxy-ca.crt" -CAkey "$pki/front-proxy-ca.key" \
    -CAcreateserial -days 3650 -extfile "$pki/client.ext" -out "$pki/front-proxy-client.crt"
  ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key"
  ossl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
  rm -f "$pki"/*.csr
}

write_kubeconfig() { # PORT
  local b64='base64 -w0'
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: olmv1-local
  cluster:
    server: https://127.0.0.1:$1
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: olmv1-admin
  user:
    client-certificate-data: $($b64 <"$pki/admin.crt")
    client-key-data: $($b64 <"$pki/admin.key")
contexts:
- name: olmv1-local
  context:
    cluster: olmv1-local
    user: olmv1-admin
current-context: olmv1-local
EOF
  chmod 600 "$dir/kubeconfig"
}

make_pki
kc="$dir/kubeconfig"
kubectl() { "$bin/kubectl" --kubeconfig="$kc" "$@"; }

# ---------------------------------------------------------------------------------------------
# etcd
for attempt in 1 2 3; do
  free_port etcd_port peer_port
  start etcd "$bin/etcd" --name=olmv1 --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="olmv1=http://127.0.0.1:$peer_port" --unsafe-no-fsync=true --log-level=warn
  rc=0
  wait_ready etcd "/health" curl -fsS "http://127.0.0.1:$etcd_port/health" || rc=$?
  ((rc == 0)) && break
  ((rc == 2)) && { log "etcd: port clash, retrying ($attempt)"; rm -rf "$dir/etcd"; continue; }
  exit 1
done
alive etcd || die "etcd did not start"
log "etcd ready on 127.0.0.1:$etcd_port ($((SECONDS - started))s)"

# ---------------------------------------------------------------------------------------------
# kube-apiserver
# Admission plugins OpenShift enables beyond Kubernetes' defaults that change what an apply may do
# (docs/local-control-plane.md lists those checked): owner references with blockOwnerDeletion
# need `update` on the owner's finalizers.
openshift_admission=OwnerReferencesPermissionEnforcement
curl_admin() { curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"; }
# Audit log of writes (Metadata level, no reads): who wrote what, e.g. only the leader replica.
# OLMV1_AUDIT_SERVICE_ACCOUNT_READS=1 (the bench scripts) also logs every read and watch by a
# service account (the controllers under measure and their installers): where each request of an
# idle controller comes from.
sa_reads=""
if [[ ${OLMV1_AUDIT_SERVICE_ACCOUNT_READS:-} == 1 ]]; then
  sa_reads=$'- level: Metadata\n  userGroups: [system:serviceaccounts]'
fi
cat >"$dir/audit-policy.yaml" <<EOF_POLICY
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
$sa_reads
- level: None
EOF_POLICY
# A real node: its kubelet is authorized by the Node authorizer, and its pods get their
# ServiceAccount's token (the ServiceAccount admission plugin, off where only kwok runs pods).
# kube-apiserver stays bound to loopback; the node reaches it at the advertised address, mapped
# to loopback by the slot's nat chain.
if ((want_real)); then
  api_node_flags=(--advertise-address="$node_host_ip" --authorization-mode=Node,RBAC
    --enable-admission-plugins="$openshift_admission,ServiceAccount"
    --kubelet-preferred-address-types=InternalIP
    --kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key")
else
  api_node_flags=(--advertise-address=127.0.0.1 --authorization-mode=RBAC
    --disable-admission-plugins=ServiceAccount --enable-admission-plugins="$openshift_admission")
fi
for attempt in 1 2 3; do
  free_port api_port
  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" --cert-dir="$pki/apiserver" \
    --tls-cert-file="$pki/serving.crt" --tls-private-key-file="$pki/serving.key" \
    --secure-port="$api_port" --bind-address=127.0.0.1 "${api_node_flags[@]}" \
    --service-cluster-ip-range="$svc_cidr" --allow-privileged=true \
    --client-ca-file="$pki/client-ca.crt" \
    --service-account-issuer="https://127.0.0.1:$api_port/" \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$logs/audit.log" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key"
  rc=0
  wait_ready kube-apiserver "/readyz" curl_admin "https://127.0.0.1:$api_port/readyz" || rc=$?
  ((rc == 0)) && break
  ((rc == 2)) && { log "kube-apiserver: port clash, retrying ($attempt)"; continue; }
  exit 1
done
alive kube-apiserver || die "kube-apiserver did not start"
write_kubeconfig "$api_port"
log "kube-apiserver ready on 127.0.0.1:$api_port ($((SECONDS - started))s)"

# ---------------------------------------------------------------------------------------------
# Registry (no dependency on the API server; started early so its start overlaps the others).
start_registry() {
  free_port reg_port
  mkdir -p "$dir/registry"
  cat >"$dir/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$reg_port
EOF
  start registry docker-registry serve "$dir/registry.yml"
}

# A second registry that requires credentials (Basic auth from an htpasswd file), as Red Hat's
# registries do: pull-secret tests publish there. One random password per environment.
auth_reg_user=olmv1
auth_reg_password=$(openssl rand -hex 16)
start_auth_registry() {
  free_port auth_reg_port
  mkdir -p "$dir/registry-auth"
  htpasswd -B -b -n "$auth_reg_user" "$auth_reg_password" >"$dir/registry-auth.htpasswd" 2>/dev/null ||
    die "htpasswd failed"
  cat >"$dir/registry-auth.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/registry-auth
  delete:
    enabled: true
auth:
  htpasswd:
    realm: olmv1-local
    path: $dir/registry-auth.htpasswd
http:
  addr: 127.0.0.1:$auth_reg_port
EOF
  start registry@auth docker-registry serve "$dir/registry-auth.yml"
}

# kube-controller-manager, kube-scheduler and kwok all use the admin kubeconfig.
start_controllers() {
  free_port cm_port sched_port kwok_port
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$cm_port" --leader-elect=false \
    --controllers='*' --root-ca-file="$pki/ca.crt" --service-account-private-key-file="$pki/sa.key" \
    --kube-api-qps=500 --kube-api-burst=1000
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --leader-elect=false \
    --kube-api-qps=500 --kube-api-burst=1000
  ((want_kwok)) || return 0
  local stages="$bin/../kwok-stages" configs=()
  for s in "$stages"/*.yaml; do configs+=(--config="$s"); done
  start kwok "$bin/kwok" --kubeconfig="$kc" "${configs[@]}" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:$kwok_port" --node-ip=127.0.0.1 --cidr=10.244.0.0/16
}

start_registry
start_auth_registry
start_controllers
for attempt in 1 2 3; do
  rc=0
  wait_ready registry "/v2/" curl -fsS "http://127.0.0.1:$reg_port/v2/" || rc=$?
  ((rc == 0)) && break
  ((rc == 2)) && { log "registry: port clash, retrying ($attempt)"; start_registry; continue; }
  exit 1
done
alive registry || die "docker-registry did not start"
log "registry ready on 127.0.0.1:$reg_port ($((SECONDS - started))s)"
# Unauthenticated, /v2/ answers 401 once the registry is up.
auth_registry_up() { [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$auth_reg_port/v2/") == 401 ]]; }
for attempt in 1 2 3; do
  rc=0
  wait_ready registry@auth "/v2/" auth_registry_up || rc=$?
  ((rc == 0)) && break
  ((rc == 2)) && { log "registry-auth: port clash, retrying ($attempt)"; start_auth_registry; continue; }
  exit 1
done
alive registry@auth || die "the authenticating docker-registry did not start"
log "authenticating registry ready on 127.0.0.1:$auth_reg_port ($((SECONDS - started))s)"

# A port clash of the three controllers is rare; on one, stop all three and start them again.
for attempt in 1 2 3; do
  rc=0
  wait_ready kube-controller-manager "/healthz" curl -fsSk "https://127.0.0.1:$cm_port/healthz" || rc=$?
  if ((rc == 0)); then
    wait_ready kube-scheduler "/healthz" curl -fsSk "https://127.0.0.1:$sched_port/healthz" || rc=$?
  fi
  if ((rc == 0 && want_kwok)); then
    wait_ready kwok "/healthz" curl -fsS "http://127.0.0.1:$kwok_port/healthz" || rc=$?
  fi
  ((rc == 0)) && break
  ((rc == 2)) || exit 1
  log "controllers: port clash, restarting them ($attempt)"
  for n in kube-controller-manager kube-scheduler kwok; do
    [[ -f "$pids/$n.pid" ]] && kill "$(cat "$pids/$n.pid")" 2>/dev/null && rm -f "$pids/$n.pid"
  done
  start_controllers
done
for n in kube-controller-manager kube-scheduler; do alive "$n" || die "$n did not start"; done
((want_kwok)) && { alive kwok || die "kwok did not start"; }
log "controller-manager, scheduler$( ((want_kwok)) && echo " and kwok") healthy ($((SECONDS - started))s)"

# ---------------------------------------------------------------------------------------------
# The real node (hack/real-node.sh): started before the fake node's wait, so both come up at once.
if ((want_real)); then
  real_node_forward "$api_port" "$reg_port" "$auth_reg_port"
  # The sandbox image: pause.c's static binary, the only file of the image.
  olmv1_bin=${OLMV1_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/olmv1}
  if [[ ! -x "$olmv1_bin" ]]; then
    log "building olmv1 (image push needs it; OLMV1_BIN names another build)"
    (cd "$repo" && cargo build -q --bin olmv1) || die "cargo build --bin olmv1 failed"
  fi
  mkdir -p "$dir/node/pause-image"
  cp "$bin/pause" "$dir/node/pause-image/pause"
  pause_ref="127.0.0.1:$reg_port/$REAL_NODE_PAUSE_REPO:$KUBE_VERSION"
  "$olmv1_bin" image push --entrypoint /pause "$dir/node/pause-image" "$pause_ref" >/dev/null ||
    die "pushing the pause image to $pause_ref failed"
  real_node_configs "$dir" "$api_port" "$want_kwok" "$pause_ref" "127.0.0.1:$reg_port" "127.0.0.1:$auth_reg_port"
  real_node_kubeconfig "$dir/node/kubelet.kubeconfig" "$pki/node.crt" "$pki/node.key"
  real_node_kubeconfig "$dir/node/kube-proxy.kubeconfig" "$pki/kube-proxy.crt" "$pki/kube-proxy.key"
  real_node_cgroups
  real_node_mount_ns "$dir"
  start containerd in_node "$dir" containerd --config "$dir/node/containerd/config.toml"
  wait_ready containerd "its socket" test -S "$dir/node/containerd/containerd.sock"
  log "containerd up ($((SECONDS - started))s)"
  start kubelet in_node "$dir" "$bin/kubelet" --config="$dir/node/kubelet/config.yaml" \
    --kubeconfig="$dir/node/kubelet.kubeconfig" --root-dir="$dir/node/kubelet" \
    --hostname-override="$REAL_NODE_NAME" --node-ip="$node_ip" \
    --node-labels="$REAL_NODE_LABEL=true" --v=1
  start kube-proxy in_node "$dir" "$bin/kube-proxy" --config="$dir/node/kube-proxy.yaml" --v=1
fi

if ((want_kwok)); then
  # One fake Node that kwok keeps Ready, so Deployments get Pods that become Ready.
  node=kwok-node-0
  node_pods=${OLMV1_NODE_PODS:-250}
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $node
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
status:
  allocatable:
    cpu: "32"
    memory: 256Gi
    pods: "$node_pods"
  capacity:
    cpu: "32"
    memory: 256Gi
    pods: "$node_pods"
  nodeInfo:
    architecture: amd64
    kubeletVersion: fake
    kubeProxyVersion: fake
    operatingSystem: linux
EOF
  node_ready() {
    [[ $(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
  }
  wait_ready kwok "node $node Ready" node_ready
fi
if ((want_real)); then
  real_node_ready() {
    [[ $(kubectl get node "$REAL_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
  }
  wait_ready kubelet "node $REAL_NODE_NAME Ready" real_node_ready
  alive kube-proxy || die "kube-proxy exited (log: $logs/kube-proxy.log)"
  log "real node $REAL_NODE_NAME Ready ($((SECONDS - started))s)"
fi
# The controller-manager's service-account controller creates `default` in each namespace.
wait_ready kube-controller-manager "the default ServiceAccount" kubectl get serviceaccount default -n default
log "nodes Ready, default ServiceAccount present ($((SECONDS - started))s)"

# ---------------------------------------------------------------------------------------------
# The project's CRDs: the chart's charts/olmv1/crds/olm.operatorframework.io_*.yaml (a test keeps
# them equal to `olmv1 crd`), or `olmv1 crd` itself when they are not there.
if [[ "${OLMV1_SKIP_CRDS:-}" != 1 ]]; then
  shopt -s nullglob
  crd_files=("$repo"/charts/olmv1/crds/olm.operatorframework.io_*.yaml)
  shopt -u nullglob
  if ((${#crd_files[@]})); then
    for f in "${crd_files[@]}"; do kubectl apply --server-side -f "$f" >/dev/null; done
  else
    (cd "$repo" && cargo run -q --bin olmv1 -- crd) | kubectl apply --server-side -f - >/dev/null
  fi
  # Retried: `kubectl wait` fails at once on a CRD whose status.conditions is still null.
  wait_ready kube-apiserver "the CRDs Established" kubectl wait --for=condition=Established --timeout=5s \
    crd/clusterextensions.olm.operatorframework.io crd/clustercatalogs.olm.operatorframework.io
  # Established can precede discovery by a moment; wait until both resources are listable.
  wait_ready kube-apiserver "the CRDs in discovery" kubectl get clusterextensions,clustercatalogs
  log "CRDs Established ($((SECONDS - started))s)"
fi

# ---------------------------------------------------------------------------------------------
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
pid_list=""
for f in "$pids"/*.pid; do pid_list+="$(basename "$f" .pid):$(cat "$f") "; done
etcd_version=$("$bin/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: //p')
{
  echo "# olmv1 local control plane; source this file. Stop with: hack/local-down.sh $(q "$dir")"
  echo "export OLMV1_ENV_DIR=$(q "$dir")"
  echo "export KUBECONFIG=$(q "$kc")"
  echo "export OLMV1_API_SERVER=$(q "https://127.0.0.1:$api_port")"
  echo "export OLMV1_CA_CERT=$(q "$pki/ca.crt")"
  echo "export OLMV1_REGISTRY=$(q "127.0.0.1:$reg_port")"
  echo "export OLMV1_AUTH_REGISTRY=$(q "127.0.0.1:$auth_reg_port")"
  echo "export OLMV1_AUTH_REGISTRY_USER=$(q "$auth_reg_user")"
  echo "export OLMV1_AUTH_REGISTRY_PASSWORD=$(q "$auth_reg_password")"
  echo "export OLMV1_TOOLS_BIN=$(q "$bin")"
  echo "export OLMV1_KUBECTL=$(q "$bin/kubectl")"
  # Not OLMV1_NODE: that is local-up's input, and sourcing this file must not change the next
  # start's mode.
  ((want_kwok)) && echo "export OLMV1_KWOK_NODE=$(q "$node")"
  if ((want_real)); then
    echo "export OLMV1_REAL_NODE=$(q "$REAL_NODE_NAME")"
    echo "export OLMV1_REAL_NODE_IP=$(q "$node_ip")"
    echo "export OLMV1_REAL_NODE_NETNS=$(q "$node_netns")"
    echo "export OLMV1_POD_CIDR=$(q "$node_pod_cidr")"
  fi
  echo "export OLMV1_SERVICE_CIDR=$(q "$svc_cidr")"
  echo "export OLMV1_KUBE_VERSION=$(q "$KUBE_VERSION")"
  echo "export OLMV1_ETCD_VERSION=$(q "v$etcd_version")"
  echo "export OLMV1_PIDS=$(q "${pid_list% }")"
  echo "export PATH=$(q "$bin"):\"\$PATH\""
} >"$dir/env.sh.tmp"
mv "$dir/env.sh.tmp" "$dir/env.sh"
log "ready in $((SECONDS - started))s: source $dir/env.sh"
echo "$dir/env.sh"
