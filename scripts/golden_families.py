"""Tiny random Qwen3, Mistral, Gemma 2 and Gemma 3 checkpoints for
scripts/golden_models.py, each with the logits transformers computes.

Every sliding window is shorter than the golden rows (12 tokens), so the
windowed and the full attention differ; the soft-caps are small enough to
bend the scores and logits of random weights. The script checks both
(a fixture where a window or a cap changes nothing could not catch its
omission). Gemma 3 comes twice: a `gemma3_text` checkpoint whose
config.json is rewritten to the hub's format (`rope_theta`,
`rope_local_base_freq`, `sliding_window_pattern`, `rope_scaling`), and a
multimodal `gemma3` one (a one-layer vision tower, language model under
`language_model.model.*`, as transformers saves it) in transformers 5's format (`layer_types`,
`rope_parameters` keyed by layer type).
"""

import json
import os

import torch
from transformers import (AutoModelForCausalLM, Gemma2Config, Gemma2ForCausalLM, Gemma3Config,
                          Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma3TextConfig,
                          MistralConfig, MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                          SiglipVisionConfig)

SMALL = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, eos_token_id=2, bos_token_id=1,
             pad_token_id=0)


def qwen3():
    return Qwen3ForCausalLM(Qwen3Config(
        **SMALL, num_hidden_layers=2, head_dim=16, rms_norm_eps=1e-6, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False)), None


def mistral():
    return MistralForCausalLM(MistralConfig(
        **SMALL, num_hidden_layers=2, rms_norm_eps=1e-5, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False)), {"sliding_window": 1000}


def gemma2():
    # query_pre_attn_scalar = head_dim: what llama.cpp assumes of Gemma 2
    # below 27B, so that the GGUF test can convert this checkpoint.
    return Gemma2ForCausalLM(Gemma2Config(
        **SMALL, num_hidden_layers=3, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=4, attn_logit_softcapping=0.5, final_logit_softcapping=1.5,
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh")), \
        {"sliding_window": 1000, "attn_logit_softcapping": None, "final_logit_softcapping": None}


def gemma3_text_config():
    # Six layers: llama.cpp's Gemma 3 pattern (five sliding, one full), its
    # local rope base (10 000) and scale (head_dim), so the GGUF test can
    # convert this checkpoint too.
    return Gemma3TextConfig(
        **SMALL, num_hidden_layers=6, head_dim=16,
        query_pre_attn_scalar=16, sliding_window=5, sliding_window_pattern=6, rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0,
                                            "rope_theta": 1000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


def gemma3():
    return Gemma3ForCausalLM(gemma3_text_config()), {"sliding_window": 1000}


def gemma3_mm():
    text = Gemma3TextConfig(
        **SMALL, num_hidden_layers=3, head_dim=8, query_pre_attn_scalar=20, sliding_window=4,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rms_norm_eps=1e-6, final_logit_softcapping=3.0,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                            "rope_theta": 500.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}})
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                num_attention_heads=2, image_size=28, patch_size=14)
    config = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                          boi_token_index=93, eoi_token_index=94, image_token_index=95,
                          eos_token_id=2, bos_token_id=1, pad_token_id=0)
    return Gemma3ForConditionalGeneration(config), None


FAMILIES = {
    "qwen3-tiny": qwen3,
    "mistral-tiny": mistral,
    "gemma2-tiny": gemma2,
    "gemma3-tiny": gemma3,
    "gemma3-mm-tiny": gemma3_mm,
}


def to_hub_format(out):
    """Rewrites a gemma3_text config.json as the hub's checkpoints state it."""
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    rope = config.pop("rope_parameters")
    layer_types = config.pop("layer_types")
    config.pop("_sliding_window_pattern", None)
    pattern = layer_types.index("full_attention") + 1
    assert layer_types == ["sliding_attention" if (i + 1) % pattern else "full_attention"
                           for i in range(len(layer_types))]
    config["sliding_window_pattern"] = pattern
    config["rope_theta"] = rope["full_attention"]["rope_theta"]
    config["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    config["rope_scaling"] = {"rope_type": "linear", "factor": rope["full_attention"]["factor"]}
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def logits_of(model, rows):
    with torch.no_grad():
        return model(torch.tensor(rows), use_cache=False).logits.float()


def check_changes(name, model, rows, logits, without):
    """A window or cap that changed nothing could not be tested: set to
    none, the logits must move."""
    if not without:
        return
    config = model.config.get_text_config() if hasattr(model.config, "text_config") else model.config
    for key, value in without.items():
        saved = getattr(config, key)
        setattr(config, key, value)
        for module in model.modules():
            if hasattr(module, key):
                setattr(module, key, value)
        moved = (logits_of(model, rows) - logits).abs().max().item()
        setattr(config, key, saved)
        for module in model.modules():
            if hasattr(module, key):
                setattr(module, key, saved)
        assert moved > 1e-3, f"{name}: {key} changes the logits by only {moved}"
        print(f"  {name}: {key} moves the logits by {moved:.3f}")


def write_family(name, build, rows, out):
    model, without = build()
    model = model.eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("bias") or "norm" in pname:
                p.add_(0.1 * torch.randn_like(p))
            # Scores of order 1, not 0.01: attention that is not uniform,
            # and soft-caps that bend it.
            if "q_proj" in pname or "k_proj" in pname:
                p.mul_(6.0)
    logits = logits_of(model, rows)
    check_changes(name, model, rows, logits, without)
    assert (logits_of(model, rows) - logits).abs().max().item() == 0
    model.save_pretrained(out, safe_serialization=True)
    if name == "gemma3-tiny":
        to_hub_format(out)
    # What is saved must reload as the same model (the rewritten config too).
    cls = type(model) if name == "gemma3-mm-tiny" else AutoModelForCausalLM
    again = cls.from_pretrained(out, dtype=torch.float32).eval()
    moved = (logits_of(again, rows) - logits).abs().max().item()
    assert moved < 1e-6, f"{name}: reloaded, the logits move by {moved}"
    return {"logits": logits.flatten().tolist(), "shape": list(logits.shape)}
