#!/usr/bin/env bash
# Issue 7's GPU work as one command, for a lent GPU machine that goes back
# seconds after each call (and has no Rust toolchain): the CUDA binary
# checked against the CPU on the same machine, then the benchmark.
#
# Here (no GPU needed):
#   scripts/build-cuda.sh                  # target/cuda/release/specbench-cuda.xz
# Then through the device tool, from the repository root (the tiny pair
# and the sample rows travel with the working tree: models/, data/samples):
#   command: bash scripts/device-session.sh gpu
#   carry:   target/cuda/release/specbench-cuda.xz
# Everything lands in $OUT (which the tool brings back): session.log,
# gpu-bench-*.{txt,json} and gpu-run-*/{cells.csv,manifest.json}.
#
# The machine's CUDA libraries (libcublas.so.13, libcurand.so.10, …) come
# from the nvidia-* wheels of its Python; the driver is the machine's own.
set -uo pipefail

case "${1:-}" in
gpu) ;;
*)
    echo "usage: $0 gpu" >&2
    exit 2
    ;;
esac

OUT=${OUT:-/tmp/specbench-device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/session.log") 2>&1
step() { printf '\n## %s (%s)\n' "$*" "$(date -u +%T)"; }

BIN=/tmp/specbench
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
    target/cuda/release/specbench-cuda.xz "$BIN" || exit 1
chmod +x "$BIN"
LIBS=$(python3 -c "
import glob, os, site
print(':'.join(sorted({d for s in site.getsitepackages()
                       for d in glob.glob(os.path.join(s, 'nvidia', '*', 'lib'))})))")
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "0. the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv
ldd "$BIN" | grep -E 'cuda|cublas|curand|not found'
nproc

step "1. logits: CUDA f32 against the CPU and transformers; f16 and bf16 against f32"
timeout 120 python3 - "$BIN" <<'EOF'
import json, math, subprocess, sys
binary = sys.argv[1]
golden = json.load(open("tests/fixtures/golden.json"))
ids = ",".join(map(str, golden["rows"][0]))
def logprobs(model, device, dtype):
    out = subprocess.run([binary, "inspect", "logits", "--model", f"tests/fixtures/{model}",
                          "--ids", ids, "--device", device, "--dtype", dtype, "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip().splitlines()[-1]
    return json.loads(out.stdout)["logprobs"]
def worst(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return f"failed: {a if isinstance(a, str) else b}"
    return f"{max(abs(x - y) for x, y in zip(a, b)):.2e}"
for model, name in [("opt-tiny-preln", "opt-tiny-preln"), ("opt-tiny-postln", "opt-tiny-postln"),
                    ("llama-tiny", "llama-tiny"), ("qwen2-tiny", "qwen2-tiny")]:
    entry = golden["models"][name]
    rows, width, vocab = entry["shape"]
    last = entry["logits"][(width - 1) * vocab: width * vocab]
    top = max(last)
    total = math.log(sum(math.exp(x - top) for x in last)) + top
    reference = [x - total for x in last]
    cpu = logprobs(model, "cpu", "f32")
    cuda = logprobs(model, "cuda", "f32")
    print(f"{model:16} cuda-f32 vs cpu-f32 {worst(cuda, cpu)}  vs transformers {worst(cuda, reference)}"
          f"  f16 vs f32 {worst(logprobs(model, 'cuda', 'f16'), cuda)}"
          f"  bf16 vs f32 {worst(logprobs(model, 'cuda', 'bf16'), cuda)}")
EOF

step "2. the tiny pair decoded on CUDA and on the CPU: the same cells"
TINY=(run --config experiments/tiny.toml --schemes specinfer,optimal,ersd,block --draft-temps 1.6)
timeout 150 "$BIN" "${TINY[@]}" --device cpu --out /tmp/tiny-cpu | tail -n 12
timeout 150 "$BIN" "${TINY[@]}" --device cuda --out /tmp/tiny-cuda | tail -n 12
timeout 30 python3 - <<'EOF'
import csv
def cells(path):
    try:
        return {r["cell_id"]: r for r in csv.DictReader(open(path))}
    except OSError as e:
        print(f"no cells: {e}")
        return {}
cpu, cuda = cells("/tmp/tiny-cpu/cells.csv"), cells("/tmp/tiny-cuda/cells.csv")
columns = ["block_efficiency", "tokens", "rounds", "accept_by_depth"]
same = [c for c in cpu if c in cuda and all(cpu[c].get(k) == cuda[c].get(k) for k in columns)]
print(f"{len(same)} of {len(cpu)} cells identical on CUDA and CPU ({', '.join(columns)})")
for c in [c for c in cpu if c not in same][:5]:
    print("  differs:", c, {k: (cpu[c].get(k), cuda.get(c, {}).get(k)) for k in columns})
EOF

step "3. the benchmark (bench model, a random-weight run, transformers)"
timeout 330 bash scripts/gpu-bench.sh "$BIN" "$OUT"

step "done"
