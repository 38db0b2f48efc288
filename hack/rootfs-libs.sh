# shellcheck shell=bash
# Sourced by the scripts that put a dynamically linked binary into an image with no base
# (hack/image.sh, hack/test-operator.sh).
#
# copy_shared_libs BINARY ROOTFS: copies the loader and every library `ldd BINARY` resolves into
# ROOTFS at the same paths, each from an installed Debian package (an image then carries nothing
# this machine's packages do not); sets shared_lib_packages to the sorted "package=version" list.
copy_shared_libs() {
  local binary=$1 rootfs=$2 lib owner pkg
  local -a found=()
  while read -r lib; do
    [[ -f "$lib" ]] || { echo "copy_shared_libs: ldd names $lib, which does not exist" >&2; return 1; }
    owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null) ||
      { echo "copy_shared_libs: $lib belongs to no installed Debian package" >&2; return 1; }
    pkg=${owner%%:*}
    found+=("$pkg=$(dpkg-query -W -f='${Version}' "$pkg")")
    install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done < <(ldd "$binary" | grep -o '/[^ ]*')
  mapfile -t shared_lib_packages < <(printf '%s\n' "${found[@]}" | sort -u)
}
