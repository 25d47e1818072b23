#!/usr/bin/env python3
"""Writes DeepSpeed's ds_config keys (dotted, one a line) from DeepSpeed's own config reader, for
import-config's unknown-key check (src/launch/data/deepspeed_config_keys_v<version>.txt).

Top-level keys: those deepspeed.runtime.config.DeepSpeedConfig reads, recorded by handing it a
dict that notes every key it looks up (get, [], in, keys()), plus the keys runtime/config.py tests
with `"KEY" in config` on branches a single-process run does not take. DeepSpeed itself ignores
any other top-level key. Sections: a section whose pydantic model (DeepSpeedConfigModel, which
forbids extra keys) refuses a probe key is listed with its model's fields and aliases, walked into
nested models; DeepSpeed refuses any other key there. Other sections (optimizer, scheduler,
activation_checkpointing, ...) are listed by name only: their contents are not checked.

Usage (in the venv of scripts/engines_env.sh, which installs the pinned DeepSpeed):
  python scripts/deepspeed_config_keys.py > src/launch/data/deepspeed_config_keys_v0.19.8.txt
"""
import inspect
import os
import re
import typing

BASE = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1}


class Recording(dict):
    """A dict that records every key looked up in it (and in its sub-dicts, dotted)."""

    def __init__(self, d, seen, prefix=""):
        super().__init__({k: (Recording(v, seen, prefix + k + ".") if isinstance(v, dict) else v)
                          for k, v in d.items()})
        self.seen, self.prefix = seen, prefix

    def note(self, k):
        self.seen.add(self.prefix + str(k))

    def get(self, k, *default):
        self.note(k)
        return super().get(k, *default)

    def __getitem__(self, k):
        self.note(k)
        return super().__getitem__(k)

    def __contains__(self, k):
        self.note(k)
        return super().__contains__(k)

    def keys(self):
        rec = self

        class Keys:
            def __contains__(self, k):
                rec.note(k)
                return dict.__contains__(rec, k)

            def __iter__(self):
                return iter(list(dict.keys(rec)))

            def __len__(self):
                return dict.__len__(rec)

        return Keys()


def model_keys(model, prefix):
    """The fields of a DeepSpeedConfigModel (names and aliases), walked into nested models."""
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel
    for name, field in model.model_fields.items():
        names = {name} | ({field.alias} if field.alias else set())
        nested = [t for t in (field.annotation, *typing.get_args(field.annotation))
                  if inspect.isclass(t) and issubclass(t, DeepSpeedConfigModel)]
        for n in names:
            if nested:
                yield from model_keys(nested[0], prefix + n + ".")
            else:
                yield prefix + n


def main():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no "Setting accelerator" line on stdout
    import deepspeed
    from deepspeed.runtime import config as ds_config
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel
    seen = set()
    ds_config.DeepSpeedConfig(Recording(BASE, seen))
    top = {k for k in seen if "." not in k}
    top |= set(re.findall(r'"(\w+)" in config\b', inspect.getsource(ds_config)))
    models, todo = {}, [DeepSpeedConfigModel]
    while todo:
        for cls in todo.pop().__subclasses__():
            models.setdefault(cls.__name__, cls)
            todo.append(cls)
    keys = set(top)
    for section in sorted(top):
        try:
            ds_config.DeepSpeedConfig(dict(BASE, **{section: {"pm_probe_key": 1}}))
        except Exception as e:  # pydantic's ValidationError names the model and the probe
            text = str(e)
            if "pm_probe_key" not in text or "Extra inputs are not permitted" not in text:
                continue
            title = re.search(r"validation errors? for (\w+)", text)
            model = models.get(title.group(1)) if title else None
            if model is None:
                continue
            keys.discard(section)
            keys |= set(model_keys(model, section + "."))
    print(f"# DeepSpeed {deepspeed.__version__}'s ds_config keys: the top-level keys DeepSpeedConfig "
          "reads (it ignores others)")
    print("# and, for sections its pydantic models check (refusing other keys), their fields; "
          "built by")
    print("# scripts/deepspeed_config_keys.py.")
    for k in sorted(keys):
        print(k)


if __name__ == "__main__":
    main()
