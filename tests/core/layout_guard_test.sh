#!/usr/bin/env bash
# The layers' boundaries (docs/architecture.md), checked on the sources:
#   - plugins (plugins/, examples/out-of-tree-plugin/, the fixture plugins) and the SDK include
#     only the SDK (accelkit/sdk/...), never the application API (a plugin's own test program,
#     examples/out-of-tree-plugin/*_test.cpp, links accelkit::conformance: not a plugin);
#   - the core includes nothing of the applications (bench, train, checkpoints);
#   - the core's rooms (core/CMakeLists.txt, docs/architecture.md) include only their own headers
#     and those of the rooms below them; a public header never includes a room's internal one,
#     and nothing outside the core but its tests does;
#   - no folder of the core holds more than 15 source files or 4,000 lines;
#   - the core's headers include one another without a cycle.
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
# The core's rooms and their order, as core/CMakeLists.txt declares them.
cm = open("core/CMakeLists.txt").read()
m = re.search(r'set\(ACCELKIT_CORE_ROOMS ([a-z_ ]+?)(?: CACHE|\))', cm)
if not m:
    print("core/CMakeLists.txt names no rooms (ACCELKIT_CORE_ROOMS)"); sys.exit(0)
rooms = m.group(1).split()
below = {r: set(re.search(r'set\(_accelkit_room_below_%s ([a-z_ ]+)\)' % r, cm).group(1).split())
         if re.search(r'set\(_accelkit_room_below_%s ([a-z_ ]+)\)' % r, cm) else set() for r in rooms}
def reach(r, seen=None):
    seen = set() if seen is None else seen
    for b in below[r]:
        if b not in seen:
            seen.add(b); reach(b, seen)
    return seen
visible = {r: reach(r) | {r} for r in rooms}
# Where each header lives: public ("accelkit/x.hpp") or shared ("accelkit/<room>/x.hpp").
owner = {}
for r in rooms:
    for kind, base in (("public", "core/%s/include" % r), ("internal", "core/%s/internal" % r)):
        for dp, _, fs in os.walk(base):
            for f in fs:
                rel = os.path.relpath(os.path.join(dp, f), base)
                owner[rel] = (r, kind)
inc = re.compile(r'#\s*include\s*[<"](accelkit/[A-Za-z0-9_/]+\.(?:hpp|h))[>"]')
for r in rooms:
    for dp, _, fs in os.walk("core/%s" % r):
        for f in sorted(fs):
            if not f.endswith((".cpp", ".hpp", ".h")): continue
            path = os.path.join(dp, f)
            public_header = path.startswith("core/%s/include/" % r)
            for n, line in enumerate(open(path, errors="replace"), 1):
                mm = inc.search(line)
                if not mm or mm.group(1) not in owner: continue
                room, kind = owner[mm.group(1)]
                if room not in visible[r]:
                    print("an include against the rooms' order: %s:%d: %s (room %s) includes %s of room %s, above it"
                          % (path, n, line.strip(), r, mm.group(1), room))
                elif public_header and kind == "internal":
                    print("a public header includes a room's internal one: %s:%d: %s" % (path, n, line.strip()))
# Outside the core, the rooms' internal headers are for the core's own tests only.
for top in ("apps", "plugins", "examples", "sdk", "bench"):
    for dp, _, fs in os.walk(top):
        for f in sorted(fs):
            if not f.endswith((".cpp", ".hpp", ".h", ".cu")): continue
            path = os.path.join(dp, f)
            for n, line in enumerate(open(path, errors="replace"), 1):
                mm = inc.search(line)
                if mm and mm.group(1) in owner and owner[mm.group(1)][1] == "internal":
                    print("a room's internal header outside the core: %s:%d: %s" % (path, n, line.strip()))
# No folder of the core holds more than 15 source files or 4,000 lines.
for dp, _, fs in os.walk("core"):
    src = [f for f in fs if f.endswith((".cpp", ".hpp", ".h", ".cu", ".in"))]
    lines = sum(sum(1 for _ in open(os.path.join(dp, f), errors="replace")) for f in src)
    if len(src) > 15 or lines > 4000:
        print("a core folder too large: %s holds %d source files, %d lines (at most 15 and 4,000)" % (dp, len(src), lines))
