#!/usr/bin/env python3
"""The same measurements as `specbench bench model`, through transformers.

Random-initialised OPT of a public size's shape (no download), float32 on
the CPU, `torch.set_num_threads(THREADS)`: prompt processing of B rows of
PROMPT tokens, one decode step per row with the KV cache (median of STEPS),
and the verification call of K rows x (L + 1) tokens after the prompt.

    python3 scripts/bench_torch_opt.py --size 125m --threads 2 [--json]
"""

import argparse
import json
import statistics
import time

import torch
from transformers import OPTConfig, OPTForCausalLM
from transformers.cache_utils import DynamicCache

SHAPES = {  # hidden, layers, heads, word_embed_proj_dim, pre-LN
    "125m": (768, 12, 12, 768, True),
    "350m": (1024, 24, 16, 512, False),
    "1.3b": (2048, 24, 32, 2048, True),
    "13b": (5120, 40, 40, 5120, True),
}


def kv_pairs(cache):
    """(keys, values) per layer, for the cache classes of transformers 4 and 5."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(k, v) for k, v in cache.to_legacy_cache()]


DEVICE = "cpu"


def sync():
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn):
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return (time.perf_counter() - start) * 1e3, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="125m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,2")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--drafts", type=int, default=2)
    ap.add_argument("--draft-len", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    h, layers, heads, proj, pre = SHAPES[args.size]
    config = OPTConfig(vocab_size=50272, hidden_size=h, num_hidden_layers=layers,
                       ffn_dim=4 * h, num_attention_heads=heads, max_position_embeddings=2048,
                       word_embed_proj_dim=proj, do_layer_norm_before=pre,
                       dropout=0.0, attention_dropout=0.0)
    # Built on the device in the benchmark's dtype: 13B in f32 on the host
    # first would need 52 GB and minutes of random init.
    torch.set_default_dtype(getattr(torch, args.dtype))
    with torch.device(args.device):
        model = OPTForCausalLM(config).eval()
    params = sum(p.numel() for p in model.parameters())
    prompt = torch.tensor([[4 + (i * 7) % 50000 for i in range(args.prompt)]], device=args.device)
    rows = []
    with torch.inference_mode():
        for b in map(int, args.batches.split(",")):
            ids = prompt.expand(b, -1).contiguous()
            prefill = []
            for _ in range(args.repeats + 1):
                ms, out = timed(lambda: model(ids, use_cache=True))
                prefill.append(ms)
            past = out.past_key_values
            decode = []
            for step in range(args.steps + 1):
                token = torch.full((b, 1), 5 + step, device=args.device)
                ms, out = timed(lambda: model(token, past_key_values=past, use_cache=True))
                past = out.past_key_values
                if step > 0:
                    decode.append(ms)
            # Verification: K copies of the prompt's cache, L + 1 tokens each.
            _, base = timed(lambda: model(prompt, use_cache=True))
            block = torch.tensor([[9 + i for i in range(args.draft_len + 1)]],
                                 device=args.device).expand(args.drafts, -1)
            verify = []
            for _ in range(args.repeats + 1):
                cache = DynamicCache()
                for layer, (k, v) in enumerate(kv_pairs(base.past_key_values)):
                    cache.update(k.expand(args.drafts, -1, -1, -1).contiguous(),
                                 v.expand(args.drafts, -1, -1, -1).contiguous(), layer)
                ms, _ = timed(lambda: model(block, past_key_values=cache, use_cache=True))
                verify.append(ms)
            rows.append(dict(size=args.size, parameters=params, batch=b, prompt=args.prompt,
                             prefill_ms=statistics.median(prefill[1:]),
                             decode_ms=statistics.median(decode),
                             verify_ms=statistics.median(verify[1:]), threads=args.threads,
                             torch=torch.__version__))
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"transformers OPT, random weights ({args.threads} threads, {args.device} {args.dtype}, torch {torch.__version__})")
        print(f"{'size':>6} {'params':>7} {'batch':>5} {'prompt':>7} {'prefill ms':>11} {'decode ms':>11} {'verify ms':>11}")
        for r in rows:
            print(f"{r['size']:>6} {r['parameters'] / 1e6:>6.0f}M {r['batch']:>5} {r['prompt']:>7} "
                  f"{r['prefill_ms']:>11.2f} {r['decode_ms']:>11.2f} {r['verify_ms']:>11.2f}")


if __name__ == "__main__":
    main()
