#!/usr/bin/env bash
# The accelkit executable loads LibTorch before anything else and refuses one that is not the
# LibTorch it was built against, naming both versions, instead of dying of a missing symbol.
# A stand-in libc10 (any shared library, under the build's libc10 file name) is put first on
# LD_LIBRARY_PATH beside a torch/version.py, as a pip-installed LibTorch keeps it.
# Usage: launcher_test.sh <accelkit> <its LibTorch version> <libc10's file name> <a shared library>
set -uo pipefail
accelkit=$1 ours=$2 c10=$3 fake=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/torch/lib"
cp "$fake" "$tmp/torch/lib/$c10"
status=0
fail() { echo "FAIL: $*"; status=1; }

"$accelkit" --version >/dev/null || fail "accelkit --version without LD_LIBRARY_PATH"

echo "__version__ = '9.9.9+fake'" >"$tmp/torch/version.py"
out=$(LD_LIBRARY_PATH=$tmp/torch/lib "$accelkit" info 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 1 ]] || fail "exit $rc with another LibTorch first on LD_LIBRARY_PATH (expected 1)"
[[ $out == *"built against LibTorch $ours"* ]] || fail "the build's version ($ours) is not named"
[[ $out == *"the LibTorch found is 9.9.9 ($tmp/torch/lib/$c10)"* ]] || fail "the found version and file are not named"
[[ $out == *"LD_LIBRARY_PATH"* ]] || fail "LD_LIBRARY_PATH, the reason it was found, is not named"
[[ $out != *"symbol lookup error"* && $out != *"undefined symbol"* ]] || fail "a symbol error reached the user"
[[ $(wc -l <<<"$out") -le 2 ]] || fail "more than two lines"

rm "$tmp/torch/version.py"
out=$(LD_LIBRARY_PATH=$tmp/torch/lib "$accelkit" info 2>&1)
rc=$?
echo "$out"
if [[ $c10 == *.so ]]; then  # nothing says its version
  [[ $rc -eq 1 && $out == *"the LibTorch found is of unknown version"* ]] || fail "an unknown version: exit $rc"
else  # a distribution's file name carries the version (libc10.so.1.13): the same as the build's
  [[ $rc -eq 1 && $out == *"cannot load"* && $out == *"as the build's"*"but is another file"* ]] ||
    fail "another file of the same version: exit $rc"
fi
[[ $out != *"symbol lookup error"* ]] || fail "a symbol error from the dynamic loader reached the user"
exit $status
