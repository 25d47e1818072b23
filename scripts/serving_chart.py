#!/usr/bin/env python3
"""Draws the closed loops of bench/serving.sh as an SVG: for each model / GPU / TP / weights of the
NIM course data set at 2,000 input and 200 output tokens, TTFT and TPOT at 1, 10 and 100 clients,
measured (dots) next to simulated with the fitted `trtllm` profile (line). docs/COST_MODEL.md
("Engine profiles") shows the result, docs/img/serving_closed_loops.svg.
  bash bench/serving.sh > out.txt
  python3 scripts/serving_chart.py out.txt > docs/img/serving_closed_loops.svg
Reads the lines "    NAME TTFT m / s  TPOT m / s" of the output; exits 2 naming the file when
none is there.
"""
import math
import re
import sys

LINE = re.compile(r"^\s+(nim-dli-(\S+)-2000in-200out-c(\d+))\s+TTFT\s+([\d.]+)\s+/\s+([\d.]+)"
                  r"\s+TPOT\s+([\d.]+)\s+/\s+([\d.]+)\s*$")
W, H = 250, 190  # one panel
PAD_L, PAD_B, PAD_T = 52, 34, 26


def read(path):
    configs = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            c = int(m.group(3))
            if c not in (1, 10, 100):
                continue
            configs.setdefault(m.group(2), {})[c] = tuple(float(m.group(i)) for i in range(4, 8))
    return {k: v for k, v in configs.items() if len(v) == 3}


def panel(x0, y0, title, points, metric):
    """points: {c: (measured, simulated)}; log-log axes."""
    values = [v for p in points.values() for v in p]
    lo, hi = math.log10(min(values)) - 0.1, math.log10(max(values)) + 0.1
    cx = {1: 0.0, 10: 0.5, 100: 1.0}
    pw, ph = W - PAD_L - 10, H - PAD_B - PAD_T

    def px(c):
        return x0 + PAD_L + cx[c] * pw

    def py(v):
        return y0 + PAD_T + ph * (1 - (math.log10(v) - lo) / (hi - lo))

    out = [f'<text x="{x0 + PAD_L}" y="{y0 + 14}" font-size="11">{title} ({metric}, ms)</text>',
           f'<rect x="{x0 + PAD_L}" y="{y0 + PAD_T}" width="{pw}" height="{ph}" fill="none" '
           'stroke="#999"/>']
    for c in (1, 10, 100):
        out.append(f'<text x="{px(c):.1f}" y="{y0 + H - PAD_B + 14}" font-size="10" '
                   f'text-anchor="middle">c={c}</text>')
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        out.append(f'<text x="{x0 + PAD_L - 4}" y="{py(10 ** e) + 3:.1f}" font-size="10" '
                   f'text-anchor="end">{10 ** e:g}</text>')
    sim = " ".join(f"{px(c):.1f},{py(points[c][1]):.1f}" for c in (1, 10, 100))
    out.append(f'<polyline points="{sim}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    for c in (1, 10, 100):
        out.append(f'<circle cx="{px(c):.1f}" cy="{py(points[c][0]):.1f}" r="3.5" '
                   'fill="#1f77b4"/>')
    return out


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    configs = read(sys.argv[1])
    if not configs:
        print(f"serving_chart: {sys.argv[1]}: no closed loops at c = 1, 10, 100 of "
              "2000-in / 200-out rows (the output of bench/serving.sh)", file=sys.stderr)
        return 2
    names = sorted(configs)
    width, height = 2 * W, H * len(names) + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="16" font-size="12">NIM (TensorRT-LLM) closed loops, 2,000 in / 200 '
           'out: measured (dots) vs simulated, trtllm profile (line)</text>']
    for i, name in enumerate(names):
        pts = configs[name]
        y0 = 30 + i * H
        svg += panel(0, y0, name, {c: (p[0], p[1]) for c, p in pts.items()}, "TTFT")
        svg += panel(W, y0, name, {c: (p[2], p[3]) for c, p in pts.items()}, "TPOT")
    svg.append("</svg>")
    print("\n".join(svg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
