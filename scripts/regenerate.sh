#!/usr/bin/env bash
# Regenerates every committed result (results/) and figure (plots/) with the
# current binary, by the exact commands below. Run from the repository root:
#
#   scripts/regenerate.sh                  # everything a CPU can make (~2 h on 2 cores)
#   scripts/regenerate.sh figure2          # Figure 2 only (no models, seconds)
#   scripts/regenerate.sh tiny             # results/tiny, plots/tiny (~5 min)
#   scripts/regenerate.sh smollm2          # results/smollm2, plots/smollm2 (~4 min; fetches the GGUF)
#   scripts/regenerate.sh verifiers-tiny   # the matched study on the tiny pair (~15 min)
#   scripts/regenerate.sh verifiers-smollm2  # the matched study on SmolLM2 (~15 min)
#   scripts/regenerate.sh trunk-tiny       # delayed tree expansion swept over d, tiny pair (~10 min)
#   scripts/regenerate.sh parity-smollm2   # every scheme end to end on SmolLM2 (~60 min)
#   scripts/regenerate.sh parity-smollm2-hot  # the draft-law mutants on SmolLM2, draft T 2.4 (~25 min)
#   scripts/regenerate.sh bench-parity     # what parity costs, tiny pair and SmolLM2 (~30 min)
#   scripts/regenerate.sh parity-transformers  # transformers' committed generations, scored again (~1 min)
#   SPECBENCH=target/cuda/release/specbench scripts/regenerate.sh parity-tiny-cuda
#                                          # on a machine with a GPU (scripts/build-cuda.sh builds it)
#
# The results hold cells.csv, generations.jsonl and manifest.json (or
# parity.csv, parity-hist.csv, parity.json): figures and tables can be
# redrawn from them (`specbench plot`, `specbench report`) without a re-run.
# tests/it/report.rs checks that `report` finds no committed run stale.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
if [[ -z ${SPECBENCH:-} ]]; then
    cargo build --release --locked
fi
specbench=${SPECBENCH:-target/release/specbench}

# Every registry scheme and mode (the suite's `every_scheme`, tests/it/parity.rs).
every_scheme=nss,sd_first,specinfer,rsd,spectr,is,greedy,optimal,optimal:mode=paper,ersd,ersd:tree=optimal,block,traversal,traversal:tree=merged,traversal:tree=distinct,spechub,is_ratio,is_target,is_uniform,is_first,is_priority

figure2() {
    mkdir -p plots/figure2
    "$specbench" theory figure2 --step 0.01 --out plots/figure2/figure2.csv
    "$specbench" plot plots/figure2/figure2.csv --out plots/figure2 --format svg,png
}

# A sweep into results/$1 from config $2, with its figures and report.
sweep() {
    rm -rf "results/$1" "plots/$1"
    "$specbench" run --config "$2" --out "results/$1"
    mkdir -p "plots/$1"
    "$specbench" plot "results/$1" --out "plots/$1" --format svg,png
    "$specbench" report "results/$1" --format md --out "plots/$1/report.md"
}

# A parity run into results/$1 (exit 1, a failed scheme, stops the script).
parity() {
    local name=$1
    shift
    rm -rf "results/$name" "plots/$name"
    "$specbench" parity --out "results/$name" "$@"
    mkdir -p "plots/$name"
    "$specbench" plot "results/$name" --out "plots/$name" --format svg,png
}

parity_smollm2() {
    scripts/fetch-smollm2.sh >/dev/null
    parity parity-smollm2 --config experiments/smollm2.toml --schemes "$every_scheme" \
        --drafts 2 --draft-temps 1.0 --datasets wmt18 --prompts 1 --max-prompt-tokens 32 \
        --max-new-tokens 10 --sequences 40
}

# The draft-law mutants on SmolLM2: its Q4_0 self-draft is close to its
# target at T 1.0, so they are shown at a hot draft temperature.
parity_smollm2_hot() {
    scripts/fetch-smollm2.sh >/dev/null
    parity parity-smollm2-hot --config experiments/smollm2.toml --schemes specinfer \
        --drafts 2 --draft-temps 2.4 --datasets wmt18 --prompts 1 --max-prompt-tokens 32 \
        --max-new-tokens 10 --sequences 60
}

