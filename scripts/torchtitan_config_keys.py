#!/usr/bin/env python3
"""Writes torchtitan's job-config keys (section.key, one a line) from its own JobConfig dataclass,
for import-config's unknown-key check (src/launch/data/torchtitan_keys_v<version>.txt).

Usage (in the venv of scripts/engines_env.sh, which installs the pinned torchtitan):
  python scripts/torchtitan_config_keys.py > src/launch/data/torchtitan_keys_v0.2.2.txt
"""
import dataclasses
import typing


def walk(cls, prefix):
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            yield from walk(kind, prefix + field.name + ".")
        else:
            yield prefix + field.name


def main():
    import torchtitan
    from torchtitan.config.job_config import JobConfig
    version = getattr(torchtitan, "__version__", "?")
    print(f"# torchtitan {version}'s job-config keys: the fields of torchtitan.config.job_config."
          "JobConfig, walked")
    print("# through its nested dataclasses; built by scripts/torchtitan_config_keys.py.")
    for key in sorted(walk(JobConfig, "")):
        print(key)


if __name__ == "__main__":
    main()
