#!/usr/bin/env python3
"""Writes the config.json keys transformers reads for the model types `import --hf` accepts
("model_type key", one a line), for its unknown-key warning (src/ckpt/data/
hf_config_keys_transformers_<version>.txt).

A model type's keys: the parameters of its configuration class's __init__ (LlamaConfig,
MixtralConfig, Qwen2MoeConfig), the keys of PretrainedConfig().to_dict() (what every config
carries: architectures, torch_dtype, token ids, generation defaults, transformers_version, ...)
and the class's attribute_map aliases. Any other key transformers keeps as an attribute its
model never reads. The version is scripts/pyenv.sh's (the one tests/ckpt compares logits with).

Usage (transformers alone, no PyTorch needed):
  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install transformers==4.44.2
  /tmp/hf/bin/python scripts/hf_config_keys.py > src/ckpt/data/hf_config_keys_transformers_4.44.2.txt
"""
import inspect
import os


def main():
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers
    from transformers import LlamaConfig, MixtralConfig, PretrainedConfig, Qwen2MoeConfig
    common = set(PretrainedConfig().to_dict())
    print(f"# transformers {transformers.__version__}'s config.json keys per model_type: its "
          "configuration class's")
    print("# parameters, PretrainedConfig's keys and attribute_map aliases; built by "
          "scripts/hf_config_keys.py.")
    for cls in (LlamaConfig, MixtralConfig, Qwen2MoeConfig):
        params = {k for k, p in inspect.signature(cls.__init__).parameters.items()
                  if k != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        for key in sorted(params | common | set(cls.attribute_map)):
            print(cls.model_type, key)


if __name__ == "__main__":
    main()
