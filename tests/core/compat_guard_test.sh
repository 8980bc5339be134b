#!/usr/bin/env bash
# Every LibTorch version difference lives in the torch_compat headers
# (sdk/include/accelkit/sdk/torch_compat*.hpp): no other source tests TORCH_VERSION_*,
# ACCELKIT_TORCH_AT_LEAST or an ACCELKIT_HAS_* version macro in a preprocessor condition.
# Usage: compat_guard_test.sh <source root>
set -uo pipefail

# Prints the offending lines under the current directory's source folders.
violations() {
  grep -rnE '^[[:space:]]*#[[:space:]]*(if|elif|ifdef|ifndef)\b.*(TORCH_VERSION|ACCELKIT_TORCH_AT_LEAST|ACCELKIT_HAS_)' \
    --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cu' --include='*.cuh' --include='*.c' \
    "$@" 2>/dev/null |
    grep -v '^sdk/include/accelkit/sdk/torch_compat[a-z_]*\.hpp:' |
    grep -v 'FIXTURE_BAD_TORCH_VERSION'
}

# The check itself finds a planted violation (and ignores the same line in a compat header).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core" "$tmp/sdk/include/accelkit/sdk"
printf '#if ACCELKIT_TORCH_AT_LEAST(2, 4)\n#endif\n' > "$tmp/core/x.cpp"
printf '#if ACCELKIT_TORCH_AT_LEAST(2, 4)\n#endif\n' > "$tmp/sdk/include/accelkit/sdk/torch_compat_x.hpp"
planted=$(cd "$tmp" && violations sdk core)
[[ $planted == core/x.cpp:1:* && $(wc -l <<<"$planted") -eq 1 ]] ||
  { echo "FAIL: the guard does not see a planted violation: '$planted'"; exit 1; }

cd "$1" || exit 1
hits=$(violations sdk core apps plugins tests bench examples)
if [[ -n $hits ]]; then
  echo "FAIL: LibTorch version conditions outside torch_compat*.hpp:"
  echo "$hits"
  exit 1
fi
echo "ok: every LibTorch version condition is in sdk/include/accelkit/sdk/torch_compat*.hpp"
