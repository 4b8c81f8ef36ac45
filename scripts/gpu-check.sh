#!/usr/bin/env bash
# The checks a lent GPU machine runs, each with a threshold; exits non-zero
# when any check fails (docs/cuda.md, "Checking a GPU").
#
#   scripts/gpu-check.sh            on a GPU: the CUDA build against the CPU
#   scripts/gpu-check.sh --cpu-only here: the same steps with the CPU as the
#                                   device (what can run without a GPU)
#
# Steps (GPU_CHECK_STEPS, default all, in this order):
#   logits  `inspect logits` on every test fixture: CPU f32 against the
#           transformers golden logits and device f32 against CPU f32, both
#           within GPU_CHECK_F32_TOL (1e-4); device f16 and bf16 against
#           device f32 within GPU_CHECK_F16_ULPS (16) and GPU_CHECK_BF16_ULPS
#           (16) unit roundoffs (2^-11, 2^-8) of the largest golden logit.
#   golden  the golden-model tests (full forward, and the cache's append,
#           rollback and select_rows against the full forward) on the device:
#           SPECBENCH_TEST_DEVICE=cuda on the test binary SPECBENCH_IT
#           (default target/cuda/release/it-cuda[.xz], from BUILD_TESTS=1
#           scripts/build-cuda.sh). Skipped when there is no test binary.
#   tiny    experiments/tiny.toml twice on the device: `compare` must find
#           every cell in both runs and the same tokens in each, and the
#           manifest must say the pool stayed awake (GPU) or slept (CPU).
#   split   experiments/tiny.toml with the target's layers split across the
#           device listed twice (cuda:0,cuda:0; cpu,cpu here) against the
#           unsplit device: the same tokens in every cell, and the manifest
#           names both places (docs/running.md, "Multi-device placement").
#   families `inspect logits` of a tiny Gemma-3 and Qwen3 on the device
#           against the CPU within GPU_CHECK_F32_TOL, when their fixtures
#           exist (tests/fixtures/gemma3-tiny, qwen3-tiny); skipped otherwise.
#   bench   `bench model --sizes 13b --dtype f16` on the device: decode time
#           over the bandwidth floor at most GPU_CHECK_FLOOR_MAX (3). GPU only
#           (13B weights do not fit a CPU machine's memory).
#   round   `bench round` (the host work of a round), when this binary has
#           it: its own exit status. GPU_CHECK_ROUND_ARGS adds flags.
#
# The binary: SPECBENCH, else (GPU) target/cuda/release/specbench or its .xz,
# (CPU) target/release/specbench or target/debug/specbench. On the GPU
# machine the CUDA libraries come from its Python's nvidia-* wheels. Logs
# go to $OUT (default /tmp/specbench-gpu-check): gpu-check.log and each
# step's output.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=gpu
case "${1:-}" in
--cpu-only) mode=cpu ;;
"") ;;
*)
    echo "usage: $0 [--cpu-only]" >&2
    exit 2
    ;;
esac

