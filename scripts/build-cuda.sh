#!/usr/bin/env bash
# Builds specbench with CUDA (`--features cuda`) into target/cuda/release.
#
#   CUDA_VERSION=13 (default): on a machine with no GPU and no system CUDA.
#     nvcc and the CUDA 13.0 libraries come from PyPI wheels in a virtualenv
#     (.cuda-venv-cu13), arranged into a toolkit-shaped CUDA_HOME with a stub
#     libcuda.so (cudarc loads the real driver at run time). The binary needs
#     a driver >= 580 (PTX ISA 9.0) and libcublas.so.13 / libcudart.so.13.
#   CUDA_VERSION=12: with a CUDA 12.x toolkit already installed (a cluster's
#     `module load cuda/12.2`; nvcc on PATH or under CUDA_HOME). PyPI has no
#     CUDA 12 nvcc: the nvidia-cuda-nvcc-cu12 wheels (12.2 to 12.8) carry
#     ptxas alone. The binary needs a driver at least as new as that toolkit
#     (12.2: >= 535, 12.4: >= 550) and its libcublas.so.12. Linking uses the
#     toolkit's stub libcuda.so, so a login node without a driver builds it.
#
# Kernels: candle compiles its kernels to PTX for CUDA_COMPUTE_CAP (one
# value; candle's build takes no list). The default, 80, gives compute_80
# PTX: it runs on A100 (sm_80), and the driver JIT-compiles it for H100/H200
# (sm_90) and later at first load. 90 would give compute_90a PTX (cudaforge
# adds the arch-specific 'a'), which runs on sm_90 only — never on an A100.
# See docs/cuda.md.
#
# Output: target/cuda/release/specbench and specbench-cuda.xz beside it
# (about 10 MB: what the device tool can carry). With BUILD_TESTS=1 also the
# integration-test binary, built with `--features cuda --no-run`, as
# target/cuda/release/it-cuda(.xz) for scripts/gpu-check.sh (so the GPU
# machine needs no Rust toolchain). At run time the binary needs libcuda.so.1
# (the driver) and the CUDA libraries, e.g. from a Python environment's
#     LD_LIBRARY_PATH=.../site-packages/nvidia/cu13/lib ./specbench …
set -euo pipefail
cd "$(dirname "$0")/.."

CUDA_VERSION=${CUDA_VERSION:-13}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80}

wheels_cuda_13() {
    local venv=${CUDA_VENV:-.cuda-venv-cu13}
    # Pin 13.0.x: PTX from a newer nvcc fails on driver 580 (UNSUPPORTED_PTX_VERSION).
    local wheels="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85
nvidia-cublas==13.0.0.19 nvidia-curand==10.4.0.35"
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
    fi
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet $wheels
    local cu
    cu=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
    [ -x "$cu/bin/nvcc" ] || { echo "error: nvcc not found under $cu/bin" >&2; exit 1; }

    # A toolkit-shaped CUDA_HOME of links into the wheels.
    local home=$PWD/target/cuda-home
    rm -rf "$home"
    mkdir -p "$home/targets/x86_64-linux" "$home/lib64"
    ln -s "$cu/bin" "$home/bin"
    ln -s "$cu/include" "$home/include"
    ln -s "$cu/nvvm" "$home/nvvm"
    ln -s "$cu/include" "$home/targets/x86_64-linux/include"
    ln -s "$home/lib64" "$home/targets/x86_64-linux/lib"
    for lib in "$cu"/lib/*.so*; do
        ln -sf "$lib" "$home/lib64/$(basename "$lib")"
        # Unversioned names (libcublas.so → libcublas.so.13) for the linker.
        base=$(basename "$lib" | sed -E 's/(\.so)\..*/\1/')
        [ -e "$home/lib64/$base" ] || ln -s "$lib" "$home/lib64/$base"
    done
    # The wheels carry no driver. candle links the driver API (-lcuda), so the
    # linker needs its symbols: a stub defines every cu* name in cuda.h, with
    # the driver's soname, so that at run time the real libcuda.so.1 is loaded.
    if [ ! -e "$home/lib64/libcuda.so" ]; then
        grep -oE '\bcu[A-Z][A-Za-z0-9_]*\b' "$cu/include/cuda.h" | sort -u \
            | sed 's/.*/int &(void) { return 999; }/' > "$home/cuda_stub.c"
        cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib64/libcuda.so" "$home/cuda_stub.c"
    fi
    export CUDA_HOME=$home CUDA_PATH=$home
    export PATH=$home/bin:$PATH
    export LIBRARY_PATH=$home/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    nvcc --version | tail -2
    echo "CUDA 13.0 wheels; kernels for CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP; the binary needs a driver >= 580"
}

installed_cuda_12() {
    local nvcc
    nvcc=$(command -v nvcc || true)
    if [[ -z $nvcc && -n ${CUDA_HOME:-} ]]; then nvcc=$CUDA_HOME/bin/nvcc; fi
    [[ -n $nvcc && -x $nvcc ]] || {
        echo "error: CUDA_VERSION=12 needs an installed CUDA 12 toolkit (nvcc on PATH or under CUDA_HOME; e.g. module load cuda/12.2)" >&2
        exit 2
    }
    local release
    release=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
    [[ $release == 12.* ]] || {
        echo "error: $nvcc is CUDA ${release:-of unknown version}, not 12.x: load a CUDA 12 toolkit, or use CUDA_VERSION=13" >&2
        exit 2
    }
    CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$nvcc")")")}
    export CUDA_HOME CUDA_PATH=$CUDA_HOME
    PATH=$(dirname "$nvcc"):$PATH
    # The driver API at link time: the toolkit's stub where no driver is installed.
    export LIBRARY_PATH=$CUDA_HOME/lib64:$CUDA_HOME/lib64/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}
    echo "CUDA $release from $CUDA_HOME; kernels for CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP; the binary needs a driver for CUDA >= $release"
}

case "$CUDA_VERSION" in
13) wheels_cuda_13 ;;
12) installed_cuda_12 ;;
*)
    echo "error: CUDA_VERSION=$CUDA_VERSION: use 13 (PyPI wheels, driver >= 580) or 12 (an installed CUDA 12 toolkit)" >&2
    exit 2
    ;;
esac

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
