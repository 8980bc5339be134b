#!/usr/bin/env bash
# torchvision's models through `accelkit bench --model` (bench/results/inference-cpu.md, "Models
# a user exports"): bench/make_torchvision_models.py writes them (Debian's python3-torchvision),
# then each is timed with static int8 beside accelkit's lossless choice and hand-tuned LibTorch,
# on every build given. JSON under OUT_DIR, the table in OUT_DIR/table.md.
#
#   bench/torchvision.sh OUT_DIR build build-debian
set -euo pipefail
out=${1:?usage: bench/torchvision.sh OUT_DIR BUILD_DIR...}
shift
mkdir -p "$out/models"
root=$(cd "$(dirname "$0")/.." && pwd)
${TV_PYTHON:-/usr/bin/python3} "$root/bench/make_torchvision_models.py" "$out/models" 2> >(grep -v Warning >&2)
steps=${STEPS:-10}
for build in "$@"; do
  tag=$(basename "$build")
  for m in ${MODELS:-resnet18_scripted mobilenet_v2_scripted resnet50_traced}; do
    echo "== $tag $m" >&2
    "$build/bin/accelkit" bench --model "$out/models/$m.pt" --input 16x3x224x224 --quantize int8-static --vs-tuned \
      --steps "$steps" --warmup 2 --wait-quiet=120 --no-cache --json >"$out/$tag-$m.json"
    "$root/bench/inference_table.py" "$out/$tag-$m.json" >>"$out/table.md"
  done
done
