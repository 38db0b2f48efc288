# shellcheck shell=bash
# A real node (containerd + runc + CNI bridge, kubelet, kube-proxy) for hack/local-up.sh, and its
# teardown for hack/local-down.sh. Sourced by both; not run on its own.
#
# Isolation: each real node gets a slot N (0..REAL_NODE_SLOTS-1), taken atomically by mkdir of
# $REAL_NODE_LOCKS/slot-N (its `owner` file names the env dir), so two environments on one machine
# never share addresses, a network namespace or a cgroup:
#   network namespace olmv1-node-N, joined to the host by the veth pair olmv1hN <-> eth0:
#     host side 10.201.N.1/30 (the API server's advertise address), namespace side 10.201.N.2/30
#     (the node's IP); pods on the namespace's bridge cni0 in 10.202.N.0/24; Services in
#     10.203.N.0/24. The host routes both /24s to 10.201.N.2 and nothing else: the namespace has no
#     default route, so nothing a pod sends can leave the machine.
#   the host's nat PREROUTING jumps to chain OLMV1-NODE-N for packets from olmv1hN: it maps
#     10.201.N.1:<port> of the API server and the two registries to 127.0.0.1:<port>
#     (route_localnet on olmv1hN only), so they stay bound to loopback.
#   a persistent mount namespace ($dir/node/ns/mnt, a slave of the host's) holds every mount that
#     containerd and kubelet make (rootfs overlays, volumes' tmpfs, pods' netns files under a
#     private /run/netns, the CNI cache): releasing it releases them all, the host never sees one.
#   cgroup v1 parent /olmv1-node-N in every hierarchy (kubelet's cgroupRoot).

REAL_NODE_LOCKS=/run/olmv1-real-node
# Four real nodes at once is more than two cores can run; each slot is one /24 per range.
REAL_NODE_SLOTS=4
REAL_NODE_NAME=real-node-0
REAL_NODE_TAINT_KEY=olmv1.dev/real-node
REAL_NODE_LABEL=olmv1.dev/real-node
# The tag of the sandbox image built from Kubernetes' pause.c.
REAL_NODE_PAUSE_REPO=olmv1/pause
REAL_NODE_CGROUP_HIERARCHIES=(unified cpu cpuacct cpuset memory devices freezer blkio pids systemd net_cls net_prio perf_event hugetlb rdma misc)

# real_node_addresses SLOT: sets the addresses of slot SLOT.
real_node_addresses() {
  local n=$1
  node_slot=$n
  node_netns=olmv1-node-$n
  node_veth=olmv1h$n
  node_host_ip=10.201.$n.1
  node_ip=10.201.$n.2
  node_pod_cidr=10.202.$n.0/24
  node_svc_cidr=10.203.$n.0/24
  node_svc_ip=10.203.$n.1
  node_chain=OLMV1-NODE-$n
  node_cgroup=olmv1-node-$n
}

