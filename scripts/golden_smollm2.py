#!/usr/bin/env python3
"""Golden logits and token ids for the GGUF loader (tests/it/gguf_smollm2.rs).

Reads SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-smollm2.sh) with Hugging
Face transformers' own GGUF support -- `from_pretrained(..., gguf_file=...)`,
which dequantizes every tensor to float32 and undoes llama.cpp's Q/K row
permutation -- and writes tests/fixtures/smollm2/golden.json:

* `texts`: real rows of data/samples (XSum documents, Dolly instructions and
  contexts, WMT18 German and English) and the ids transformers' GGUF
  tokenizer conversion gives them (no special tokens added: the file says
  `add_bos_token = false`);
* `prompts`: for three short real prompts, at every position, the logits of
  the 16 most likely ids and of 48 fixed probe ids (a seeded draw over the
  whole vocabulary), and the log-sum-exp of the full logits vector (the
  full vectors would be 49152 floats per position);
* `perplexity`: the first 128 tokens of an XSum document and the mean
  next-token negative log-likelihood transformers gives them.

    python3 -m venv .venv && .venv/bin/pip install torch transformers gguf accelerate
    .venv/bin/python scripts/golden_smollm2.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
"""

import json
import os
import subprocess
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "smollm2", "golden.json")
SAMPLES = os.path.join(ROOT, "data", "samples")
TOP, PROBES, PERPLEXITY_TOKENS = 16, 48, 128


def rows(name, n):
    with open(os.path.join(SAMPLES, name), encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(
        [os.path.join(ROOT, "scripts", "fetch-smollm2.sh")], text=True).strip()
    folder, name = os.path.split(path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()

    def ids(text):
        return tokenizer(text, add_special_tokens=True)["input_ids"]

    xsum, dolly, wmt = rows("xsum_test.jsonl", 4), rows("dolly_15k.jsonl", 4), rows("wmt18_de_en_test.jsonl", 6)
    texts = ([r["document"] for r in xsum]
             + [r["instruction"] + "\n" + r["context"] for r in dolly]
             + [r["de"] for r in wmt] + [r["en"] for r in wmt]
             + ["<|im_start|>user\nWhat is 1234 + 56?<|im_end|>\n<|im_start|>assistant\n"])
    generator = torch.Generator().manual_seed(26)
    vocab = model.config.vocab_size
    probes = torch.randperm(vocab, generator=generator)[:PROBES].tolist()
    prompts = ["The capital of France is",
               xsum[0]["document"][:120],
               "Translate to English: " + wmt[0]["de"]]
    golden_prompts = []
    with torch.no_grad():
        for text in prompts:
            row = ids(text)
            logits = model(torch.tensor([row])).logits[0].float()
            positions = []
            for t in range(len(row)):
                top = torch.topk(logits[t], TOP).indices.tolist()
                chosen = top + [p for p in probes if p not in top]
                positions.append({
                    "ids": chosen,
                    "logits": [float(logits[t, i]) for i in chosen],
                    "logsumexp": float(torch.logsumexp(logits[t].double(), 0)),
                })
            golden_prompts.append({"text": text, "ids": row, "positions": positions})
        long_ids = ids(xsum[1]["document"])[:PERPLEXITY_TOKENS]
        logits = model(torch.tensor([long_ids])).logits[0].double()
        nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(long_ids[1:]))
    golden = {
        "file": name,
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "reference": f"transformers {transformers.__version__} (from_pretrained(gguf_file=...), float32, CPU), "
                     f"torch {torch.__version__}",
        "tokenizer": f"transformers {transformers.__version__} GGUF tokenizer conversion ({type(tokenizer).__name__})",
        "texts": [{"text": t, "ids": ids(t)} for t in texts],
        "prompts": golden_prompts,
        "perplexity": {"ids": long_ids, "mean_nll": float(nll)},
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}: {len(texts)} texts, {len(golden_prompts)} prompts, "
          f"perplexity {float(torch.exp(nll)):.2f} over {len(long_ids)} tokens")


if __name__ == "__main__":
    main()
