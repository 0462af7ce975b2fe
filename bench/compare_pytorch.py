#!/usr/bin/python3
"""The models of `mixp bench train` in PyTorch, timed the same way, printing the same JSON.

Run with Debian's interpreter and python3-torch 1.13 (optional; not part of CI):

  /usr/bin/python3 bench/compare_pytorch.py --model gpt --precision amp-bf16 [--steps N]

`--precision fp32` is plain fp32; `--precision amp-bf16` runs the forward pass under
torch.autocast('cpu', dtype=torch.bfloat16). PyTorch runs at its best: OMP_WAIT_POLICY=PASSIVE,
ATEN_CPU_CAPABILITY=avx512, jemalloc preloaded with MALLOC_CONF as below, OpenBLAS for fp32
matmuls (the script re-executes itself with them when they are missing; they come from
Debian's libjemalloc2 and libopenblas0-openmp), torch.set_num_threads equal to the cores. The
JSON line says which allocator and MALLOC_CONF the process ran with, and bench/ratios.py
refuses to compare a run without them. The models mirror src/nn/models.cpp layer for layer
(the parameter counts are printed); like `mixp bench train`'s models (ModelConfig's dropout
0.0) they have no dropout. The optimizer is AdamW with the settings of mixp's trainer; batches
are synthetic, of the real data's shapes.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# Debian's torch does fp32 matmuls through the system BLAS, netlib's reference by default (50x
# slower here); OpenBLAS (Debian's libopenblas0-openmp) is put first for this process only.
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
# jemalloc's settings for PyTorch training on the CPU: large allocations from a dedicated arena
# (oversize_threshold), freed pages never handed back to the kernel (dirty and muzzy decay -1),
# so that a step's activations reuse the last step's pages instead of faulting in fresh ones,
# purging on a background thread, and metadata on transparent huge pages where that pays.
MALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
               "dirty_decay_ms:-1,muzzy_decay_ms:-1")
BEST_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "ATEN_CPU_CAPABILITY": "avx512",
            "MALLOC_CONF": MALLOC_CONF}


def ensure_best_environment():
    """Re-executes the script with PyTorch's best settings when they are not in place yet."""
    env = dict(os.environ)
    changed = False
    for k, v in BEST_ENV.items():
        if env.get(k) != v:
            env[k] = v
            changed = True
    if os.path.exists(JEMALLOC) and JEMALLOC not in env.get("LD_PRELOAD", ""):
        env["LD_PRELOAD"] = (JEMALLOC + " " + env.get("LD_PRELOAD", "")).strip()
        changed = True
    if os.path.isdir(OPENBLAS) and OPENBLAS not in env.get("LD_LIBRARY_PATH", ""):
        env["LD_LIBRARY_PATH"] = ":".join(x for x in (OPENBLAS, env.get("LD_LIBRARY_PATH")) if x)
        changed = True
    if changed and env.get("MIXP_BENCH_REEXEC") != "1":
        env["MIXP_BENCH_REEXEC"] = "1"
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def jemalloc_loaded():
    """Whether jemalloc is mapped into this process (LD_PRELOAD took effect)."""
    with open("/proc/self/maps") as maps:
        return any("libjemalloc" in line for line in maps)


ensure_best_environment()

import torch  # noqa: E402  (after the environment is set)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Mlp(nn.Module):
    def __init__(self, image_size=28, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(image_size * image_size, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, classes)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self, image_size=28, classes=10):
        super().__init__()
        layers = []
        for cin, cout in ((1, 32), (32, 64)):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                       nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        side = image_size // 4
        self.classifier = nn.Sequential(nn.Linear(64 * side * side, 128), nn.ReLU(),
                                        nn.Linear(128, classes))

    def forward(self, x):
        f = self.features(x)
        return self.classifier(f.reshape(f.shape[0], -1))


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        # PyTorch 1.13 has no fused attention on the CPU: nanoGPT's explicit path.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Mlp4(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = Mlp4(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab=65, context=256, width=384, layers=6, heads=6):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head_weight = self.transformer.wte.weight  # tied, as in nanoGPT and mixp
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))
            elif p.dim() >= 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return F.linear(self.transformer.ln_f(x), self.lm_head_weight)


def train_step_flop(model, batch, image_size=28, classes=10, vocab=65, context=256, width=384,
                    layers=6):
    """The FLOP count of bench/train_bench.cpp's train_step_flop(), term for term."""
    n = float(batch)
    if model == "mlp":
        first = 2 * n * image_size * image_size * 1024
        rest = 2 * n * (1024 * 1024 + 1024 * classes)
        return 2 * first + 3 * rest
    if model == "cnn":
        s = float(image_size)
        conv1 = 2 * n * s * s * 32 * 9
        conv2 = 2 * n * (s / 2) * (s / 2) * 64 * 32 * 9
        fc = 2 * n * (64 * (s / 4) * (s / 4) * 128 + 128 * classes)
        return 2 * conv1 + 3 * (conv2 + fc)
    t, w = float(context), float(width)
    per_layer = 2 * n * t * 12 * w * w + 4 * n * t * t * w
    return 3 * (layers * per_layer + 2 * n * t * w * vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "gpt"], default="gpt")
    ap.add_argument("--precision", choices=["fp32", "amp-bf16"], default="fp32")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--peak-gflops", type=float, default=0.0,
                    help="the peak to compare with (mixp bench peak's f32 or bf16 figure)")
    a = ap.parse_args()

    threads = os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    lm = a.model == "gpt"
    batch = a.batch or (16 if lm else 64)
    model = {"mlp": Mlp, "cnn": Cnn, "gpt": Gpt}[a.model]()
    model.train()
    params = list(model.parameters())
    if lm:
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99), foreach=True)
    else:
        opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)

    g = torch.Generator().manual_seed(7)
    if lm:
        x = torch.randint(0, 65, (batch, 256), generator=g)
        y = torch.roll(x.reshape(-1), -1)
    else:
        x = torch.randn(batch, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)

    use_bf16 = a.precision == "amp-bf16"
    ms = []
    loss = None
    for s in range(a.warmup + a.steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()
        elapsed = (time.perf_counter() - start) * 1e3
        if s >= a.warmup:
            ms.append(elapsed)
    ms.sort()
    k = len(ms)
    median_ms = ms[k // 2] if k % 2 else 0.5 * (ms[k // 2 - 1] + ms[k // 2])
    flop = train_step_flop(a.model, batch)
    gflops = flop / (median_ms * 1e6)
    out = {
        "framework": "pytorch " + torch.__version__,
        "model": a.model,
        "precision": a.precision,
        "batch": batch,
        "threads": threads,
        "parameters": sum(p.numel() for p in params),
        "steps": a.steps,
        "warmup": a.warmup,
        "median_ms": median_ms,
        "min_ms": ms[0],
        "samples_per_s": batch * 1000.0 / median_ms,
        "gflop_per_step": flop / 1e9,
        "gflops": gflops,
        "peak_dtype": "bf16" if use_bf16 else "f32",
        "peak_gflops": a.peak_gflops or None,
        "pct_of_peak": 100.0 * gflops / a.peak_gflops if a.peak_gflops else None,
        "loss": loss_value,
        "peak_memory_mib": None,  # PyTorch's CPU allocator keeps no accounting by purpose
        "blas": "openblas" if OPENBLAS in os.environ.get("LD_LIBRARY_PATH", "") else "system",
        "allocator": "jemalloc" if jemalloc_loaded() else "glibc",
        "malloc_conf": os.environ.get("MALLOC_CONF"),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
