#!/usr/bin/env bash
# Installs what the tests and the demo need and a fresh machine (Debian bookworm) may lack:
#   Debian packages: docker-registry (OCI registry), openssl (test PKI), apache2-utils (htpasswd
#   for registry Basic auth tests), curl, ca-certificates, podman and runc (hack/deploy-test.sh runs
#   olmv1's image under them; runc because crun refuses hybrid cgroup hierarchies), graphviz
#   (`olmv1 upgrades -o svg`), python3 (the hostile tar corpus);
#   checks Go (>= GO_MIN in hack/versions.env) and cargo;
#   builds the control plane's binaries, kwok and helm from one Go module (hack/build-tools.sh,
#   one cached `go build`) while the packages install (the Go build needs none of them).
# With OLMV1_NODE=real or kwok+real (the real node of hack/local-up.sh), also: containerd (Debian's
#   1.6, CRI v1), containernetworking-plugins (bridge, host-local, loopback, portmap in
#   /usr/lib/cni), iptables, iproute2, gcc and libc6-dev (the static pause binary), and kubelet,
#   kube-proxy, cert-manager and pause (hack/build-tools.sh --node). Not installed otherwise: the kwok-only
#   path stays as it was (containerd alone is ~100 MB installed).
# Safe to run again: it only does what is missing.
# Each step is a phase of $OLMV1_PHASE_LOG (hack/phases.sh): the packages, and each Go tool.
#
# Usage: hack/install-deps.sh [--no-tools]
#   --no-tools  the packages and checks only (hack/test.sh builds the Go tools beside the tests)
set -euo pipefail
no_tools=0
[[ ${1:-} == --no-tools ]] && no_tools=1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
source "$here/phases.sh"
log() { echo "install-deps: $*" >&2; }
die() { log "error: $*"; exit 1; }

# command -> Debian package
declare -A packages=(
  [docker-registry]=docker-registry
  [openssl]=openssl
  [htpasswd]=apache2-utils
  [curl]=curl
  [podman]=podman
  [runc]=runc
  [python3]=python3
  [dot]=graphviz
)
missing=()
for cmd in "${!packages[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
real_node=0
case ${OLMV1_NODE:-kwok} in
  real | kwok+real) real_node=1 ;;
esac
if ((real_node)); then
  declare -A node_packages=(
    [containerd]=containerd
    [containerd-shim-runc-v2]=containerd
    [iptables]=iptables
    [ip]=iproute2
    [nsenter]=util-linux
    [gcc]=gcc
  )
  for cmd in "${!node_packages[@]}"; do
    command -v "$cmd" >/dev/null || missing+=("${node_packages[$cmd]}")
  done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
  # Installing containerd may start Debian's system service (where systemd runs); the real
  # node never uses it: it runs its own with its own socket, root and state dirs.
  ((${#missing[@]})) && mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
fi
# Go: the Kubernetes and kwok modules are built with it (kwok's module asks for Go 1.26; older
# toolchains fetch it through the Go module proxy as golang.org/toolchain when GOTOOLCHAIN allows).
command -v go >/dev/null || die "Go is not installed; install Go ${GO_MIN} or newer"
go_version=$(go env GOVERSION)
go_version=${go_version#go}
if ! printf '%s\n%s\n' "$GO_MIN" "$go_version" | sort -V -C; then
  die "Go $go_version is older than $GO_MIN; install a newer Go"
fi

# Rust: rustup's toolchain (rust-version in Cargo.toml).
if ! command -v cargo >/dev/null; then
  [[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || die "cargo is not installed; install Rust with rustup"

# The Go tools build while the packages install (pause, which needs gcc and libc6-dev, after both),
# unless the CA certificates are among the packages: Go's module downloads need them.
install_packages() {
  phase_begin "deps: packages"
  if ((${#missing[@]} == 0)); then
    phase_end "deps: packages" cached
    return
  fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || die "missing packages (${missing[*]}) and not root; install them"
    sudo=(sudo)
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  phase_end "deps: packages" installed "${#missing[@]} packages"
}
tools_args=()
((real_node)) && tools_args+=(--node)
if ((no_tools)); then
  install_packages
  log "ok without the Go tools (go $go_version, $(cargo --version))"
  exit 0
fi
if [[ " ${missing[*]} " == *" ca-certificates "* ]]; then
  install_packages
  "$here/build-tools.sh" "${tools_args[@]}" --skip pause >/dev/null &
  tools_pid=$!
else
  "$here/build-tools.sh" "${tools_args[@]}" --skip pause >/dev/null &
  tools_pid=$!
  install_packages
fi
wait "$tools_pid" || die "building the Go tools failed (hack/build-tools.sh)"
"$here/build-tools.sh" "${tools_args[@]}" --only pause >/dev/null
log "ok (go $go_version, $(cargo --version))"
