#!/usr/bin/env bash
# Runs every test of the workspace against one shared local control plane:
#   installs what is missing (hack/install-deps.sh), builds the tests, starts the environment
#   (hack/local-up.sh), runs `cargo test --workspace` with OLMV1_TEST_ENV pointing at it, and stops
#   the environment on exit; then, for a whole run (no arguments), the installed-form test
#   hack/deploy-test.sh (the image under podman, installed with helm and the manifest), whose release build
#   (hack/release-build.sh) runs beside the cargo tests. Exits non-zero when anything fails.
# Extra arguments go to `cargo test` (e.g. `hack/test.sh --test cluster_api`) and skip deploy-test.
# The environment has kwok's node and a real node (kubelet + containerd, tainted: only the tests
# that ask for it run there); OLMV1_NODE=kwok runs without it, and then the real-node tests fail.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."

export OLMV1_NODE=${OLMV1_NODE:-kwok+real}
export OLMV1_E2E_REAL_NODE=1
"$here/install-deps.sh"
[[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"

# Build first, so the control plane does not idle through a long compile.
cargo test --workspace --no-run "$@"

# A whole run ends with deploy-test, whose image needs the release build: it compiles beside the
# cargo tests (which mostly wait on the cluster) instead of after them.
release_pid=
if (($# == 0)); then
  release_log=$(mktemp "${TMPDIR:-/tmp}/olmv1-release-build.XXXXXX")
  "$here/release-build.sh" >"$release_log" 2>&1 &
  release_pid=$!
fi

export OLMV1_ENV_DIR
OLMV1_ENV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-test-env.XXXXXX")
stop_env() {
  local rc=$?
  if [[ -n "$release_pid" ]]; then
    kill "$release_pid" 2>/dev/null || true
  fi
  if ((rc == 0)); then
    "$here/local-down.sh" "$OLMV1_ENV_DIR" || rc=1
  else
    # Keep the logs of a failed run for inspection (CI prints their tails below).
    "$here/local-down.sh" --keep "$OLMV1_ENV_DIR" || true
    if [[ "${CI:-}" == true ]]; then
      for f in "$OLMV1_ENV_DIR"/logs/*.log; do
        [[ -f "$f" ]] || continue
        echo "----- last lines of $f" >&2
        tail -n 20 "$f" >&2
      done
    fi
    echo "test.sh: failed; environment logs kept in $OLMV1_ENV_DIR/logs" >&2
  fi
  exit "$rc"
}
trap stop_env EXIT
export OLMV1_TEST_ENV
OLMV1_TEST_ENV=$("$here/local-up.sh")

cargo test --workspace "$@"
if (($# == 0)); then
  if ! wait "$release_pid"; then
    release_pid=
    cat "$release_log" >&2
    echo "test.sh: the release build failed" >&2
    exit 1
  fi
  release_pid=
  echo "test.sh: release build ready beside the tests ($(grep -h Finished "$release_log" || true))"
  # The installed form runs on kwok: its own environment needs no second real node.
  OLMV1_NODE=kwok "$here/deploy-test.sh"
fi
