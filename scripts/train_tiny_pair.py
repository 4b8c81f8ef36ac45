#!/usr/bin/env python3
"""Re-trains the tiny OPT draft/target pair of models/ by its recipe (models/README.md).

The committed weights in models/ stay the reference: CPU kernels are not
bit-reproducible and the original target phases followed a wall-clock schedule,
so a re-trained pair comes out close to, not equal to, the committed one.

Steps (each reads and writes the work folder, default /tmp/tiny-pair):

  tokenizer   byte-level BPE, 8192 ids, on the training records of data/samples
  train       one training phase of one model (AdamW, warmup + cosine, packed blocks)
  export      OPTForCausalLM folders with the tokenizer files (f16 weights by default)
  accept      the pair's single-draft acceptance 1 - TV over the validation positions
  all         the whole recipe: tokenizer; draft 500 steps; target 2093 + 1448 steps; export; accept

    python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch transformers tokenizers safetensors
    /tmp/tvenv/bin/python scripts/train_tiny_pair.py all --work /tmp/tiny-pair   # ~1 h on 2 cores
    /tmp/tvenv/bin/python scripts/train_tiny_pair.py all --max-steps 5           # a smoke run, seconds

The export goes to WORK/export/tiny-opt-{draft,target}; copy it over models/
only to replace the reference pair on purpose (then regenerate the golden logits
with scripts/golden_models.py and the reference run with scripts/make-plots.sh).
Versions used for the committed pair: torch 2.15.0, transformers 5.23.0,
tokenizers 0.23.3.
"""

import argparse
import json
import math
import os
import random
import shutil
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import OPTConfig, OPTForCausalLM

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "samples"
# Every text field of every record is one document.
FILES = {
    "xsum_test.jsonl": ["document", "summary"],
    "wmt18_de_en_test.jsonl": ["de", "en"],
    "dolly_15k.jsonl": ["instruction", "context", "response"],
}
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3 as in facebook/opt-*
EOS = 2  # `</s>`: end of every document, and the BOS of every block
BLOCK = 256  # BOS + 255 ids
VAL_FRACTION, SPLIT_SEED = 0.05, 1234
SHAPES = {
    "target": dict(hidden_size=256, num_hidden_layers=6, ffn_dim=1024, num_attention_heads=8,
                   word_embed_proj_dim=256),
    "draft": dict(hidden_size=128, num_hidden_layers=2, ffn_dim=512, num_attention_heads=4,
                  word_embed_proj_dim=128),
}
# The recipe (models/README.md): draft one phase; target two, the second a warm
# restart of the first with fresh optimizer state.
RECIPE = [
    dict(model="draft", steps=500, batch=8, lr=2e-3, resume=False),
    dict(model="target", steps=2093, batch=4, lr=2e-3, resume=False),
    dict(model="target", steps=1448, batch=8, lr=1e-3, resume=True),
]


def split_records():
    """(train, validation) documents: 5 % of each file's records held back."""
    train, val = [], []
    for name, fields in FILES.items():
        records = [json.loads(line) for line in open(DATA / name, encoding="utf-8")]
        order = list(range(len(records)))
        random.Random(SPLIT_SEED).shuffle(order)
        held = set(order[:round(VAL_FRACTION * len(records))])
        for i, record in enumerate(records):
            docs = [record[f] for f in fields if record.get(f)]
            (val if i in held else train).append(docs)
    return train, val


