#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (-fsanitize=fuzzer,address,undefined) and runs
# each on a corpus seeded from valid files (fuzz/make_seeds.cpp).
#   scripts/fuzz.sh [SECONDS]          each target SECONDS (default 300); the corpus grows in
#                                      BUILD/corpus/TARGET, findings go to BUILD/findings/
#   scripts/fuzz.sh --smoke [SECONDS]  CI: each target SECONDS (default 3) from the seeds alone;
#                                      exit 77 (a skip for ctest) when clang or libFuzzer is missing
# BUILD is $MIXP_FUZZ_BUILD, default build/fuzz; $MIXP_FUZZ_TARGETS chooses targets (default
# "safetensors idx"). Prints, per target, the executions, the coverage (edges) and the corpus
# size; exits 1 on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
if [ "${1:-}" = "--smoke" ]; then
  smoke=1
  shift
fi
seconds="${1:-$([ $smoke = 1 ] && echo 3 || echo 300)}"
build="${MIXP_FUZZ_BUILD:-build/fuzz}"

cxx=""
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
done
runtime=""
[ -n "$cxx" ] && runtime="$("$cxx" --print-runtime-dir 2>/dev/null || true)"
if [ -z "$cxx" ] || ! ls "$runtime"/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: needs clang and libFuzzer (Debian: clang-14 libclang-rt-14-dev;" \
       "scripts/install-deps.sh installs them)"
  exit 77
fi

CXX="$cxx" cmake -S fuzz -B "$build" >/dev/null
cmake --build "$build" -j2 >/dev/null

seeds="$build/seeds"
rm -rf "$seeds"
"$build/make_seeds" "$seeds"

status=0
for target in ${MIXP_FUZZ_TARGETS:-safetensors idx}; do
  if [ $smoke = 1 ]; then
    corpus="$(mktemp -d)"
  else
    corpus="$build/corpus/$target"
    mkdir -p "$corpus"
  fi
  findings="$build/findings/$target"
  mkdir -p "$findings"
  log="$build/fuzz_$target.log"
  set +e
  # libFuzzer's own exit status for a finding is 77 by default: ctest's skip. Not here.
  "$build/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 -error_exitcode=3 \
    -timeout_exitcode=4 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$findings/" "$corpus" "$seeds/$target" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" || true)
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  units=$(find "$corpus" -type f | wc -l)
  echo "fuzz_$target: ${seconds}s, ${execs:-?} executions (${rate:-?}/s), coverage ${cov:-?}" \
       "edges, corpus $units inputs, exit $rc"
  if [ $rc -ne 0 ]; then
    echo "fuzz_$target: FINDING: see $log and $findings/"
    tail -30 "$log"
    status=1
  fi
  if [ $smoke = 1 ]; then rm -rf "$corpus"; fi
done
exit $status
