#!/usr/bin/env bash
# Inference figures (bench/results/inference-cpu.md): the models of bench/make_models.py timed by
# `accelkit bench --model FILE --quantize int8|int8-static --vs-tuned` on every build given, one
# run each (the Linear stack with dynamic int8 Linear, the CNNs with static int8), JSON and text
# under OUT_DIR. MODELS="resnet18 mnist_cnn" runs only those.
#
#   bench/inference.sh OUT_DIR build build-debian
set -euo pipefail
out=${1:?usage: bench/inference.sh OUT_DIR BUILD_DIR...}
shift
mkdir -p "$out/models"
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
"$python" "$root/bench/make_models.py" "$out/models" 2>/dev/null
steps=${STEPS:-20}
for build in "$@"; do
  tag=$(basename "$build")
  for spec in "linear4096 16x4096 int8" "resnet18 16x3x224x224 int8-static" "mnist_cnn 64x1x28x28 int8-static"; do
    set -- $spec
    case " ${MODELS:-$1} " in *" $1 "*) ;; *) continue ;; esac
    echo "== $tag $1" >&2
    "$build/bin/accelkit" bench --model "$out/models/$1.pt" --input "$2" --quantize "$3" --vs-tuned \
      --steps "$steps" --warmup 3 --wait-quiet=120 --no-cache --json >"$out/$tag-$1.json"
    "$root/bench/inference_table.py" "$out/$tag-$1.json" >>"$out/table.md"
  done
done
