#!/usr/bin/env python3
"""Writes the command-line flag table of a serving engine (the TSV format of
src/launch/data/megatron_flags_core_v0.16.1.tsv: flag, switch|value, type, nargs, choices) from its
released source, without importing it (neither package imports on a CPU-only host: both need
CUDA builds of torch).

sglang: `python -m sglang.launch_server` builds its parser with ServerArgs.add_cli_args, which
registers every field of the ServerArgs dataclasses (sglang/srt/arg_groups/fields/*.py) annotated
`A[T, "help"]` or `A[T, Arg(...)]` (arg_groups/arg_utils.py add_cli_args_from_dataclass: the
flag is Arg.cli_name or "--" + the field name with dashes, plus Arg.aliases; no_cli fields are
skipped; bool fields are switches), then the parser.add_argument calls of add_cli_args itself.
This script reads those annotations and calls with `ast`.

vllm: `vllm serve` builds its parser with EngineArgs.add_cli_args (vllm/engine/arg_utils.py):
parser.add_argument calls whose flags are literal and whose type is given either literally or by
`**<group>_kwargs["field"]`, the type of EngineArgs' dataclass field `field`; bool fields are
argparse.BooleanOptionalAction (--flag and --no-flag).

Usage (from the engine's released wheel or sdist, unpacked):
  python3 scripts/serving_engine_flags.py sglang SGLANG_PACKAGE_DIR VERSION > src/launch/data/sglang_flags_VERSION.tsv
  python3 scripts/serving_engine_flags.py vllm VLLM_PACKAGE_DIR VERSION > src/launch/data/vllm_flags_VERSION.tsv
"""
import ast
import glob
import os
import sys


def type_name(node):
    """int|float|str|bool of an annotation (Optional[...] and X | None unwrapped)."""
    if isinstance(node, ast.Name):
        return node.id if node.id in ("int", "float", "str", "bool") else "str"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return type_name(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Subscript):
        outer = node.value.id if isinstance(node.value, ast.Name) else (
            node.value.attr if isinstance(node.value, ast.Attribute) else "")
        if outer == "Optional":
            return type_name(node.slice)
        if outer == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            vals = [e.value for e in elts if isinstance(e, ast.Constant)]
            return type(vals[0]).__name__ if vals else "str"
        return "str"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return type_name(side)
    return "str"


def literal_choices(node):
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Optional":
        return literal_choices(node.slice)
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [str(e.value) for e in elts if isinstance(e, ast.Constant)]
    return []


def kw(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def const_list(node):
    if isinstance(node, (ast.List, ast.Tuple)):
        return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
    return []


def add_argument_rows(tree, field_types):
    """(flags, kind, type, choices) of every parser.add_argument(...) call in `tree`."""
    out = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "add_argument"):
            continue
        flags = [a.value for a in call.args
                 if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")]
        if not flags:
            continue
        t = kw(call, "type")
        typ = t.id if isinstance(t, ast.Name) and t.id in ("int", "float", "str") else None
        action = kw(call, "action")
        action_name = (action.value if isinstance(action, ast.Constant) else
                       getattr(action, "attr", getattr(action, "id", ""))) if action is not None else ""
        choices = const_list(kw(call, "choices")) if kw(call, "choices") is not None else []
        # **group_kwargs["field"]: the EngineArgs field's type.
        spreads = []
        for k in call.keywords:
            if k.arg is None and isinstance(k.value, ast.Dict):  # **{**group_kwargs["f"], ...}
                spreads += [v for key, v in zip(k.value.keys, k.value.values) if key is None]
            elif k.arg is None:
                spreads.append(k.value)
        for v in spreads:
            if isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant):
                field = v.slice.value
                if field in field_types:
                    ftyp, fchoices = field_types[field]
                    typ = typ or ftyp
                    choices = choices or fchoices
        if action_name in ("store_true", "store_false") or "StoreTrue" in str(action_name):
            kind, typ = "switch", "bool"
        elif action_name == "BooleanOptionalAction" or typ == "bool":
            kind, typ = "bool-optional", "bool"
        else:
            kind = "value"
        out.append((flags, kind, typ or "str", choices))
    return out


def dataclass_fields(tree, class_name):
    fields = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[item.target.id] = (type_name(item.annotation), literal_choices(item.annotation))
    return fields


def sglang_rows(pkg):
    rows = []
    for path in sorted(glob.glob(os.path.join(pkg, "srt", "arg_groups", "fields", "*.py"))):
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = node.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"
                    and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) >= 2):
                continue
            typ_node, meta = ann.slice.elts[0], ann.slice.elts[1]
            name = node.target.id
            flags, choices, action = ["--" + name.replace("_", "-")], literal_choices(typ_node), None
            if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
                no_cli = kw(meta, "no_cli")
                if isinstance(no_cli, ast.Constant) and no_cli.value:
                    continue
                cli = kw(meta, "cli_name")
                if isinstance(cli, ast.Constant):
                    flags = [cli.value]
                flags += const_list(kw(meta, "aliases")) if kw(meta, "aliases") is not None else []
                if kw(meta, "choices") is not None:
                    choices = const_list(kw(meta, "choices")) or choices
                action = kw(meta, "action")
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                continue
            typ = type_name(typ_node)
            kind = "switch" if typ == "bool" or action is not None else "value"
            rows.append((flags, kind, typ, choices))
    rows += add_argument_rows(ast.parse(open(os.path.join(pkg, "srt", "server_args.py")).read()), {})
    return rows


def vllm_rows(pkg):
    tree = ast.parse(open(os.path.join(pkg, "engine", "arg_utils.py")).read())
    fields = dataclass_fields(tree, "EngineArgs")
    add = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    return add_argument_rows(add, fields)


def main():
    engine, pkg, version = sys.argv[1:4]
    rows = sglang_rows(pkg) if engine == "sglang" else vllm_rows(pkg)
    print(f"# {engine} {version}'s command-line flags, read from its released package by "
          "scripts/serving_engine_flags.py")
    print("# (the parser's registrations, not run). Columns: flag, switch|value|bool-optional, "
          "type, nargs, choices.")
    seen = set()
    for flags, kind, typ, choices in rows:
        for flag in flags:
            if flag in seen:
                continue
            seen.add(flag)
            print(f"{flag}\t{kind}\t{typ}\t\t{'|'.join(choices)}")
            if kind == "bool-optional":
                seen.add("--no-" + flag[2:])
                print(f"--no-{flag[2:]}\tswitch\tbool\t0\t")


if __name__ == "__main__":
    main()
