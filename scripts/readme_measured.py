#!/usr/bin/env python3
"""Copies the last `bash bench/tune.sh` run into the docs: every block marked
`<!-- measured: bash bench/tune.sh (out/bench/tune/NAME) -->` in README.md and docs/tune.md
gets that file's text, and docs/img/tune-*.png are headless-Chromium screenshots of the run's
pages. Timings vary from run to run, so ReadmeOutputs does not re-run these; this script is how
they change. Usage: python3 scripts/readme_tune.py [out_dir (default out/bench/tune)]
"""
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- measured: bash bench/tune\.sh \(out/bench/tune/(\S+)\) -->$")
PAGES = {"tiny-moe-np4.html": "tune-tiny-moe-np4.png"}


def fill(path, out):
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if i + 1 >= len(lines) or lines[i + 1] != "```":
                sys.exit(f"readme_tune: {path}:{i + 1}: a marker must precede a ``` block")
            j = i + 2
            while j < len(lines) and lines[j] != "```":
                j += 1
            source = out / m.group(1)
            if not source.exists():
                sys.exit(f"readme_tune: {source} is missing: run bash bench/tune.sh first")
            text = source.read_text().rstrip("\n").split("\n")
            lines[i + 2:j] = text
            i += 2 + len(text)
        i += 1
    path.write_text("\n".join(lines))


def screenshot(html, png):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("readme_tune: chromium is not installed (scripts/setup.sh installs it)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1280,2300", "--virtual-time-budget=10000",
                    f"--screenshot={png}", f"file://{html.resolve()}"],
                   check=True, capture_output=True)


def main():
    out = ROOT / (sys.argv[1] if len(sys.argv) > 1 else "out/bench/tune")
    for doc in (ROOT / "README.md", ROOT / "docs/tune.md"):
        fill(doc, out)
    (ROOT / "docs/img").mkdir(exist_ok=True)
    for html, png in PAGES.items():
        screenshot(out / html, ROOT / "docs/img" / png)


if __name__ == "__main__":
    main()
