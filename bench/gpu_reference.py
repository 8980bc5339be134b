"""Reference rates on a CUDA GPU through PyTorch itself, for bench/results/gpu-*.md: device copy
bandwidth (bytes read + written), bf16 and fp32 matmul rates on random data, and PyTorch's own
fused AdamW (torch.optim.AdamW(fused=True), i.e. at::_fused_adamw_) on 4 x [5120, 5120] fp32
parameters - the tensors `accelkit bench --model optimizer --width 5120` steps. Medians of CUDA
event timings after warm-up. Usage: python3 bench/gpu_reference.py"""
import statistics
import torch


def timed(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        print("reference: no CUDA device")
        return
    dev = torch.device("cuda")
    print(f"reference: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    n = 1 << 28  # 1 GiB of fp32
    src = torch.randn(n, device=dev)
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src))
    print(f"  copy 1 GiB: {ms:.3f} ms = {2 * 4 * n / ms / 1e6:.0f} GB/s (read + written)")
    del src, dst
    for dtype in (torch.bfloat16, torch.float32):
        k = 8192
        a = torch.randn(k, k, device=dev, dtype=dtype)
        b = torch.randn(k, k, device=dev, dtype=dtype)
        ms = timed(lambda: torch.mm(a, b), reps=10)
        print(f"  mm {k}^3 {str(dtype).split('.')[1]}: {ms:.3f} ms = {2 * k ** 3 / ms / 1e9:.0f} TFLOP/s")
    torch.manual_seed(0)
    params = [torch.randn(5120, 5120, device=dev, requires_grad=True) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    count = sum(p.numel() for p in params)
    for fused in (True, False):
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=fused, foreach=None if fused else True)
        ms = timed(opt.step, reps=30)
        name = "fused (at::_fused_adamw_)" if fused else "foreach"
        print(f"  torch.optim.AdamW {name}, {count / 1e6:.1f}M params: {ms:.3f} ms = "
              f"{28 * count / ms / 1e6:.0f} GB/s (28 bytes per parameter)")


if __name__ == "__main__":
    main()
