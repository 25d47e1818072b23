#!/usr/bin/env python3
"""The planner's answers for the presets, kept as snapshots so a change that moves them is seen.

Each case below is a `pentamesh plan ... --json` (or `estimate ... --json`) command whose output
is stored in tests/plan/snapshots/<name>.json, without the search's wall-clock "seconds".
  python3 scripts/plan_snapshots.py --check    # exit 1 naming each case whose answer moved
  python3 scripts/plan_snapshots.py            # rewrite the snapshots (say why in the commit)
  ... --binary PATH                            # another pentamesh binary (the test passes its own)
Numbers are compared with a relative tolerance of 1e-9 (same code, other compiler flags); texts,
counts and layouts exactly. A refactor must leave every snapshot as it is.
"""
import json
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIR = ROOT / "tests" / "plan" / "snapshots"
CASES = {
    "meridianfin-72b-1024": "plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 "
    "--train meridian-128k --top 5 --baseline fsdp",
    "llama3-8b-64": "plan --model llama3-8b --train pretrain-4k --gpus 64 --top 5",
    "llama3-70b-512": "plan --model llama3-70b --train pretrain-4k --gpus 512 --top 5",
    "mixtral-8x7b-64": "plan --model mixtral-8x7b --train pretrain-4k --gpus 64 --top 5",
    "qwen3-235b-256": "plan --model qwen3-235b-a22b --train pretrain-4k --gpus 256 --top 5",
    "llama2-70b-a100": "plan --model llama2-70b --cluster a100-80gb --train pretrain-4k "
    "--gpus 1024 --top 5",
    "llama3-405b-estimate": "estimate --model llama3-405b --cluster h100-sxm --gpus 16384 "
    "--train llama3-405b-8k --layout \"dp=128 tp=8 pp=16 zero=1 mbs=1 recompute=none "
    "schedule=interleaved:4\"",
    "zb-h1-few-microbatches": "estimate --model llama3-8b --cluster h100-sxm --gpus 8 "
    "--train pretrain-4k --layout \"dp=1 tp=1 pp=8 zero=0 mbs=256 recompute=full schedule=zb\"",
}


def run(args, binary):
    out = subprocess.run(f"{binary} {args} --json", shell=True, cwd=ROOT, capture_output=True,
                         text=True)
    if out.returncode not in (0, 2):
        sys.exit(f"plan_snapshots: `{args}` exited {out.returncode}: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    doc.pop("seconds", None)
    return doc


def differences(want, got, path="$"):
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k not in want or k not in got:
                yield f"{path}.{k}: {'added' if k in got else 'removed'}"
            else:
                yield from differences(want[k], got[k], f"{path}.{k}")
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            yield f"{path}: {len(want)} entries, now {len(got)}"
        for i, (w, g) in enumerate(zip(want, got)):
            yield from differences(w, g, f"{path}[{i}]")
    elif (isinstance(want, float) or isinstance(got, float)) and \
            isinstance(want, (int, float)) and isinstance(got, (int, float)) and \
            not isinstance(want, bool) and not isinstance(got, bool):
        if not math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12):
            yield f"{path}: {want} -> {got}"
    elif want != got:
        yield f"{path}: {json.dumps(want)[:80]} -> {json.dumps(got)[:80]}"


def main():
    if "--help" in sys.argv or "-h" in sys.argv:  # print the usage; rewrite nothing
        print(__doc__)
        return 0
    check = "--check" in sys.argv
    binary = str(ROOT / "build" / "src" / "cli" / "pentamesh")
    if "--binary" in sys.argv:
        binary = sys.argv[sys.argv.index("--binary") + 1]
    DIR.mkdir(parents=True, exist_ok=True)
    moved = []
    for name, args in CASES.items():
        got = run(args, binary)
        path = DIR / f"{name}.json"
        if not check:
            path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
            continue
        if not path.exists():
            moved.append(f"{name}: no snapshot {path.relative_to(ROOT)}")
            continue
        diff = list(differences(json.loads(path.read_text()), got))
        if diff:
            moved.append(f"{name} (`pentamesh {args}`): {len(diff)} values moved, e.g.\n    " +
                         "\n    ".join(diff[:8]))
    if moved:
        print("plan_snapshots: the planner's answers moved:\n  " + "\n  ".join(moved))
        print("If the change is intended, rerun `python3 scripts/plan_snapshots.py` and say why "
              "in the commit.")
        sys.exit(1)
    print(f"plan_snapshots: {len(CASES)} cases {'unchanged' if check else 'written'}")


if __name__ == "__main__":
    main()