OUT=${OUT:-/tmp/specbench-gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
export F32_TOL=${GPU_CHECK_F32_TOL:-1e-4}
export F16_ULPS=${GPU_CHECK_F16_ULPS:-16}
export BF16_ULPS=${GPU_CHECK_BF16_ULPS:-16}
FLOOR_MAX=${GPU_CHECK_FLOOR_MAX:-3}
STEPS=${GPU_CHECK_STEPS:-logits golden tiny split families bench round}
failures=()
step() { printf '\n## %s (%s)\n' "$*" "$(date -u +%T)"; }
pass() { echo "PASS $*"; }
fail() {
    echo "FAIL $*"
    failures+=("$1")
}
wanted() { [[ " $STEPS " == *" $1 "* ]]; }
unxz_to() { python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$1" "$2" && chmod +x "$2"; }

if [[ $mode == gpu ]]; then
    DEV=cuda
    BIN=${SPECBENCH:-target/cuda/release/specbench}
    if [[ ! -x $BIN && -f target/cuda/release/specbench-cuda.xz ]]; then
        BIN=/tmp/specbench-cuda
        unxz_to target/cuda/release/specbench-cuda.xz "$BIN" || exit 1
    fi
    IT=${SPECBENCH_IT:-target/cuda/release/it-cuda}
    if [[ ! -x $IT && -f target/cuda/release/it-cuda.xz ]]; then
        IT=/tmp/specbench-it-cuda
        unxz_to target/cuda/release/it-cuda.xz "$IT" || exit 1
    fi
    LIBS=$(python3 -c "
import glob, os, site
print(':'.join(sorted({d for s in site.getsitepackages()
                       for d in glob.glob(os.path.join(s, 'nvidia', '*', 'lib'))})))" 2>/dev/null)
    export LD_LIBRARY_PATH="${LIBS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    DEV=cpu
    BIN=${SPECBENCH:-target/release/specbench}
    [[ -x $BIN ]] || BIN=target/debug/specbench
    IT=${SPECBENCH_IT:-}
fi
[[ -x $BIN ]] || { echo "error: no specbench binary ($BIN): build it, or set SPECBENCH" >&2; exit 2; }
export BIN DEV

step "0. the machine ($mode mode, device $DEV, binary $BIN)"
if [[ $mode == gpu ]]; then
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
    ldd "$BIN" | grep -E 'cuda|cublas|curand|not found'
else
    grep -m1 'model name' /proc/cpuinfo
fi
"$BIN" --version

if wanted logits; then
    step "logits: CPU f32 vs transformers and $DEV f32 vs CPU f32 (<= $F32_TOL); $DEV f16/bf16 vs $DEV f32 (<= $F16_ULPS/$BF16_ULPS roundoffs of the largest logit)"
    if timeout 300 python3 - <<'EOF'; then pass logits; else fail logits "a logit difference is over its threshold (above)"; fi
import json, math, os, subprocess, sys
binary, device = os.environ["BIN"], os.environ["DEV"]
f32_tol = float(os.environ["F32_TOL"])
ulps = {"f16": (float(os.environ["F16_ULPS"]), 2.0 ** -11), "bf16": (float(os.environ["BF16_ULPS"]), 2.0 ** -8)}
golden = json.load(open("tests/fixtures/golden.json"))
ids = ",".join(map(str, golden["rows"][0]))
def logprobs(model, device, dtype):
    out = subprocess.run([binary, "inspect", "logits", "--model", f"tests/fixtures/{model}", "--ids", ids,
                          "--device", device, "--dtype", dtype, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAIL {model} {device} {dtype}: {out.stderr.strip()}")
    return json.loads(out.stdout)["logprobs"]
def worst(a, b):
    return max(abs(x - y) for x, y in zip(a, b))
broken = 0
def judge(label, value, bound):
    global broken
    ok = value <= bound
    broken += not ok
    print(f"  {label:44} {value:.2e} {'<=' if ok else '>'} {bound:.2e} {'ok' if ok else 'OVER'}")
for model in ["opt-tiny-preln", "opt-tiny-postln", "llama-tiny", "qwen2-tiny"]:
    entry = golden["models"][model]
    rows, width, vocab = entry["shape"]
    last = entry["logits"][(width - 1) * vocab: width * vocab]
    top = max(last)
    total = math.log(sum(math.exp(x - top) for x in last)) + top
    reference = [x - total for x in last]
    largest = max(abs(x) for x in last)
    cpu = logprobs(model, "cpu", "f32")
    judge(f"{model} cpu f32 vs transformers", worst(cpu, reference), f32_tol)
    dev = cpu if device == "cpu" else logprobs(model, device, "f32")
    if device != "cpu":
        judge(f"{model} {device} f32 vs cpu f32", worst(dev, cpu), f32_tol)
    for dtype, (n, u) in ulps.items():
        judge(f"{model} {device} {dtype} vs {device} f32", worst(logprobs(model, device, dtype), dev), n * u * largest)
sys.exit(1 if broken else 0)
EOF
fi

if wanted golden; then
    step "golden models and the cache (append, rollback, select_rows) on $DEV"
    if [[ -n $IT && -x $IT ]]; then
        if SPECBENCH_TEST_DEVICE=$DEV timeout 600 "$IT" golden_models:: --test-threads 1; then
            pass golden
        else
            fail golden "a golden-model test failed on $DEV"
        fi
    else
        echo "skipped: no test binary (SPECBENCH_IT, or BUILD_TESTS=1 scripts/build-cuda.sh)"
    fi
fi

if wanted tiny; then
    step "experiments/tiny.toml twice on $DEV: compare finds the same tokens in every cell"
    if [[ $mode == gpu ]]; then
        TINY=(--schemes specinfer,optimal,ersd,block --draft-temps 1.6)
    else
        TINY=(--schemes specinfer --datasets dolly --prompts 1 --draft-temps 1.6 --max-new-tokens 12)
    fi
    rm -rf "$OUT/tiny-1" "$OUT/tiny-2"
    ok=1
    for i in 1 2; do
        timeout 300 "$BIN" run experiments/tiny.toml "${TINY[@]}" --device "$DEV" --out "$OUT/tiny-$i" \
            > "$OUT/tiny-$i.txt" 2>&1 || { ok=0; tail -n 3 "$OUT/tiny-$i.txt"; }
    done
    if [[ $ok == 1 ]] && "$BIN" compare "$OUT/tiny-1" "$OUT/tiny-2" --json > "$OUT/tiny-compare.json" &&
        python3 - "$OUT/tiny-compare.json" "$OUT/tiny-1/manifest.json" "$mode" <<'EOF'; then pass tiny; else fail tiny "the two runs differ, did not run, or the pool was not awake on the GPU"; fi
import json, sys
c = json.load(open(sys.argv[1]))
print(f"  {c['same_tokens']} of {c['common_cells']} cells generated the same tokens; "
      f"different: {c['different_tokens']}; only in one run: {c['only_in_base'] + c['only_in_new']}")
# On the GPU the pool's threads spin through the model calls; on the CPU
# they do not (docs/threads.md). Binaries older than that have no field.
awake = json.load(open(sys.argv[2])).get("pool_awake")
print(f"  pool awake through model calls: {awake}")
sys.exit(0 if c["common_cells"] > 0 and c["same_tokens"] == c["common_cells"]
         and not c["different_tokens"] and not c["only_in_base"] and not c["only_in_new"]
         and awake in (None, sys.argv[3] == "gpu") else 1)
EOF
fi

if wanted split; then
    if [[ $mode == gpu ]]; then SPLIT=cuda:0,cuda:0; else SPLIT=cpu,cpu; fi
    step "experiments/tiny.toml on $SPLIT against $DEV: the same tokens in every cell"
    SPLIT_RUN=(--schemes specinfer,ersd --datasets dolly --prompts 2 --draft-temps 1.6 --max-new-tokens 16)
    rm -rf "$OUT/split-whole" "$OUT/split-placed"
    ok=1
    for run in "whole $DEV" "placed $SPLIT"; do
        read -r name device <<< "$run"
        timeout 300 "$BIN" run experiments/tiny.toml "${SPLIT_RUN[@]}" --device "$device" --out "$OUT/split-$name" \
            > "$OUT/split-$name.txt" 2>&1 || { ok=0; tail -n 3 "$OUT/split-$name.txt"; }
    done
    # `compare` refuses runs of different devices: the generations are
    # compared here, token for token, per (cell, prompt).
    if [[ $ok == 1 ]] && python3 - "$OUT/split-whole" "$OUT/split-placed" <<'EOF'; then pass split; else fail split "the split run's tokens differ from the unsplit run's, it did not run, or it was not split"; fi
import json, sys
def generations(run):
    lines = (json.loads(l) for l in open(f"{run}/generations.jsonl") if l.strip())
    return {(g["cell_id"], g["prompt_id"]): g["tokens"] for g in lines}
whole, placed = generations(sys.argv[1]), generations(sys.argv[2])
same = sum(whole[k] == placed.get(k) for k in whole)
where = json.load(open(f"{sys.argv[2]}/manifest.json"))["models"]["target"]["device"]
print(f"  {same} of {len(whole)} generations have the same tokens ({len(placed)} split); target placed as {where}")
sys.exit(0 if whole and same == len(whole) == len(placed) and where.count("[") == 2 else 1)
EOF
fi

if wanted families; then
    step "tiny Gemma-3 and Qwen3 on $DEV against the CPU (f32 within $F32_TOL)"
    for fixture in gemma3-tiny qwen3-tiny; do
        dir=tests/fixtures/$fixture
        if [[ ! -f $dir/config.json ]]; then
            echo "skipped $fixture: no $dir"
            continue
        fi
        for device in cpu "$DEV"; do
            timeout 120 "$BIN" inspect logits --model "$dir" --ids 2,50,7,41,5 --device "$device" --json \
                > "$OUT/$fixture-$device.json" 2> "$OUT/$fixture-$device.err"
        done
        if python3 - "$OUT/$fixture-cpu.json" "$OUT/$fixture-$DEV.json" "$F32_TOL" <<'EOF'; then pass "families $fixture"; else fail families "$fixture on $DEV differs from the CPU by more than $F32_TOL, or did not run"; fi
import json, sys
a, b = (json.load(open(p))["logprobs"] for p in sys.argv[1:3])
worst = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) and a else float("inf")
print(f"  largest log-probability difference: {worst:.2e}")
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
EOF
    done
fi

if wanted bench; then
    step "bench model --sizes 13b --dtype f16 on $DEV: decode ×floor <= $FLOOR_MAX"
    if [[ $mode == gpu ]]; then
        if timeout 600 "$BIN" bench model --sizes 13b --dtype f16 --device cuda --batches 1,8 --json \
            > "$OUT/bench-13b.json" && python3 - "$OUT/bench-13b.json" "$FLOOR_MAX" <<'EOF'; then pass bench; else fail bench "decode over the floor above $FLOOR_MAX, below 1 (a floor measured wrong), or the benchmark failed"; fi
import json, sys
rows, limit = json.load(open(sys.argv[1])), float(sys.argv[2])
for r in rows:
    print(f"  {r.get('size')} batch {r.get('batch')}: decode {r['decode_ms']:.2f} ms, floor {r['floor_ms']:.2f} ms, ×floor {r['decode_over_floor']:.2f}")
# A decode faster than the floor means the floor is wrong (the bandwidth
# measured too low), and the check could not fail: that fails too.
if any(r["decode_over_floor"] < 1 for r in rows):
    print("  decode is faster than the floor: the measured bandwidth is below the card's, so the floor says nothing")
sys.exit(0 if rows and all(1 <= r["decode_over_floor"] <= limit for r in rows) else 1)
EOF
    else
        echo "skipped on the CPU: 13B weights in f16 need 26 GB"
    fi
fi

if wanted round; then
    step "bench round (host work per round) on $DEV"
    if "$BIN" bench round --help > /dev/null 2>&1; then
        # shellcheck disable=SC2086
        if timeout 600 "$BIN" bench round ${GPU_CHECK_ROUND_ARGS:-} > "$OUT/bench-round.txt" 2>&1; then
            cat "$OUT/bench-round.txt"
            pass round
        else
            tail -n 20 "$OUT/bench-round.txt"
            fail round "bench round failed"
        fi
    else
        echo "skipped: this binary has no \`bench round\`"
    fi
fi

step "done"
if ((${#failures[@]})); then
    echo "gpu-check: ${#failures[@]} failed: ${failures[*]}"
    exit 1
fi
echo "gpu-check: every check passed"
