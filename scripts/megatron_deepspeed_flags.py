#!/usr/bin/env python3
"""Writes Megatron-DeepSpeed's command-line flag table (the TSV format of
src/launch/data/megatron_flags_core_v0.16.1.tsv) by building the parser pretrain_gpt.py uses.

Megatron-DeepSpeed's parse_args (megatron/arguments.py) builds an argparse parser from its
_add_*_args functions, then deepspeed.add_config_arguments, and parses with parse_args (unknown
flags are an error, allow_abbrev=False). The module itself cannot be imported next to NVIDIA's
megatron-core (both are the `megatron` package), so this script executes only the function
definitions of that file and calls the _add_*_args functions in the order parse_args does, then
DeepSpeed's own add_config_arguments from the installed deepspeed. Nothing of the file is copied.

Usage (in the venv of scripts/engines_env.sh, which has deepspeed and torch):
  git -C MIRROR show COMMIT:megatron/arguments.py > arguments.py
  python scripts/megatron_deepspeed_flags.py arguments.py COMMIT > src/launch/data/...tsv
"""
import argparse
import ast
import sys


def parser_of(source):
    tree = ast.parse(source)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    parse_args = next(f for f in funcs if f.name == "parse_args")
    # The _add_*_args calls of parse_args, in order.
    order = [c.func.id for c in ast.walk(parse_args)
             if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
             and c.func.id.startswith("_add_")]
    order.sort(key=lambda name: next(c.lineno for c in ast.walk(parse_args)
                                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                                     and c.func.id == name))
    module = ast.Module(body=[f for f in funcs if f.name.startswith("_add_")], type_ignores=[])
    import contextlib
    import os
    with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed logs its accelerator on stdout
        import torch
        import deepspeed
    env = {"argparse": argparse, "os": os, "torch": torch, "deepspeed": deepspeed}
    exec(compile(module, "megatron/arguments.py", "exec"), env)  # noqa: S102
    parser = argparse.ArgumentParser(allow_abbrev=False)
    for name in order:
        parser = env[name](parser)
    return deepspeed.add_config_arguments(parser), deepspeed.__version__


def main():
    path, commit = sys.argv[1], sys.argv[2]
    parser, ds_version = parser_of(open(path).read())
    print("# Megatron-DeepSpeed's command-line flags: every option of megatron/arguments.py's "
          "parser")
    print(f"# (parse_args), microsoft/Megatron-DeepSpeed commit {commit}, plus DeepSpeed "
          f"{ds_version}'s")
    print("# add_config_arguments; built by scripts/megatron_deepspeed_flags.py. Columns: flag, "
          "switch|value, type, nargs, choices.")
    rows = []
    for action in parser._actions:
        for flag in action.option_strings:
            if not flag.startswith("--"):
                continue
            switch = action.nargs == 0
            typ = getattr(action.type, "__name__", "str") if action.type else "str"
            nargs = "" if action.nargs is None else str(action.nargs)
            choices = "|".join(str(c) for c in action.choices) if action.choices else ""
            rows.append((flag, "switch" if switch else "value", typ, nargs, choices))
    for row in sorted(rows):
        print("\t".join(row))


if __name__ == "__main__":
    main()
