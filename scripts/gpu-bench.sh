#!/usr/bin/env bash
# The GPU benchmark (docs/cuda.md), on a machine with an NVIDIA GPU: OPT-125M
# and OPT-13B shapes with random weights (no download) in f16 — prefill and
# decode at batch 1 and 2, the target's verification of K × (L + 1) tokens,
# a whole speculative round with an OPT-125M draft — each decode step beside
# its memory-bandwidth floor. Then one short `specbench run` of the same
# shapes on CUDA (experiments/gpu-random.toml). Where PyTorch +
# transformers are importable, the same shapes through transformers follow.
#
#   scripts/gpu-bench.sh [path/to/specbench] [out-dir]
#
# The binary comes from scripts/build-cuda.sh (or `cargo build --release
# --features cuda`). Results: <out-dir>/gpu-bench-<host>-<date>.{txt,json}
# and the run's cells.csv + manifest.json in <out-dir>/gpu-run-<host>-<date>/.
set -euo pipefail
BIN=${1:-target/cuda/release/specbench}
OUT=${2:-benches/results}
mkdir -p "$OUT"
STAMP="$(hostname)-$(date -u +%Y%m%dT%H%M%SZ)"
{
    echo "# $(date -u +%FT%TZ) $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv || true
} | tee "$OUT/gpu-bench-$STAMP.txt"
# --json prints the table on stderr as well.
"$BIN" bench model --device cuda --dtype f16 --sizes 125m,13b --draft-size 125m \
    --batches 1,2 --prompt 128 --steps 32 --drafts 2 --draft-len 5 --repeats 5 --json \
    2> >(tee -a "$OUT/gpu-bench-$STAMP.txt" >&2) > "$OUT/gpu-bench-$STAMP.json"
"$BIN" run --config "$(dirname "$0")/../experiments/gpu-random.toml" \
    --out "$OUT/gpu-run-$STAMP" 2>&1 | tail -n 12 | tee -a "$OUT/gpu-bench-$STAMP.txt"
if python3 -c 'import torch, transformers' 2>/dev/null; then
    for size in 125m 13b; do
        python3 "$(dirname "$0")/bench_torch_opt.py" --size "$size" --device cuda \
            --dtype float16 | tee -a "$OUT/gpu-bench-$STAMP.txt"
    done
fi