# real_node_claim DIR: takes a free slot for the env in DIR (a slot whose owner's env dir is gone
# is cleaned and taken over) and prepares its network (before kube-apiserver, which advertises
# the host side's address). Fails naming the envs that hold every slot. Call it as a plain
# statement under `set -e` (not in a condition or $(...), where errexit does not apply).
real_node_fail() {
  echo "local-up: error: real node: $*" >&2
  return 1
}
real_node_claim() {
  local dir=$1 n owner holders=()
  [[ $EUID == 0 ]] || { real_node_fail "it needs root (network and mount namespaces, cgroups)"; return 1; }
  for cmd in containerd containerd-shim-runc-v2 runc ip iptables nsenter unshare; do
    command -v "$cmd" >/dev/null || { real_node_fail "$cmd is not installed (run OLMV1_NODE=real hack/install-deps.sh)"; return 1; }
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    { real_node_fail "the CNI plugins are not in /usr/lib/cni (run OLMV1_NODE=real hack/install-deps.sh)"; return 1; }
  mkdir -p "$REAL_NODE_LOCKS" "$dir/node"
  for ((n = 0; n < REAL_NODE_SLOTS; n++)); do
    if mkdir "$REAL_NODE_LOCKS/slot-$n" 2>/dev/null; then
      # node/slot before owner: whoever reads an owner also finds its node/slot (not stale).
      echo "$n" >"$dir/node/slot"
      echo "$dir" >"$REAL_NODE_LOCKS/slot-$n/owner"
      break
    fi
    owner=$(cat "$REAL_NODE_LOCKS/slot-$n/owner" 2>/dev/null || true)
    if [[ -n "$owner" && ! -f "$owner/node/slot" ]]; then
      # The env that held it is gone (removed without local-down): clean what it left, take it.
      echo "local-up: real node slot $n: its env $owner is gone; removing its network" >&2
      real_node_addresses "$n"
      real_node_release_network
      echo "$n" >"$dir/node/slot"
      echo "$dir" >"$REAL_NODE_LOCKS/slot-$n/owner"
      break
    fi
    holders+=("${owner:-?}")
  done
  ((n < REAL_NODE_SLOTS)) || {
    real_node_fail "all $REAL_NODE_SLOTS real-node slots of this machine are taken (by ${holders[*]}); stop one with hack/local-down.sh DIR"
    return 1
  }
  real_node_addresses "$n"
  # Nothing else on this machine may route the slot's ranges.
  local r
  for r in 10.201.$n.0/30 "$node_pod_cidr" "$node_svc_cidr"; do
    if ip -4 route show match "$r" | grep -v '^default' | grep -q .; then
      real_node_fail "the host already routes $r ($(ip -4 route show match "$r" | grep -v '^default' | head -1)); slot $n cannot be used"
      return 1
    fi
  done
  ip netns add "$node_netns"
  ip link add "$node_veth" type veth peer name eth0 netns "$node_netns"
  ip addr add "$node_host_ip/30" dev "$node_veth"
  ip link set "$node_veth" up
  ip -n "$node_netns" addr add "$node_ip/30" dev eth0
  ip -n "$node_netns" link set eth0 up
  ip -n "$node_netns" link set lo up
  ip netns exec "$node_netns" sysctl -qw net.ipv4.ip_forward=1
  ip route add "$node_pod_cidr" via "$node_ip" dev "$node_veth"
  ip route add "$node_svc_cidr" via "$node_ip" dev "$node_veth"
  # Packets from the namespace to 10.201.N.1 are mapped to loopback ports (OLMV1-NODE-N).
  sysctl -qw "net.ipv4.conf.$node_veth.route_localnet=1"
  iptables -t nat -N "$node_chain"
  iptables -t nat -A PREROUTING -i "$node_veth" -j "$node_chain" -m comment --comment "olmv1 real node $n"
}

# real_node_forward PORT...: maps 10.201.N.1:PORT to 127.0.0.1:PORT for the namespace.
real_node_forward() {
  local p
  for p in "$@"; do
    iptables -t nat -A "$node_chain" -d "$node_host_ip" -p tcp --dport "$p" -j DNAT --to-destination "127.0.0.1:$p"
  done
}

# real_node_release_network: removes the slot's namespace, veth, routes and nat chain (each step
# tolerates its part being gone already).
real_node_release_network() {
  ip netns del "$node_netns" 2>/dev/null || true # takes eth0, hence olmv1hN, and the routes
  ip link del "$node_veth" 2>/dev/null || true
  ip route del "$node_pod_cidr" 2>/dev/null || true
  ip route del "$node_svc_cidr" 2>/dev/null || true
  while iptables -t nat -D PREROUTING -i "$node_veth" -j "$node_chain" -m comment --comment "olmv1 real node $node_slot" 2>/dev/null; do :; done
  iptables -t nat -F "$node_chain" 2>/dev/null || true
  iptables -t nat -X "$node_chain" 2>/dev/null || true
}

