#!/usr/bin/python3
"""Writes the golden fixtures of mixp: PyTorch's outputs and gradients for every op and for a
tiny GPT, as JSON under tests/golden/fixtures/.

Run offline, once, with Debian's interpreter (python3-torch 1.13):

    /usr/bin/python3 tests/golden/make_fixtures.py

Deterministic: every case draws its inputs from its own torch.Generator, seeded with the CRC-32
of the case's name, in float64. The math is done in float64 always; a case of dtype "f32" rounds
its inputs (and upstream gradient) to float32 first, computes in float64 from those exact values
and rounds the results to float32, so that the fixture is the correctly rounded answer for the
f32 inputs rather than PyTorch's own f32 arithmetic. See tests/golden/README.md for the layout.
"""

import json
import math
import os
import re
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
FORMAT_VERSION = 1

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


# ---- tensors as JSON ---------------------------------------------------------------------------

_DTYPE_NAMES = {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64"}


def tensor_json(t):
    t = t.detach().contiguous()
    name = _DTYPE_NAMES[t.dtype]
    flat = t.reshape(-1).tolist()
    for v in flat:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("non-finite value in a fixture")
    return {"shape": list(t.shape), "dtype": name, "data": flat}


# ---- inputs ------------------------------------------------------------------------------------

def generator(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def normal(g, shape, scale=1.0):
    return torch.randn(shape, generator=g, dtype=torch.float64) * scale


def positive(g, shape):
    """Uniform in [0.5, 2): for log, sqrt, rsqrt, non-integer powers, variances."""
    return 0.5 + 1.5 * torch.rand(shape, generator=g, dtype=torch.float64)


def away_from_zero(g, shape):
    """|x| in [0.5, 2) with a random sign: for divisors and relu (no kink at 0)."""
    sign = torch.where(torch.rand(shape, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
    return positive(g, shape) * sign


def indices(g, shape, high):
    return torch.randint(0, high, shape, generator=g, dtype=torch.int64)


# ---- cases -------------------------------------------------------------------------------------

class Case:
    """One op applied once: inputs, outputs, upstream gradients, input gradients.

    inputs: list of (name, tensor in float64 or int64, requires_grad); an input of None is
    recorded as absent (an undefined tensor in mixp). fn(**inputs) returns a tensor, a tuple of
    tensors, or a dict {"outputs": tensor or tuple, "after": {name: tensor}} for state that the
    op updates in place (batch norm's running statistics).

    f32_inputs: names of floating inputs that are float32 whatever the case's dtype (mixp keeps
    batch norm's running statistics in f32 for every input dtype): rounded to float32 like the
    inputs of an f32 case, and recorded, with their "after" values, as f32.
    """

    def __init__(self, name, op, attrs, inputs, fn, dtype="f64", reduction_length=1,
                 f32_inputs=()):
        self.name, self.op, self.attrs = name, op, attrs
        self.inputs, self.fn, self.dtype = inputs, fn, dtype
        self.reduction_length = int(reduction_length)
        self.f32_inputs = frozenset(f32_inputs)

    def to_json(self):
        rounded = self.dtype == "f32"
        leaves = {}
        for name, t, requires_grad in self.inputs:
            if t is None:
                leaves[name] = None
                continue
            if t.is_floating_point():
                t = (t.to(torch.float32).to(torch.float64) if rounded or name in self.f32_inputs
                     else t.clone())
                t.requires_grad_(requires_grad)
            leaves[name] = t
        call_args = {n: (t.clone() if t is not None and not t.requires_grad and t.is_floating_point()
                         else t) for n, t in leaves.items()}
        result = self.fn(**call_args)
        after = {}
        if isinstance(result, dict):
            after = result.get("after", {})
            result = result["outputs"]
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        g = generator(self.name + "/grad_output")
        grad_outputs = []
        for out in outputs:
            go = normal(g, out.shape)
            if rounded:
                go = go.to(torch.float32).to(torch.float64)
            grad_outputs.append(go)
        torch.autograd.backward(outputs, grad_outputs)

        def typed(t, name=None):
            f32 = rounded or name in self.f32_inputs
            return t.to(torch.float32) if f32 and t.is_floating_point() else t

        inputs_json = []
        for name, _, requires_grad in self.inputs:
            t = leaves[name]
            entry = {"name": name}
            if t is None:
                entry["value"] = None
            else:
                entry["value"] = tensor_json(typed(t, name))
                if requires_grad:
                    if t.grad is None:
                        raise RuntimeError(f"{self.name}: no gradient for {name}")
                    entry["grad"] = tensor_json(typed(t.grad, name))
            inputs_json.append(entry)
        names = ["out"] if len(outputs) == 1 else [f"out{i}" for i in range(len(outputs))]
        outputs_json = [{"name": n, "value": tensor_json(typed(o)), "grad": tensor_json(typed(go))}
                        for n, o, go in zip(names, outputs, grad_outputs)]
        case = {"name": self.name, "op": self.op, "attrs": self.attrs, "dtype": self.dtype,
                "reduction_length": self.reduction_length, "inputs": inputs_json,
                "outputs": outputs_json}
        if after:
            case["after"] = {n: tensor_json(typed(t, n)) for n, t in after.items()}
        return case


def write_group(group, description, cases):
    # golden_test.cpp names each test after the case, with every run of other characters than
    # letters and digits made one '_'; those names must be unique too.
    names = [re.sub(r"[^A-Za-z0-9]+", "_", c.name).strip("_") for c in cases]
    if len(set(names)) != len(names):
        raise RuntimeError(f"{group}: duplicate case names")
    path = os.path.join(OUT_DIR, group + ".json")
    header = {"format": FORMAT_VERSION, "group": group, "description": description,
              "generator": "tests/golden/make_fixtures.py", "torch": torch.__version__}
    with open(path, "w") as f:
        f.write("{\"meta\":" + json.dumps(header, allow_nan=False) + ",\n\"cases\":[\n")
        f.write(",\n".join(json.dumps(c.to_json(), separators=(",", ":"), allow_nan=False)
                           for c in cases))
        f.write("\n]}\n")
    return path


def numel(shape):
    return math.prod(shape) if shape else 1


# ---- elementwise -------------------------------------------------------------------------------

def elementwise_cases():
    cases = []
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    shapes = [([7, 5], [7, 5]), ([7, 5], [5]), ([3, 1, 4], [2, 1]), ([], [3]), ([2, 3, 4], [3, 1]),
              ([4, 1], [1, 6])]
    for op, fn in binary.items():
        for sa, sb in shapes:
            for dtype in (["f64", "f32"] if sa == [3, 1, 4] else ["f64"]):
                name = f"{op}/{sa}x{sb}/{dtype}".replace(" ", "")
                g = generator(name)
                a = normal(g, sa)
                b = away_from_zero(g, sb) if op == "div" else normal(g, sb)
                out = numel(list(torch.broadcast_shapes(tuple(sa), tuple(sb))))
                # the gradient of a broadcast input sums this many terms
                length = max(out // numel(sa), out // numel(sb))
                cases.append(Case(name, op, {}, [("a", a, True), ("b", b, True)],
                                  lambda a, b, fn=fn: fn(a, b), dtype, length))

    unary = [
        ("neg", {}, normal, torch.neg),
        ("exp", {}, normal, torch.exp),
        ("log", {}, positive, torch.log),
        ("sqrt", {}, positive, torch.sqrt),
        ("rsqrt", {}, positive, torch.rsqrt),
        ("pow", {"exponent": 3.0}, normal, lambda x: torch.pow(x, 3.0)),
        ("pow", {"exponent": 2.0}, normal, lambda x: torch.pow(x, 2.0)),
        ("pow", {"exponent": 0.5}, positive, lambda x: torch.pow(x, 0.5)),
        ("pow", {"exponent": -1.5}, positive, lambda x: torch.pow(x, -1.5)),
        ("tanh", {}, normal, torch.tanh),
        ("sigmoid", {}, normal, torch.sigmoid),
        ("relu", {}, away_from_zero, torch.relu),
        ("gelu", {}, normal, F.gelu),
        ("gelu_tanh", {}, normal, lambda x: F.gelu(x, approximate="tanh")),
        ("silu", {}, normal, F.silu),
        ("add_scalar", {"scalar": 0.75}, normal, lambda x: x + 0.75),
        ("mul_scalar", {"scalar": -1.5}, normal, lambda x: x * -1.5),
    ]
    f32_too = {"exp", "log", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "rsqrt"}
    for op, attrs, draw, fn in unary:
        suffix = "" if not attrs else "_" + str(next(iter(attrs.values())))
        for dtype in ["f64", "f32"] if op in f32_too else ["f64"]:
            name = f"{op}{suffix}/[3,7]/{dtype}"
            g = generator(name)
            # normal inputs scaled by 2 to reach the tails of tanh, sigmoid and gelu
            x = draw(g, [3, 7]) * (2.0 if draw is normal else 1.0)
            cases.append(Case(name, op, attrs, [("x", x, True)], lambda x, fn=fn: fn(x), dtype))
    return cases


# ---- reductions --------------------------------------------------------------------------------

def reduction_cases():
    cases = []
    specs = [
        # op, shape, dims ([] = all), keepdim, dtype
        ("sum", [4, 6, 5], [], False, "f64"),
        ("sum", [4, 6, 5], [1], False, "f64"),
        ("sum", [4, 6, 5], [0, -1], False, "f64"),
        ("sum", [4, 6, 5], [1], True, "f64"),
        ("sum", [3, 257], [1], False, "f32"),
        ("sum", [4, 6, 5], [], False, "f32"),
        ("mean", [4, 6, 5], [], False, "f64"),
        ("mean", [4, 6, 5], [2], True, "f64"),
        ("mean", [4, 6, 5], [0, 2], False, "f64"),
        ("mean", [5, 33], [0], False, "f32"),
    ]
    for op, shape, dims, keepdim, dtype in specs:
        name = f"{op}/{shape}/dims{dims}/keepdim={int(keepdim)}/{dtype}".replace(" ", "")
        x = normal(generator(name), shape)
        length = numel([shape[d] for d in dims]) if dims else numel(shape)
        fn = torch.sum if op == "sum" else torch.mean

        def run(x, fn=fn, dims=dims, keepdim=keepdim):
            return fn(x) if not dims else fn(x, dim=dims, keepdim=keepdim)

        cases.append(Case(name, op, {"dims": dims, "keepdim": keepdim}, [("x", x, True)], run,
                          dtype, length))
    for shape, dim, keepdim, dtype in [([5, 7], 0, False, "f64"), ([3, 4, 9], -1, True, "f64"),
                                       ([3, 4, 9], 1, False, "f64"), ([6, 10], 1, False, "f32")]:
        name = f"max/{shape}/dim{dim}/keepdim={int(keepdim)}/{dtype}".replace(" ", "")
        x = normal(generator(name), shape)  # continuous values: no ties
        cases.append(Case(name, "max", {"dim": dim, "keepdim": keepdim}, [("x", x, True)],
                          lambda x, dim=dim, keepdim=keepdim: torch.max(x, dim, keepdim)[0],
                          dtype))
    return cases


# ---- linear algebra ----------------------------------------------------------------------------

def linalg_cases():
    cases = []
    for sa, sb, dtype in [([5, 7], [7, 3], "f64"), ([2, 5, 7], [2, 7, 3], "f64"),
                          ([2, 5, 7], [7, 3], "f64"), ([2, 3, 4, 5], [2, 3, 5, 2], "f64"),
                          ([17, 33], [33, 9], "f32"), ([2, 5, 7], [7, 3], "f32")]:
        name = f"matmul/{sa}x{sb}/{dtype}".replace(" ", "")
        g = generator(name)
        a, b = normal(g, sa), normal(g, sb)
        m, k, n = sa[-2], sa[-1], sb[-1]
        batch = numel(sa[:-2]) if len(sb) == 2 else 1  # a shared b sums over the batch too
        cases.append(Case(name, "matmul", {}, [("a", a, True), ("b", b, True)],
                          lambda a, b: torch.matmul(a, b),
                          dtype, max(k, n, m * batch)))
    for sa, sb, dtype in [([3, 4, 6], [3, 6, 2], "f64"), ([2, 9, 16], [2, 16, 5], "f32")]:
        name = f"bmm/{sa}x{sb}/{dtype}".replace(" ", "")
        g = generator(name)
        a, b = normal(g, sa), normal(g, sb)
        cases.append(Case(name, "bmm", {}, [("a", a, True), ("b", b, True)],
                          lambda a, b: torch.bmm(a, b), dtype,
                          max(sa[1], sa[2], sb[2])))
    for sx, out, bias, dtype in [([2, 3, 16], 9, True, "f64"), ([13, 31], 5, False, "f64"),
                                 ([6, 8], 4, True, "f64"), ([2, 3, 16], 9, True, "f32")]:
        name = f"linear/{sx}x{out}/bias={int(bias)}/{dtype}".replace(" ", "")
        g = generator(name)
        x, w = normal(g, sx), normal(g, [out, sx[-1]]) / math.sqrt(sx[-1])
        b = normal(g, [out]) if bias else None
        rows = numel(sx[:-1])
        cases.append(Case(name, "linear", {}, [("x", x, True), ("weight", w, True),
                                               ("bias", b, bias)],
                          lambda x, weight, bias: F.linear(x, weight, bias), dtype,
                          max(sx[-1], out, rows)))
    return cases


# ---- softmax and losses ------------------------------------------------------------------------

def loss_cases():
    cases = []
    for op, shape, dim, dtype in [("softmax", [4, 11], -1, "f64"), ("softmax", [6, 3, 2], 0, "f64"),
                                  ("softmax", [2, 3, 5], 1, "f64"), ("softmax", [4, 11], -1, "f32"),
                                  ("log_softmax", [4, 11], -1, "f64"),
                                  ("log_softmax", [2, 5, 3], 1, "f64"),
                                  ("log_softmax", [4, 11], -1, "f32")]:
        name = f"{op}/{shape}/dim{dim}/{dtype}".replace(" ", "")
        x = normal(generator(name), shape, 2.0)
        fn = F.softmax if op == "softmax" else F.log_softmax
        cases.append(Case(name, op, {"dim": dim}, [("x", x, True)],
                          lambda x, fn=fn, dim=dim: fn(x, dim=dim), dtype, shape[dim]))

    ce = [
        # name, targets, ignore_index, label_smoothing, dtype
        ("plain", [2, 0, 4, 1, 4, 3], -100, 0.0, "f64"),
        ("default_ignore", [2, -100, 4, 1, -100, 3], -100, 0.0, "f64"),
        ("ignore_index3", [2, 3, 4, 1, 3, 0], 3, 0.0, "f64"),
        ("label_smoothing", [2, 0, 4, 1, 4, 3], -100, 0.1, "f64"),
        ("smooth_and_ignore", [2, 3, 4, 1, 3, 0], 3, 0.1, "f64"),
        ("plain", [2, 0, 4, 1, 4, 3], -100, 0.0, "f32"),
        ("smooth_and_ignore", [2, 3, 4, 1, 3, 0], 3, 0.25, "f32"),
    ]
    for label, targets, ignore, smoothing, dtype in ce:
        name = f"cross_entropy/{label}/{dtype}"
        logits = normal(generator(name), [6, 5], 2.0)
        t = torch.tensor(targets, dtype=torch.int64)
        cases.append(Case(name, "cross_entropy",
                          {"ignore_index": ignore, "label_smoothing": smoothing},
                          [("logits", logits, True), ("targets", t, False)],
                          lambda logits, targets, ignore=ignore, smoothing=smoothing:
                          F.cross_entropy(logits, targets, ignore_index=ignore,
                                          label_smoothing=smoothing), dtype, 30))
    for shape, dtype in [([4, 7], "f64"), ([3, 2, 5], "f64"), ([4, 7], "f32")]:
        name = f"mse_loss/{shape}/{dtype}".replace(" ", "")
        g = generator(name)
        p, q = normal(g, shape), normal(g, shape)
        cases.append(Case(name, "mse_loss", {}, [("prediction", p, True), ("target", q, True)],
                          lambda prediction, target: F.mse_loss(prediction, target), dtype,
                          numel(shape)))
    return cases


# ---- layout, embedding, concatenation ----------------------------------------------------------

def misc_cases():
    cases = []
    for shape, d0, d1 in [([3, 4, 5], 0, 2), ([2, 3, 4], 1, -1), ([6, 7], 0, 1)]:
        name = f"transpose/{shape}/{d0},{d1}".replace(" ", "")
        cases.append(Case(name, "transpose", {"dim0": d0, "dim1": d1},
                          [("x", normal(generator(name), shape), True)],
                          lambda x, d0=d0, d1=d1: torch.transpose(x, d0, d1)))
    for shape, order in [([2, 3, 4, 5], [3, 1, 0, 2]), ([2, 3, 4], [0, 2, 1])]:
        name = f"permute/{shape}/{order}".replace(" ", "")
        cases.append(Case(name, "permute", {"order": order},
                          [("x", normal(generator(name), shape), True)],
                          lambda x, order=order: x.permute(*order)))

    # embedding: indices repeat, so the weight gradient accumulates rows
    for wshape, ishape, dtype in [([10, 4], [2, 5], "f64"), ([7, 3], [9], "f64"),
                                  ([10, 4], [2, 5], "f32")]:
        name = f"embedding/{wshape}/{ishape}/{dtype}".replace(" ", "")
        g = generator(name)
        w = normal(g, wshape)
        idx = indices(g, ishape, wshape[0])
        idx.view(-1)[1] = idx.view(-1)[0]  # at least one repeated index
        repeats = int(torch.bincount(idx.view(-1)).max())
        cases.append(Case(name, "embedding", {},
                          [("weight", w, True), ("indices", idx, False)],
                          lambda weight, indices: F.embedding(indices, weight), dtype, repeats))

    for shapes, dim in [([[2, 3], [2, 1], [2, 4]], 1), ([[1, 3], [2, 3]], 0),
                        ([[2, 2, 3], [2, 1, 3], [2, 3, 3]], -2)]:
        name = f"cat/{shapes}/dim{dim}".replace(" ", "")
        g = generator(name)
        xs = [(f"x{i}", normal(g, s), True) for i, s in enumerate(shapes)]
        cases.append(Case(name, "cat", {"dim": dim}, xs,
                          lambda dim=dim, **kw: torch.cat([kw[f"x{i}"] for i in range(len(kw))],
                                                          dim)))
    # mixp's split takes one chunk size (torch.split's int form), not a list of sizes
    for shape, split, dim in [([5, 4], 2, 0), ([2, 7], 3, 1), ([3, 6, 2], 4, 1), ([2, 6], 3, -1)]:
        name = f"split/{shape}/{split}/dim{dim}".replace(" ", "")
        attrs = {"dim": dim, "split_size": split}
        cases.append(Case(name, "split", attrs, [("x", normal(generator(name), shape), True)],
                          lambda x, split=split, dim=dim: torch.split(x, split, dim)))
    for shape, dim, start, length in [([4, 6], 1, 1, 3), ([5, 3], 0, 2, 3), ([2, 5, 4], -1, 0, 2)]:
        name = f"narrow/{shape}/dim{dim}/{start}+{length}".replace(" ", "")
        cases.append(Case(name, "narrow", {"dim": dim, "start": start, "length": length},
                          [("x", normal(generator(name), shape), True)],
                          lambda x, dim=dim, start=start, length=length:
                          torch.narrow(x, dim, start, length)))
    return cases


# ---- normalization -----------------------------------------------------------------------------

def norm_cases():
    cases = []
    for shape, affine, eps, offset, dtype in [([2, 3, 8], True, 1e-5, 0.0, "f64"),
                                              ([4, 16], True, 1e-5, 3.0, "f64"),
                                              ([5, 6], False, 1e-5, 0.0, "f64"),
                                              ([3, 7], True, 0.1, 0.0, "f64"),
                                              ([4, 16], True, 1e-5, 0.0, "f32")]:
        name = f"layer_norm/{shape}/affine={int(affine)}/eps={eps}/{dtype}".replace(" ", "")
        g = generator(name)
        x = normal(g, shape) + offset
        c = shape[-1]
        w = 1.0 + normal(g, [c], 0.3) if affine else None
        b = normal(g, [c], 0.3) if affine else None
        cases.append(Case(name, "layer_norm", {"eps": eps},
                          [("x", x, True), ("weight", w, affine), ("bias", b, affine)],
                          lambda x, weight, bias, eps=eps, c=c:
                          F.layer_norm(x, [c], weight, bias, eps), dtype,
                          max(c, numel(shape[:-1]))))

    for shape, training, dtype in [([3, 2, 4, 4], True, "f64"), ([2, 3, 3, 5], True, "f64"),
                                   ([3, 2, 4, 4], False, "f64"), ([3, 2, 4, 4], True, "f32")]:
        momentum, eps = 0.1, 1e-5
        name = f"batch_norm/{shape}/training={int(training)}/{dtype}".replace(" ", "")
        g = generator(name)
        c = shape[1]
        x = normal(g, shape, 1.5) + 0.5
        w, b = 1.0 + normal(g, [c], 0.3), normal(g, [c], 0.3)
        rm, rv = normal(g, [c], 0.5), positive(g, [c])

        def run(x, weight, bias, running_mean, running_var, training=training, momentum=momentum,
                eps=eps):
            y = F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
            return {"outputs": y,
                    "after": {"running_mean": running_mean, "running_var": running_var}}

        cases.append(Case(name, "batch_norm",
                          {"training": training, "momentum": momentum, "eps": eps},
                          [("x", x, True), ("weight", w, True), ("bias", b, True),
                           ("running_mean", rm, False), ("running_var", rv, False)],
                          run, dtype, numel(shape) // c,
                          f32_inputs=("running_mean", "running_var")))
    return cases


# ---- convolution and pooling -------------------------------------------------------------------

def conv_cases():
    cases = []
    specs = [
        # x shape, weight shape, bias, stride, pad, dilation, groups, dtype
        ([2, 3, 6, 6], [4, 3, 3, 3], True, 1, 1, 1, 1, "f64"),
        ([1, 2, 7, 7], [3, 2, 3, 3], True, 2, 0, 1, 1, "f64"),
        ([1, 2, 8, 8], [2, 2, 3, 3], True, 1, 2, 2, 1, "f64"),
        ([2, 4, 5, 5], [6, 2, 3, 3], False, 1, 1, 1, 2, "f64"),
        ([1, 3, 5, 6], [2, 3, 2, 3], True, 1, 0, 1, 1, "f64"),
        ([2, 3, 4, 4], [5, 3, 1, 1], True, 1, 0, 1, 1, "f64"),
        ([2, 3, 6, 6], [4, 3, 3, 3], True, 1, 1, 1, 1, "f32"),
    ]
    for sx, sw, bias, stride, pad, dilation, groups, dtype in specs:
        name = (f"conv2d/{sx}x{sw}/bias={int(bias)}/s{stride}p{pad}d{dilation}g{groups}/{dtype}"
                .replace(" ", ""))
        g = generator(name)
        fan_in = sw[1] * sw[2] * sw[3]
        x, w = normal(g, sx), normal(g, sw) / math.sqrt(fan_in)
        b = normal(g, [sw[0]], 0.5) if bias else None
        ho = (sx[2] + 2 * pad - dilation * (sw[2] - 1) - 1) // stride + 1
        wo = (sx[3] + 2 * pad - dilation * (sw[3] - 1) - 1) // stride + 1
        cases.append(Case(name, "conv2d",
                          {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups},
                          [("x", x, True), ("weight", w, True), ("bias", b, bias)],
                          lambda x, weight, bias, stride=stride, pad=pad, dilation=dilation,
                          groups=groups: F.conv2d(x, weight, bias, stride, pad, dilation, groups),
                          dtype, max(fan_in, sx[0] * ho * wo, sw[0] // groups * sw[2] * sw[3])))

    for op, shape, k, s, p, dtype in [("max_pool2d", [2, 3, 6, 6], 2, 2, 0, "f64"),
                                      ("max_pool2d", [1, 2, 7, 7], 3, 2, 1, "f64"),
                                      ("max_pool2d", [1, 2, 5, 5], 3, 1, 1, "f64"),
                                      ("avg_pool2d", [2, 3, 6, 6], 2, 2, 0, "f64"),
                                      ("avg_pool2d", [1, 2, 7, 7], 3, 2, 1, "f64"),
                                      ("max_pool2d", [2, 3, 6, 6], 2, 2, 0, "f32"),
                                      ("avg_pool2d", [1, 2, 7, 7], 3, 2, 1, "f32")]:
        name = f"{op}/{shape}/k{k}s{s}p{p}/{dtype}".replace(" ", "")
        x = normal(generator(name), shape)  # continuous: no ties inside a window
        if op == "max_pool2d":
            fn = lambda x, k=k, s=s, p=p: F.max_pool2d(x, k, s, p)
        else:
            fn = lambda x, k=k, s=s, p=p: F.avg_pool2d(x, k, s, p, count_include_pad=True)
        cases.append(Case(name, op, {"kernel": k, "stride": s, "pad": p}, [("x", x, True)], fn,
                          dtype, k * k))
    for shape, out, dtype in [([1, 2, 7, 5], [3, 2], "f64"), ([2, 3, 4, 4], [1, 1], "f64"),
                              ([1, 2, 6, 6], [4, 4], "f64"), ([1, 2, 7, 5], [3, 2], "f32")]:
        name = f"adaptive_avg_pool2d/{shape}/{out}/{dtype}".replace(" ", "")
        x = normal(generator(name), shape)
        length = math.ceil(shape[2] / out[0] + 1) * math.ceil(shape[3] / out[1] + 1)
        cases.append(Case(name, "adaptive_avg_pool2d", {"output_size": out}, [("x", x, True)],
                          lambda x, out=out: F.adaptive_avg_pool2d(x, out), dtype, length))
    return cases


# ---- attention ---------------------------------------------------------------------------------

def attention(q, k, v, causal):
    """softmax(q k^T / sqrt(Dh) + mask) v for q, k, v [B, H, T, Dh]; mask -inf above the diagonal."""
    t, dh = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_cases():
    cases = []
    for shape, causal, dtype in [([2, 2, 5, 4], True, "f64"), ([2, 2, 5, 4], False, "f64"),
                                 ([1, 3, 7, 8], True, "f64"), ([2, 2, 5, 4], True, "f32")]:
        name = f"scaled_dot_product_attention/{shape}/causal={int(causal)}/{dtype}".replace(" ", "")
        g = generator(name)
        q, k, v = normal(g, shape), normal(g, shape), normal(g, shape)
        cases.append(Case(name, "scaled_dot_product_attention", {"causal": causal},
                          [("q", q, True), ("k", k, True), ("v", v, True)],
                          lambda q, k, v, causal=causal: attention(q, k, v, causal), dtype,
                          max(shape[2], shape[3])))
    return cases


# ---- a tiny GPT, as nanoGPT writes it ----------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = attention(q, k, v, causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, tied):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        if tied:
            self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, dtype=torch.int64)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def init_gpt(model, g):
    """Random values everywhere (not nanoGPT's zero biases and unit norms, which would hide
    mistakes in their gradients): embeddings N(0, 0.5), Linear weights N(0, 1/in),
    biases N(0, 0.1), LayerNorm weights 1 + N(0, 0.1), LayerNorm biases N(0, 0.1), drawn in the
    order of named_parameters()."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("wte.weight") or name.endswith("wpe.weight"):
                p.copy_(normal(g, p.shape, 0.5))
            elif ".ln_" in name or "ln_f" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + normal(g, p.shape, 0.1))
            elif name.endswith("bias"):
                p.copy_(normal(g, p.shape, 0.1))
            else:
                p.copy_(normal(g, p.shape, 1.0 / math.sqrt(p.shape[1])))


def transformer_model(tied):
    config = {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,
              "bias": True, "dropout": 0.0, "layer_norm_eps": 1e-5, "mlp_activation": "gelu_tanh",
              "tied": tied}
    name = "gpt/tied" if tied else "gpt/untied"
    g = generator(name)
    model = GPT(11, 8, 2, 2, 16, tied).double()
    init_gpt(model, g)
    idx = indices(g, [2, 8], 11)
    targets = indices(g, [2, 8], 11)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}

    def loss_of(logits):
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    logits = model(idx)
    loss = loss_of(logits)
    model.zero_grad()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    lr, steps, losses = 0.1, 3, []
    for _ in range(steps):
        model.zero_grad()
        step_loss = loss_of(model(idx))
        step_loss.backward()
        losses.append(step_loss.item())
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    with torch.no_grad():
        loss_after = loss_of(model(idx)).item()
    params_after = {n: p.detach().clone() for n, p in model.named_parameters()}

    return {
        "name": name,
        "config": config,
        "note": ("lm_head.weight is transformer.wte.weight (one tensor, listed once by that name)"
                 if tied else "lm_head.weight and transformer.wte.weight are separate"),
        "idx": tensor_json(idx),
        "targets": tensor_json(targets),
        "params": {n: tensor_json(t) for n, t in params.items()},
        "logits": tensor_json(logits),
        "loss": tensor_json(loss),
        "grads": {n: tensor_json(t) for n, t in grads.items()},
        "sgd": {"lr": lr, "momentum": 0.0, "weight_decay": 0.0, "steps": steps,
                "losses": losses, "loss_after": loss_after,
                "params_after": {n: tensor_json(t) for n, t in params_after.items()}},
    }


def write_transformer():
    path = os.path.join(OUT_DIR, "transformer.json")
    header = {"format": FORMAT_VERSION, "group": "transformer",
              "description": "2-layer pre-norm GPT (nanoGPT names), f64: logits, loss, every "
                             "gradient, parameters after 3 SGD steps",
              "generator": "tests/golden/make_fixtures.py", "torch": torch.__version__}
    models = [transformer_model(tied=False), transformer_model(tied=True)]
    with open(path, "w") as f:
        f.write("{\"meta\":" + json.dumps(header, allow_nan=False) + ",\n\"models\":[\n")
        f.write(",\n".join(json.dumps(m, separators=(",", ":"), allow_nan=False) for m in models))
        f.write("\n]}\n")
    return path


def lstm_model(name, input_size, hidden_size, num_layers, batch, steps):
    g = generator(name)
    lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True,
                   dtype=torch.float64)
    with torch.no_grad():
        for _, p in lstm.named_parameters():  # random everywhere, in named_parameters() order
            p.copy_(normal(g, tuple(p.shape), 0.5))
    x = normal(g, (batch, steps, input_size)).requires_grad_(True)
    grad_out = normal(g, (batch, steps, hidden_size))
    params = {n: p.detach().clone() for n, p in lstm.named_parameters()}
    out, _ = lstm(x)
    out.backward(grad_out)
    return {"name": name,
            "config": {"input_size": input_size, "hidden_size": hidden_size,
                       "num_layers": num_layers, "bias": True, "batch_first": True},
            "params": {n: tensor_json(t) for n, t in params.items()},
            "x": tensor_json(x), "out": tensor_json(out), "grad_out": tensor_json(grad_out),
            "grad_x": tensor_json(x.grad),
            "grads": {n: tensor_json(p.grad) for n, p in lstm.named_parameters()}}


def write_lstm():
    path = os.path.join(OUT_DIR, "lstm.json")
    header = {"format": FORMAT_VERSION, "group": "lstm",
              "description": "torch.nn.LSTM, batch_first, f64: output and the gradients of "
                             "the input and every parameter for a given upstream gradient",
              "generator": "tests/golden/make_fixtures.py", "torch": torch.__version__}
    models = [lstm_model("lstm/1-layer", 3, 4, 1, 2, 5), lstm_model("lstm/2-layer", 3, 4, 2, 2, 5)]
    with open(path, "w") as f:
        f.write("{\"meta\":" + json.dumps(header, allow_nan=False) + ",\n\"models\":[\n")
        f.write(",\n".join(json.dumps(m, separators=(",", ":"), allow_nan=False) for m in models))
        f.write("\n]}\n")
    return path


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    groups = [
        ("elementwise", "add/sub/mul/div with broadcasting, unary math and activations",
         elementwise_cases),
        ("reductions", "sum, mean, max along a dim", reduction_cases),
        ("linalg", "matmul, bmm, linear", linalg_cases),
        ("losses", "softmax, log_softmax, cross_entropy, mse_loss", loss_cases),
        ("misc", "transpose, permute, embedding, cat, split, narrow", misc_cases),
        ("norm", "layer_norm, batch_norm (NCHW)", norm_cases),
        ("conv", "conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d", conv_cases),
        ("attention", "scaled_dot_product_attention, written out", attention_cases),
    ]
    paths = [write_group(group, desc, fn()) for group, desc, fn in groups]
    paths.append(write_transformer())
    paths.append(write_lstm())
    total = 0
    for p in paths:
        size = os.path.getsize(p)
        total += size
        print(f"{os.path.relpath(p)}: {size} bytes")
    print(f"total: {total} bytes (torch {torch.__version__})")


if __name__ == "__main__":
    sys.exit(main())
