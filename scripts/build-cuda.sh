#!/usr/bin/env bash
# Builds specbench with CUDA on a machine with no GPU and no system CUDA:
# nvcc and the CUDA libraries come from PyPI wheels in a virtualenv,
# arranged into a toolkit-shaped CUDA_HOME. cudarc loads the driver
# libraries at run time, so linking only needs a stub libcuda.so.
#
#   CUDA_VERSION=13 (default): CUDA 13.0 wheels; the binary needs a driver
#     >= 580 (PTX ISA 9.0) and libcublas.so.13 / libcudart.so.13.
#   CUDA_VERSION=12: CUDA 12.2 wheels; a driver >= 535 (PTX ISA 8.2: the
#     535 and 550 drivers many clusters run) and libcublas.so.12.
#
# Kernels: candle compiles its kernels to PTX for CUDA_COMPUTE_CAP (one
# value; candle's build takes no list). The default, 80, gives compute_80
# PTX: it runs on A100 (sm_80) and the driver JIT-compiles it for H100/H200
# (sm_90) and later at first load. 90 would give compute_90a PTX (cudaforge
# adds the arch-specific 'a'), which runs on sm_90 only — never on an A100.
# See docs/cuda.md.
#
# With a normal CUDA install, none of this is needed:
#     CUDA_COMPUTE_CAP=80 cargo build --release --features cuda
#
# Output: target/cuda/release/specbench and specbench-cuda.xz beside it
# (about 10 MB: what the device tool can carry). With BUILD_TESTS=1 also the
# integration-test binary, built with `--features cuda --no-run`, as
# target/cuda/release/it-cuda(.xz) for scripts/gpu-check.sh (so the GPU
# machine needs no Rust toolchain). At run time the binary needs libcuda.so.1
# (the driver) and the wheels' libraries, e.g.
#     LD_LIBRARY_PATH=.../site-packages/nvidia/cu13/lib ./specbench …
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${CUDA_VENV:-.cuda-venv}
CUDA_VERSION=${CUDA_VERSION:-13}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80}
case "$CUDA_VERSION" in
13)
    # Pin 13.0.x: PTX from a newer nvcc fails on driver 580 (UNSUPPORTED_PTX_VERSION).
    WHEELS="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85
nvidia-cublas==13.0.0.19 nvidia-curand==10.4.0.35"
    ;;
12)
    # Pin 12.2.x: its PTX (ISA 8.2) loads on driver 535 and later.
    WHEELS="nvidia-cuda-nvcc-cu12==12.2.140 nvidia-cuda-runtime-cu12==12.2.140
nvidia-cuda-nvrtc-cu12==12.2.140 nvidia-cuda-cccl-cu12==12.2.140
nvidia-cublas-cu12==12.2.5.6 nvidia-curand-cu12==10.3.3.141"
    ;;
*)
    echo "error: CUDA_VERSION=$CUDA_VERSION: use 12 (driver >= 535) or 13 (driver >= 580)" >&2
    exit 2
    ;;
esac
VENV=$VENV-cu$CUDA_VERSION

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# shellcheck disable=SC2086
"$VENV/bin/pip" install --quiet $WHEELS
NV=$("$VENV/bin/python" -c 'import nvidia; print(list(nvidia.__path__)[0])')

# A toolkit-shaped CUDA_HOME of links into the wheels.
HOME_DIR=$PWD/target/cuda-home
rm -rf "$HOME_DIR"
mkdir -p "$HOME_DIR/targets/x86_64-linux" "$HOME_DIR/lib64"
if [ "$CUDA_VERSION" = 13 ]; then
    # CUDA 13 wheels share one tree, nvidia/cu13.
    CU=$NV/cu13
    [ -x "$CU/bin/nvcc" ] || { echo "error: nvcc not found under $CU/bin" >&2; exit 1; }
    ln -s "$CU/bin" "$HOME_DIR/bin"
    ln -s "$CU/include" "$HOME_DIR/include"
    ln -s "$CU/nvvm" "$HOME_DIR/nvvm"
    LIB_DIRS=("$CU/lib")
