"""The reference for `pentamesh generate`: Hugging Face transformers (PyPI) on Debian's CPU
PyTorch loads an exported model directory and continues a prompt with
model.generate(do_sample=False), for tests/ckpt/generate_cli_test.cc to compare token for token.

usage: hf_generate.py MODEL_DIR PROMPT_IDS MAX_NEW_TOKENS
  PROMPT_IDS: comma-separated token ids. Prints JSON {"ids": [the new tokens], "architecture"}.
  The end-of-sequence token does not stop generation (pentamesh generates exactly N tokens).
"""
import json
import sys

import torch
import transformers


def main() -> int:
    model_dir, prompt, new_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ids = torch.tensor([[int(t) for t in prompt.split(",")]], dtype=torch.long)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             pad_token_id=0)
    new = out[0, ids.shape[1]:].tolist()
    print(json.dumps({"ids": new, "architecture": type(model).__name__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
