#!/usr/bin/env bash
# Times llama.cpp and specbench on the same GGUF files and writes one table:
# decode ms/token, prompt ms/token, calls of 12 and 48 rows with the last row's
# logits (a prompt) and with every row's (a verification), at 1 and 2 threads,
# with specbench's time over llama.cpp's per row (docs/benchmarks.md, "bench
# model").
#
#   scripts/bench-vs-llamacpp.sh                 # SmolLM2 Q4_1 + its Q4_0, Q8_0
#   scripts/bench-vs-llamacpp.sh --build-only    # only build llama.cpp
#   MODELS="a.gguf b.gguf" scripts/bench-vs-llamacpp.sh
#
# llama.cpp is built from the sources the PyPI package llama-cpp-python ships
# (its vendor/llama.cpp; `pip download`, no other network), with cmake from
# PyPI, for AVX2 + FMA + F16C only (no AVX-512, not -march=native), so both
# programs run the same instruction sets. The build and the re-quantized files
# are cached under specbench's cache folder ($SPECBENCH_CACHE, else
# $XDG_CACHE_HOME/specbench, else ~/.cache/specbench); a second call reuses them.
#
# Each measurement alternates the two programs (llama.cpp, then specbench, then
# again) ROUNDS times and keeps each one's median, so a machine whose load
# drifts slows both alike. The table goes to stdout and to
# $CACHE/llamacpp/bench-<date>.md, with the machine's load (uptime) beside it.
set -euo pipefail

PACKAGE=${LLAMA_CPP_PYTHON:-llama-cpp-python==0.3.16}
ROUNDS=${ROUNDS:-3}
PROMPT=${PROMPT:-64}
STEPS=${STEPS:-16}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${SPECBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specbench}
ROOT="$CACHE/llamacpp"
PYTHON=${PYTHON:-python3}
SPECBENCH=${SPECBENCH:-$HERE/target/release/specbench}

die() { echo "error: $*" >&2; exit 1; }

build_llamacpp() {
    local build="$ROOT/build"
    if [[ -x "$build/bin/llama-bench" && -x "$build/bin/llama-quantize" ]]; then
        return
    fi
    mkdir -p "$ROOT"
    "$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip: install python3-pip"
    if [[ ! -d "$ROOT/src" ]]; then
        echo "downloading $PACKAGE's sources (pip download) ..." >&2
        rm -rf "$ROOT/sdist" && mkdir -p "$ROOT/sdist"
        "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python "$PACKAGE" -d "$ROOT/sdist" \
            >"$ROOT/pip.log" 2>&1 || die "pip download $PACKAGE failed (is PyPI reachable?): $(tail -n 1 "$ROOT/pip.log")"
        mkdir -p "$ROOT/unpacked"
        tar -xzf "$ROOT"/sdist/*.tar.gz -C "$ROOT/unpacked"
        local vendor
        vendor=$(ls -d "$ROOT"/unpacked/*/vendor/llama.cpp) || die "$PACKAGE has no vendor/llama.cpp"
        mv "$vendor" "$ROOT/src"
        rm -rf "$ROOT/unpacked" "$ROOT/sdist"
    fi
    local cmake=cmake
    if ! command -v cmake >/dev/null; then
        [[ -x "$ROOT/venv/bin/cmake" ]] || {
            "$PYTHON" -m venv "$ROOT/venv" && "$ROOT/venv/bin/pip" install --quiet cmake
        } || die "could not install cmake from PyPI into $ROOT/venv"
        cmake="$ROOT/venv/bin/cmake"
    fi
    echo "building llama-bench and llama-quantize (AVX2+FMA+F16C, no AVX-512) ..." >&2
    "$cmake" -S "$ROOT/src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_BMI2=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >"$ROOT/cmake.log" 2>&1 \
        || die "cmake configure failed: see $ROOT/cmake.log"
    "$cmake" --build "$build" --target llama-bench llama-quantize -j "${JOBS:-$(nproc)}" \
        >>"$ROOT/cmake.log" 2>&1 || die "llama.cpp build failed: see $ROOT/cmake.log"
}

