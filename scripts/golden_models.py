#!/usr/bin/env python3
"""Golden logits for specbench's decoders (tests/golden_models.rs, tests/tiny_models.rs).

Creates tiny random models with Hugging Face transformers -- a pre-LayerNorm
OPT (the 125M / 1.3B ... 66B layout), a 350M-style OPT (post-LayerNorm,
project_in/project_out with word_embed_proj_dim != hidden), a Llama 3 style
model (grouped-query attention, llama3 rope scaling, tied head), a Qwen2
one (q/k/v biases, untied head), and Qwen3, Mistral, Gemma 2 and Gemma 3
ones (scripts/golden_families.py: q/k norms, sliding windows shorter than
the rows, soft-caps, both Gemma 3 config formats) -- saves each with safetensors (and the
pre-LN OPT also as a PyTorch pytorch_model.bin named decoder.*), and writes
the logits transformers computes for a batch of two token rows at every
position to tests/fixtures/golden.json.

It also records what transformers gives for the committed tiny target
(models/tiny-opt-target, f16 weights read into float32 as specbench reads
them) on the text "The weather today": the token ids and the next-token
log-softmax (checked by `specbench inspect logits`).

    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors
    .venv/bin/python scripts/golden_models.py            # every fixture
    .venv/bin/python scripts/golden_models.py families   # the Qwen3, Mistral, Gemma ones
"""

import json
import os
import sys

import torch
import transformers
from transformers import (AutoTokenizer, LlamaConfig, LlamaForCausalLM, OPTConfig,
                          OPTForCausalLM, Qwen2Config, Qwen2ForCausalLM)

from golden_families import FAMILIES, write_family

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
TINY = os.path.join(ROOT, "models", "tiny-opt-target")

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

OTHERS = {
    "llama-tiny": (LlamaForCausalLM, LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
        # Llama 3 frequency scaling, with a short original context so that
        # all three bands (kept, scaled, smoothed) occur at head_dim 8.
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
        bos_token_id=1, eos_token_id=2)),
    "qwen2-tiny": (Qwen2ForCausalLM, Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
        eos_token_id=2)),
}

ROWS = [
    [2, 5, 17, 33, 8, 91, 40, 3, 12, 60, 7, 44],
    [2, 71, 9, 9, 26, 54, 1, 88, 30, 15, 62, 4],
]


def write_families(golden):
    """The Qwen3, Mistral and Gemma fixtures, from their own seed."""
    torch.manual_seed(2024)
    golden["families_transformers"] = transformers.__version__
    for name, build in FAMILIES.items():
        golden["models"][name] = write_family(name, build, ROWS, os.path.join(FIXTURES, name))


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
    for name, (cls, config) in OTHERS.items():
        model = cls(config).eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("bias") or "norm" in pname:
                    p.add_(0.1 * torch.randn_like(p))
        model.save_pretrained(os.path.join(FIXTURES, name), safe_serialization=True)
        with torch.no_grad():
            logits = model(torch.tensor(ROWS)).logits.float()
        golden["models"][name] = {"logits": logits.flatten().tolist(),
                                  "shape": list(logits.shape)}
    write_families(golden)
    tok = AutoTokenizer.from_pretrained(TINY)
    # The weights are stored in float16; specbench computes in float32 from
    # the upcast weights, and so does this reference.
    model = OPTForCausalLM.from_pretrained(TINY, dtype=torch.float32).eval()
    ids = tok("The weather today").input_ids
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].float()
    golden["tiny_opt_target"] = {
        "text": "The weather today", "ids": ids,
        "logprobs": torch.log_softmax(logits, -1).tolist(),
    }
    with open(os.path.join(FIXTURES, "golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", os.path.join(FIXTURES, "golden.json"))


if __name__ == "__main__":
    if sys.argv[1:] == ["families"]:
        # Only the Qwen3, Mistral and Gemma fixtures, the others kept.
        path = os.path.join(FIXTURES, "golden.json")
        with open(path) as f:
            golden = json.load(f)
        write_families(golden)
        with open(path, "w") as f:
            json.dump(golden, f)
    else:
        main()
