#!/usr/bin/env bash
# mixp against PyTorch on this machine: `mixp bench train` and bench/compare_pytorch.py on the
# same models, shapes and batches, run back to back in rounds (the two frameworks alternate
# in each round, so that a shared machine's noise falls on both), then the ratios that
# docs/performance.md reports, each the median over rounds of the ratio within a round.
#
#   bench/run.sh [ROUNDS]        default 3; MIXP=path/to/mixp, OUT=results.jsonl
#   GPT_STEPS=5 SMALL_STEPS=20   timed steps per run (after 2 and 5 warm-up steps)
#   PEAK_F32=G PEAK_BF16=G       the peaks for percent of peak, instead of measuring them now
#                                (on a busy machine the measured peak falls short); the peak is
#                                also measured in every round, just before its gpt runs, and
#                                ratios.py gives the gpt percentages against that one too
#
# Needs a release build (cmake --build --preset release) and, for the PyTorch side, Debian's
# python3-torch, libjemalloc2 and libopenblas0-openmp (apt-get install them; optional, not in CI).
# Without jemalloc or OpenBLAS PyTorch runs below its best, and the comparison would not be
# fair, so run.sh stops; compare_pytorch.py preloads jemalloc with the MALLOC_CONF of its header
# and ratios.py checks that every PyTorch run had both. Both sides train without dropout.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
mixp=${MIXP:-build/release/tools/mixp/mixp}
out=${OUT:-$(mktemp /tmp/mixp-bench-XXXXXX.jsonl)}
gpt_steps=${GPT_STEPS:-5}
small_steps=${SMALL_STEPS:-20}
py=/usr/bin/python3

[ -x "$mixp" ] || { echo "run.sh: no $mixp; build with cmake --build --preset release" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "run.sh: $py has no torch (apt-get install python3-torch)" >&2; exit 2; }
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/openblas-openmp; do
  [ -e "$lib" ] || { echo "run.sh: $lib is missing: PyTorch would run below its best (apt-get install libjemalloc2 libopenblas0-openmp)" >&2; exit 2; }
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
peak=$("$mixp" bench peak | tail -1)
echo "$peak" >&2
f32_peak=${PEAK_F32:-$("$py" -c "import json,sys; print(json.loads(sys.argv[1])['f32_gflops'])" "$peak")}
bf16_peak=${PEAK_BF16:-$("$py" -c "import json,sys; print(json.loads(sys.argv[1])['bf16_gflops'])" "$peak")}
echo "peaks used: f32 $f32_peak, bf16 $bf16_peak GFLOP/s" >&2
: > "$out"

for ((r = 1; r <= rounds; ++r)); do
  for model in mlp cnn gpt; do
    if [ "$model" = gpt ]; then steps=$gpt_steps warmup=2; else steps=$small_steps warmup=5; fi
    if [ "$model" = gpt ]; then  # the peak next to the gpt runs, for ratios.py's round-peak figure
      echo "{\"round\": $r, \"peak\": $("$mixp" bench peak | tail -1)}" >> "$out"
    fi
    for precision in fp32 amp-bf16; do
      if [ "$precision" = fp32 ]; then p=$f32_peak; else p=$bf16_peak; fi
      common=(--model "$model" --precision "$precision" --steps "$steps" --warmup "$warmup" --peak-gflops "$p")
      # Alternate which framework goes first, round by round.
      if ((r % 2)); then order="mixp torch"; else order="torch mixp"; fi
      for who in $order; do
        if [ "$who" = mixp ]; then
          line=$("$mixp" bench train "${common[@]}")
        else
          line=$("$py" bench/compare_pytorch.py "${common[@]}")
        fi
        echo "{\"round\": $r, \"result\": $line}" >> "$out"
        echo "round $r: $who $model $precision: $("$py" -c "import json,sys; print('%.1f ms' % json.loads(sys.argv[1])['median_ms'])" "$line")" >&2
      done
    done
    if [ "$model" = gpt ]; then  # the bf16 preset, for memory against fp32
      line=$("$mixp" bench train --model gpt --precision bf16 --steps 2 --warmup 1 --peak-gflops "$bf16_peak")
      echo "{\"round\": $r, \"result\": $line}" >> "$out"
    fi
  done
done
echo "results: $out" >&2
"$py" bench/ratios.py "$out"
