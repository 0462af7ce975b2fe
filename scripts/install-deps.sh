#!/usr/bin/env bash
# Installs the Debian packages mixp builds and tests with (see docs/dependencies.md).
# Idempotent: packages already present are left alone, and nothing is run when all are there.
#   scripts/install-deps.sh           install what is missing
#   scripts/install-deps.sh --check   only report what is missing (exit 1 if anything is)
set -euo pipefail

packages=(
  cmake make g++ pkg-config     # the toolchain
  libdnnl-dev                   # oneDNN 2.6: matmul and convolution kernels
  zlib1g-dev                    # gzipped IDX data sets
  nlohmann-json3-dev            # JSON: safetensors headers, configs, metrics
  libcli11-dev                  # the command line
  libgtest-dev libgmock-dev     # tests
  libbenchmark-dev              # micro-benchmarks
  libopenmpi-dev openmpi-bin    # Open MPI 4.1: the Communicator's backend, mpirun for the tests
  iproute2                      # ip netns: the two-host test (tests/dist/two_hosts.sh)
  clang-14 libclang-rt-14-dev   # the libFuzzer targets of fuzz/ (scripts/fuzz.sh)
  dataset-fashion-mnist         # the default data set, in /usr/share/datasets
  bible-kjv                     # the default text corpus: scripts/make-kjv.sh
  chromium                      # headless, renders mixp report's HTML in its test
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "missing packages: ${missing[*]}"
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
