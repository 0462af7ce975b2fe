#!/usr/bin/env python3
"""Holds each folder of src/ (and each public header) to the layers of the design.

The layers, lowest first (docs/design.md): each folder may include headers of its own
layer and of the layers below it, never of a layer above it.

    1 core, runtime     2 tensor      3 kernels, dist     4 autograd, ops
    5 amp               6 nn, optim   7 data, io          8 train, diag

A header belongs to the folder that implements it: src/<folder>/... to <folder>, a public
header include/mixp/<folder>/... to <folder> unless IMPLEMENTED_ELSEWHERE says otherwise, and
the top-level public headers as TOP_LEVEL_HEADERS says. The public headers are checked too,
each as a file of its folder, since a header that includes a higher layer drags it into every
file that includes it.

Exceptions are listed in EXCEPTIONS with their reason (docs/design.md explains them);
one that no longer matches anything is reported too, so that the list stays true.

Usage: check-layers.py [--root REPO]   exit 0: clean; 1: violations (listed); 2: bad input.
Python 3 standard library only.
"""

import argparse
import pathlib
import re
import sys

LEVELS = {
    "core": 1,
    "runtime": 1,  # libmixp_openmp_env: sets the OpenMP environment at load; uses nothing
    "tensor": 2,
    "kernels": 3,
    "dist": 3,
    "autograd": 4,
    "ops": 4,
    "amp": 5,
    "nn": 6,
    "optim": 6,
    "data": 7,
    "io": 7,
    "train": 8,
    "diag": 8,
}

# include/mixp/<name>: the folder of src/ that implements it.
TOP_LEVEL_HEADERS = {
    "autograd.h": "autograd",  # src/autograd/engine.cpp
    "convert.h": "kernels",  # src/kernels/convert.cpp: the vectorized conversions
    "cpu.h": "core",
    "device.h": "tensor",  # src/tensor/device.cpp
    "dtype.h": "core",
    "error.h": "core",
    "float_types.h": "core",  # header only: the storage types
    "format.h": "core",
    "memory.h": "tensor",  # src/tensor/memory.cpp
    "op_kind.h": "ops",  # src/ops/op_kind.cpp
    "ops.h": "ops",
    "random.h": "core",
    "runtime.h": "kernels",  # src/kernels/runtime.cpp: reference mode, threads
    "state_dict.h": "tensor",  # src/tensor/state_dict.cpp (on main, being added)
    "tensor.h": "tensor",
    "mixp.h": "train",  # the umbrella header: everything
}

# Public headers of a folder whose code lives in a lower one (docs/design.md).
IMPLEMENTED_ELSEWHERE = {
    # Every op consults the autocast state and the backward engine turns it off: it lives in
    # src/autograd/autocast.cpp, below the ops.
    "mixp/amp/autocast.h": "autograd",
    # FP8 autocast's state, the recipes, quantize() and fp8_gemm(), which the FP8 ops call:
    # src/autograd/fp8_autocast.cpp and src/autograd/fp8_scaling.cpp.
    "mixp/amp/fp8.h": "autograd",
    # FP4's quantize_fp4(), fp4_gemm() and Hadamard transform, which the FP4 linear calls:
    # src/autograd/fp4_scaling.cpp.
    "mixp/amp/fp4.h": "autograd",
    # Adaptive precision's per-layer state and measurements, which the linear under an FP4
    # recipe consults: src/autograd/adaptive_precision.cpp.
    "mixp/amp/adaptive.h": "autograd",
}

# (including file, included header) -> why the rule does not hold there (docs/design.md).
EXCEPTIONS = {
    ("include/mixp/amp/grad_scaler.h", "mixp/optim/optimizer.h"):
        "GradScaler::unscale() and step() take the optimizer, as PyTorch's do",
    ("include/mixp/amp/presets.h", "mixp/optim/master_weights.h"):
        "a preset names the optimizer's precision (optim::Precision)",
    ("src/tensor/element.cpp", "mixp/convert.h"):
        "casts run through the vectorized conversions, kernels that need nothing above core",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def folder_of_header(header, including, root):
    """The layer folder of `header` as written in an #include of the file `including`."""
    parts = header.split("/")
    if header in IMPLEMENTED_ELSEWHERE:
        return IMPLEMENTED_ELSEWHERE[header]
    if parts[0] == "mixp":
        if len(parts) == 2:
            return TOP_LEVEL_HEADERS.get(parts[1])
        return parts[1] if parts[1] in LEVELS else None
    if parts[0] in LEVELS and (root / "src" / header).exists():
        return parts[0]
    # Relative to the including file: the including file's own folder.
    if (including.parent / header).exists():
        return folder_of_file(including, root)
    return None


def folder_of_file(path, root):
    rel = path.relative_to(root).parts
    if rel[0] == "src":
        return rel[1]
    if rel[:2] == ("include", "mixp"):
        header = "/".join(rel[1:])
        if header in IMPLEMENTED_ELSEWHERE:
            return IMPLEMENTED_ELSEWHERE[header]
        return TOP_LEVEL_HEADERS.get(rel[2]) if len(rel) == 3 else rel[2]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent,
                        help="the repository (default: the one holding this script)")
    args = parser.parse_args()
    root = args.root.resolve()
    files = sorted(p for d in ("src", "include/mixp") for p in (root / d).rglob("*")
                   if p.suffix in (".h", ".cpp") and p.is_file())
    if not files:
        print(f"check-layers: no sources under {root}/src", file=sys.stderr)
        return 2

    problems, used_exceptions = [], set()
    for path in files:
        rel = path.relative_to(root).as_posix()
        folder = folder_of_file(path, root)
        if folder not in LEVELS:
            problems.append(f"{rel}: folder '{folder}' has no layer; add it to LEVELS")
            continue
        for header in INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
            target = folder_of_header(header, path, root)
            if target is None:
                problems.append(f"{rel} includes {header}, which maps to no layer; add it to "
                                "TOP_LEVEL_HEADERS or LEVELS")
                continue
            if LEVELS[target] <= LEVELS[folder]:
                continue
            if (rel, header) in EXCEPTIONS:
                used_exceptions.add((rel, header))
                continue
            where = (f", where {header} is implemented" if header in IMPLEMENTED_ELSEWHERE
                     else "")
            problems.append(f"{rel} includes {header} (folder {folder} may not use folder "
                            f"{target}{where})")
    for key in sorted(set(EXCEPTIONS) - used_exceptions):
        problems.append(f"the exception for {key[0]} including {key[1]} matches nothing; "
                        "remove it from EXCEPTIONS")

    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} problem(s); the layers and their exceptions are in "
              "docs/design.md", file=sys.stderr)
        return 1
    print(f"check-layers: {len(files)} files follow the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
