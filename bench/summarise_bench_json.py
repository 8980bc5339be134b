#!/usr/bin/env python3
"""One line per `accelkit --json bench` file: the medians, the ratios, the floor and the check.

Usage: bench/summarise_bench_json.py FILE.json...
"""
import json
import sys


def variant(d, name):
    v = d.get(name)
    if not isinstance(v, dict):
        return ""
    return f"{name} {v['median_ms']:.3f} ms ({v.get('dtype', '?')}, {v.get('optimizer', '?')}, {v.get('step_mode', '?')})"


for path in sys.argv[1:]:
    try:
        with open(path) as f:
            text = f.read()
        # The JSON object, past any log lines written before it (stdout and stderr together).
        start = 0 if text.startswith("{") else text.find("\n{") + 1
        d, _ = json.JSONDecoder().raw_decode(text[start:])
    except (OSError, ValueError) as e:
        print(f"{path}: unreadable ({e})")
        continue
    parts = [f"{path}: {d.get('shape', d.get('model'))}"]
    parts += [variant(d, n) for n in ("baseline", "accelkit", "tuned", "eager") if variant(d, n)]
    for key in ("speedup", "speedup_vs_tuned", "speedup_vs_eager"):
        if isinstance(d.get(key), (int, float)):
            parts.append(f"{key} {d[key]:.2f}x")
    fl = d.get("floor")
    if isinstance(fl, dict) and fl.get("floor_ms"):
        parts.append(f"floor {fl['floor_ms']:.3f} ms (matmul {fl.get('matmul_ms', 0):.3f} at {fl.get('matmul_tflops', 0):.1f} "
                     f"TFLOP/s + optimizer {fl.get('optimizer_ms', 0):.3f} at {fl.get('copy_gbps', 0):.0f} GB/s), "
                     f"measured/floor {fl.get('measured_over_floor', 0):.2f}")
    acc = d.get("accuracy")
    if isinstance(acc, dict):
        parts.append(f"accuracy rel {acc.get('rel_diff')} tol {acc.get('tolerance')} ok {acc.get('ok')}")
    print("; ".join(parts))
