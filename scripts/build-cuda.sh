#!/usr/bin/env bash
# Builds specbench with CUDA on a machine with no GPU and no system CUDA:
# nvcc and the CUDA 13.0 libraries come from PyPI wheels in a virtualenv,
# arranged into a toolkit-shaped CUDA_HOME; kernels are compiled for
# CUDA_COMPUTE_CAP (default 90: H100/H200). cudarc loads the driver
# libraries at run time, so linking only needs a stub libcuda.so.
#
# With a normal CUDA install, none of this is needed:
#     CUDA_COMPUTE_CAP=90 cargo build --release --features cuda
#
# Output: target/cuda/release/specbench and specbench-cuda.xz beside it
# (about 8 MB: what the device tool can carry). At run time the binary needs
# libcuda.so.1 (the driver), libcublas.so.13, libcudart.so.13 and
# libcurand.so.10, e.g. from a Python environment's nvidia/cu13/lib:
#     LD_LIBRARY_PATH=.../site-packages/nvidia/cu13/lib ./specbench …
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${CUDA_VENV:-.cuda-venv}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
# Pin 13.0.x: PTX from a newer nvcc fails on driver 580 (UNSUPPORTED_PTX_VERSION).
WHEELS="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85
nvidia-cublas==13.0.0.19 nvidia-curand==10.4.0.35"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# shellcheck disable=SC2086
"$VENV/bin/pip" install --quiet $WHEELS
CU=$("$VENV/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
[ -x "$CU/bin/nvcc" ] || { echo "error: nvcc not found under $CU/bin" >&2; exit 1; }

# A toolkit-shaped CUDA_HOME of links into the wheels.
HOME_DIR=$PWD/target/cuda-home
rm -rf "$HOME_DIR"
mkdir -p "$HOME_DIR/targets/x86_64-linux" "$HOME_DIR/lib64"
ln -s "$CU/bin" "$HOME_DIR/bin"
ln -s "$CU/include" "$HOME_DIR/include"
ln -s "$CU/nvvm" "$HOME_DIR/nvvm"
ln -s "$CU/include" "$HOME_DIR/targets/x86_64-linux/include"
ln -s "$HOME_DIR/lib64" "$HOME_DIR/targets/x86_64-linux/lib"
for lib in "$CU"/lib/*.so*; do
    ln -sf "$lib" "$HOME_DIR/lib64/$(basename "$lib")"
    # Unversioned names (libcublas.so → libcublas.so.13) for the linker.
    base=$(basename "$lib" | sed -E 's/(\.so)\..*/\1/')
    [ -e "$HOME_DIR/lib64/$base" ] || ln -s "$lib" "$HOME_DIR/lib64/$base"
done
# The wheels carry no driver. candle links the driver API (-lcuda), so the
# linker needs its symbols: a stub defines every cu* name in cuda.h, with
# the driver's soname, so that at run time the real libcuda.so.1 is loaded.
if [ ! -e "$HOME_DIR/lib64/libcuda.so" ]; then
    grep -oE '\bcu[A-Z][A-Za-z0-9_]*\b' "$CU/include/cuda.h" | sort -u \
        | sed 's/.*/int &(void) { return 999; }/' > "$HOME_DIR/cuda_stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$HOME_DIR/lib64/libcuda.so" "$HOME_DIR/cuda_stub.c"
fi

export CUDA_HOME=$HOME_DIR CUDA_PATH=$HOME_DIR
export PATH=$HOME_DIR/bin:$PATH
export LIBRARY_PATH=$HOME_DIR/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$HOME_DIR/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvcc --version | tail -2

cargo build --release --locked --features cuda --target-dir target/cuda
xz -T0 -6 -c target/cuda/release/specbench > target/cuda/release/specbench-cuda.xz
ls -la target/cuda/release/specbench target/cuda/release/specbench-cuda.xz
