#!/usr/bin/env bash
# One model's training step under fp32, amp-bf16 and amp-fp16, interleaved in rounds (fp32,
# amp-bf16, amp-fp16, fp32, ...), so that a shared machine's noise falls on every preset; then
# per preset the median over rounds of its step time and peak memory, and the ratios against
# fp32 of the same round: the figures docs/performance.md gives for the cnn.
#
#   bench/precision_ratios.sh [ROUNDS]   default 5; MODEL=cnn, STEPS=20 (after 5 warm-up),
#                                        MIXP=path/to/mixp, OUT=results.jsonl
#
# A ratio's "speed" is fp32's median step time over the preset's; "min" compares the fastest
# steps instead, which a busy machine disturbs less; "memory" is the preset's peak over fp32's.
# The loss after the last step is printed per preset: at a fixed seed it is the same in every
# round, and a change of it means the bits of the step changed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
model=${MODEL:-cnn}
steps=${STEPS:-20}
mixp=${MIXP:-build/release/tools/mixp/mixp}
out=${OUT:-$(mktemp /tmp/mixp-precisions-XXXXXX.jsonl)}
[ -x "$mixp" ] || { echo "precision_ratios.sh: no $mixp; build the release preset" >&2; exit 2; }
: >"$out"
echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for precision in fp32 amp-bf16 amp-fp16; do
    "$mixp" bench train --model "$model" --precision "$precision" --steps "$steps" --warmup 5 \
      --peak-gflops 1000 | sed "s/^{/{\"round\":$round,/" >>"$out"
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); runs in $out"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
by = {(r["round"], r["precision"]): r for r in runs}
rounds = sorted({r["round"] for r in runs})
def median_of(f, p):
    return statistics.median(f(by[k, p]) for k in rounds)
print(f"{'preset':10s} {'median ms':>10s} {'min ms':>8s} {'peak MiB':>9s}   "
      "speed vs fp32 (rounds)   min vs fp32   memory vs fp32   loss")
for p in ["fp32", "amp-bf16", "amp-fp16"]:
    speed = [by[k, "fp32"]["median_ms"] / by[k, p]["median_ms"] for k in rounds]
    fastest = [by[k, "fp32"]["min_ms"] / by[k, p]["min_ms"] for k in rounds]
    memory = [by[k, p]["peak_memory_mib"]["total"] / by[k, "fp32"]["peak_memory_mib"]["total"]
              for k in rounds]
    losses = sorted({by[k, p]["loss"] for k in rounds})
    print(f"{p:10s} {median_of(lambda r: r['median_ms'], p):10.2f} "
          f"{median_of(lambda r: r['min_ms'], p):8.2f} "
          f"{median_of(lambda r: r['peak_memory_mib']['total'], p):9.2f}   "
          f"{statistics.median(speed):.2f}x ({', '.join(f'{s:.2f}' for s in speed)})   "
          f"{statistics.median(fastest):.2f}x   {statistics.median(memory):.3f}   {losses}")
PY
