#!/usr/bin/env bash
# Builds upstream OLM v1 (operator-framework/operator-controller: the `operator-controller` and
# `catalogd` binaries) from two local git checkouts, for the side-by-side checks in
# hack/interop.sh and hack/bench-vs-upstream.sh. Nothing of upstream enters this repository.
#
# Usage: hack/upstream.sh UPSTREAM_SRC BOXCUTTER_SRC
#   UPSTREAM_SRC   a checkout of github.com/operator-framework/operator-controller at
#                  $UPSTREAM_COMMIT (hack/versions.env)
#   BOXCUTTER_SRC  a checkout of github.com/package-operator/boxcutter at the tag upstream's
#                  go.mod names ($UPSTREAM_BOXCUTTER_VERSION)
# Prints the bin directory holding both binaries on stdout (cached by commit under
# ~/.cache/olmv1/tools/upstream-<commit>/bin; a cold build takes several minutes on 2 cores).
#
# Why a local boxcutter: the Go module proxy answers 403 for both modules, so the boxcutter
# dependency is replaced by its checkout (through a private copy of go.mod: the checkout is not
# modified) and every other module comes from the proxy. The `containers_image_openpgp` tag is
# upstream's own (Makefile GO_BUILD_TAGS): it avoids cgo and libgpgme.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
log() { echo "upstream: $*" >&2; }
die() { log "error: $*"; exit 1; }

how_to_get="get them with: git clone <operator-controller repo> DIR && git -C DIR checkout $UPSTREAM_COMMIT;
  git clone <boxcutter repo> DIR2 && git -C DIR2 checkout $UPSTREAM_BOXCUTTER_VERSION (see docs/upstream.md)"
(($# == 2)) || die "usage: hack/upstream.sh UPSTREAM_SRC BOXCUTTER_SRC; $how_to_get"
src=$1 box=$2
[[ -f "$src/go.mod" && -d "$src/cmd/operator-controller" ]] ||
  die "$src is not an operator-controller checkout (no go.mod or cmd/operator-controller); $how_to_get"
[[ -f "$box/go.mod" ]] && grep -q '^module pkg.package-operator.run/boxcutter' "$box/go.mod" ||
  die "$box is not a boxcutter checkout (no go.mod of pkg.package-operator.run/boxcutter); $how_to_get"
src=$(cd "$src" && pwd) box=$(cd "$box" && pwd)

# The pin: both checkouts must be at the revisions in hack/versions.env.
head=$(git -C "$src" rev-parse HEAD 2>/dev/null) || die "$src is not a git checkout; $how_to_get"
[[ $head == "$UPSTREAM_COMMIT" ]] || die "$src is at $head, not at the pinned $UPSTREAM_COMMIT; $how_to_get"
box_head=$(git -C "$box" rev-parse HEAD 2>/dev/null) || die "$box is not a git checkout; $how_to_get"
box_tag=$(git -C "$box" rev-parse "$UPSTREAM_BOXCUTTER_VERSION^{commit}" 2>/dev/null) ||
  die "$box has no tag $UPSTREAM_BOXCUTTER_VERSION; $how_to_get"
[[ $box_head == "$box_tag" ]] || die "$box is not at $UPSTREAM_BOXCUTTER_VERSION; $how_to_get"
grep -q "pkg.package-operator.run/boxcutter $UPSTREAM_BOXCUTTER_VERSION" "$src/go.mod" ||
  die "$src/go.mod does not name boxcutter $UPSTREAM_BOXCUTTER_VERSION"

tools_root=${OLMV1_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/tools}
bin="$tools_root/upstream-${UPSTREAM_COMMIT:0:12}/bin"
need=()
for b in operator-controller catalogd; do [[ -x "$bin/$b" ]] || need+=("$b"); done
if ((${#need[@]})); then
  command -v go >/dev/null || die "go is not installed"
  mkdir -p "$bin"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp "$src/go.mod" "$tmp/build.mod"
  cp "$src/go.sum" "$tmp/build.sum"
  (cd "$src" && go mod edit -modfile="$tmp/build.mod" -replace "pkg.package-operator.run/boxcutter=$box")
  version_pkg=github.com/operator-framework/operator-controller/internal/shared/version
  ldflags="-s -w -X '$version_pkg.version=${UPSTREAM_COMMIT:0:12}' -X '$version_pkg.gitCommit=$UPSTREAM_COMMIT'"
  log "building ${need[*]} at ${UPSTREAM_COMMIT:0:12} (a cold build takes several minutes)"
  start=$SECONDS
  for b in "${need[@]}"; do
    (cd "$src" && CGO_ENABLED=0 go build -modfile="$tmp/build.mod" -trimpath \
      -tags containers_image_openpgp -ldflags "$ldflags" -o "$tmp/$b" "./cmd/$b")
    mv "$tmp/$b" "$bin/$b"
  done
  log "built in $((SECONDS - start))s"
fi
echo "$bin"
