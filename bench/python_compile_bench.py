#!/usr/bin/env python3
"""What a Python user gets: accelkit's `accelkit bench` models trained in PyTorch with torch.compile.

The models, data, loss and optimizer match core/src/bench_models.cpp and core/src/bench.cpp (CPU
sizes): a student trained with MSE against a fixed random teacher of the same architecture, AdamW.
Variants run in one process, one timed step of each per round (in a seeded random order per round,
as the C++ bench does), after an equal number of untimed steps whose losses are checked against eager.

    .venv/bin/python bench/python_compile_bench.py --model all --steps 20 --json out.json
"""
import argparse
import json
import os
import platform
import random
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20240901  # accelkit's BenchOptions::seed: model = SEED, input = SEED + 1, teacher = SEED + 2
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)


# --- models (bench_models.cpp) -------------------------------------------------------------------

class EncoderLayer(nn.Module):
    """Pre-norm: x + proj(attn(ln1(x))), then + fc2(gelu(fc1(ln2(x)))); no dropout."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        # [B, T, 3, H, dh] -> [3, B, H, T, dh]
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape(b, t, d)
        h = x + self.proj(a)
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class MnistCnn(nn.Module):
    """pytorch/examples' MNIST CNN without dropout."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        h = F.relu(F.max_pool2d(self.conv1(x), 2))
        h = F.relu(F.max_pool2d(self.conv2(h), 2))
        h = F.relu(self.fc1(h.flatten(1)))
        return self.fc2(h)


# CPU sizes from make_spec: name -> (description, input shape, model factory)
def spec(model):
    if model == "mlp":
        d, batch, layers = 2048, 256, 3
        def make():
            mods = []
            for i in range(layers):
                if i:
                    mods.append(nn.ReLU())
                mods.append(nn.Linear(d, d))
            return nn.Sequential(*mods)
        return f"{layers} x Linear({d}, {d}) + ReLU, MSE, batch {batch}", (batch, d), make
    if model == "transformer":
        d, batch, seq, layers = 256, 8, 128, 4
        heads = d // 64 if d % 64 == 0 else 1
        make = lambda: nn.Sequential(*[EncoderLayer(d, heads) for _ in range(layers)])
        return (f"{layers} encoder layers, d {d}, {heads} heads, seq {seq}, batch {batch}, SDPA",
                (batch, seq, d), make)
    if model == "cnn":
        batch = 64
        return f"MNIST CNN, MSE, batch {batch} of 1 x 28 x 28", (batch, 1, 28, 28), MnistCnn
    raise ValueError(model)


def build(make, seed):
    torch.manual_seed(seed)
    return make()


# --- machine -------------------------------------------------------------------------------------

def cpuinfo():
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def cpu_field(text, key):
    for line in text.splitlines():
        if line.split(":")[0].strip() == key:
            return line.split(":", 1)[1].strip()
    return None


def physical_cores(text):
    """Distinct (physical id, core id) pairs; os.cpu_count() when /proc/cpuinfo lacks them."""
    pairs, phys = set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            pairs.add((phys, value.strip()))
    return len(pairs) or os.cpu_count() or 1


