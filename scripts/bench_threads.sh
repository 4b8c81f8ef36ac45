#!/usr/bin/env bash
# Token rates of tiny.toml-style cells (target-only, SD, SpecInfer at K = 2)
# under each thread setting, interleaved so that load drifts hit every
# setting alike; medians over REPEATS runs. See docs/threads.md.
#
#   scripts/bench_threads.sh NEW_BINARY [OLD_BINARY] [REPEATS]
#
# NEW_BINARY takes --threads; OLD_BINARY (a build without it, optional) is
# run with RAYON_NUM_THREADS=1, pinned with `taskset -c 0`, and with
# RAYON_NUM_THREADS=2. Uses the committed tiny pair (models/) and data/samples.
set -euo pipefail
new=${1:?usage: scripts/bench_threads.sh NEW_BINARY [OLD_BINARY] [REPEATS]}
old=${2:-}
repeats=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(run --config experiments/tiny.toml --schemes specinfer --draft-temps 1.2 --prompts 4)

settings=("new --threads 1" "new --threads 2")
if [[ -n $old ]]; then
  settings+=("old RAYON_NUM_THREADS=1" "old taskset -c 0" "old RAYON_NUM_THREADS=2")
fi

run_setting() { # setting, out dir
  case $1 in
    "new --threads 1") "$new" "${args[@]}" --threads 1 --out "$2" ;;
    "new --threads 2") "$new" "${args[@]}" --threads 2 --out "$2" ;;
    "old RAYON_NUM_THREADS=1") RAYON_NUM_THREADS=1 "$old" "${args[@]}" --out "$2" ;;
    "old taskset -c 0") taskset -c 0 "$old" "${args[@]}" --out "$2" ;;
    "old RAYON_NUM_THREADS=2") RAYON_NUM_THREADS=2 "$old" "${args[@]}" --out "$2" ;;
  esac >/dev/null 2>&1
}

for r in $(seq "$repeats"); do
  for i in "${!settings[@]}"; do
    run_setting "${settings[$i]}" "$work/$i-$r"
  done
done

# Pooled tokens / generation seconds per kind, median over repeats.
python3 - "$work" "$repeats" "${settings[@]}" <<'PY'
import csv, statistics, sys
work, repeats, settings = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'tokens/s (median of ' + str(repeats) + ')':<28} {'target-only':>12} {'SD (L=5)':>10} {'SpecInfer K=2':>14}")
for i, name in enumerate(settings):
    rates = {"target": [], "sd": [], "specinfer": []}
    for r in range(1, repeats + 1):
        rows = list(csv.DictReader(open(f"{work}/{i}-{r}/cells.csv")))
        for kind in rates:
            picked = [x for x in rows if (x["kind"] if kind != "specinfer" else x["scheme"]) == kind]
            tokens = sum(float(x["tokens"]) for x in picked)
            seconds = sum(float(x["gen_seconds"]) for x in picked)
            rates[kind].append(tokens / seconds)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{name:<28} {med['target']:>12.1f} {med['sd']:>10.1f} {med['specinfer']:>14.1f}")
PY
