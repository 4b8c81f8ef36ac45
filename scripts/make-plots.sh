#!/usr/bin/env bash
# Regenerates everything under plots/ (and the reference run in results/tiny)
# with the exact commands below. Run from the repository root (the tiny run
# uses the trained pair in models/ and the sample rows in data/samples):
#
#   scripts/make-plots.sh            # all: Figure 2, the tiny run, its figures and tables
#   scripts/make-plots.sh figure2    # Figure 2 only (no models needed, seconds)
#   scripts/make-plots.sh smollm2    # results/smollm2 and plots/smollm2 only: SmolLM2 GGUF
#                                    # with its Q4_0 self-draft (fetches the file; ~30 min)
#
# The tiny run takes about 4 minutes on 2 cores; its cells.csv, generations.jsonl
# and manifest.json are committed in results/tiny so the figures can be redrawn
# (`specbench plot results/tiny …`) without re-running it.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
cargo build --release --locked
specbench=target/release/specbench

mkdir -p plots/figure2
"$specbench" theory figure2 --step 0.01 --out plots/figure2/figure2.csv
"$specbench" plot plots/figure2/figure2.csv --out plots/figure2 --format svg,png
[[ $what == figure2 ]] && exit 0

if [[ $what == smollm2 ]]; then
    scripts/fetch-smollm2.sh
    rm -rf results/smollm2 plots/smollm2
    "$specbench" run --config experiments/smollm2.toml --out results/smollm2
    mkdir -p plots/smollm2
    "$specbench" plot results/smollm2 --out plots/smollm2 --format svg,png
    "$specbench" report results/smollm2 --format md --out plots/smollm2/report.md
    exit 0
fi

rm -rf results/tiny plots/tiny
"$specbench" run --config experiments/tiny.toml --out results/tiny
mkdir -p plots/tiny
"$specbench" plot results/tiny --out plots/tiny --format svg,png
"$specbench" report results/tiny --format md --out plots/tiny/report.md
