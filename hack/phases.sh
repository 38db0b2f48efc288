# shellcheck shell=bash
# Phase timings of a run (sourced, not run): .ci/run, hack/test.sh and every script they call
# (hack/install-deps.sh, build-tools.sh, release-build.sh, cert-manager.sh, test-operator.sh, ...)
# append a begin and an end line per phase to one file, $OLMV1_PHASE_LOG, inherited by child
# processes (the test binaries' scripts included); the script that created it prints the table
# at its end, also after a failure, so a slow phase shows itself in every CI log:
#
#   phase                                        start    wall  result
#   deps: go build kube-apiserver,...             0:21    386s  built
#   cargo test build                              6:40    283s  built
#   ...
#
# start is the offset from the log's creation; phases overlap where they run side by side.
# result: built (work done), cached (nothing to do), ok (ran and passed), FAILED, or unfinished
# (begun, never ended: killed, or still running at the end). A phase found cached again after its
# first row (a tool each test binary asks for) is not repeated.
# Without $OLMV1_PHASE_LOG (a script run by hand) the phase functions do nothing.

# phases_init: makes a new log unless one is inherited; phases_owner=1 when this process made it.
phases_init() {
  phases_owner=0
  if [[ -z ${OLMV1_PHASE_LOG:-} ]]; then
    OLMV1_PHASE_LOG=$(mktemp "${TMPDIR:-/tmp}/olmv1-phases.XXXXXX")
    printf 'S\t%s\n' "$EPOCHREALTIME" >>"$OLMV1_PHASE_LOG"
    phases_owner=1
  fi
  export OLMV1_PHASE_LOG
}

# phase_begin NAME
phase_begin() {
  [[ -n ${OLMV1_PHASE_LOG:-} ]] || return 0
  printf 'B\t%s\t%s\n' "$EPOCHREALTIME" "$1" >>"$OLMV1_PHASE_LOG"
}

# phase_end NAME RESULT [NOTE]
phase_end() {
  [[ -n ${OLMV1_PHASE_LOG:-} ]] || return 0
  printf 'E\t%s\t%s\t%s\t%s\n' "$EPOCHREALTIME" "$1" "$2" "${3:-}" >>"$OLMV1_PHASE_LOG"
}

# phase NAME CMD...: runs CMD as one phase, result ok or FAILED; returns CMD's status.
phase() {
  local name=$1 rc=0
  shift
  phase_begin "$name"
  "$@" || rc=$?
  if ((rc == 0)); then phase_end "$name" ok; else phase_end "$name" FAILED "exit $rc"; fi
  return "$rc"
}

# phases_print [FILE]: the table, in start order, to stdout.
phases_print() {
  local file=${1:-${OLMV1_PHASE_LOG:-}}
  [[ -n $file && -f $file ]] || return 0
  local now=$EPOCHREALTIME
  awk -F'\t' -v now="$now" '
    function clock(s) { s = int(s + 0.5); return sprintf("%d:%02d", int(s / 60), s % 60) }
    $1 == "S" { origin = $2 }
    # Phases of one name may overlap (two test binaries asking for the same tool at once): each
    # end closes the oldest begin of its name still open.
    $1 == "B" { n++; name[n] = $3; begin[n] = $2; open[$3] = open[$3] " " n }
    $1 == "E" {
      i = ""
      if (open[$3] != "") {
        split(open[$3], ids, " "); i = ids[1]
        sub(/^ [0-9]+/, "", open[$3])
      }
      if (i == "") { n++; i = n; name[i] = $3; begin[i] = $2 }
      end[i] = $2; result[i] = $4; note[i] = $5
    }
    END {
      if (origin == "") origin = begin[1]
      printf "%-52s %7s %7s  %s\n", "phase", "start", "wall", "result"
      for (i = 1; i <= n; i++) {
        r = result[i]; e = end[i]
        if (e == "") { r = "unfinished"; e = now }
        # A tool asked for again (each test binary that needs it) is one row, not one per ask.
        if (r == "cached" && (name[i] in seen)) continue
        seen[name[i]] = 1
        line = sprintf("%-52s %7s %6ds  %s", name[i], clock(begin[i] - origin), int(e - begin[i] + 0.5), r)
        if (note[i] != "") line = line " (" note[i] ")"
        print line
      }
      printf "%-52s %7s %6ds\n", "total", "", int(now - origin + 0.5)
    }' "$file"
}
