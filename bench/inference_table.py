#!/usr/bin/env python3
"""One Markdown table row per `accelkit bench --json` inference result (bench/inference.sh)."""
import json
import sys

for path in sys.argv[1:]:
    r = json.load(open(path))
    base = r["baseline"]["median_ms"]
    cells = [r["torch_version"], r["model"].rsplit("/", 1)[-1], r["shape"].split("inputs ")[-1],
             f'{base:.1f} ms ({r["baseline"]["threads"]} thr)']
    for v in ("tuned", "accelkit", "int8"):
        x = r.get(v)
        if not x:
            cells.append("-")
            continue
        cos = f', cos {x["cosine"]:.5f}' if "cosine" in x else ""
        scheme = ""
        if v == "int8" and r.get("quantize"):
            scheme = " (static)" if r["quantize"]["scheme"].startswith("static") else " (dynamic)"
        cells.append(f'{x["median_ms"]:.1f} ms = {base / x["median_ms"]:.2f}x{cos}{scheme}')
    tuned = r.get("tuned", {}).get("median_ms")
    cells.append(f'{tuned / r["accelkit"]["median_ms"]:.2f}x' if tuned else "-")
    cells.append(f'{tuned / r["int8"]["median_ms"]:.2f}x' if tuned and r.get("int8") else "-")
    cells.append(r["inference"]["chosen"] if r.get("inference") else "-")
    m = r["machine"]
    cells.append("busy" if m["busy"] else f'quiet ({m["other_cores_during"]:.2f} other cores)')
    print("| " + " | ".join(cells) + " |")
