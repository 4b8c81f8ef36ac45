#!/usr/bin/env bash
# Spread one specbench experiment over a Slurm job array, then merge.
#
#   scripts/slurm-array.sh N CONFIG [run flags…]
#
# submits N array tasks, each running `specbench run CONFIG --shard slurm`
# (task i of N takes every N-th (dataset, temperatures, seed) group into
# results/<name>/shard-i-of-N/), and one merge job that starts when all of
# them have succeeded and writes results/<name>/merged/. Extra sbatch options
# come from SBATCH_* environment variables or SPECBENCH_SBATCH (e.g.
# SPECBENCH_SBATCH="--partition=gpu --gres=gpu:1 --time=12:00:00").
#
# The binary: SPECBENCH if set; else, for a GPU job (the config's device, or
# a --device flag, names cuda or auto), the CUDA build
# target/cuda/release/specbench (scripts/build-cuda.sh); else the CPU build
# target/release/specbench. Each task's log starts with the binary it ran
# (path, sha256, version) and the host.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 N CONFIG [run flags…]   (e.g. $0 8 experiments/paper-e1.toml)" >&2
    exit 2
fi
shards=$1
config=$2
shift 2
if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then
    echo "error: N must be a positive whole number, not '$shards'" >&2
    exit 2
fi
if [[ ! -f $config ]]; then
    echo "error: $config does not exist: give an experiment config such as experiments/paper-e1.toml" >&2
    exit 2
fi
command -v sbatch >/dev/null || { echo "error: sbatch not found: run this on a Slurm login node" >&2; exit 2; }
# Which device the run asks for: the last --device flag, else the config's.
# (A list, `["cuda:0", "cuda:1"]`, is read by its first device.)
device=$(sed -n 's/^device *= *\[\{0,1\}[[:space:]]*"\([^"]*\)".*/\1/p' "$config" | head -n 1)
prev=
for arg in "$@"; do
    if [[ $prev == --device ]]; then device=$arg; fi
    if [[ $arg == --device=* ]]; then device=${arg#--device=}; fi
    prev=$arg
done
case "${device:-cpu}" in
cuda* | auto) gpu_job=1 ;;
*) gpu_job=0 ;;
esac
if [[ -n ${SPECBENCH:-} ]]; then
    binary=$SPECBENCH
elif [[ $gpu_job == 1 ]]; then
    binary=target/cuda/release/specbench
    [[ -x $binary ]] || { echo "error: $binary not found: a GPU job (device '$device') needs the CUDA build: scripts/build-cuda.sh (or cargo build --release --features cuda --target-dir target/cuda), or set SPECBENCH" >&2; exit 2; }
else
    binary=target/release/specbench
fi
[[ -x $binary ]] || { echo "error: $binary not found: cargo build --release (or set SPECBENCH)" >&2; exit 2; }
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
sha=$(sha256sum "$binary" | cut -c1-16)
version=$("$binary" --version 2>/dev/null || echo unknown)
# What each task's log says first: which binary ran where.
announce="echo \"specbench task \${SLURM_ARRAY_TASK_ID:-merge} on \$(hostname): $binary (sha256 $sha…, $version, device ${device:-cpu})\""

name=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$config" | head -n 1)
name=${name:-$(basename "$config" .toml)}
prev=
for arg in "$@"; do
    # --name on the command line wins over the config's name.
    if [[ ${prev:-} == --name ]]; then name=$arg; fi
    prev=$arg
done
out=results/$name
mkdir -p "$out/slurm-logs"

flags=$(printf ' %q' "$@")
array_job=$(sbatch --parsable ${SPECBENCH_SBATCH:-} \
    --job-name="specbench-$name" --array="1-$shards" \
    --output="$out/slurm-logs/shard-%a.out" \
    --wrap="$announce; $binary run $(printf %q "$config") --shard slurm$flags")
merge_inputs=$(for i in $(seq 1 "$shards"); do printf ' %s/shard-%d-of-%d' "$out" "$i" "$shards"; done)
merge_job=$(sbatch --parsable ${SPECBENCH_SBATCH:-} \
    --job-name="specbench-$name-merge" --dependency="afterok:$array_job" \
    --output="$out/slurm-logs/merge.out" \
    --wrap="$announce; $binary merge$merge_inputs --out $out/merged")
echo "submitted array job $array_job ($shards shards) and merge job $merge_job, running $binary"
echo "results: $out/merged (then: specbench report $out/merged; specbench plot $out/merged --out $out/plots)"
