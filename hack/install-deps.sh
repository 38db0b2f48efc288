#!/usr/bin/env bash
# Installs what the tests and the demo need and a fresh machine (Debian bookworm) may lack:
#   Debian packages: docker-registry (OCI registry), openssl (test PKI), apache2-utils (htpasswd
#   for registry Basic auth tests), curl, ca-certificates, podman and runc (hack/deploy-test.sh runs
#   olmv1's image under them; runc because crun refuses hybrid cgroup hierarchies), graphviz
#   (`olmv1 upgrades -o svg`);
#   checks Go (>= GO_MIN in hack/versions.env) and cargo;
#   builds the control plane's binaries from Go modules (hack/build-tools.sh, cached by version).
# Safe to run again: it only does what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
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
  [dot]=graphviz
)
missing=()
for cmd in "${!packages[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || die "missing packages (${missing[*]}) and not root; install them"
    sudo=(sudo)
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
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

"$here/build-tools.sh" >/dev/null
log "ok (go $go_version, $(cargo --version))"