# The public headers include one another without a cycle.
edges = {}
for name, (r, kind) in owner.items():
    text = open("core/%s/%s/%s" % (r, "include" if kind == "public" else "internal", name), errors="replace").read()
    edges[name] = [x for x in inc.findall(text) if x in owner]
state = {}
def visit(n, path):
    state[n] = 1
    for m2 in edges[n]:
        if state.get(m2) == 1:
            print("include cycle in the core: " + " -> ".join(path + [n, m2])); sys.exit(0)
        if m2 not in state: visit(m2, path + [n])
    state[n] = 2
for n in sorted(edges):
    if n not in state: visit(n, [])
PY
}

# The check itself sees each kind of violation planted in a scratch tree.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/plugins/x" "$tmp/apps/bench/include/accelkit" "$tmp/apps/x" "$tmp/core/base/include/accelkit" \
  "$tmp/core/base/internal/accelkit/base" "$tmp/core/host/src" "$tmp/core/host/include/accelkit" \
  "$tmp/core/runtime/include/accelkit" "$tmp/core/runtime/src"
printf '#include <accelkit/runtime.hpp>\n#include <accelkit/sdk/plugin.hpp>\n' > "$tmp/plugins/x/x.cpp"
: > "$tmp/apps/bench/include/accelkit/bench.hpp"
printf 'set(ACCELKIT_CORE_ROOMS base host runtime CACHE INTERNAL "")\nset(_accelkit_room_below_host base)\nset(_accelkit_room_below_runtime host)\n' \
  > "$tmp/core/CMakeLists.txt"
: > "$tmp/core/base/internal/accelkit/base/strings.hpp"
printf '#include "accelkit/base/strings.hpp"\n' > "$tmp/core/base/include/accelkit/files.hpp"
printf '#include "accelkit/b.hpp"\n#include "accelkit/bench.hpp"\n' > "$tmp/core/host/include/accelkit/a.hpp"
printf '#include "accelkit/a.hpp"\n' > "$tmp/core/host/include/accelkit/b.hpp"
printf '#include "accelkit/files.hpp"\n#include "accelkit/runtime.hpp"\n' > "$tmp/core/host/src/loader.cpp"
printf '#include "accelkit/a.hpp"\n' > "$tmp/core/runtime/include/accelkit/runtime.hpp"
printf '#include "accelkit/base/strings.hpp"\n' > "$tmp/apps/x/x.cpp"
for i in $(seq 1 16); do : > "$tmp/core/runtime/src/f$i.cpp"; done
planted=$(cd "$tmp" && violations)
for want in "not the SDK: plugins/x/x.cpp:1:" "an application header in the core: core/host/include/accelkit/a.hpp:2:" \
            "an include against the rooms' order: core/host/src/loader.cpp:2:" \
            "a public header includes a room's internal one: core/base/include/accelkit/files.hpp:1:" \
            "a room's internal header outside the core: apps/x/x.cpp:1:" \
            "a core folder too large: core/runtime/src holds 16 source files" \
            "include cycle in the core: accelkit/a.hpp -> accelkit/b.hpp -> accelkit/a.hpp"; do
  [[ $planted == *"$want"* ]] || { echo "FAIL: the guard misses a planted violation ($want): '$planted'"; exit 1; }
done
[[ $(wc -l <<<"$planted") -eq 7 ]] || { echo "FAIL: the guard reports more than was planted: '$planted'"; exit 1; }

cd "$1" || exit 1
hits=$(violations)
if [[ -n $hits ]]; then
  echo "FAIL: the layers' boundaries are crossed:"
  echo "$hits"
  exit 1
fi
echo "ok: plugins and the SDK include the SDK only, the core no application header, each room of the core only the rooms below it, no core folder too large, no include cycle in the core"
