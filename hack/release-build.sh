#!/usr/bin/env bash
# The release build of olmv1 that the image carries (hack/image.sh), with this checkout's and
# cargo's paths remapped out of panic locations, so the bytes do not depend on where the
# repository lives. hack/test.sh starts it beside the cargo tests of a whole run, so that
# deploy-test's image step finds it built.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
export RUSTFLAGS="--remap-path-prefix=$repo=/olmv1 --remap-path-prefix=$cargo_home=/cargo"
cd "$repo"
exec cargo build --release --locked --bin olmv1
