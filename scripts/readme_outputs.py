#!/usr/bin/env python3
"""Re-runs the commands whose output the README and the docs show and writes (or checks) it.

A block in README.md, docs/results.md, docs/commands.md or docs/COST_MODEL.md marked by a line
`<!-- output: pentamesh ... -->` followed by a fenced code block holds exactly what that command
prints (run with build/src/cli/pentamesh from the repository's root). Usage:
  python3 scripts/readme_outputs.py            # rewrite the blocks in place
  python3 scripts/readme_outputs.py --check    # exit 1 naming each block that differs
  ... --binary PATH                             # another pentamesh binary (tests pass theirs)
Timings (search seconds, layouts per second) vary from run to run and are not compared.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- output: (pentamesh .*) -->$")
TIMING = re.compile(r"\d+\.\d+ s \(\d+\.\d+M layouts/s\)")


def run(command, binary):
    argv = command.split(" ", 1)
    full = f"{binary} {argv[1]}" if len(argv) > 1 else binary
    out = subprocess.run(full, shell=True, cwd=ROOT, capture_output=True, text=True)
    if out.returncode not in (0,):
        sys.exit(f"readme_outputs: `{command}` exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


DOCS = ("README.md", "docs/results.md", "docs/commands.md", "docs/COST_MODEL.md")


def blocks(lines, name):
    """Yields (command, first content line index, closing fence index)."""
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                sys.exit(f"readme_outputs: {name} line {i + 1}: a marker must precede a ``` block")
            j = i + 2
            while j < len(lines) and lines[j] != "```":
                j += 1
            if j == len(lines):
                sys.exit(f"readme_outputs: {name} line {i + 2}: unclosed ``` block")
            yield m.group(1), i + 2, j
            i = j
        i += 1


def main():
    if "--help" in sys.argv or "-h" in sys.argv:  # print the usage; rewrite nothing
        print(__doc__)
        return 0
    args = sys.argv[1:]
    check = "--check" in args
    binary = str(ROOT / "build/src/cli/pentamesh")
    if "--binary" in args:
        binary = args[args.index("--binary") + 1]
    differ = []
    for name in DOCS:
        differ += [(name, c) for c in process(ROOT / name, name, binary, check)]
    if check:
        for name, c in differ:
            print(f"{name}: the output of `{c}` differs from what the binary prints now")
        if differ:
            print("run: python3 scripts/readme_outputs.py")
            return 1
        return 0
    print(f"readme_outputs: {len(differ)} block(s) rewritten")
    return 0


def process(path, name, binary, check):
    """Rewrites (unless check) the blocks of one file; returns the commands whose output differs."""
    lines = path.read_text().split("\n")
    new_lines, last, differ = [], 0, []
    for command, begin, end in blocks(lines, name):
        output = run(command, binary).rstrip("\n").split("\n")
        old = lines[begin:end]
        if [TIMING.sub("T", l) for l in old] != [TIMING.sub("T", l) for l in output]:
            differ.append(command)
        new_lines += lines[last:begin] + output
        last = end
    new_lines += lines[last:]
    if not check:
        path.write_text("\n".join(new_lines))
    return differ


if __name__ == "__main__":
    sys.exit(main())
