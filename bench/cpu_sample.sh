#!/usr/bin/env bash
# bench/cpu_sample.sh OUT NAME=PIDS...: writes to OUT one "NAME TICKS" line per group of processes,
# the CPU time (user + system, in clock ticks) they have used so far, plus "loadgen" (the
# idem-loadgen that runs this as its --before-measure/--after-measure hook). bench/run.sh takes two
# samples around a measured phase and divides the difference by the requests served. (No figure for
# the whole machine: /proc/stat's tick-sampled totals came out below the processes' own times here.)
#
#   PIDS   comma-separated process IDs; a PID prefixed "tree:" also counts its children, live
#          (their own times) and exited (the cutime/cstime the parent collected), as a Postgres
#          postmaster or an nginx master reaps its backends and workers.
# A process that is gone counts 0: a sample never fails the run it measures.
set -u
out=$1
shift

# ticks PID [with_children]: user + system of PID (every thread), plus what it collected from its
# exited children when asked.
ticks() {
  local fields with_children=${2:-}
  # Fields after the command name, which may hold spaces: utime is the 12th, stime 13th,
  # cutime 14th, cstime 15th of what follows ") ".
  fields=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  # shellcheck disable=SC2086
  set -- $fields
  if [ "$with_children" = with_children ]; then
    echo $(("${12}" + "${13}" + "${14}" + "${15}"))
  else
    echo $(("${12}" + "${13}"))
  fi
}

# tree_ticks PID: PID with its children, live and exited. A child reaped while its live
# siblings are read would count twice or not at all: read again until the parent's figure holds.
tree_ticks() {
  local parent before sum child
  for _ in 1 2 3 4 5; do
    parent=$(ticks "$1" with_children)
    sum=$parent
    for child in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
      sum=$((sum + $(ticks "$child")))
    done
    before=$parent
    parent=$(ticks "$1" with_children)
    [ "$parent" = "$before" ] && break
  done
  echo "$sum"
}

group_ticks() {
  local total=0 pid
  for pid in ${1//,/ }; do
    case "$pid" in
      tree:*) total=$((total + $(tree_ticks "${pid#tree:}"))) ;;
      '') ;;
      *) total=$((total + $(ticks "$pid"))) ;;
    esac
  done
  echo "$total"
}

# The idem-loadgen above this script: system() runs it through /bin/sh, which may or may not exec.
loadgen_pid() {
  local pid=$PPID comm
  for _ in 1 2 3; do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
    if [ "$comm" = idem-loadgen ]; then
      echo "$pid"
      return 0
    fi
    pid=$(awk '{ sub(/^.*\) /, ""); print $2 }' "/proc/$pid/stat" 2>/dev/null) || return 0
  done
}

{
  for group in "$@"; do
    echo "${group%%=*} $(group_ticks "${group#*=}")"
  done
  echo "loadgen $(group_ticks "$(loadgen_pid)")"
} >"$out.tmp" && mv "$out.tmp" "$out"
