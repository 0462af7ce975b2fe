#!/usr/bin/env bash
# Runs a program as one Open MPI job across two "hosts" made on this machine, to show that it
# needs neither shared memory nor a single host: every byte between the hosts crosses TCP.
#
#   tests/dist/two_hosts.sh [OPTIONS] [--] PROGRAM [ARGS...]
#
#   --ranks-per-host N   ranks on each host (default 1): ranks 0..N-1 run on host a, N..2N-1 on b
#   --timeout SECONDS    mpirun is ended after this long (default 100; the status is then 124)
#   --mpirun PATH        the mpirun to use (default: mpirun on PATH)
#   -x NAME              pass the environment variable NAME to every rank (repeatable); the
#                        variables MIXP_*, OMP_*, GTEST_* and the sanitizers' *SAN_OPTIONS
#                        that are set pass without it
#
# Examples (as root):
#   tests/dist/two_hosts.sh build/release/tests/dist_mpi_test
#   tests/dist/two_hosts.sh -x MY_VAR -- build/release/tools/mixp/mixp train ... --out runs/dp
#
# The working folder of every rank is the caller's, and PROGRAM and ARGS reach every rank
# unchanged: the hosts share the file system, as machines sharing a network file system do, so
# relative paths and a run folder mean the same on both.
#
# How: two network namespaces, mixp-two-hosts-<pid>-a and -b, joined by a veth pair whose ends live
# only inside them, with a /30 of 10.253.0.0/16 chosen from the PID (so that copies running at the
# same time use different addresses), and loopback up in each. Each host also has its own host name
# and its own empty /dev/shm. mpirun runs on host a with a hostfile that gives each host its ranks
# as slots; it starts its daemon on host b through an rsh agent (written here) that enters b's
# namespaces, with the bare environment a login over ssh would give (PATH and HOME); everything else
# the ranks get passes with -x. Open MPI may use TCP only (btl tcp,self with pml ob1, no
# shared-memory collectives or windows) and only the test subnet, for its own traffic too
# (oob_tcp_if_include); the namespaces have no other interface than loopback and no route out, so no
# address outside them can be used. Each rank records its network namespace before it starts
# PROGRAM, and the script checks that the ranks ran on the hosts they were placed on. The
# namespaces, the veth pair and the temporary files are removed on every exit, also when mpirun
# fails, times out or the script is interrupted.
#
# Exit status: PROGRAM's (mpirun's: the first failing rank's), or
#   1    PROGRAM succeeded but a rank did not run on its host, or the hosts could not be made
#        for a reason other than missing rights
#   2    a usage error
#   77   skipped: this machine does not let the script make namespaces (not root, no `ip`, no
#        CAP_NET_ADMIN); with MIXP_TWO_HOSTS_REQUIRED=1 (as in CI) that is a failure, status 1
#   124  mpirun ran past --timeout
#   128+N  the script got signal N

# SC2016: the single-quoted '$' texts are for the shells that run them. SC2034: made_a and made_b
# are read by name (${!made}).
# shellcheck disable=SC2016,SC2034
set -euo pipefail

readonly skip_status=77
me=two_hosts.sh

usage() {
  echo "usage: $me [--ranks-per-host N] [--timeout SECONDS] [--mpirun PATH] [-x NAME]... [--]" \
    "PROGRAM [ARGS...]" >&2
  exit 2
}

ranks_per_host=1
timeout_s=100
mpirun=mpirun
exports=()
while [ $# -gt 0 ]; do
  case $1 in
    --ranks-per-host) [ $# -ge 2 ] || usage; ranks_per_host=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
    --mpirun) [ $# -ge 2 ] || usage; mpirun=$2; shift 2 ;;
    -x) [ $# -ge 2 ] || usage; exports+=("$2"); shift 2 ;;
    --) shift; break ;;
    -*) echo "$me: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
if ! [[ $ranks_per_host =~ ^[1-9][0-9]*$ ]]; then
  echo "$me: --ranks-per-host must be a positive integer, not '$ranks_per_host'" >&2
  exit 2
fi
if ! [[ $timeout_s =~ ^[1-9][0-9]*$ ]]; then
  echo "$me: --timeout must be a positive number of seconds, not '$timeout_s'" >&2
  exit 2
fi
if ! mpirun=$(command -v "$mpirun"); then
  echo "$me: no mpirun found (install openmpi-bin, or name it with --mpirun)" >&2
  exit 2
