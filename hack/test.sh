#!/usr/bin/env bash
# Runs every test of the workspace against one shared local control plane:
#   installs what is missing (hack/install-deps.sh --no-tools: the packages), then builds the Go
#   tools (hack/build-tools.sh) while the tests build (`cargo test --no-run`, which needs neither);
#   starts the environment (hack/local-up.sh); runs `cargo test --workspace` with OLMV1_TEST_ENV
#   pointing at it, and stops the environment on exit; then, for a whole run (no arguments), the
#   installed-form test hack/deploy-test.sh (the image under podman, installed with helm and
#   with the install manifest).
# With the real node, hack/build-tools.sh --node also builds cert-manager for the e2e tests that
#   run it (one `go build` with the other Go tools; hack/cert-manager.sh, called by a test, waits
#   for it rather than starting another). Both images the tests run are
#   made from the tests' own build: the test operator's (hack/test-operator.sh) and olmv1's for
#   deploy-test (OLMV1_IMAGE_BINARY; OLMV1_RELEASE_IMAGE=1 makes and tests the release build's
#   image instead, built beside the tests at nice 19). Its test binaries run in two groups side by side, each
#   against its own environment: the e2e binary (the longest, mostly waiting on the cluster, and
#   the one that restarts kube-apiserver), and every other binary then the doc-tests on a second,
#   kwok-only environment. Exits non-zero when anything fails.
# At its end, also after a failure, it prints a table of its phases (hack/phases.sh): the tools,
# the tests' build, the environment, each test binary, deploy-test (and the release build when
# OLMV1_RELEASE_IMAGE=1 asks for it), with wall
# time and whether each was built, cached, passed or failed; .ci/run prints the same table.
# Extra arguments go to `cargo test` (e.g. `hack/test.sh --test cluster_api`) and skip deploy-test.
# The environment has kwok's node and a real node (kubelet + containerd, tainted: only the tests
# that ask for it run there); OLMV1_NODE=kwok runs without it, and then the real-node tests fail.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
source "$here/phases.sh"
phases_init

