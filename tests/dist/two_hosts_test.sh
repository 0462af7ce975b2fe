#!/usr/bin/env bash
# Checks tests/dist/two_hosts.sh itself: it exits with the program's status, passes arguments and
# the working folder unchanged, removes its namespaces, temporary files and processes however it
# ends (failure, timeout, SIGTERM), and skips without rights, or fails where that is required.
#   tests/dist/two_hosts_test.sh MPIRUN
# Exit status 0 when every check holds, 1 otherwise, 77 (skipped) where namespaces cannot be
# made, as two_hosts.sh itself decides.

# SC2016: the single-quoted '$' texts are for the ranks' shells, or literal.
# shellcheck disable=SC2016
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 MPIRUN" >&2; exit 2; }
# Open MPI gives the ranks of an ending job a second between SIGTERM and SIGKILL; these ranks
# need none, and the checks below end three jobs.
export OMPI_MCA_odls_base_sigkill_timeout=0
mpirun=$1
script=$(realpath "$(dirname "$0")/two_hosts.sh")
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
cd "$work"
failures=0

fail() {
  echo "FAILED: $*" >&2
  failures=$((failures + 1))
}

# Starts two_hosts.sh in the background with ARGS; sets $pid.
start() {
  "$script" --mpirun "$mpirun" "$@" &
  pid=$!
}

# finish NAME WANT: waits for $pid, then checks its status and that nothing of it is left.
finish() {
  local name=$1 want=$2 status=0 side
  wait "$pid" || status=$?
  [ "$status" = "$want" ] || fail "$name: status $status, want $want"
  for side in a b; do
    [ ! -e "/run/netns/mixp-two-hosts-$pid-$side" ] || fail "$name: namespace $side left behind"
  done
  if compgen -G "/tmp/mixp-two-hosts-$pid.*" >/dev/null; then
    fail "$name: temporary folder left behind"
  fi
}

# Whether process PID still runs (a zombie, ended but not yet reaped, does not).
running() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$state" != Z ]
}

# Waits up to 20 s for FILE to hold something.
await() {
  local i
  for ((i = 0; i < 200; ++i)); do
    [ ! -s "$1" ] || return 0
    sleep 0.1
  done
  fail "$1 did not appear"
  return 1
}

# Without rights it skips in one line, or fails when required. First, as root, whether this
# machine can make namespaces at all (two_hosts.sh says so with its skip status).
start true
status=0
wait "$pid" || status=$?
if [ "$status" = 77 ]; then exit 77; fi
[ "$status" = 0 ] || fail "a trivial program across the two hosts: status $status, want 0"
if command -v setpriv >/dev/null; then
  # A copy that an unprivileged user may read, wherever the source tree is.
  mkdir -m 755 "$work/public"
  cp "$script" "$work/public/two_hosts.sh"
  chmod 755 "$work" "$work/public/two_hosts.sh"
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  status=0
  message=$(MIXP_TWO_HOSTS_REQUIRED=0 "${as_nobody[@]}" "$work/public/two_hosts.sh" \
            --mpirun "$mpirun" true 2>&1) ||
    status=$?
  [ "$status" = 77 ] || fail "without rights: status $status, want 77 (skipped): $message"
  [ "$(wc -l <<<"$message")" = 1 ] || fail "without rights: more than one line: $message"
  status=0
  MIXP_TWO_HOSTS_REQUIRED=1 "${as_nobody[@]}" "$work/public/two_hosts.sh" --mpirun "$mpirun" \
    true 2>/dev/null || status=$?
  [ "$status" = 1 ] || fail "without rights, MIXP_TWO_HOSTS_REQUIRED=1: status $status, want 1"
fi

# The program's status, from rank 1 (on host b), is the script's.
start -- sh -c 'exit $((OMPI_COMM_WORLD_RANK == 1 ? 3 : 0))'
finish "rank 1 exits 3" 3

# A program named by a path relative to the caller's working folder, which host b reaches too,
# runs there with its name and arguments (spaces, an empty one, a pattern) unchanged. Host b
# starts from a bare environment, as a login would: a variable reaches it only with -x.
cat >show-args <<'EOF'
#!/bin/sh
printf '[%s]' "$0" "$@" >"args-$OMPI_COMM_WORLD_RANK"
echo "${TWO_HOSTS_PASSED:-unset} ${TWO_HOSTS_KEPT:-unset}" >"env-$OMPI_COMM_WORLD_RANK"
EOF
chmod +x show-args
TWO_HOSTS_PASSED=passed TWO_HOSTS_KEPT=kept start -x TWO_HOSTS_PASSED -- ./show-args 'a b' '' '*' \
  '$HOME'
finish "arguments" 0
for rank in 0 1; do
  got=$(cat "args-$rank" 2>/dev/null || echo "no file")
  [ "$got" = '[./show-args][a b][][*][$HOME]' ] || fail "rank $rank got the arguments $got"
done
got=$(cat env-1 2>/dev/null || echo "no file")
[ "$got" = "passed unset" ] || fail "rank 1 on host b saw the variables as '$got', want 'passed unset'"

# Interrupted: SIGTERM ends the job and every rank, and the script exits 128 + 15.
start -- sh -c 'echo $$ >"pid-$OMPI_COMM_WORLD_RANK"; exec sleep 60'
if await pid-0 && await pid-1; then
  kill -TERM "$pid"
  finish "SIGTERM" 143
  for rank in 0 1; do
    if running "$(cat "pid-$rank")"; then fail "SIGTERM: rank $rank still runs"; fi
  done
fi

# Past --timeout: status 124, and again nothing left.
rm -f pid-0 pid-1
start --timeout 1 -- sh -c 'echo $$ >"pid-$OMPI_COMM_WORLD_RANK"; exec sleep 60'
finish "--timeout 1" 124
for rank in 0 1; do
  if [ -s "pid-$rank" ] && running "$(cat "pid-$rank")"; then
    fail "--timeout: rank $rank still runs"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) of two_hosts.sh failed" >&2
  exit 1
fi
echo "two_hosts.sh: every check passed"
