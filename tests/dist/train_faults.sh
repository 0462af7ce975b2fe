#!/usr/bin/env bash
# `mixp train` under mpirun when things go wrong, end to end:
#   1. one rank killed with SIGKILL: the job ends within 60 s, and mpirun's message names the
#      lost rank; `--resume` then finishes the run bitwise equal to an uninterrupted one;
#   2. SIGTERM to mpirun: every rank finishes its step, one checkpoint of it is written, and a resume
#      finishes the run bitwise equal to the uninterrupted one;
#   3. ranks started with different flags refuse to start, naming the rank and the setting.
#
#   tests/dist/train_faults.sh MPIRUN MIXP
#
# Runs as root (CI): the Open MPI root variables are set here.
set -euo pipefail
mpirun=$1
mixp=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# What this tests is processes (kills, signals, mismatched flags), not arithmetic: the fast
# kernels run even in a suite run under MIXP_REFERENCE=1, whose reference kernels would stretch
# the 3000-step runs past the test's time limit.
unset MIXP_REFERENCE
dir=$(mktemp -d /tmp/mixp_train_faults.XXXXXX)
trap 'pkill -KILL -f "$dir" 2>/dev/null || true; rm -rf "$dir"' EXIT

for i in $(seq 1 400); do echo "and the evening and the morning were the day $((i % 9))."; done \
  > "$dir/corpus.txt"
train=(train --model gpt --data "$dir/corpus.txt" --layers 1 --heads 2 --width 32 --context 32
       --batch 8 --steps 3000 --lr 0.003 --threads 1 --log-interval 100 --checkpoint-every 200
       --schedule constant --deterministic)

fail() { echo "FAIL: $*" >&2; exit 1; }

# The tensors of two model files, bitwise (the metadata, which names the run, left out).
same_weights() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n]); header.pop('__metadata__', None)
    body = data[8 + n:]
    return {k: (v['dtype'], v['shape'], body[v['data_offsets'][0]:v['data_offsets'][1]])
            for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a == b else 1)
EOF
}

# The pid of rank $2 of the job writing to folder $1.
rank_pid() {
  for pid in $(pgrep -f -- "--out $1" || true); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$pid"
      return
    fi
  done
}

wait_for_checkpoint() {
  for _ in $(seq 1 600); do
    compgen -G "$1/checkpoint-*.safetensors" > /dev/null && return 0
    sleep 0.1
  done
  fail "no checkpoint appeared in $1"
}

# Resumes the run in $dir/$1 (interrupted by $2) on 2 ranks and checks that it ends bitwise
# as the uninterrupted run.
resume_to_the_whole_run() {
  "$mpirun" -np 2 "$mixp" train --resume "$dir/$1" > "$dir/$1-resumed.log" 2>&1 \
    || { cat "$dir/$1-resumed.log"; fail "the resume after $2 failed"; }
  same_weights "$dir/whole/model.safetensors" "$dir/$1/model.safetensors" \
    || fail "the run resumed after $2 differs from the uninterrupted run"
  echo "resumed after $2: bitwise the uninterrupted run"
}

echo "== the uninterrupted run"
"$mpirun" -np 2 "$mixp" "${train[@]}" --out "$dir/whole" > "$dir/whole.log" 2>&1 \
  || { cat "$dir/whole.log"; fail "the uninterrupted run failed"; }

echo "== rank 1 killed with SIGKILL"
"$mpirun" -np 2 "$mixp" "${train[@]}" --out "$dir/killed" > "$dir/killed.log" 2>&1 &
job=$!
wait_for_checkpoint "$dir/killed"
victim=$(rank_pid "$dir/killed" 1)
[ -n "$victim" ] || fail "rank 1 of the job was not found"
start=$(date +%s)
kill -KILL "$victim"
status=0
timeout 70 tail --pid="$job" -f /dev/null || fail "the job still runs 70 s after rank 1 died"
wait "$job" || status=$?
elapsed=$(( $(date +%s) - start ))
[ "$status" -ne 0 ] || fail "the job ended with status 0 after a rank was killed"
[ "$elapsed" -le 60 ] || fail "the job took ${elapsed} s to end after rank 1 died"
grep -q "rank 1" "$dir/killed.log" || { cat "$dir/killed.log"; fail "no message names rank 1"; }
echo "ended ${elapsed} s after the kill, status $status: $(grep -m1 'rank 1' "$dir/killed.log")"
resume_to_the_whole_run killed "the kill"

echo "== SIGTERM to mpirun"
"$mpirun" -np 2 "$mixp" "${train[@]}" --out "$dir/stopped" > "$dir/stopped.log" 2>&1 &
job=$!
wait_for_checkpoint "$dir/stopped"
kill -TERM "$job"
wait "$job" || true
for r in 0 1; do
  [ -z "$(rank_pid "$dir/stopped" "$r")" ] || fail "rank $r still runs after SIGTERM"
done
# mpirun stops forwarding the ranks' output once it has SIGTERM, so rank 0's report is lost; the
# checkpoint of the step the ranks stopped after is what shows.
newest=$(ls "$dir/stopped" | grep -E '^checkpoint-[0-9]+\.safetensors$' | sort | tail -1)
step=$((10#$(echo "$newest" | tr -dc '0-9')))
[ $((step % 200)) -ne 0 ] || fail "no checkpoint of the stop: the newest is $newest"
echo "stopped after step $step with one checkpoint"
resume_to_the_whole_run stopped "SIGTERM"

echo "== ranks with different flags"
status=0
"$mpirun" -np 1 "$mixp" "${train[@]}" --out "$dir/mixed" : \
          -np 1 "$mixp" "${train[@]}" --seed 1 --out "$dir/mixed" > "$dir/mixed.log" 2>&1 \
  || status=$?
[ "$status" -ne 0 ] || fail "ranks with different flags trained"
grep -q "rank 1 of 2" "$dir/mixed.log" && grep -q "/train/seed" "$dir/mixed.log" \
  || { cat "$dir/mixed.log"; fail "the refusal does not name rank 1 and the seed"; }
[ ! -e "$dir/mixed/run.json" ] || fail "a refused run wrote its folder"
echo "refused: $(grep -m1 '/train/seed' "$dir/mixed.log")"
echo "PASS"