def build_tokenizer(work):
    train, _ = split_records()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8192, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((d for docs in train for d in docs), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="</s> $A", pair="</s> $A $B", special_tokens=[("</s>", EOS)])
    out = work / "tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    tok.model.save(str(out))  # vocab.json + merges.txt, as facebook/opt-* ship them
    special = {"content": "</s>", "lstrip": False, "normalized": True, "rstrip": False,
               "single_word": False}
    json.dump({"bos_token": special, "eos_token": special, "unk_token": special,
               "pad_token": dict(special, content="<pad>")},
              open(out / "special_tokens_map.json", "w"), indent=2)
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, s in enumerate(SPECIALS)}
    json.dump({"add_bos_token": True, "add_prefix_space": False, "added_tokens_decoder": added,
               "bos_token": "</s>", "clean_up_tokenization_spaces": False, "eos_token": "</s>",
               "errors": "replace", "pad_token": "<pad>", "tokenizer_class": "GPT2Tokenizer",
               "unk_token": "</s>"}, open(out / "tokenizer_config.json", "w"), indent=2)
    print(f"tokenizer: {tok.get_vocab_size()} ids -> {out}")


def documents(work):
    """Each document's ids followed by `</s>`, per record, for train and validation."""
    tok = Tokenizer.from_file(str(work / "tokenizer" / "tokenizer.json"))
    encode = lambda docs: [tok.encode(d, add_special_tokens=False).ids + [EOS] for d in docs]
    train, val = split_records()
    return [encode(r) for r in train], [encode(r) for r in val]


def pack(records, rng=None):
    """Concatenates the records' documents (reshuffled when `rng` is given)
    into blocks of 255 ids, each prefixed with `</s>`: [n, 256]."""
    order = list(range(len(records)))
    if rng is not None:
        rng.shuffle(order)
    ids = [t for i in order for doc in records[i] for t in doc]
    n = len(ids) // (BLOCK - 1)
    body = torch.tensor(ids[:n * (BLOCK - 1)]).view(n, BLOCK - 1)
    return torch.cat([torch.full((n, 1), EOS), body], dim=1)


def model_for(kind, vocab):
    config = OPTConfig(vocab_size=vocab, max_position_embeddings=512, do_layer_norm_before=True,
                       activation_function="relu", dropout=0.1, attention_dropout=0.0,
                       enable_bias=True, layer_norm_elementwise_affine=True,
                       tie_word_embeddings=True, pad_token_id=1, bos_token_id=EOS,
                       eos_token_id=EOS, **SHAPES[kind])
    return OPTForCausalLM(config)


@torch.no_grad()
def val_loss(model, blocks):
    """Token-weighted mean next-token loss over `blocks`."""
    model.eval()
    total, count = 0.0, 0
    for chunk in blocks.split(8):
        logits = model(chunk).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="sum")
        total, count = total + loss.item(), count + chunk[:, 1:].numel()
    model.train()
    return total / count