# A re-quantization of the SmolLM2 file (cached).
requantized() {
    local source=$1 type=$2
    local out="$ROOT/SmolLM2-135M-Instruct.$type.gguf"
    if [[ ! -f "$out" ]]; then
        "$ROOT/build/bin/llama-quantize" --allow-requantize "$source" "$out" "$type" \
            >"$ROOT/quantize.log" 2>&1 || die "llama-quantize to $type failed: see $ROOT/quantize.log"
    fi
    echo "$out"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# The measures, in the order both programs print them.
MEASURES="decode ms/token|prompt ms/token|12 rows, last logits ms|48 rows, last logits ms|12 rows, all logits ms|48 rows, all logits ms"

# llama.cpp: ms per token of tg$STEPS and pp$PROMPT; ms per call of pp12 and
# pp48 (only the last row's logits, as a prompt), and of pp12 and pp48 after
# $PROMPT tokens with every row's logits (`-embd 1` makes every token an
# output; with no pooling the head still runs on each, as a verification
# call needs).
llama_once() {
    local model=$1 threads=$2
    local last all
    last=$("$ROOT/build/bin/llama-bench" -m "$model" -t "$threads" -r 1 -o json \
        -p "$PROMPT,12,48" -n "$STEPS" 2>/dev/null)
    all=$("$ROOT/build/bin/llama-bench" -m "$model" -t "$threads" -r 1 -o json \
        -p 12,48 -n 0 -d "$PROMPT" -embd 1 2>/dev/null)
    "$PYTHON" -c '
import json, sys
def per(rows):
    out = {}
    for r in rows:
        ms = 1000.0 / r["avg_ts"]  # ms per token
        out["decode" if r["n_gen"] else r["n_prompt"]] = ms
    return out
last, every, p = per(json.loads(sys.argv[1])), per(json.loads(sys.argv[2])), int(sys.argv[3])
print(last["decode"], last[p], last[12] * 12, last[48] * 48, every[12] * 12, every[48] * 48)
' "$last" "$all" "$PROMPT"
}

# specbench: the same six, from `bench model --json` (its quantized row):
# decode and prompt after $PROMPT tokens, prompts of 12 and 48 tokens
# (prefill: last row's logits), and verification calls of 2 × 6 and 8 × 6
# rows after $PROMPT tokens (every row's logits).
specbench_once() {
    local model=$1 threads=$2
    bench() {
        "$SPECBENCH" bench model --model "$model" --matmul quantized --threads "$threads" --batches 1 \
            --repeats 1 --draft-len 5 --json "$@" 2>/dev/null
    }
    local main rows48 prompt12 prompt48
    main=$(bench --prompt "$PROMPT" --steps "$STEPS" --drafts 2)
    rows48=$(bench --prompt "$PROMPT" --steps 1 --drafts 8)
    prompt12=$(bench --prompt 12 --steps 1 --drafts 1)
    prompt48=$(bench --prompt 48 --steps 1 --drafts 1)
    "$PYTHON" -c '
import json, sys
pick = lambda text: next(r for r in json.loads(text) if r["size"] != "dequantized")
main, r48, p12, p48 = (pick(t) for t in sys.argv[1:5])
p = int(sys.argv[5])
print(main["decode_ms"], main["prefill_ms"] / p, p12["prefill_ms"], p48["prefill_ms"],
      main["verify_ms"], r48["verify_ms"])
' "$main" "$rows48" "$prompt12" "$prompt48" "$PROMPT"
}

measure() {
    local model=$1 threads=$2
    local l s
    l=$(mktemp) s=$(mktemp)
    for _ in $(seq "$ROUNDS"); do
        llama_once "$model" "$threads" >>"$l"
        specbench_once "$model" "$threads" >>"$s"
    done
    local name
    name=$(basename "$model" .gguf)
    for col in 1 2 3 4 5 6; do
        local what lm sm
        what=$(echo "$MEASURES" | cut -d'|' -f"$col")
        lm=$(awk -v c="$col" '{print $c}' "$l" | median)
        sm=$(awk -v c="$col" '{print $c}' "$s" | median)
        printf '| %s | %s | %s | %.2f | %.2f | %.2f |\n' "$name" "$threads" "$what" "$lm" "$sm" \
            "$(awk -v a="$sm" -v b="$lm" 'BEGIN {print a / b}')"
    done
    rm -f "$l" "$s"
}

main() {
    build_llamacpp
    [[ "${1:-}" == "--build-only" ]] && { echo "$ROOT/build/bin"; return; }
    [[ -x "$SPECBENCH" ]] || die "no specbench binary at $SPECBENCH: run cargo build --release (or set SPECBENCH)"
    local models=${MODELS:-}
    if [[ -z "$models" ]]; then
        local q41
        q41=$("$HERE/scripts/fetch-smollm2.sh")
        models="$q41 $(requantized "$q41" Q4_0) $(requantized "$q41" Q8_0)"
    fi
    local out
    out="$ROOT/bench-$(date -u +%Y-%m-%dT%H%M).md"
    {
        echo "llama.cpp ($PACKAGE's vendor/llama.cpp, AVX2+FMA+F16C) vs specbench (quantized matmul);"
        echo "median of $ROUNDS alternated runs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;"
        echo "load before: $(uptime | sed 's/.*load average/load average/')"
        echo
        echo "| model | threads | measure | llama.cpp | specbench | ratio |"
        echo "|---|---|---|---|---|---|"
        for model in $models; do
            for threads in 1 2; do
                measure "$model" "$threads"
            done
        done
        echo
        echo "load after: $(uptime | sed 's/.*load average/load average/')"
    } | tee "$out"
}

main "$@"