fi
# Open MPI wants both variables to run as root (needed here to make namespaces).
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
forwarded=()
automatic='^(MIXP_|OMP_|GTEST_|OMPI_ALLOW_RUN_AS_ROOT|(A|UB|L)SAN_OPTIONS$)'
for name in "${exports[@]}" $(compgen -e | grep -E "$automatic" || true); do
  if ! [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || [ -z "${!name+set}" ]; then
    echo "$me: -x $name: no such variable in the environment" >&2
    exit 2
  fi
  forwarded+=(-x "$name")
done
program=("$@")

# The namespaces and addresses. Both ends of the veth pair live inside the namespaces, so even
# equal subnets could not meet; the PID spreads them anyway, so that two runs never look alike.
ns_a=mixp-two-hosts-$$-a
ns_b=mixp-two-hosts-$$-b
veth_a=mixp-a
veth_b=mixp-b
subnet_index=$(($$ % 16384))
subnet_base=10.253.$((subnet_index / 64))
host_offset=$(((subnet_index % 64) * 4))
subnet=$subnet_base.$host_offset/30
addr_a=$subnet_base.$((host_offset + 1))
addr_b=$subnet_base.$((host_offset + 2))

made_a=0
made_b=0
tmp=""
launcher=""

remove_hosts() {
  local side ns made veth
  for side in a b; do
    ns=ns_$side made=made_$side veth=veth_$side
    ns=${!ns} made=${!made} veth=${!veth}
    [ "$made" = 1 ] || continue
    # Processes left in the namespace (a daemon of an interrupted job) are ours: end them, and
    # give them up to 2 s to go before they are killed.
    local pids=() wait_steps=20
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
    [ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
    while [ ${#pids[@]} -gt 0 ] && [ "$wait_steps" -gt 0 ]; do
      sleep 0.1
      wait_steps=$((wait_steps - 1))
      mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
    done
    [ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null || true
    # Removing one end of the pair removes both, even if the namespace outlives this script.
    ip -n "$ns" link del "$veth" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || echo "$me: could not remove namespace $ns" >&2
  done
  made_a=0
  made_b=0
  if [ -n "$tmp" ]; then rm -rf -- "$tmp"; fi
}

on_signal() {
  local signal=$1 number=$2
  trap - INT TERM HUP
  echo "$me: got SIG$signal: ending mpirun and removing the hosts" >&2
  if [ -n "$launcher" ]; then
    kill -TERM "$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
  fi
  exit $((128 + number))
}

trap remove_hosts EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# cannot_make_hosts REASON [ERROR]: one line, then the skip status (or 1 where required).
cannot_make_hosts() {
  local line=${1//$'\n'/ }
  [ $# -lt 2 ] || line="$line (${2//$'\n'/ })"
  if [ "${MIXP_TWO_HOSTS_REQUIRED:-0}" = 1 ]; then
    echo "$me: failed: $line; MIXP_TWO_HOSTS_REQUIRED=1 forbids skipping" >&2
    exit 1
  fi
  echo "$me: skipped: $line" >&2
  exit $skip_status
}

if ! command -v ip >/dev/null; then
  cannot_make_hosts "no 'ip' command to make network namespaces (install iproute2)"
fi
for ns in "$ns_a" "$ns_b"; do
  if [ -e "/run/netns/$ns" ]; then
    echo "$me: the namespace $ns exists already, left by an earlier run that was killed" \
      "(remove it with: ip netns del $ns)" >&2
    exit 1
  fi
done
if ! error=$(ip netns add "$ns_a" 2>&1); then
  cannot_make_hosts "cannot make network namespaces, which needs root (CAP_NET_ADMIN and
CAP_SYS_ADMIN)" "ip netns add: $error"
fi
made_a=1
ip netns add "$ns_b"
made_b=1
if ! error=$(ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" \
             2>&1); then
  cannot_make_hosts "cannot join network namespaces by a veth pair" "ip link add: $error"
fi
ip -n "$ns_a" addr add "$addr_a/30" dev "$veth_a"
ip -n "$ns_b" addr add "$addr_b/30" dev "$veth_b"
for side in a b; do
  ns=ns_$side veth=veth_$side
  ip -n "${!ns}" link set lo up
  ip -n "${!ns}" link set "${!veth}" up
done

# Entering a host: its network namespace, then a host name and a /dev/shm of its own.
host_setup='hostname "$0" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"'
enter_a=(ip netns exec "$ns_a" unshare --uts --mount -- /bin/sh -c "$host_setup" "$ns_a")
enter_b=(ip netns exec "$ns_b" unshare --uts --mount -- /bin/sh -c "$host_setup" "$ns_b")
if ! error=$("${enter_b[@]}" true 2>&1); then
  cannot_make_hosts "cannot give a namespace its own host name and /dev/shm" "$error"
fi

tmp=$(mktemp -d "/tmp/mixp-two-hosts-$$.XXXXXX")

# Open MPI calls its rsh agent as `AGENT [OPTIONS] HOST COMMAND...`, where COMMAND is one shell
# command line split into words (quotes included), as ssh would send it to a remote shell.
{
  echo '#!/usr/bin/env bash'
  echo 'while [ $# -gt 0 ] && [[ $1 == -* ]]; do shift; done'
  printf 'if [ "${1:-}" != %q ]; then\n' "$addr_b"
  printf '  echo "%s agent: no host ${1:-} here, only %s" >&2\n' "$me" "$addr_b"
  echo '  exit 255'
  echo 'fi'
  echo 'shift'
  printf 'exec %s' "$(printf '%q ' "${enter_b[@]}")"
  printf 'env -i PATH=%q HOME=%q ' "$PATH" "${HOME:-/}"
  [ -z "${LD_LIBRARY_PATH:-}" ] || printf 'LD_LIBRARY_PATH=%q ' "$LD_LIBRARY_PATH"
  echo '/bin/sh -c "$*"'
} >"$tmp/agent"

# Each rank writes where it runs, then becomes PROGRAM in the same process.
cat >"$tmp/rank" <<EOF
#!/bin/sh
echo "\$(readlink /proc/self/ns/net) \$(hostname)" >"$tmp/rank-\$OMPI_COMM_WORLD_RANK"
exec "\$@"
EOF
chmod +x "$tmp/agent" "$tmp/rank"

# The hosts as a hostfile, the form a job across real machines takes (README.md).
printf '%s slots=%s\n' "$addr_a" "$ranks_per_host" "$addr_b" "$ranks_per_host" >"$tmp/hosts"

ranks=$((2 * ranks_per_host))
# --bind-to none: each host believes it owns every core, so binding would pin the ranks of both
# hosts to the same cores. Open MPI's per-job folders go under $tmp, so that they are removed
# with it even when mpirun is interrupted.
"${enter_a[@]}" timeout --kill-after=10 "$timeout_s" "$mpirun" \
  -np "$ranks" --hostfile "$tmp/hosts" \
  --map-by slot --bind-to none --wdir "$PWD" \
  --mca plm_rsh_agent "$tmp/agent" --mca orte_tmpdir_base "$tmp" \
  --mca pml ob1 --mca btl tcp,self --mca coll ^sm --mca osc ^sm,ucx \
  --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
  "${forwarded[@]}" "$tmp/rank" "${program[@]}" &
launcher=$!
status=0
wait "$launcher" || status=$?
launcher=""
if [ "$status" -ne 0 ]; then
  [ "$status" -ne 124 ] || echo "$me: mpirun ran past --timeout $timeout_s s" >&2
  exit "$status"
fi

# The ranks ran where they were placed: 0..N-1 in a's network namespace, N..2N-1 in b's.
net_a=$(ip netns exec "$ns_a" readlink /proc/self/ns/net)
net_b=$(ip netns exec "$ns_b" readlink /proc/self/ns/net)
for ((rank = 0; rank < ranks; ++rank)); do
  want=$net_b host=$ns_b
  if [ "$rank" -lt "$ranks_per_host" ]; then want=$net_a host=$ns_a; fi
  if [ ! -s "$tmp/rank-$rank" ]; then
    echo "$me: rank $rank did not say where it ran" >&2
    exit 1
  fi
  read -r net name <"$tmp/rank-$rank"
  if [ "$net" != "$want" ] || [ "$name" != "$host" ]; then
    echo "$me: rank $rank ran in $net on host '$name', not in $want on host '$host'" >&2
    exit 1
  fi
done
received=$(ip netns exec "$ns_b" cat "/sys/class/net/$veth_b/statistics/rx_bytes")
sent=$(ip netns exec "$ns_b" cat "/sys/class/net/$veth_b/statistics/tx_bytes")
rank_range() { if [ "$1" = "$2" ]; then echo "rank $1"; else echo "ranks $1-$2"; fi; }
echo "$me: $(rank_range 0 $((ranks_per_host - 1))) ran on $ns_a ($addr_a, $net_a)," \
  "$(rank_range "$ranks_per_host" $((ranks - 1))) on $ns_b ($addr_b, $net_b);" \
  "host b received $received bytes and sent $sent over TCP"