def train(work, kind, steps, batch, lr, resume, threads, seed=0):
    torch.manual_seed(seed)
    train_docs, val_docs = documents(work)
    val_blocks = pack(val_docs)
    vocab = Tokenizer.from_file(str(work / "tokenizer" / "tokenizer.json")).get_vocab_size()
    ckpt = work / f"{kind}.pt"
    model = model_for(kind, vocab)
    if resume:  # warm restart: the weights only, fresh AdamW state
        model.load_state_dict(torch.load(ckpt))
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    warmup = 30

    def lr_at(step):  # linear warmup, then cosine to 10 % of the peak
        if step < warmup:
            return lr * (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))

    # Threads: fixed, or (0) every 100 steps time 5 steps with 1 and with 2
    # threads and keep the faster (on a small machine busy with other work,
    # 2 threads can be slower than 1).
    torch.set_num_threads(threads or 2)
    rng = random.Random(seed)
    blocks, cursor = pack(train_docs, rng), 0
    evals = set(round(steps * (i + 1) / 8) for i in range(8))
    best, recent, probe, times = float("inf"), [], [], {}
    for step in range(steps):
        if threads == 0 and step > 0 and (step == 6 or step % 100 == 0):
            probe, times = [1] * 5 + [2] * 5, {1: 0.0, 2: 0.0}
        if cursor + batch > len(blocks):  # next epoch, records reshuffled
            blocks, cursor = pack(train_docs, rng), 0
        x = blocks[cursor:cursor + batch]
        cursor += batch
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        if probe:
            torch.set_num_threads(probe[0])
        start = time.perf_counter()
        loss = model(x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if probe:
            times[probe.pop(0)] += time.perf_counter() - start
            if not probe:
                torch.set_num_threads(min(times, key=times.get))
        recent = (recent + [loss.item()])[-50:]
        if step + 1 in evals:
            val = val_loss(model, val_blocks[::2])
            print(f"{kind} step {step + 1}/{steps}: train {sum(recent) / len(recent):.3f} "
                  f"(last 50) / val {val:.3f} (every other block), threads "
                  f"{torch.get_num_threads()}", flush=True)
            if val < best:
                best = val
                torch.save(model.state_dict(), ckpt)
    if not evals:
        torch.save(model.state_dict(), ckpt)
    model.load_state_dict(torch.load(ckpt))
    print(f"{kind}: kept checkpoint, validation loss {val_loss(model, val_blocks):.4f} "
          f"over {val_blocks[:, 1:].numel()} predictions -> {ckpt}")


def export(work, dtype):
    tok_dir = work / "tokenizer"
    vocab = Tokenizer.from_file(str(tok_dir / "tokenizer.json")).get_vocab_size()
    for kind in ("draft", "target"):
        model = model_for(kind, vocab)
        model.load_state_dict(torch.load(work / f"{kind}.pt"))
        out = work / "export" / f"tiny-opt-{kind}"
        model.to(getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
        for f in tok_dir.iterdir():
            shutil.copy(f, out / f.name)
        print(f"exported {out} ({dtype})")


@torch.no_grad()
def accept(folder):
    """Mean 1 - TV(p, q_T) over every validation position, p the target at
    temperature 1, q the draft at temperature T."""
    work = Path(folder)
    _, val_docs = documents(work.parent if work.name == "export" else work)
    blocks = pack(val_docs)
    load = lambda k: OPTForCausalLM.from_pretrained(
        work / f"tiny-opt-{k}", dtype=torch.float32).eval()
    target, draft = load("target"), load("draft")
    temps = (1.0, 1.2, 1.6, 2.0, 2.4)
    acc = {t: [] for t in temps}
    for chunk in blocks.split(8):
        p = torch.softmax(target(chunk).logits.double(), -1)
        logits = draft(chunk).logits.double()
        for t in temps:
            q = torch.softmax(logits / t, -1)
            acc[t].append(torch.minimum(p, q).sum(-1).flatten())
    for t in temps:
        a = torch.cat(acc[t])
        print(f"draft T = {t}: acceptance {a.mean():.3f} over {a.numel()} positions")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["tokenizer", "train", "export", "accept", "all"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/tiny-pair"))
    parser.add_argument("--model", choices=["draft", "target"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--resume", action="store_true",
                        help="warm restart from WORK/MODEL.pt (weights only)")
    parser.add_argument("--threads", type=int, default=0, help="0: adaptive, 1 or 2")
    parser.add_argument("--max-steps", type=int,
                        help="cap every phase at this many steps (a smoke run)")
    parser.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    cap = (lambda n: min(n, args.max_steps)) if args.max_steps else (lambda n: n)
    if args.step in ("tokenizer", "all"):
        build_tokenizer(work)
    if args.step == "train":
        if not (args.model and args.steps):
            parser.error("train needs --model and --steps")
        train(work, args.model, cap(args.steps), args.batch, args.lr, args.resume, args.threads)
    if args.step == "all":
        for phase in RECIPE:
            train(work, phase["model"], cap(phase["steps"]), phase["batch"], phase["lr"],
                  phase["resume"], args.threads)
    if args.step in ("export", "all"):
        export(work, args.dtype)
    if args.step in ("accept", "all"):
        accept(work / "export")


if __name__ == "__main__":
    main()
