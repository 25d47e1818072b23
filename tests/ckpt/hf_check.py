"""The real client of `pentamesh export --hf`: Hugging Face transformers (PyPI) on Debian's CPU
PyTorch loads an exported model directory with AutoModelForCausalLM and AutoTokenizer and writes
what it computes, for tests/ckpt/hf_test.cc to compare with pentamesh's own forward.

usage: hf_check.py MODEL_DIR WORK_DIR
  reads  WORK_DIR/tokens.bin (int32, batch*seq) and WORK_DIR/meta.json {"batch", "seq", "text"}
  writes WORK_DIR/hf_logits.bin (float32, batch*seq*vocab), WORK_DIR/hf_out.json
         {"architecture", "tokenizer_class", "ids": ids of meta.text (when a tokenizer exists)}
"""
import json
import os
import sys

import numpy as np
import torch
import transformers


def main() -> int:
    model_dir, work = sys.argv[1], sys.argv[2]
    meta = json.load(open(os.path.join(work, "meta.json")))
    tokens = np.fromfile(os.path.join(work, "tokens.bin"), dtype=np.int32)
    tokens = tokens.reshape(meta["batch"], meta["seq"])
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens.astype(np.int64))).logits
    logits.to(torch.float32).numpy().tofile(os.path.join(work, "hf_logits.bin"))
    out = {"architecture": type(model).__name__, "transformers": transformers.__version__,
           "torch": torch.__version__}
    if os.path.exists(os.path.join(model_dir, "tokenizer.model")):
        tok = transformers.AutoTokenizer.from_pretrained(model_dir, use_fast=False)
        out["tokenizer_class"] = type(tok).__name__
        out["ids"] = tok.encode(meta["text"], add_special_tokens=False)
    json.dump(out, open(os.path.join(work, "hf_out.json"), "w"))
    print(json.dumps({k: v for k, v in out.items() if k != "ids"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
