#!/usr/bin/env bash
# Stops a local control plane started by hack/local-up.sh: every process named in its pids/ dir
# (TERM, then KILL after 10 s), a real node's containers, shims, namespaces, mounts, cgroups,
# routes and nat chain (hack/real-node.sh), then removes the environment directory. Scripts that add processes
# (hack/demo.sh) write pids/PROGRAM@ROLE.pid; such a process must have a path under the env dir
# on its command line (e.g. --kubeconfig DIR/kubeconfig), which is how a recycled pid is told apart.
#
# Usage: hack/local-down.sh [--keep] [DIR | DIR/env.sh]   (default: $OLMV1_ENV_DIR)
#   --keep   stop the processes but keep the directory (logs, data) for inspection
set -euo pipefail
keep=0
if [[ "${1:-}" == --keep ]]; then
  keep=1
  shift
fi
target=${1:-${OLMV1_ENV_DIR:-}}
[[ -n "$target" ]] || { echo "usage: hack/local-down.sh [--keep] DIR|ENV_FILE" >&2; exit 2; }
[[ -f "$target" ]] && target=$(dirname "$target")
[[ -d "$target" ]] || { echo "local-down: $target does not exist; nothing to stop" >&2; exit 0; }
dir=$(cd "$target" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source "$here/real-node.sh"

# A pid only counts while it still runs a program from this environment's command line; a
# recycled pid of some other process is never signalled.
ours() { # PID NAME
  local exe cmd want=${2%%@*} # pids/PROGRAM@ROLE.pid: a process of PROGRAM (e.g. olmv1@controller)
  [[ $want == registry ]] && want=docker-registry
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  # A binary replaced while it runs (cargo build, apt upgrade) reads "PATH (deleted)".
  exe=${exe% (deleted)}
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $(basename "$exe") == "$want" && $cmd == *"$dir/"* ]]
}

stopped=()
# stop NAME...: TERM to each, then wait for all of them (KILL after 10 s).
stop() {
  local name pid f
  local -A group=()
  for name in "$@"; do
    f="$dir/pids/$name.pid"
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    if ours "$pid" "$name"; then
      kill -TERM "$pid" 2>/dev/null || true
      group[$name]=$pid
      stopped+=("$name")
    fi
    rm -f "$f"
  done
  local deadline=$((SECONDS + 10))
  for name in "${!group[@]}"; do
    pid=${group[$name]}
    while kill -0 "$pid" 2>/dev/null && ours "$pid" "$name"; do
      if ((SECONDS >= deadline)); then
        echo "local-down: $name ($pid) ignored TERM; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
  done
}

shopt -s nullglob
# Whatever runs on top of the control plane first (pids/PROGRAM@ROLE.pid and any other), then the
# controllers and the registry, then the API server, then etcd: each stage stops while what it
# depends on still answers, so nothing hangs waiting for a vanished dependency.
others=()
for f in "$dir"/pids/*.pid; do
  name=$(basename "$f" .pid)
  case $name in
    kwok | kube-scheduler | kube-controller-manager | registry | kube-apiserver | etcd) ;;
    kubelet | kube-proxy | containerd) ;; # real_node_down, in its order
    *) others+=("$name") ;;
  esac
done
((${#others[@]})) && stop "${others[@]}"
# The real node (hack/real-node.sh) while the API server still answers its kubelet.
real_node_down "$dir"
stop kwok kube-scheduler kube-controller-manager registry
stop kube-apiserver
stop etcd
rm -f "$dir"/pids/*.pid

if ((keep)); then
  echo "local-down: stopped ${stopped[*]:-nothing}; kept $dir" >&2
else
  rm -rf "$dir"
  echo "local-down: stopped ${stopped[*]:-nothing}; removed $dir" >&2
fi