# What parity costs (docs/benchmarks.md, "Parity"): the tiny pair at the
# issue's N = 2,000, SmolLM2 at N = 100 (2,000 would take hours on a CPU;
# its rate does not depend on N, each sequence being decoded alone).
bench_parity() {
    local schemes=specinfer
    rm -rf results/bench-parity-tiny results/bench-parity-smollm2 plots/bench-parity
    "$specbench" bench parity --config experiments/tiny.toml --out results/bench-parity-tiny \
        --schemes "$schemes" --drafts 2,8 --draft-temps 2.4 --datasets wmt18 --prompts 1 \
        --max-prompt-tokens 24 --max-new-tokens 12 --sequences 2000
    scripts/fetch-smollm2.sh >/dev/null
    "$specbench" bench parity --config experiments/smollm2.toml --out results/bench-parity-smollm2 \
        --schemes "$schemes" --drafts 2 --draft-temps 2.4 --datasets wmt18 --prompts 1 \
        --max-prompt-tokens 32 --max-new-tokens 10 --sequences 100
    mkdir -p plots/bench-parity
    "$specbench" plot results/bench-parity-tiny results/bench-parity-smollm2 \
        --out plots/bench-parity --format svg,png
}

parity_transformers() {
    # The generations are transformers' (scripts/parity_generations.py wrote
    # them, 1,000 sampled and 1,000 assisted) and stay; the scoring is re-run.
    local out=results/parity-transformers
    "$specbench" parity --config experiments/tiny.toml --generations "$out/generations.jsonl" --out "$out"
    mkdir -p plots/parity-transformers
    "$specbench" plot "$out" --out plots/parity-transformers --format svg,png
}

parity_tiny_cuda() {
    parity parity-tiny-cuda --config experiments/tiny.toml --device cuda --dtype f16 \
        --schemes "$every_scheme" --drafts 2,8 --draft-temps 2.4 --datasets wmt18 --prompts 1 \
        --max-prompt-tokens 24 --max-new-tokens 12 --sequences 80
}

case $what in
    figure2) figure2 ;;
    tiny) sweep tiny experiments/tiny.toml ;;
    smollm2) scripts/fetch-smollm2.sh >/dev/null && sweep smollm2 experiments/smollm2.toml ;;
    verifiers-tiny) sweep verifiers-tiny experiments/verifiers.toml ;;
    verifiers-smollm2) scripts/fetch-smollm2.sh >/dev/null && sweep verifiers-smollm2 experiments/verifiers-smollm2.toml ;;
    trunk-tiny) sweep trunk-tiny experiments/trunk.toml ;;
    parity-smollm2) parity_smollm2 ;;
    parity-smollm2-hot) parity_smollm2_hot ;;
    bench-parity) bench_parity ;;
    parity-transformers) parity_transformers ;;
    parity-tiny-cuda) parity_tiny_cuda ;;
    all)
        figure2
        sweep tiny experiments/tiny.toml
        scripts/fetch-smollm2.sh >/dev/null
        sweep smollm2 experiments/smollm2.toml
        sweep verifiers-tiny experiments/verifiers.toml
        sweep verifiers-smollm2 experiments/verifiers-smollm2.toml
        sweep trunk-tiny experiments/trunk.toml
        parity_smollm2
        parity_smollm2_hot
        bench_parity
        parity_transformers
        echo "results/parity-tiny-cuda needs a GPU: SPECBENCH=target/cuda/release/specbench $0 parity-tiny-cuda"
        ;;
    *)
        echo "error: unknown target '$what': give all, figure2, tiny, smollm2, verifiers-tiny, verifiers-smollm2, trunk-tiny, parity-smollm2, parity-smollm2-hot, bench-parity, parity-transformers or parity-tiny-cuda" >&2
        exit 2
        ;;
esac
