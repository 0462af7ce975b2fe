#!/usr/bin/python3
"""The ratios that docs/performance.md reports, from bench/run.sh's results (a JSON-lines file
of {"round": r, "result": <a bench train or compare_pytorch.py line>}).

Each speed ratio is computed within a round (the runs were back to back) and the median over
rounds is reported with every round's value; speed-ups are time ratios (slower / faster)."""
import json
import statistics
import sys
from collections import defaultdict

# PyTorch on the CPU is compared only at its best: jemalloc preloaded with these settings, as
# bench/compare_pytorch.py sets them.
MALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
               "dirty_decay_ms:-1,muzzy_decay_ms:-1")


def unfair_pytorch_runs(results):
    """The PyTorch results that ran without jemalloc or without its settings."""
    return [r for r in results if r["framework"] != "mixp"
            and (r.get("allocator") != "jemalloc" or r.get("malloc_conf") != MALLOC_CONF)]


def main(path):
    runs = defaultdict(dict)  # round -> (framework, model, precision) -> result
    round_peaks = {}  # round -> `mixp bench peak`'s line, measured just before its gpt runs
    for line in open(path):
        if not line.strip():
            continue
        rec = json.loads(line)
        if "peak" in rec:
            round_peaks[rec["round"]] = rec["peak"]
            continue
        res = rec["result"]
        fw = "mixp" if res["framework"] == "mixp" else "torch"
        runs[rec["round"]][(fw, res["model"], res["precision"])] = res
    unfair = unfair_pytorch_runs([res for r in runs.values() for res in r.values()])
    if unfair:
        r = unfair[0]
        sys.exit("ratios.py: %d PyTorch run(s) without jemalloc and MALLOC_CONF=%s (the first: %s %s, "
                 "allocator %s, MALLOC_CONF %s); no comparison is made against PyTorch below its best "
                 "(apt-get install libjemalloc2)"
                 % (len(unfair), MALLOC_CONF, r["model"], r["precision"], r.get("allocator"),
                    r.get("malloc_conf")))

    def ratio(name, num, den, field="median_ms", target=None):
        values = [r[num][field] / r[den][field] for r in runs.values() if num in r and den in r]
        if not values:
            return
        med = statistics.median(values)
        t = "" if target is None else ("  target >= %.2f: %s" % (target, "met" if med >= target else "NOT met"))
        print("%-46s %6.2f  (rounds %s)%s" % (name, med, ", ".join("%.2f" % v for v in values), t))

    def value(name, key, field, fmt="%6.1f", target=None, below=False):
        values = [r[key][field] for r in runs.values() if key in r and r[key].get(field) is not None]
        if not values:
            return
        med = statistics.median(values)
        t = ""
        if target is not None:
            ok = med <= target if below else med >= target
            t = "  target %s %g: %s" % ("<=" if below else ">=", target, "met" if ok else "NOT met")
        print(("%-46s " + fmt + "  (rounds %s)%s") % (name, med, ", ".join(fmt.strip() % v for v in values), t))

    # The median step of each run, and its fastest step: on a shared machine the fastest is the
    # one least slowed by other work, so both are shown.
    for field in ("median_ms", "min_ms"):
        print("speed-ups from %s (time ratios, median over rounds):" % field)
        r = lambda name, a, b, target=None: ratio(name, a, b, field, target)
        r("gpt amp-bf16: PyTorch bf16 autocast / mixp", ("torch", "gpt", "amp-bf16"), ("mixp", "gpt", "amp-bf16"), 2.0)
        r("gpt fp32: PyTorch / mixp", ("torch", "gpt", "fp32"), ("mixp", "gpt", "fp32"), 1.2)
        r("gpt: mixp fp32 / mixp amp-bf16", ("mixp", "gpt", "fp32"), ("mixp", "gpt", "amp-bf16"), 1.8)
        r("gpt: PyTorch fp32 / PyTorch bf16", ("torch", "gpt", "fp32"), ("torch", "gpt", "amp-bf16"))
        for m in ("mlp", "cnn"):
            r("%s amp-bf16: PyTorch bf16 autocast / mixp" % m, ("torch", m, "amp-bf16"), ("mixp", m, "amp-bf16"), 2.0)
            r("%s fp32: PyTorch / mixp" % m, ("torch", m, "fp32"), ("mixp", m, "fp32"))
    # Each run's JSON carries the peak it was measured against: run.sh's PEAK_F32/PEAK_BF16 when
    # set, else the peak bench of this invocation.
    peaks = sorted({"%s %.0f" % (res.get("peak_dtype", "?"), res["peak_gflops"])
                    for r in runs.values() for res in r.values()
                    if res.get("model") == "gpt" and res.get("peak_gflops")})
    print("percent of the peak (median step; peaks GFLOP/s: %s):" % ", ".join(peaks))
    value("gpt amp-bf16 mixp, % of bf16 peak", ("mixp", "gpt", "amp-bf16"), "pct_of_peak", target=80)
    value("gpt amp-bf16 PyTorch, % of bf16 peak", ("torch", "gpt", "amp-bf16"), "pct_of_peak")
    value("gpt fp32 mixp, % of fp32 peak", ("mixp", "gpt", "fp32"), "pct_of_peak")
    value("gpt fp32 PyTorch, % of fp32 peak", ("torch", "gpt", "fp32"), "pct_of_peak")
    # The same against the peak measured in each run's round: the machine's speed drifts within
    # minutes, and a peak measured next to the run moves with it.
    if round_peaks:
        print("percent of the peak measured in the same round, just before its gpt runs:")
        for name, key, dtype in (("gpt amp-bf16 mixp, % of round's bf16 peak", ("mixp", "gpt", "amp-bf16"), "bf16"),
                                 ("gpt amp-bf16 PyTorch, % of round's bf16 peak", ("torch", "gpt", "amp-bf16"), "bf16"),
                                 ("gpt fp32 mixp, % of round's fp32 peak", ("mixp", "gpt", "fp32"), "f32")):
            values = [100.0 * r[key]["gflops"] / round_peaks[n]["%s_gflops" % dtype]
                      for n, r in sorted(runs.items()) if key in r and n in round_peaks]
            if not values:
                continue
            med = statistics.median(values)
            peaks_used = ", ".join("%.0f" % round_peaks[n]["%s_gflops" % dtype] for n in sorted(round_peaks))
            t = ("  target >= 80: %s" % ("met" if med >= 80 else "NOT met")) if dtype == "bf16" and key[0] == "mixp" else ""
            print("%-46s %6.1f  (rounds %s; peaks %s)%s" % (name, med, ", ".join("%.1f" % v for v in values), peaks_used, t))
    print("memory (mixp's accounting by tag):")
    bf16, fp32, amp = ("mixp", "gpt", "bf16"), ("mixp", "gpt", "fp32"), ("mixp", "gpt", "amp-bf16")
    for r in runs.values():
        if bf16 in r and fp32 in r:
            t = r[bf16]["peak_memory_mib"]["total"] / r[fp32]["peak_memory_mib"]["total"]
            a = r[bf16]["peak_memory_mib"]["activation"] / r[fp32]["peak_memory_mib"]["activation"]
            print("gpt bf16 preset / fp32: peak total %.3f (target <= 0.55: %s), peak activations %.3f (%.1f / %.1f MiB)"
                  % (t, "met" if t <= 0.55 else "NOT met", a, r[bf16]["peak_memory_mib"]["activation"],
                     r[fp32]["peak_memory_mib"]["activation"]))
            if amp in r:
                print("gpt amp-bf16 / fp32: peak total %.3f, peak activations %.3f"
                      % (r[amp]["peak_memory_mib"]["total"] / r[fp32]["peak_memory_mib"]["total"],
                         r[amp]["peak_memory_mib"]["activation"] / r[fp32]["peak_memory_mib"]["activation"]))
            break


if __name__ == "__main__":
    main(sys.argv[1])
