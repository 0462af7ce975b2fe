#!/usr/bin/python3
"""An independent reader of safetensors files, written from the format's description alone
(no mixp code, standard library only): checks the header and decodes every tensor.

    independent_safetensors_reader.py [--layout] FILE   prints one JSON object: {"tensors":
    {name: {"dtype", "shape", "values"}}, "metadata": {...}} (--layout: without the values);
    exits 1 with a message when the file breaks the format: header length, JSON, dtype names,
    shapes against spans, offsets sorted, contiguous, in bounds and covering the data.
"""
import json
import math
import struct
import sys

# The dtype names of the format, and their sizes in bytes.
SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
         "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def fp8(byte, exponent_bits, mantissa_bits, bias, e4m3):
    sign = -1.0 if byte & 0x80 else 1.0
    e = (byte >> mantissa_bits) & ((1 << exponent_bits) - 1)
    m = byte & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if e4m3 and e == top and m == (1 << mantissa_bits) - 1:
        return math.nan
    if not e4m3 and e == top:
        return math.nan if m else sign * math.inf
    if e == 0:
        return sign * m / (1 << mantissa_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)


def decode(dtype, raw):
    if dtype == "F64":
        return list(struct.unpack("<%dd" % (len(raw) // 8), raw))
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    if dtype == "BF16":
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    if dtype == "F8_E4M3":
        return [fp8(b, 4, 3, 7, True) for b in raw]
    if dtype == "F8_E5M2":
        return [fp8(b, 5, 2, 15, False) for b in raw]
    if dtype == "I64":
        return list(struct.unpack("<%dq" % (len(raw) // 8), raw))
    if dtype == "I32":
        return list(struct.unpack("<%di" % (len(raw) // 4), raw))
    if dtype == "U8":
        return list(raw)
    raise ValueError("no decoder for " + dtype)


def fail(message):
    print("independent reader: " + message, file=sys.stderr)
    sys.exit(1)


def main(path, with_values):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail("header length %d beyond the file" % n)
    if n % 8:
        fail("header length %d not a multiple of 8 (the data would not be aligned)" % n)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    spans = []
    tensors = {}
    for name, entry in header.items():
        if set(entry) != {"dtype", "shape", "data_offsets"}:
            fail("%s: fields %s" % (name, sorted(entry)))
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in SIZES:
            fail("%s: dtype %r is not a safetensors dtype name" % (name, dtype))
        count = 1
        for d in shape:
            count *= d
        if count * SIZES[dtype] != end - begin:
            fail("%s: shape %s of %s does not fill [%d, %d)" % (name, shape, dtype, begin, end))
        spans.append((begin, end, name))
        tensors[name] = {"dtype": dtype, "shape": shape}
        if with_values:
            tensors[name]["values"] = [v if math.isfinite(v) else repr(v)
                                       for v in decode(dtype, body[begin:end])]
    cursor = 0
    for begin, end, name in sorted(spans):
        if begin != cursor:
            fail("%s starts at %d, not at %d: a gap or an overlap" % (name, begin, cursor))
        cursor = end
    if cursor != len(body):
        fail("the tensors cover %d of %d data bytes" % (cursor, len(body)))
    print(json.dumps({"tensors": tensors, "metadata": metadata}))


if __name__ == "__main__":
    layout = sys.argv[1] == "--layout"
    main(sys.argv[-1], not layout)