def native_bf16(text):
    flags = set((cpu_field(text, "flags") or "").split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


# --- one variant: its own model copy, optimizer and (maybe) compiled forward -----------------------

class Variant:
    def __init__(self, name, make, bf16, compile_mode=None):
        self.name = name
        self.model = build(make, SEED)
        self.forward = self.model if compile_mode is None else (
            torch.compile(self.model) if compile_mode == "default" else torch.compile(self.model, mode=compile_mode))
        try:  # CPU fused AdamW: PyTorch 2.4+
            self.opt = torch.optim.AdamW(self.model.parameters(), fused=True, **ADAMW)
            self.optimizer = "AdamW(fused=True)"
        except (RuntimeError, TypeError, ValueError):
            self.opt = torch.optim.AdamW(self.model.parameters(), **ADAMW)
            self.optimizer = "AdamW"
        self.bf16 = bf16
        self.samples, self.losses = [], []
        self.first_step_s = None

    def loss(self, fwd, x, target):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            y = fwd(x)
        return F.mse_loss(y.float(), target)  # fp32, outside autocast

    def step(self, x, target):
        """zero_grad, forward, loss, backward, AdamW step; returns (seconds, loss)."""
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        l = self.loss(self.forward, x, target)
        l.backward()
        self.opt.step()
        return time.perf_counter() - t0, l.detach()

    def final_loss(self, x, target):
        """Forward-only loss after the untimed steps, on the uncompiled module (same weights)."""
        with torch.no_grad():
            return self.loss(self.model, x, target).item()


def rel_diff(a, ref):
    if a != a or ref != ref or abs(a) == float("inf") or abs(ref) == float("inf"):
        return float("inf")
    return abs(a - ref) / abs(ref) if ref else abs(a - ref)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_model(name, args, bf16):
    shape, in_shape, make = spec(name)
    torch.manual_seed(SEED + 1)
    x = torch.randn(*in_shape)
    teacher = build(make, SEED + 2)
    with torch.no_grad():  # the target in fp32, computed once
        target = teacher(x).detach()

    variants = [Variant("eager", make, bf16), Variant("compile", make, bf16, "default")]
    if args.max_autotune:
        variants.append(Variant("compile-max-autotune", make, bf16, "max-autotune-no-cudagraphs"))

    # Untimed steps: the first includes compilation (timed as "first step"), then --warmup more.
    for v in variants:
        log(f"[{name}] {v.name}: first step" + (" (compiling ...)" if v.forward is not v.model else ""))
        v.first_step_s, l = v.step(x, target)
        v.losses.append(l.item())
        for _ in range(args.warmup):
            v.losses.append(v.step(x, target)[1].item())
        v.losses.append(v.final_loss(x, target))

    # Accuracy: worst relative loss difference against eager over the untimed steps and after them.
    tol = 2e-2 if bf16 else 1e-3
    ref = variants[0].losses
    for v in variants:
        v.rel_diff = max(rel_diff(a, b) for a, b in zip(v.losses, ref))
        v.ok = v.rel_diff <= tol

    rng = random.Random(SEED)
    order = list(range(len(variants)))
    for r in range(args.steps):
        if r % max(1, args.steps // 10) == 0:
            log(f"[{name}] timing round {r + 1}/{args.steps}")
        rng.shuffle(order)
        for i in order:
            variants[i].samples.append(variants[i].step(x, target)[0] * 1e3)

    base = statistics.median(variants[0].samples)
    rows = []
    for v in variants:
        med = statistics.median(v.samples)
        rows.append(dict(variant=v.name, median_ms=med, min_ms=min(v.samples), max_ms=max(v.samples),
                         first_step_s=v.first_step_s, speedup=base / med, samples_ms=v.samples,
                         losses=v.losses, rel_diff=v.rel_diff, ok=v.ok, optimizer=v.optimizer))
    params = sum(p.numel() for p in variants[0].model.parameters())
    return dict(model=name, shape=shape, params=params, tolerance=tol, variants=rows)


def print_table(res):
    print(f"\n{res['model']}: {res['shape']}, {res['params']:,} parameters, {res['variants'][0]['optimizer']}")
    print(f"  {'variant':<22}{'median ms':>11}{'min ms':>10}{'max ms':>10}{'compile s':>11}{'speedup':>9}"
          f"  loss rel diff (tol {res['tolerance']:g})")
    for r in res["variants"]:
        status = "ok" if r["ok"] else "FAIL"
        print(f"  {r['variant']:<22}{r['median_ms']:>11.2f}{r['min_ms']:>10.2f}{r['max_ms']:>10.2f}"
              f"{r['first_step_s']:>11.2f}{r['speedup']:>8.2f}x  {r['rel_diff']:.2e} {status}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "transformer", "cnn", "all"], default="all")
    p.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps after the first (compiling) one")
    p.add_argument("--threads", type=int, default=0, help="default: physical cores")
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="auto")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--max-autotune", action="store_true", help="add torch.compile(mode='max-autotune-no-cudagraphs')")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")

    info = cpuinfo()
    threads = args.threads or physical_cores(info)
    torch.set_num_threads(threads)
    bf16 = args.precision == "bf16" or (args.precision == "auto" and native_bf16(info))
    cpu = cpu_field(info, "model name") or platform.processor() or "unknown CPU"
    load_start = os.getloadavg()[0]

    results = [run_model(m, args, bf16)
               for m in (["mlp", "transformer", "cnn"] if args.model == "all" else [args.model])]

    load_end = os.getloadavg()[0]
    print(f"torch {torch.__version__} | {cpu} | {threads} threads | {'bf16 autocast' if bf16 else 'fp32'} "
          f"| load {load_start:.2f} -> {load_end:.2f} | {args.steps} timed steps, {args.warmup} warm-up")
    for res in results:
        print_table(res)
    failed = [f"{r['model']}/{v['variant']}" for r in results for v in r["variants"] if not v["ok"]]
    if failed:
        print(f"\naccuracy check FAILED: {', '.join(failed)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(torch=torch.__version__, cpu=cpu, threads=threads, precision="bf16" if bf16 else "fp32",
                           load_start=load_start, load_end=load_end, steps=args.steps, warmup=args.warmup,
                           seed=SEED, results=results), f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
