#!/usr/bin/env bash
# The layers' boundaries (docs/architecture.md), checked on the sources:
#   - plugins (plugins/, examples/out-of-tree-plugin/, the fixture plugins) and the SDK include
#     only the SDK (accelkit/sdk/...), never the application API (a plugin's own test program,
#     examples/out-of-tree-plugin/*_test.cpp, links accelkit::conformance: not a plugin);
#   - the core includes nothing of the applications (bench, train, checkpoints);
#   - the core's public headers include one another without a cycle.
# Usage: layout_guard_test.sh <source root>
set -uo pipefail

# Prints every violation under the current directory, one per line.
violations() {
  grep -rnE '#[[:space:]]*include[[:space:]]*[<"]accelkit/' --include='*.cpp' --include='*.hpp' --include='*.h' \
    --include='*.cu' --include='*.mm' plugins examples/out-of-tree-plugin tests/fixtures/plugins sdk 2>/dev/null |
    grep -vE '[<"]accelkit/sdk/' | grep -vE '^examples/out-of-tree-plugin/[^:/]*_test\.cpp:' | sed 's/^/not the SDK: /'
  local h
  for h in $(find apps -path '*/include/accelkit/*.hpp' -printf '%f\n' 2>/dev/null | sort -u); do
    grep -rnE "#[[:space:]]*include[[:space:]]*[<\"]accelkit/$h[>\"]" core 2>/dev/null | sed 's/^/an application header in the core: /'
  done
  python3 - <<'PY'
import os, re, sys
root = "core/include/accelkit"
if not os.path.isdir(root): sys.exit(0)
names = [n for n in os.listdir(root) if n.endswith(".hpp")]
edges = {n: [m for m in re.findall(r'#\s*include\s*[<"]accelkit/([a-z_]+\.hpp)[>"]', open(os.path.join(root, n)).read())
             if m in names] for n in names}
state = {}
def visit(n, path):
    state[n] = 1
    for m in edges[n]:
        if state.get(m) == 1:
            print("include cycle in the core: " + " -> ".join(path + [n, m])); sys.exit(0)
        if m not in state: visit(m, path + [n])
    state[n] = 2
for n in sorted(edges):
    if n not in state: visit(n, [])
PY
}

# The check itself sees each kind of violation planted in a scratch tree.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/plugins/x" "$tmp/core/include/accelkit" "$tmp/apps/bench/include/accelkit"
printf '#include <accelkit/runtime.hpp>\n#include <accelkit/sdk/plugin.hpp>\n' > "$tmp/plugins/x/x.cpp"
: > "$tmp/apps/bench/include/accelkit/bench.hpp"
printf '#include "accelkit/b.hpp"\n#include "accelkit/bench.hpp"\n' > "$tmp/core/include/accelkit/a.hpp"
printf '#include "accelkit/a.hpp"\n' > "$tmp/core/include/accelkit/b.hpp"
planted=$(cd "$tmp" && violations)
for want in "not the SDK: plugins/x/x.cpp:1:" "an application header in the core: core/include/accelkit/a.hpp:2:" \
            "include cycle in the core: a.hpp -> b.hpp -> a.hpp"; do
  [[ $planted == *"$want"* ]] || { echo "FAIL: the guard misses a planted violation ($want): '$planted'"; exit 1; }
done
[[ $(wc -l <<<"$planted") -eq 3 ]] || { echo "FAIL: the guard reports more than was planted: '$planted'"; exit 1; }

cd "$1" || exit 1
hits=$(violations)
if [[ -n $hits ]]; then
  echo "FAIL: the layers' boundaries are crossed:"
  echo "$hits"
  exit 1
fi
echo "ok: plugins and the SDK include the SDK only, the core no application header, no include cycle in the core"
