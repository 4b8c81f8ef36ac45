#!/usr/bin/env python3
"""Generations from another program, for `specbench parity --generations`.

Runs Hugging Face transformers on the committed tiny OPT pair (models/):
the target sampled alone, and the target with the draft as its assistant
(transformers' assisted generation, a speculative decoder), both at
temperature 1 and top-p 0.95, from one prompt. Writes one JSON object per
generation:

    {"prompt": [ids fed, BOS included], "tokens": [ids emitted],
     "temperature": 1.0, "top_p": 0.95, "top_k": 0, "program": "..."}

which `specbench parity` scores under specbench's own reading of the same
target model (docs/exactness.md, "Other programs' generations"):

    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors
    .venv/bin/python scripts/parity_generations.py --out hf.jsonl --count 2000
    specbench parity --config experiments/tiny.toml --generations hf.jsonl

Neither CI nor users need this script: it shows the file format with a
real program on the other side.
"""

import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "Translate German to English.\nGerman: Die Katze schläft auf dem Sofa.\nEnglish:"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--count", type=int, default=2000, help="generations per program")
    parser.add_argument("--new-tokens", type=int, default=12)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(ROOT, "models/tiny-opt-target"))
    load = lambda name: AutoModelForCausalLM.from_pretrained(
        os.path.join(ROOT, "models", name), dtype=torch.float32).to(device).eval()
    target, draft = load("tiny-opt-target"), load("tiny-opt-draft")
    prompt = tokenizer(PROMPT, return_tensors="pt").input_ids.to(device)
    settings = {"temperature": 1.0, "top_p": 0.95, "top_k": 0}
    programs = {
        "transformers-sample": {},
        "transformers-assisted": {"assistant_model": draft},
    }
    with open(args.out, "w") as out, torch.no_grad():
        for program, extra in programs.items():
            for _ in range(args.count):
                ids = target.generate(prompt, do_sample=True, max_new_tokens=args.new_tokens,
                                      pad_token_id=tokenizer.pad_token_id, **settings, **extra)
                line = {"prompt": prompt[0].tolist(), "tokens": ids[0, prompt.shape[1]:].tolist(),
                        **settings, "program": program}
                out.write(json.dumps(line) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