export OLMV1_NODE=${OLMV1_NODE:-kwok+real}
export OLMV1_E2E_REAL_NODE=1
[[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "test.sh: $*" >&2; }
whole=0
(($# == 0)) && whole=1
work=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-test.XXXXXX")

# background [--nice N] NAME LOG CMD...: runs CMD as phase NAME in its own process group (so that
# the exit trap can stop it with everything it started: cargo's rustc, go's compilers), output in
# LOG, at nice N (default 0). The phase's result is FAILED, or `built` when the log shows compiling
# work (cargo's "Compiling", build-tools' or cert-manager's "built"), else `cached`. Sets
# background_pid.
# The new session setsid makes is also a scheduling group of its own where the kernel groups
# sessions (sched_autogroup, on by default in Debian's kernels), and a group shares the CPU
# equally with the tests' group whatever its processes' nice: measured, two spinners at nice 19
# in their own session took 63 % of two busy cores against this session's 26 %. So N is set
# on the group too (/proc/self/autogroup; 0.6 % each of the two then).
background_pids=()
background() {
  local nice=0
  if [[ $1 == --nice ]]; then
    nice=$2
    shift 2
  fi
  local name=$1 out=$2
  shift 2
  setsid -w bash -c '
    source "$0/phases.sh"
    nice=$1 name=$2 out=$3
    shift 3
    if ((nice > 0)) && [[ -w /proc/self/autogroup ]]; then
      # The kernel lets a non-admin change a group nice once per 100 ms: try again.
      set_nice=0
      for _ in 1 2 3 4 5 6 7 8 9 10; do
        echo "$nice" 2>/dev/null >/proc/self/autogroup && { set_nice=1; break; }
        sleep 0.1
      done
      ((set_nice)) || echo "test.sh: $name: its scheduling group kept nice 0 (/proc/self/autogroup refused $nice)" >&2
    fi
    phase_begin "$name"
    rc=0
    "$@" >"$out" 2>&1 || rc=$?
    if ((rc != 0)); then
      phase_end "$name" FAILED "exit $rc"
    elif grep -qE "^ *Compiling |: built " "$out"; then
      phase_end "$name" built
    else
      phase_end "$name" cached
    fi
    exit "$rc"' "$here" "$nice" "$name" "$out" nice -n "$nice" "$@" </dev/null &
  background_pid=$!
  background_pids+=("$background_pid")
}

env_dir=
others_env_dir=
finish() {
  local rc=$?
  local pid
  for pid in "${background_pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  # Interrupted while the other binaries ran: their environment stopped too (kept, for its logs).
  [[ -z $others_env_dir || ! -d $others_env_dir/pids ]] || "$here/local-down.sh" --keep "$others_env_dir" >/dev/null 2>&1 || true
  if [[ -n $env_dir ]]; then
    if ((rc == 0)); then
      "$here/local-down.sh" "$env_dir" || rc=1
    else
      # Keep the logs of a failed run for inspection (CI prints their tails below).
      "$here/local-down.sh" --keep "$env_dir" || true
      if [[ "${CI:-}" == true ]]; then
        for f in "$env_dir"/logs/*.log; do
          [[ -f "$f" ]] || continue
          echo "----- last lines of $f" >&2
          tail -n 20 "$f" >&2
        done
      fi
      log "failed; environment logs kept in $env_dir/logs"
    fi
  fi
  # The failed tests' own messages again, last, where a CI log's tail shows them (a long e2e
  # output puts them far from the end otherwise).
  if ((rc != 0)) && [[ -f $work/tests.log ]] && grep -q '^failures:$' "$work/tests.log"; then
    echo "test.sh: what the failed tests said (each binary's failures section, at most 80 lines each):"
    awk '/^failures:$/ { on = 1; n = 0 } on && n < 80 { print; n++ } /^test result:/ { on = 0 }' "$work/tests.log"
  fi
  if ((phases_owner)); then
    echo "test.sh: phases (wall time; start is the offset from the run's start; side by side where they overlap)"
    phases_print
    rm -f "$OLMV1_PHASE_LOG"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT

# 1. What is missing installed: the packages first, in the foreground (sudo may ask for a password;
#    apt is never stopped halfway), then side by side: the Go tools (cert-manager's with the real
#    node), the release build (a whole run, when asked for) and the tests' build (which needs
#    none of them).
"$here/install-deps.sh" --no-tools
build_tools_args=()
[[ $OLMV1_NODE == *real* ]] && build_tools_args+=(--node)
background "deps: hack/build-tools.sh" "$work/deps.log" "$here/build-tools.sh" "${build_tools_args[@]}"
deps_pid=$background_pid
release_pid=
if ((whole)); then
  # deploy-test's image carries the tests' own olmv1 binary: a release build would compile every
  # dependency a second time, with optimizations, the largest CPU cost of a cold run. The release
  # build of the image, when asked for, at the lowest priority: it takes what the tests leave.
  if [[ ${OLMV1_RELEASE_IMAGE:-} == 1 ]]; then
    unset OLMV1_IMAGE_BINARY
    background --nice 19 "release build (nice 19)" "$work/release.log" "$here/release-build.sh"
    release_pid=$background_pid
  fi
fi

phase_begin "cargo test build"
set +e
if ((whole)); then
  # Its JSON messages name every test executable (hack/test-executables.py), run below.
  cargo test --workspace --no-run --locked --message-format=json-render-diagnostics 2>&1 >"$work/build.json" |
    tee "$work/build.log" >&2
else
  cargo test --workspace --no-run "$@" 2>&1 | tee "$work/build.log" >&2
fi
build_rc=${PIPESTATUS[0]}
set -e
if ((build_rc != 0)); then
  phase_end "cargo test build" FAILED "exit $build_rc"
  exit "$build_rc"
fi
phase_end "cargo test build" "$(grep -q '^ *Compiling ' "$work/build.log" && echo built || echo cached)"

if ! wait "$deps_pid"; then
  cat "$work/deps.log" >&2
  log "hack/build-tools.sh failed"
  exit 1
fi
grep -v '^go: downloading' "$work/deps.log" >&2 || true
log "dependencies ready in ${SECONDS}s"

# 2. The environment, and every test binary against it, each one a phase; a whole run adds a second
#    environment for the binaries other than e2e (below).
env_dir=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-test-env.XXXXXX")
export OLMV1_ENV_DIR=$env_dir OLMV1_TEST_ENV
OLMV1_TEST_ENV=$(phase "environment up ($OLMV1_NODE)" "$here/local-up.sh")

# run_test_executables e2e|others: each test executable of the tests' build (e2e's, or all but
# e2e's), as cargo test runs it: from its package's directory, after cargo's "Running" line; all of
# them, also after a failure (like --no-fail-fast); fails when any failed.
run_test_executables() {
  local dir src exe rc=0
  while IFS=$'\t' read -r dir src exe; do
    echo "     Running $src (${exe#"$PWD"/})"
    (cd "$dir" && CARGO_MANIFEST_DIR=$dir "$exe") || rc=1
  done < <("$here/test-executables.py" "$1" <"$work/build.json")
  return "$rc"
}

# test_phases: copies cargo test's output through, and records a phase per test binary (from
# cargo's "Running" or "Doc-tests" line to the next), named by its crate and source, ok or FAILED
# from its "test result" line.
test_phases() {
  local line name="" result=""
  end_test_phase() {
    [[ -n $name ]] || return 0
    if [[ -n $result ]]; then phase_end "$name" "$result"; else phase_end "$name" FAILED "no test result"; fi
  }
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line"
    if [[ $line =~ ^\ +Running\ (.*)\ \(.*/([^/]+)-[0-9a-f]+\)$ ]]; then
      end_test_phase
      name="test: ${BASH_REMATCH[2]} (${BASH_REMATCH[1]})" result=""
      phase_begin "$name"
    elif [[ $line =~ ^\ +Doc-tests\ (.*)$ ]]; then
      end_test_phase
      name="test: ${BASH_REMATCH[1]} (doc-tests)" result=""
      phase_begin "$name"
    elif [[ $line =~ ^test\ result:\ (ok|FAILED) ]]; then
      result=${BASH_REMATCH[1]}
    fi
  done
  end_test_phase
}
if ((!whole)); then
  cargo test --workspace "$@" 2>&1 | tee "$work/tests.log" | test_phases
