#!/usr/bin/env bash
# Two accelkit builds against two LibTorch builds on one machine (scripts/setup --all): this
# build's accelkit must refuse every plugin of the other build - from the file, before loading
# it - with both LibTorch versions in the reason, and carry on (exit 0, no crash).
# Usage: cross_libtorch_test.sh <this build's accelkit> <this LibTorch version> <other build dir>
set -uo pipefail
accelkit=$1 ours=$2 other=$3
dir=$other/lib/accelkit/plugins
shopt -s nullglob
plugins=("$dir"/libaccelkit-*.so)
((${#plugins[@]})) || { echo "FAIL: no plugins in $dir (build $other first: scripts/setup --all)"; exit 1; }
theirs=$(sed -n 1p "$other/accelkit-torch-version.txt" 2>/dev/null)
[[ -n $theirs ]] || { echo "FAIL: $other/accelkit-torch-version.txt names no LibTorch version"; exit 1; }
echo "this build: LibTorch $ours; $other: LibTorch $theirs; ${#plugins[@]} plugin(s)"

out=$("$accelkit" plugins -v --plugin-path "$dir" 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: accelkit plugins exited $rc"; exit 1; }
status=0
for so in "${plugins[@]}"; do
  line=$(grep -F "  $so: " <<<"$out")
  [[ $line == *": rejected - "* ]] || { echo "FAIL: $so was not rejected: $line"; status=1; continue; }
  [[ $line == *"$theirs"* && $line == *"$ours"* ]] ||
    { echo "FAIL: the reason for $so does not name both versions ($theirs, $ours): $line"; status=1; }
  [[ $line == *"not loaded"* || $line == *"another LibTorch"* ]] ||
    { echo "FAIL: $so was not refused from the file: $line"; status=1; }
done
# The process that refused them still works on its own plugins.
"$accelkit" info >/dev/null || { echo "FAIL: accelkit info after the refusals"; status=1; }
exit $status
