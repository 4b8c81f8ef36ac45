#!/usr/bin/env bash
# Decode, verify and prefill times of the OPT-125M shape, specbench beside
# transformers, at 1 and 2 threads, interleaved so that drifts in the
# machine's speed hit every setting alike. See docs/threads.md.
#
#   scripts/bench_model_threads.sh SPECBENCH PYTHON [ROUNDS] [OUT_DIR]
#
# PYTHON is an interpreter with torch and transformers. Each run's JSON is
# kept under OUT_DIR; the medians per setting are printed at the end.
set -euo pipefail
specbench=${1:?usage: scripts/bench_model_threads.sh SPECBENCH PYTHON [ROUNDS] [OUT_DIR]}
python=${2:?usage: scripts/bench_model_threads.sh SPECBENCH PYTHON [ROUNDS] [OUT_DIR]}
rounds=${3:-5}
out=${4:-$(mktemp -d)}
here=$(dirname "$0")
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for threads in 1 2; do
    "$specbench" bench model --threads "$threads" --batches 1,2 --json \
      >"$out/specbench-t$threads-r$round.json" 2>/dev/null
    "$python" "$here/bench_torch_opt.py" --size 125m --threads "$threads" --batches 1,2 --json \
      >"$out/torch-t$threads-r$round.json" 2>/dev/null
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
from collections import defaultdict

times = defaultdict(list)
for path in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
    setting = path.rsplit("/", 1)[1].rsplit("-r", 1)[0]
    for row in json.load(open(path)):
        for key in ("decode_ms", "verify_ms", "prefill_ms", "floor_ms"):
            if row.get(key) is not None:
                times[(setting, row["batch"], key)].append(row[key])
print(f"{'setting':<14} {'batch':>5} {'measure':<11} {'median':>8}  runs")
for (setting, batch, key), values in sorted(times.items()):
    runs = " ".join(f"{v:.1f}" for v in values)
    print(f"{setting:<14} {batch:>5} {key:<11} {statistics.median(values):>8.2f}  {runs}")
print(f"(JSON under {sys.argv[1]})")
PY
