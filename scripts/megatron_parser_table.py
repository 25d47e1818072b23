#!/usr/bin/env python3
"""Writes Megatron-LM's parser table (every option of megatron/training/arguments.py's
add_megatron_arguments: flag, dest, action, const, default) for tests/launch/validate_engines.py,
which builds the namespace validate_args sees from an emitted argv (the defaults of every
argument not on the command line) before applying the rules of
tests/launch/megatron_validate_args.py.

The parser is built by importing megatron.training.arguments from a Megatron-LM checkout (its
own megatron/core beside it); the third-party modules its import chain needs but the parser does
not use (six, regex: tokenizer modules) are stand-in empty modules. Nothing of the checkout is
copied: the output is argparse's own description of the options. Enum defaults are written as
their member name.

Usage (in the venv of scripts/engines_env.sh, which has torch):
  mkdir CHECKOUT && git -C MIRROR archive COMMIT megatron | tar -x -C CHECKOUT
  python scripts/megatron_parser_table.py CHECKOUT COMMIT > tests/launch/data/...tsv
"""
import argparse
import enum
import importlib
import sys
import types


class _Absent(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


def import_arguments(checkout):
    sys.path.insert(0, checkout)
    for _ in range(50):
        try:
            return importlib.import_module("megatron.training.arguments")
        except ModuleNotFoundError as e:
            for k in [k for k in sys.modules if k.startswith("megatron")]:
                del sys.modules[k]
            parts = e.name.split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name not in sys.modules:
                    module = _Absent(name)
                    module.__path__ = []
                    sys.modules[name] = module
    raise SystemExit("megatron.training.arguments does not import")


def text(value):
    if isinstance(value, enum.Enum):
        return repr(value.name)
    return repr(value)


def main():
    checkout, commit = sys.argv[1], sys.argv[2]
    arguments = import_arguments(checkout)
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    print("# Megatron-LM's parser: every option of megatron/training/arguments.py's "
          "add_megatron_arguments,")
    print(f"# NVIDIA/Megatron-LM commit {commit}; built by "
          "scripts/megatron_parser_table.py.")
    print("# Columns: flag, dest, action (store|store_true|store_false|boolean), const, "
          "default (Python literals; enums by name).")
    kinds = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
             "_StoreFalseAction": "store_false", "BooleanOptionalAction": "boolean"}
    for action in parser._actions:
        kind = kinds.get(type(action).__name__)
        if kind is None:
            continue  # --help
        for flag in action.option_strings:
            if not flag.startswith("--"):
                continue
            how = kind
            if kind == "boolean":  # --x sets True, --no-x False
                how = "store_false" if flag.startswith("--no-") else "store_true"
            print("\t".join([flag, action.dest, how, text(action.const), text(action.default)]))


if __name__ == "__main__":
    main()
