#!/usr/bin/env bash
# Builds olmv1's container image from the release build and pushes it with olmv1's own registry
# client (`olmv1 image push`, no Docker):
#   /usr/local/bin/olmv1          the release binary (paths of this checkout remapped, so the bytes
#                                 do not depend on where the repository lives), or the binary
#                                 OLMV1_IMAGE_BINARY names (hack/test.sh: the tests' own build)
#   /lib*/...                     the shared libraries it links, copied from this machine's Debian
#                                 packages (each must belong to an installed package)
#   /etc/ssl/certs/ca-certificates.crt, /etc/passwd, /etc/group (user olmv1, 65532), /etc/nsswitch.conf
# and nothing else; one layer, runs as 65532:65532, OCI labels source/revision/version.
# Reproducible: same binary, libraries, certificates and labels -> same digest (tar entries sorted,
# times and owners zeroed, no creation time in the config).
#
# Usage: hack/image.sh [REF]     REF defaults to $OLMV1_REGISTRY/olmv1:v<version>
# Prints the pushed digest reference (REGISTRY/REPO@sha256:...) on stdout; sizes on stderr.
# Environment: OLMV1_IMAGE_VERSION overrides the version label (e.g. a release tag);
# OLMV1_IMAGE_BINARY an olmv1 binary already built, carried instead of the release build;
# registry credentials as for `olmv1 image push` (REGISTRY_AUTH_FILE, OLMV1_REGISTRY_USERNAME/PASSWORD).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
log() { echo "image: $*" >&2; }
die() { log "error: $*"; exit 1; }
source "$here/rootfs-libs.sh"

[[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)
version=${OLMV1_IMAGE_VERSION:-$version}
if [[ $# -ge 1 ]]; then
  ref=$1
else
  [[ -n "${OLMV1_REGISTRY:-}" ]] || die "no REF given and OLMV1_REGISTRY is not set"
  ref="$OLMV1_REGISTRY/olmv1:v$version"
fi
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
git -C "$repo" diff --quiet HEAD 2>/dev/null || revision="$revision-dirty"
source_url=${OLMV1_IMAGE_SOURCE:-$(git -C "$repo" config --get remote.origin.url 2>/dev/null || echo "https://github.com/olmv1/olmv1")}

if [[ -n ${OLMV1_IMAGE_BINARY:-} ]]; then
  binary=$OLMV1_IMAGE_BINARY
  [[ -x $binary ]] || die "OLMV1_IMAGE_BINARY=$binary is not an executable"
else
  started=$SECONDS
  "$here/release-build.sh" >&2
  log "release build ready in $((SECONDS - started))s"
  binary="$repo/target/release/olmv1"
fi

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
install -D -m 0755 "$binary" "$rootfs/usr/local/bin/olmv1"
strip --strip-debug "$rootfs/usr/local/bin/olmv1" 2>/dev/null || true

# Shared libraries: the loader and every library ldd resolves, at the same paths.
copy_shared_libs "$binary" "$rootfs" || die "the shared libraries of $binary cannot be copied"

ca_bundle=/etc/ssl/certs/ca-certificates.crt
[[ -f $ca_bundle ]] || die "$ca_bundle is missing (apt-get install ca-certificates)"
install -D -m 0644 "$ca_bundle" "$rootfs$ca_bundle"
install -d "$rootfs/etc"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nolmv1:x:65532:65532:olmv1:/nonexistent:/usr/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nolmv1:x:65532:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
chmod 0644 "$rootfs"/etc/passwd "$rootfs"/etc/group "$rootfs"/etc/nsswitch.conf

uncompressed=$(du -sb --apparent-size "$rootfs" | cut -f1)
digest_ref=$("$binary" image push "$rootfs" "$ref" \
  --entrypoint /usr/local/bin/olmv1 --user 65532:65532 \
  --env PATH=/usr/local/bin --env SSL_CERT_FILE=$ca_bundle \
  --label "org.opencontainers.image.source=$source_url" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.title=olmv1" \
  --label "org.opencontainers.image.base.name=scratch")

# The pushed size, from the registry's own manifest (loopback registries are plain HTTP).
registry=${digest_ref%%/*}
path=${digest_ref#*/}
scheme=https
[[ $registry == 127.0.0.1:* || $registry == localhost:* ]] && scheme=http
compressed=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "$scheme://$registry/v2/${path%@*}/manifests/${path#*@}" 2>/dev/null |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])' ||
  echo "?")
log "libraries from: ${shared_lib_packages[*]}"
log "size: $compressed bytes compressed, $uncompressed bytes unpacked"
log "pushed $digest_ref (version $version, revision $revision)"
echo "$digest_ref"