else
    # CUDA 12 wheels have a tree each (nvidia/cuda_nvcc, nvidia/cublas, …):
    # merged here. nvcc finds its include/ and nvvm/ beside its own real
    # path, so its bin/ is copied rather than linked.
    [ -x "$NV/cuda_nvcc/bin/nvcc" ] || { echo "error: nvcc not found under $NV/cuda_nvcc/bin" >&2; exit 1; }
    cp -rL "$NV/cuda_nvcc/bin" "$HOME_DIR/bin"
    ln -s "$NV/cuda_nvcc/nvvm" "$HOME_DIR/nvvm"
    mkdir -p "$HOME_DIR/include"
    LIB_DIRS=()
    for tree in "$NV"/*/; do
        if [ -d "$tree/include" ]; then
            for entry in "$tree"include/*; do
                [ -e "$HOME_DIR/include/$(basename "$entry")" ] || ln -s "$entry" "$HOME_DIR/include/"
            done
        fi
        [ -d "$tree/lib" ] && LIB_DIRS+=("$tree/lib")
    done
fi
ln -s "$HOME_DIR/include" "$HOME_DIR/targets/x86_64-linux/include"
ln -s "$HOME_DIR/lib64" "$HOME_DIR/targets/x86_64-linux/lib"
for dir in "${LIB_DIRS[@]}"; do
    for lib in "$dir"/*.so*; do
        [ -e "$lib" ] || continue
        ln -sf "$lib" "$HOME_DIR/lib64/$(basename "$lib")"
        # Unversioned names (libcublas.so → libcublas.so.13) for the linker.
        base=$(basename "$lib" | sed -E 's/(\.so)\..*/\1/')
        [ -e "$HOME_DIR/lib64/$base" ] || ln -s "$lib" "$HOME_DIR/lib64/$base"
    done
done
# The wheels carry no driver. candle links the driver API (-lcuda), so the
# linker needs its symbols: a stub defines every cu* name in cuda.h, with
# the driver's soname, so that at run time the real libcuda.so.1 is loaded.
if [ ! -e "$HOME_DIR/lib64/libcuda.so" ]; then
    grep -oE '\bcu[A-Z][A-Za-z0-9_]*\b' "$HOME_DIR/include/cuda.h" | sort -u \
        | sed 's/.*/int &(void) { return 999; }/' > "$HOME_DIR/cuda_stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$HOME_DIR/lib64/libcuda.so" "$HOME_DIR/cuda_stub.c"
fi

export CUDA_HOME=$HOME_DIR CUDA_PATH=$HOME_DIR
export PATH=$HOME_DIR/bin:$PATH
export LIBRARY_PATH=$HOME_DIR/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$HOME_DIR/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvcc --version | tail -2

echo "CUDA $CUDA_VERSION, kernels for CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"

cargo build --release --locked --features cuda --target-dir target/cuda
xz -T0 -6 -c target/cuda/release/specbench > target/cuda/release/specbench-cuda.xz
ls -la target/cuda/release/specbench target/cuda/release/specbench-cuda.xz
if [ "${BUILD_TESTS:-0}" = 1 ]; then
    # The integration tests with CUDA (golden models and the cache on the
    # device: SPECBENCH_TEST_DEVICE=cuda), built but not run.
    it=$(cargo test --release --locked --features cuda --target-dir target/cuda --test it --no-run \
        --message-format=json | sed -n 's/.*"executable":"\([^"]*\/it-[^"]*\)".*/\1/p' | tail -n 1)
    [ -x "$it" ] || { echo "error: no integration-test binary was built" >&2; exit 1; }
    cp "$it" target/cuda/release/it-cuda
    xz -T0 -6 -c target/cuda/release/it-cuda > target/cuda/release/it-cuda.xz
    ls -la target/cuda/release/it-cuda target/cuda/release/it-cuda.xz
fi
