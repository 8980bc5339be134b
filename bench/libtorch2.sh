#!/usr/bin/env bash
# The LibTorch 2.x comparison (bench/results/libtorch2.md): accelkit bench on every model with
# --vs-tuned, on each LibTorch build present (build/ and build-debian/), then the same models in
# PyTorch from Python with torch.compile (the wheel's Python). One run after another, never in
# parallel; each waits for a quiet machine (1-minute load < 0.5) first. Logs go to $OUT
# (default bench/out/). Usage: bench/libtorch2.sh [steps]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-bench/out}
steps=${1:-20}
mkdir -p "$out"
quiet() {
  for _ in $(seq 1 60); do
    awk '{ exit !($1 < 0.5) }' /proc/loadavg && return 0
    sleep 5
  done
  echo "libtorch2: the machine did not get quiet (load $(cut -d' ' -f1-3 /proc/loadavg)); running anyway" >&2
}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "debian: $(cat /etc/debian_version)"
  grep -m1 'model name' /proc/cpuinfo
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512bw|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
  nproc
  git log -1 --format='tree: %h %s'
} > "$out/machine.txt"
for build in build build-debian; do
  [[ -x $build/bin/accelkit ]] || continue
  v=$(cat "$build/accelkit-torch-version.txt")
  for model in mlp transformer cnn optimizer; do
    quiet
    cmd="$build/bin/accelkit bench --model $model --vs-tuned --steps $steps"
    echo "\$ $cmd   # load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/$build-$model.txt"
    $cmd 2>/dev/null | tee -a "$out/$build-$model.txt"
  done
done
if [[ -x .venv/bin/python ]]; then
  quiet
  cmd=".venv/bin/python -W ignore bench/python_compile_bench.py --model all --steps $steps --warmup 3"
  echo "\$ $cmd   # load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/python-compile.txt"
  $cmd --json "$out/python-compile.json" 2>/dev/null | tee -a "$out/python-compile.txt"
fi
