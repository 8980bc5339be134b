"""Where a ResNet-20 training step's time goes on this CPU, with plain PyTorch (the wheel's
LibTorch, the same kernels a C++ program runs): the step's median, its operators by self time
(torch.profiler), the 3x3 convolutions' rates in GFLOP/s (forward, forward + backward) and
BatchNorm's, ReLU's and a copy's times on the same activations.

    .venv/bin/python bench/profile_resnet20.py [--threads N] [--nchw] [--batch B]

Channels-last fp32 by default, as accelkit's step tuning and the hand-tuned variant of
accelkit_bench_resnet_program run it (results: bench/results/programs.md).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in [(16, 1), (32, 2), (64, 2)]:
            for k in range(3):
                blocks.append(Block(cin, cout, stride if k == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(torch.relu(self.bn(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def median_ms(f, n):
    for _ in range(3):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[n // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--nchw", action="store_true")
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    fmt = torch.contiguous_format if a.nchw else torch.channels_last
    model = ResNet20().to(memory_format=fmt)
    x = torch.randn(a.batch, 3, 32, 32).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (a.batch,))
    opt = torch.optim.Adam(model.parameters(), 1e-3, fused=True)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    print(f"torch {torch.__version__}, {a.threads} threads, batch {a.batch}, fp32 "
          f"{'NCHW' if a.nchw else 'channels-last'}")
    print(f"step: {median_ms(step, 9):.1f} ms (median of 9)")
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(3):
            step()
    print("operators by self time over 3 steps:")
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))

    print("3x3 convolutions (batch as above):")
    for c, h in [(16, 32), (32, 16), (64, 8)]:
        xi = torch.randn(a.batch, c, h, h).contiguous(memory_format=fmt).requires_grad_()
        w = torch.randn(c, c, 3, 3).contiguous(memory_format=fmt).requires_grad_()
        flops = 2 * a.batch * c * c * 9 * h * h

        def fwd_bwd():
            out = F.conv2d(xi, w, padding=1)
            out.backward(torch.ones_like(out))

        f = median_ms(lambda: F.conv2d(xi, w, padding=1), 10)
        fb = median_ms(fwd_bwd, 10)
        print(f"  {c:3d} channels {h:2d}x{h:<2d}  forward {flops / f / 1e6:4.0f} GFLOP/s, "
              f"forward + backward {3 * flops / fb / 1e6:4.0f} GFLOP/s")
    print("elementwise passes on one activation (ms):")
    for c, h in [(16, 32), (32, 16), (64, 8)]:
        t = torch.randn(a.batch, c, h, h).contiguous(memory_format=fmt)
        g = torch.randn_like(t)
        wb, bb, rm, rv = torch.randn(c), torch.randn(c), torch.zeros(c), torch.ones(c)
        mb = t.numel() * 4 / 1e6
        copy = median_ms(lambda: t.clone(), 20)
        bn = median_ms(lambda: torch.native_batch_norm(t, wb, bb, rm, rv, True, 0.1, 1e-5), 20)
        _, sm, si = torch.native_batch_norm(t, wb, bb, rm, rv, True, 0.1, 1e-5)
        bnb = median_ms(lambda: torch.ops.aten.native_batch_norm_backward(
            g, t, wb, rm, rv, sm, si, True, 1e-5, [True, True, True]), 20)
        relu = median_ms(lambda: torch.relu(t), 20)
        print(f"  {c:3d}x{h}x{h} ({mb:.1f} MB): copy {copy:.3f} ({2 * mb / copy:.0f} GB/s), batch_norm {bn:.3f}, "
              f"its backward {bnb:.3f}, relu {relu:.3f}")


if __name__ == "__main__":
    main()