else
  # The e2e binary here, streamed; the others meanwhile on a kwok-only environment of their own,
  # their output printed as one block once both are done. Each executable of the tests' build is
  # run as cargo test runs it (hack/test-executables.py says why not through cargo).
  others_env_dir=$(mktemp -d "${TMPDIR:-/tmp}/olmv1-test-env.XXXXXX")
  others_env=$(OLMV1_ENV_DIR=$others_env_dir OLMV1_NODE=kwok phase "environment up (kwok, other binaries)" "$here/local-up.sh")
  (
    export OLMV1_TEST_ENV=$others_env OLMV1_ENV_DIR=$others_env_dir OLMV1_NODE=kwok
    rc=0
    run_test_executables others 2>&1 | test_phases || rc=$?
    cargo test --workspace --locked --doc 2>&1 | test_phases || rc=$?
    if ((rc == 0)); then
      "$here/local-down.sh" "$others_env_dir" >&2 || rc=1
    else
      "$here/local-down.sh" --keep "$others_env_dir" >&2 || true
      echo "test.sh: failed; the other binaries' environment logs kept in $others_env_dir/logs" >&2
    fi
    exit "$rc"
  ) >"$work/others.log" &
  others_pid=$!
  e2e_rc=0
  run_test_executables e2e 2>&1 | tee "$work/tests.log" | test_phases || e2e_rc=$?
  others_rc=0
  wait "$others_pid" || others_rc=$?
  echo "test.sh: the other test binaries and the doc-tests, run beside e2e:"
  cat "$work/others.log"
  cat "$work/others.log" >>"$work/tests.log"
  ((e2e_rc == 0 && others_rc == 0)) || exit 1
fi

# 3. The installed form: its image carries the olmv1 binary the tests ran (or the release build,
#    once ready, with OLMV1_RELEASE_IMAGE=1).
if ((whole)); then
  if [[ -n $release_pid ]]; then
    phase_begin "release build: waited for"
    if ! wait "$release_pid"; then
      phase_end "release build: waited for" FAILED
      cat "$work/release.log" >&2
      log "the release build failed"
      exit 1
    fi
    phase_end "release build: waited for" ok
    log "release build ready beside the tests ($(grep -h Finished "$work/release.log" || true))"
  else
    OLMV1_IMAGE_BINARY=$("$here/test-executables.py" binary olmv1 <"$work/build.json")
    export OLMV1_IMAGE_BINARY
  fi
  # The installed form runs on kwok: its own environment needs no second real node.
  OLMV1_NODE=kwok phase deploy-test "$here/deploy-test.sh"
fi
