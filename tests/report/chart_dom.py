#!/usr/bin/python3
"""Reads a page as Chromium rendered it (`chromium --headless --dump-dom`, after its scripts ran)
and prints one JSON object per chart of report/chart.h, keyed by the chart's div id:
  rendered (data-rendered="1"), error (data-error), box [left, top, width, height] in page pixels,
  x_ticks / y_ticks: the visible axis tick labels as Vega drew them (text, in order),
  marks: {"line": n, "symbol": n, "rect": n}: SVG items drawn per mark type,
  rect_widths: the width of each rect mark's item (its path "Mx,yhW..."), in document order.
Standard library only (html.parser). The test asserts on the numbers; this only extracts."""
import json
import re
import sys
from html.parser import HTMLParser


class Charts(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.charts = {}
        self.stack = []  # (tag, chart id or None, axis or None, mark or None, in_label)
        self.hidden = False  # the current <text> is hidden (Vega's labelOverlap sets opacity 0)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        chart, axis, mark, label = self.stack[-1][1:] if self.stack else (None, None, None, False)
        cls = (a.get("class") or "").split()
        if tag == "div" and "pm-chart" in cls:
            chart = a["id"]
            box = [int(v) for v in a["data-box"].split(",")] if a.get("data-box") else None
            self.charts[chart] = {"rendered": a.get("data-rendered") == "1",
                                  "error": a.get("data-error", ""), "box": box,
                                  "x_ticks": [], "y_ticks": [],
                                  "marks": {"line": 0, "symbol": 0, "rect": 0},
                                  "rect_widths": []}
        if chart and "role-axis" in cls and "mark-group" in cls:
            axis = (a.get("aria-label") or "")[:1].lower()  # "X-axis ..." / "Y-axis ..."
        if chart and "role-axis-label" in cls:
            label = True
        if chart and "role-mark" in cls:
            for kind in ("line", "symbol", "rect"):
                if "mark-" + kind in cls:
                    mark = kind
        elif chart and mark and tag == "path":
            self.charts[chart]["marks"][mark] += 1
            width = re.match(r"M[^h]*h(-?[0-9.e+-]+)", a.get("d") or "")
            if mark == "rect" and width:
                self.charts[chart]["rect_widths"].append(float(width.group(1)))
        if tag == "text":
            self.hidden = a.get("opacity") == "0"
        self.stack.append((tag, chart, axis, mark, label))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if not self.stack:
            return
        tag, chart, axis, _, label = self.stack[-1]
        if tag == "text" and chart and label and axis in ("x", "y") and data.strip() and \
                not self.hidden:
            self.charts[chart][axis + "_ticks"].append(data.strip())


def main(path):
    parser = Charts()
    parser.feed(open(path, encoding="utf-8").read())
    print(json.dumps(parser.charts))


if __name__ == "__main__":
    main(sys.argv[1])
