#!/usr/bin/env bash
# Writes the King James Bible as plain text, mixp's default character-level corpus.
#   scripts/make-kjv.sh OUTPUT      e.g. scripts/make-kjv.sh data/kjv.txt
#
# The text comes from Debian's bible-kjv package (scripts/install-deps.sh installs it):
# `bible "Gen1:1-Rev22:21"` prints every verse, with book and chapter headings and verse numbers,
# wrapped at 79 columns. With a reference on its command line bible does not paginate or prompt;
# its line width follows $COLUMNS, which is pinned here so that the output is always the same:
# 4298239 bytes of ASCII with the SHA-256 below (bible-kjv 4.38, Debian 12).
#
# Idempotent: an OUTPUT that already has that size and hash is left alone. The file is written
# to a temporary name, checked, then renamed, so an interrupted run leaves no partial corpus.
set -euo pipefail

expected_size=4298239
expected_sha256=82fa5f3788c6a9a010fb128a0f0bf588984b5888a82058520620eded59b033ea

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTPUT" >&2
  exit 2
fi
out=$1

matches() {
  [ -f "$1" ] &&
    [ "$(stat -c %s "$1")" = "$expected_size" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$expected_sha256" ]
}

if matches "$out"; then
  exit 0
fi

if ! command -v bible >/dev/null 2>&1; then
  echo "make-kjv: the 'bible' command is missing; install Debian's bible-kjv" \
    "(scripts/install-deps.sh does)" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.tmp.XXXXXX")
trap 'rm -f "$tmp"' EXIT
COLUMNS=80 bible "Gen1:1-Rev22:21" </dev/null >"$tmp"

if ! matches "$tmp"; then
  echo "make-kjv: bible wrote $(stat -c %s "$tmp") bytes with SHA-256" \
    "$(sha256sum "$tmp" | cut -d' ' -f1);" \
    "expected $expected_size bytes with SHA-256 $expected_sha256 (another bible-kjv version?)" >&2
  exit 1
fi
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "make-kjv: wrote $out ($expected_size bytes)"
