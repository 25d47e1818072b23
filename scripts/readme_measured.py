#!/usr/bin/env python3
"""Copies measured outputs into the docs: every block marked `<!-- measured: COMMAND (FILE) -->`
in README.md, docs/results.md and docs/tune.md gets the text of FILE (relative to the
repository's root), which COMMAND wrote when it last ran (`bash scripts/demo.sh` writes
out/demo/summary.txt, `bash bench/tune.sh` out/bench/tune/NAME). When the tune run's page exists,
docs/img/tune-*.png are headless-Chromium screenshots of it. Timings vary from run to run, so
ReadmeOutputs does not re-run these; running COMMAND and then this script is how they change.
Usage: python3 scripts/readme_measured.py
"""
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- measured: (.+) \((\S+)\) -->$")
DOCS = ("README.md", "docs/results.md", "docs/tune.md")
PAGES = {"out/bench/tune/tiny-moe-np4.html": "tune-tiny-moe-np4.png"}


def fill(path):
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if i + 1 >= len(lines) or lines[i + 1] != "```":
                sys.exit(f"readme_measured: {path}:{i + 1}: a marker must precede a ``` block")
            j = i + 2
            while j < len(lines) and lines[j] != "```":
                j += 1
            source = ROOT / m.group(2)
            if not source.exists():
                print(f"readme_measured: {source} is missing (run {m.group(1)}); block kept")
                i = j + 1
                continue
            text = source.read_text().rstrip("\n").split("\n")
            lines[i + 2:j] = text
            i += 2 + len(text)
        i += 1
    path.write_text("\n".join(lines))


def screenshot(html, png):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("readme_measured: chromium is not installed (scripts/setup.sh installs it)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1280,2300", "--virtual-time-budget=10000",
                    f"--screenshot={png}", f"file://{html.resolve()}"],
                   check=True, capture_output=True)


def main():
    if "--help" in sys.argv or "-h" in sys.argv:  # print the usage; rewrite nothing
        print(__doc__)
        return 0
    for doc in DOCS:
        fill(ROOT / doc)
    (ROOT / "docs/img").mkdir(exist_ok=True)
    for html, png in PAGES.items():
        if (ROOT / html).exists():
            screenshot(ROOT / html, ROOT / "docs/img" / png)


if __name__ == "__main__":
    sys.exit(main())
