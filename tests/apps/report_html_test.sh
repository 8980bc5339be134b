#!/usr/bin/env bash
# report.html in a real browser: the fixture program writes metrics.jsonl with known values and
# renders report.html; headless chromium takes a 1200x1600 screenshot (a PNG of that size, not
# blank: many colours, each plot's line colour among them) and dumps the DOM it built, whose
# plotted values (each polyline's data-steps/data-values) and event markers must equal what
# metrics.jsonl holds, read here by Python's own JSON parser. Skipped (exit 77) without chromium.
# Usage: report_html_test.sh <report_html_fixture>
set -uo pipefail

fixture=$1
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "SKIP: chromium is not installed (scripts/setup installs it)"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "SKIP: python3 is not installed"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fixture" "$tmp" || { echo "FAIL: $fixture $tmp"; exit 1; }

# --no-sandbox: chromium's sandbox refuses to run as root (containers, CI). Its own profile in
# the scratch directory, never the user's; `timeout` so that a browser that hangs fails the test.
run_browser() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$tmp/profile" "$@" "file://$tmp/report.html" 2>>"$tmp/browser.log"
}
if ! run_browser --screenshot="$tmp/shot.png" --window-size=1200,1600 >/dev/null; then
  echo "FAIL: chromium's screenshot failed:"; tail -n 20 "$tmp/browser.log"; exit 1
fi
if ! run_browser --dump-dom >"$tmp/dom.html"; then
  echo "FAIL: chromium's --dump-dom failed:"; tail -n 20 "$tmp/browser.log"; exit 1
fi

python3 - "$tmp" <<'PY'
import json, struct, sys, zlib
from html.parser import HTMLParser

tmp = sys.argv[1]
failures = []
def check(ok, what):
    if not ok:
        failures.append(what)

# What metrics.jsonl holds: the later record of a step wins.
steps, runs = {}, []
with open(tmp + "/metrics.jsonl") as f:
    for line in f:
        rec = json.loads(line)
        if rec.get("event") == "run":
            runs.append(rec)
        elif "step" in rec:
            steps[rec["step"]] = rec
order = sorted(steps)

def recorded(key):  # (step, value) of the steps where `key` is a finite number
    return [(s, steps[s][key]) for s in order if isinstance(steps[s].get(key), (int, float))]

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.figure = None
        self.series = {}    # data-series -> attributes
        self.markers = {}   # figure id -> {(kind, step)}
        self.figures = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure":
            self.figure = a.get("id")
            self.figures.append(self.figure)
        elif tag == "polyline" and "data-series" in a:
            self.series[a["data-series"]] = a
        elif tag == "g" and a.get("class", "").startswith("marker "):
            kind = a["class"].split()[1]
            self.markers.setdefault(self.figure, set()).add((kind, int(a["data-step"])))

dom = Dom()
with open(tmp + "/dom.html") as f:
    dom.feed(f.read())

check(dom.figures == ["loss", "throughput", "memory", "temperature", "power"], f"figures: {dom.figures}")
for key, series in [("loss", "loss"), ("samples_per_s", "throughput"), ("memory_bytes", "memory"),
                    ("temperature_c", "temperature"), ("power_w", "power")]:
    want = recorded(key)
    a = dom.series.get(series)
    if a is None:
        failures.append(f"no polyline for {series} in the DOM")
        continue
    got_steps = [int(t) for t in a["data-steps"].split()]
    tokens = a["data-values"].split()
    check(got_steps == [s for s, _ in want], f"{series}: steps {got_steps} != {[s for s, _ in want]}")
    check(len(tokens) == len(want), f"{series}: {len(tokens)} values for {len(want)} records")
    for (s, v), t in zip(want, tokens):
        # Memory in bytes, an integer; the rest doubles, equal bit for bit (0.0 == -0.0 aside).
        ok = isinstance(v, int) and t.isdigit() and int(t) == v if series == "memory" else float(t) == float(v)
        check(ok, f"{series} at step {s}: plotted {t}, recorded {v!r}")

# The fixture's known values: exactly what it wrote, and the resumed segment's values won.
loss = dict(zip(dom.series["loss"]["data-steps"].split(), dom.series["loss"]["data-values"].split()))
check(loss.get("3") == "0.30000000000000004", f"loss at step 3: {loss.get('3')}")
check("9" not in loss and isinstance(steps[9]["loss"], str), "the NaN loss at step 9 is plotted or not recorded as nan")
temp = dict(zip(dom.series["temperature"]["data-steps"].split(), dom.series["temperature"]["data-values"].split()))
check(float(temp["35"]) == 55.0 + 35 / 3.0 + 0.001, f"temperature at step 35: {temp['35']} (not the resumed record)")
check(len(runs) == 2 and runs[1]["start_step"] == 30, f"run records: {runs}")

want_markers = {("warn", 20), ("pause", 25), ("resume", 30), ("warn", 50), ("event", 50)}
for fig in dom.figures:
    check(dom.markers.get(fig) == want_markers, f"markers in {fig}: {sorted(dom.markers.get(fig, []))}")

# The screenshot: a PNG of the window's size, decoded (zlib, the five row filters).
with open(tmp + "/shot.png", "rb") as f:
    png = f.read()
if png[:8] != b"\x89PNG\r\n\x1a\n":
    print("FAIL: the screenshot is not a PNG"); sys.exit(1)
pos, chunks = 8, {}
while pos < len(png):
    n, kind = struct.unpack(">I4s", png[pos:pos + 8])
    chunks.setdefault(kind, []).append(png[pos + 8:pos + 8 + n])
    pos += 12 + n
width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
check((width, height) == (1200, 1600), f"screenshot size {width}x{height}")
if depth != 8 or colour not in (2, 6):
    print(f"FAIL: a PNG this test does not decode (bit depth {depth}, colour type {colour})"); sys.exit(1)
bpp = 3 if colour == 2 else 4
raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
stride = width * bpp
prev = bytearray(stride)
colours = {}
for y in range(height):
    kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if kind == 1:
        for i in range(bpp, stride): row[i] = (row[i] + row[i - bpp]) & 255
    elif kind == 2:
        row = bytearray((r + p) & 255 for r, p in zip(row, prev))
    elif kind == 3:
        for i in range(stride): row[i] = (row[i] + ((row[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
    elif kind == 4:
        for i in range(stride):
            a, b, c = (row[i - bpp] if i >= bpp else 0), prev[i], (prev[i - bpp] if i >= bpp else 0)
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = bytes(row[x:x + 3])
        colours[px] = colours.get(px, 0) + 1
    prev = row
check(len(colours) >= 50, f"the screenshot has {len(colours)} colours: blank?")
background = max(colours.values())
check(background < 0.97 * width * height, f"the screenshot is {background / (width * height):.1%} one colour")
for series in dom.series.values():
    rgb = bytes.fromhex(series["stroke"].lstrip("#"))
    check(colours.get(rgb, 0) >= 30, f"{series['data-series']}'s colour {series['stroke']} in {colours.get(rgb, 0)} pixels")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: chromium rendered report.html ({width}x{height}, {len(colours)} colours); "
      f"{sum(len(s['data-values'].split()) for s in dom.series.values())} plotted values equal metrics.jsonl")
PY
