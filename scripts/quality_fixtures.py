#!/usr/bin/env python3
"""Reference values for specbench's quality metrics (src/quality/).

Writes tests/fixtures/quality.json: ROUGE-L F-measures from rouge-score and
corpus BLEU scores from sacrebleu, on real references from data/samples
(XSum summaries, WMT18 English) and on awkward inputs. tests/quality.rs
compares specbench's values with these to 1e-6; neither CI nor users need
Python.

Options, as specbench uses them (docs/paper.md, E7):
  ROUGE-L: rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False), fmeasure
  BLEU:    sacrebleu.corpus_bleu(hyps, [refs]) with its defaults
           (tokenize="13a", smooth_method="exp", lowercase=False), score / 100

Regenerate (versions used for the committed file: rouge-score 0.1.2,
sacrebleu 2.6.0, nltk 3.10.4, Python 3):
  python3 -m venv /tmp/qvenv && /tmp/qvenv/bin/pip install rouge-score sacrebleu
  /tmp/qvenv/bin/python scripts/quality_fixtures.py [data/samples] > /dev/null
"""

import json
import random
import sys
from importlib.metadata import version
from pathlib import Path

import sacrebleu
from rouge_score import rouge_scorer

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data" / "samples"
OUT = ROOT / "tests" / "fixtures" / "quality.json"


def rows(name, limit):
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:limit]


def perturb(text, rng):
    """A plausible hypothesis: some words dropped, swapped or repeated."""
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.15:
            continue
        if r < 0.25:
            out.extend([w, w])
        else:
            out.append(w)
    if len(out) > 3 and rng.random() < 0.5:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


AWKWARD = [
    ("", "A reference with words."),
    ("A hypothesis with words.", ""),
    ("", ""),
    ("...!!! ??? ---", "Punctuation only, then words."),
    ("Straße, Größe und Übermaß: ß ü ö ä", "Strasse groesse und uebermass"),
    ("东京 is in 日本, they said 😀", "Tokyo is in Japan, they said"),
    ("İstanbul and the KELVIN sign \u212a work", "istanbul and the kelvin sign k work"),
    ("It cost $1,000.50 (approx.) on 3-4 May.", "It cost $1,000.50 on 3 - 4 May."),
    ("e-mail, don't, it's; U.S.A. vs. U.K.", "email do not it is USA versus UK"),
    ("&quot;Quoted&quot; &amp; &lt;tagged&gt; <skipped> text", "\"Quoted\" & <tagged> text"),
    ("the the the the the the", "the cat is on the mat"),
    ("tabs\tand\u00a0non-breaking\u2003spaces\x1cseparators", "tabs and non-breaking spaces separators"),
    ("trailing dot .", "trailing dot."),
    ("hyphen-\nated line\nbreak", "hyphenated line break"),
    ("a.b,c.d 1.2,3 x.5 5.x", "a.b,c.d 1.2,3 x.5 5.x"),
    ("{curly} [square] |pipe| ~tilde^ `tick` _under_ \\back/slash", "curly square pipe tilde tick under back slash"),
]


def main():
    rng = random.Random(20261124)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    xsum = [r["summary"] for r in rows("xsum_test.jsonl", 40)]
    wmt = rows("wmt18_de_en_test.jsonl", 40)
    wmt_en = [r["en"] for r in wmt]
    wmt_de = [r["de"] for r in wmt]

    rouge_cases = []
    pairs = []
    for i, ref in enumerate(xsum[:25]):
        pairs.append((perturb(ref, rng), ref))
        pairs.append((xsum[(i + 1) % len(xsum)], ref))
    pairs += AWKWARD
    long_ref = " ".join(xsum)
    pairs.append((perturb(long_ref, rng) * 3, long_ref))  # thousands of tokens
    for hyp, ref in pairs:
        score = scorer.score(ref, hyp)["rougeL"].fmeasure
        rouge_cases.append({"hypothesis": hyp, "reference": ref, "rouge_l": score})

    def bleu(hyps, refs):
        return sacrebleu.corpus_bleu(hyps, [refs]).score / 100.0

    bleu_cases = []
    perturbed = [perturb(r, rng) for r in wmt_en]
    corpora = [
        ("perturbed references", perturbed, wmt_en),
        ("German source as hypothesis", wmt_de, wmt_en),
        ("shifted references", wmt_en[1:] + wmt_en[:1], wmt_en),
        ("identical", wmt_en, wmt_en),
        ("short hypotheses (brevity penalty)", [" ".join(r.split()[:4]) for r in wmt_en], wmt_en),
        ("no 4-gram matches", ["one two three", "four five"], ["one two three four", "four five six"]),
        ("only unigram matches", ["dog cat", "bird"], ["cat dog", "bird fish"]),
        ("empty hypotheses", ["", ""], ["a b c", "d e"]),
        ("one empty hypothesis", ["", wmt_en[0]], [wmt_en[1], wmt_en[0]]),
        ("awkward", [h for h, _ in AWKWARD], [r for _, r in AWKWARD]),
        ("single word", ["word"], ["word"]),
        ("very long line", [" ".join(perturbed) * 2], [" ".join(wmt_en) * 2]),
    ]
    for name, hyps, refs in corpora:
        bleu_cases.append({"name": name, "hypotheses": hyps, "references": refs, "bleu": bleu(hyps, refs)})

    fixture = {
        "generated_by": "scripts/quality_fixtures.py",
        "versions": {p: version(p) for p in ("rouge-score", "sacrebleu", "nltk")},
        "rouge_options": "RougeScorer(['rougeL'], use_stemmer=False).score(reference, hypothesis)['rougeL'].fmeasure",
        "bleu_options": "corpus_bleu(hypotheses, [references]).score / 100 (13a, exp smoothing, case-sensitive)",
        "rouge_l": rouge_cases,
        "bleu": bleu_cases,
    }
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(rouge_cases)} ROUGE-L cases, {len(bleu_cases)} BLEU corpora")


if __name__ == "__main__":
    main()