# real_node_mount_ns DIR: the persistent mount namespace (see the header) with private tmpfs on
# the host paths containerd and the CNI plugins write to no matter their configuration.
real_node_mount_ns() {
  local dir=$1 ns=$1/node/ns
  mkdir -p "$ns"
  # The file a mount namespace is bound to must sit on a private mount.
  mount --bind "$ns" "$ns"
  mount --make-private "$ns"
  touch "$ns/mnt"
  # kubelet wants these machine-wide sysctls (pkg/kubelet/cm setupKernelTunables) and, unless
  # protectKernelDefaults, writes them: kernel.panic_on_oops=1 would make any oops of this shared
  # machine a reboot. Inside the namespace it reads its values from read-only files instead
  # (protectKernelDefaults: true, so it checks and never writes).
  local sysctls=$dir/node/sysctl
  mkdir -p "$sysctls"
  echo 1 >"$sysctls/vm.overcommit_memory"
  echo 0 >"$sysctls/vm.panic_on_oom"
  echo 10 >"$sysctls/kernel.panic"
  echo 1 >"$sysctls/kernel.panic_on_oops"
  echo 1000000 >"$sysctls/kernel.keys.root_maxkeys"
  echo 25000000 >"$sysctls/kernel.keys.root_maxbytes"
  unshare --mount="$ns/mnt" --propagation slave sh -c '
    set -e
    mkdir -p /run/netns /var/lib/cni /run/containerd
    mount -t tmpfs -o mode=755 olmv1-netns /run/netns
    mount -t tmpfs -o mode=755 olmv1-cni /var/lib/cni
    mount -t tmpfs -o mode=711 olmv1-containerd /run/containerd
    for f in "$1"/*; do
      target=/proc/sys/$(basename "$f" | tr . /)
      mount --bind "$f" "$target"
      mount -o remount,bind,ro "$target"
    done
  ' sh "$sysctls"
}

# in_node DIR CMD...: becomes CMD (exec) in the node's network and mount namespaces, so that
# `start NAME in_node ...` records CMD's own pid.
in_node() {
  local dir=$1
  shift
  exec nsenter --net="/run/netns/$node_netns" --mount="$dir/node/ns/mnt" -- "$@"
}

real_node_cgroups() {
  local h
  for h in "${REAL_NODE_CGROUP_HIERARCHIES[@]}"; do
    [[ -d /sys/fs/cgroup/$h ]] || continue
    mkdir -p "/sys/fs/cgroup/$h/$node_cgroup"
    if [[ $h == cpuset ]]; then
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$node_cgroup/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$node_cgroup/cpuset.mems"
    fi
  done
}

# real_node_configs DIR API_PORT REGISTRY... : containerd, CNI, kubelet and kube-proxy files.
# TAINT=1 registers the node with the NoSchedule taint (kwok+real).
real_node_configs() {
  local dir=$1 api_port=$2 taint=$3 pause_ref=$4
  shift 4
  local nd=$dir/node reg
  mkdir -p "$nd/containerd/certs.d" "$nd/cni/net.d" "$nd/cni/ipam" "$nd/kubelet" "$nd/pod-logs"
  cat >"$nd/containerd/config.toml" <<EOF
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$nd/containerd/containerd.sock"
[ttrpc]
  address = "$nd/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's bounding set lacks CAP_SYS_RESOURCE: lowering oom_score_adj (-998 for the
  # sandbox) fails in runc ("can't get final child's PID from pipe: EOF"); keep it >= ours.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$nd/containerd/certs.d"
EOF
  # Images are named 127.0.0.1:PORT/... (the registries' loopback addresses, as everywhere else);
  # from the node's namespace the same registry answers at 10.201.N.1:PORT.
  for reg in "$@"; do
    mkdir -p "$nd/containerd/certs.d/$reg"
    cat >"$nd/containerd/certs.d/$reg/hosts.toml" <<EOF
server = "http://$reg"
[host."http://$node_host_ip:${reg##*:}"]
  capabilities = ["pull", "resolve"]
EOF
  done
  cat >"$nd/cni/net.d/10-olmv1.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "olmv1",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$nd/cni/ipam",
        "ranges": [[{"subnet": "$node_pod_cidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  local taints=""
  ((taint)) && taints="registerWithTaints:
- key: $REAL_NODE_TAINT_KEY
  value: \"true\"
  effect: NoSchedule"
  cat >"$nd/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine: kubelet (1.36) still runs on it when told not to fail.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /$node_cgroup
enforceNodeAllocatable: [pods]
failSwapOn: false
# Checked against the namespace's read-only copies, never written (real_node_mount_ns).
protectKernelDefaults: true
containerRuntimeEndpoint: unix://$nd/containerd/containerd.sock
imageServiceEndpoint: unix://$nd/containerd/containerd.sock
podLogsDir: $nd/pod-logs
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# Only the API server reaches 10.201.N.2 (from the host): client certificates of the env's client
# CA, all allowed (a webhook would need RBAC for system:nodes' reviews).
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/client-ca.crt}
authorization:
  mode: AlwaysAllow
# No cluster DNS here: pods reach the API server by the kubernetes Service's IP.
resolvConf: ""
# A shared build machine's disk is often fuller than the defaults allow; only a nearly full one
# should evict.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
maxPods: 110
$taints
EOF
  cat >"$nd/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $nd/kube-proxy.kubeconfig
hostnameOverride: $REAL_NODE_NAME
clusterCIDR: $node_pod_cidr
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  # A pod that calls a Service backed by a pod on the same bridge gets its answer through the
  # gateway (no br_netfilter needed).
  masqueradeAll: true
# nf_conntrack_max and the conntrack timeouts are machine-wide: leave them as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

# real_node_kubeconfig FILE CERT KEY: a kubeconfig for the node's side of 10.201.N.1.
real_node_kubeconfig() {
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: olmv1-local
  cluster:
    server: https://$node_host_ip:$api_port
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: node
  user:
    client-certificate-data: $($b64 <"$2")
    client-key-data: $($b64 <"$3")
contexts:
- name: olmv1-local
  context: {cluster: olmv1-local, user: node}
current-context: olmv1-local
EOF
  chmod 600 "$1"
}

# real_node_down DIR: stops and removes everything real_node_* started for the env in DIR, in
# order: kubelet and kube-proxy (no restarts of what is killed next), every process in the node's
# cgroups (the containers, pause included), containerd's shims, containerd, the mount namespace
# (every mount with it), the cgroups, the network, the slot. Safe when parts are missing.
real_node_down() {
  local dir=$1 pid f h
  [[ -f "$dir/node/slot" ]] || return 0
  real_node_addresses "$(cat "$dir/node/slot")"
  # A slot taken over by another environment since (this one stopped without releasing it) is
  # that one's: its cgroups, network and lock are left alone; only what this dir started stops.
  local owner ours=1
  owner=$(cat "$REAL_NODE_LOCKS/slot-$node_slot/owner" 2>/dev/null || true)
  if [[ -n $owner && $owner != "$dir" ]]; then
    ours=0
    echo "local-down: real-node slot $node_slot now belongs to $owner: its network and cgroups are left alone" >&2
  fi
  for f in kubelet kube-proxy; do
    if [[ -f "$dir/pids/$f.pid" ]]; then stop "$f"; fi
  done
  # The containers: everything in the slot's cgroups (their shims are outside them).
  for _ in 1 2 3; do
    ((ours)) || break
    local pids_left=()
    for f in /sys/fs/cgroup/pids/"$node_cgroup"/{,*/,*/*/,*/*/*/,*/*/*/*/}cgroup.procs; do
      [[ -f "$f" ]] || continue
      # A container's cgroup may go between the glob and the read (its runtime removes it once
      # the kill of the round before took effect): 2>/dev/null before the redirection.
      while read -r pid; do pids_left+=("$pid"); done 2>/dev/null <"$f" || true
    done
    ((${#pids_left[@]})) || break
    kill -KILL "${pids_left[@]}" 2>/dev/null || true
    sleep 0.2
  done
  # containerd-shim-runc-v2 -namespace k8s.io -id ID -address DIR/node/containerd/containerd.sock
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    # A process may exit between the glob and the read: 2>/dev/null before the redirection.
    if [[ $(tr '\0' ' ' 2>/dev/null <"$f") == *containerd-shim*"-address $dir/node/containerd/containerd.sock"* ]]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if [[ -f "$dir/pids/containerd.pid" ]]; then stop containerd; fi
  # Releasing the mount namespace's file unmounts every mount inside it once nothing runs there.
  umount "$dir/node/ns/mnt" 2>/dev/null || true
  umount "$dir/node/ns" 2>/dev/null || true
  # Cgroups, deepest first (empty now).
  for h in "${REAL_NODE_CGROUP_HIERARCHIES[@]}"; do
    ((ours)) || break
    [[ -d /sys/fs/cgroup/$h/$node_cgroup ]] || continue
    find "/sys/fs/cgroup/$h/$node_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
    if [[ -d /sys/fs/cgroup/$h/$node_cgroup ]]; then
      echo "local-down: cgroup $h/$node_cgroup is still in use" >&2
    fi
  done
  ((ours)) && real_node_release_network
  if [[ $(cat "$REAL_NODE_LOCKS/slot-$node_slot/owner" 2>/dev/null) == "$dir" ]]; then
    rm -rf "${REAL_NODE_LOCKS:?}/slot-$node_slot"
  fi
  rm -f "$dir/node/slot"
}
