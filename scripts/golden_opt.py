#!/usr/bin/env python3
"""Golden logits for specbench's OPT (tests/opt_golden.rs).

Creates two tiny random OPT models with Hugging Face transformers -- a
pre-LayerNorm one (the 125M / 1.3B ... 66B layout) and a 350M-style one
(post-LayerNorm, project_in/project_out with word_embed_proj_dim != hidden)
-- saves each with safetensors (and the pre-LN one also as a PyTorch
pytorch_model.bin), and writes the logits transformers computes for a batch
of two token rows at every position to tests/fixtures/opt_golden.json.

When ../shared/models/tiny-opt-target exists it also records what
transformers gives for the text "The weather today": the token ids and the
next-token log-softmax (checked by `specbench inspect logits`).

    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors
    .venv/bin/python scripts/golden_opt.py
"""

import json
import os
import sys

import torch
import transformers
from transformers import AutoTokenizer, OPTConfig, OPTForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models", "tiny-opt-target")

MODELS = {
    "opt-tiny-preln": dict(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
        num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32,
        do_layer_norm_before=True,
    ),
    "opt-tiny-postln": dict(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
        num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=16,
        do_layer_norm_before=False,
    ),
}

ROWS = [
    [2, 5, 17, 33, 8, 91, 40, 3, 12, 60, 7, 44],
    [2, 71, 9, 9, 26, 54, 1, 88, 30, 15, 62, 4],
]


def main():
    torch.manual_seed(1234)
    golden = {"transformers": transformers.__version__, "torch": torch.__version__,
              "rows": ROWS, "models": {}}
    for name, shape in MODELS.items():
        config = OPTConfig(**shape, dropout=0.0, attention_dropout=0.0,
                           pad_token_id=1, bos_token_id=2, eos_token_id=2)
        model = OPTForCausalLM(config).eval()
        # Random biases and LayerNorm affines too, so a missed term shows.
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("bias") or "layer_norm" in pname:
                    p.add_(0.1 * torch.randn_like(p))
        out = os.path.join(FIXTURES, name)
        model.save_pretrained(out, safe_serialization=True)
        if name == "opt-tiny-preln":
            # The facebook/opt-* layout: a PyTorch pickle whose tensors are
            # named `decoder.*` (no `model.` prefix), tied head not stored.
            bin_dir = out + "-bin"
            os.makedirs(bin_dir, exist_ok=True)
            config.save_pretrained(bin_dir)
            state = {k[len("model."):]: v.contiguous() for k, v in model.state_dict().items()
                     if k.startswith("model.")}
            torch.save(state, os.path.join(bin_dir, "pytorch_model.bin"))
        with torch.no_grad():
            logits = model(torch.tensor(ROWS)).logits.float()
        golden["models"][name] = {"logits": logits.flatten().tolist(),
                                  "shape": list(logits.shape)}
    if os.path.isdir(SHARED):
        tok = AutoTokenizer.from_pretrained(SHARED)
        model = OPTForCausalLM.from_pretrained(SHARED).eval()
        ids = tok("The weather today").input_ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].float()
        golden["shared_tiny_opt_target"] = {
            "text": "The weather today", "ids": ids,
            "logprobs": torch.log_softmax(logits, -1).tolist(),
        }
    else:
        print(f"{SHARED} absent: no shared-model golden values", file=sys.stderr)
    with open(os.path.join(FIXTURES, "opt_golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", os.path.join(FIXTURES, "opt_golden.json"))


if __name__ == "__main__":
    main()
