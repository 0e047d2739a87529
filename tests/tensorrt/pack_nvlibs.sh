#!/usr/bin/env bash
# NVIDIA's cuBLAS and cuDNN for the GPU test host, whose TensorRT (PyPI's full wheel) comes with
# stubs in their place (docs/development.md#real-tensorrt-on-an-x86-gpu-host). Downloads the two
# wheels from the package index, keeps the runtime libraries, packs each set as a zstd tar and
# cuts it into 60 MB parts, one per transfer:
#   OUT/cublas/part*  OUT/cublas.sha256   (libcublas.so.N, libcublasLt.so.N)
#   OUT/cudnn/part*   OUT/cudnn.sha256    (libcudnn.so.N, libcudnn_*_infer.so.N)
# On the host, copy each part to /tmp/nvlibs/NAME/ and each .sha256 to /tmp/nvlibs/, then run
# NVLIBS="/tmp/nvlibs/cublas /tmp/nvlibs/cudnn" bash tests/tensorrt/h200.sh ...
# The defaults are the CUDA 11 builds TensorRT 8.5.2 loads (verified 2026-12-07); the 8.6.0 wheel
# loads CUDA 12's cuBLAS: CUBLAS_WHEEL=nvidia-cublas-cu12==... (not run yet).
# Usage: bash tests/tensorrt/pack_nvlibs.sh [OUT]   (default OUT: .nvlibs, ignored by git)
set -euo pipefail
OUT=${1:-.nvlibs}
CUBLAS_WHEEL=${CUBLAS_WHEEL:-nvidia-cublas-cu11==11.11.3.6}
CUDNN_WHEEL=${CUDNN_WHEEL:-nvidia-cudnn-cu11==8.6.0.163}
PIP=${PIP:-.venv/bin/pip}
command -v zstd >/dev/null || { echo "pack_nvlibs.sh: needs zstd (apt-get install zstd)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pack() {  # NAME WHEEL-SPEC FILE-PATTERN...: the wheel's lib/ files matching a pattern
  local name=$1 spec=$2
  shift 2
  echo "$name: downloading $spec" >&2
  "$PIP" download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.10 -d "$work/$name" "$spec"
  (cd "$work/$name" && unzip -q -o ./*.whl 'nvidia/*/lib/*')
  local lib=("$work/$name"/nvidia/*/lib) files=() pattern
  for pattern in "$@"; do
    while IFS= read -r file; do files+=("$file"); done < <(cd "${lib[0]}" && ls $pattern)
  done
  [ ${#files[@]} -gt 0 ] || { echo "$name: no $* in $spec" >&2; exit 1; }
  echo "$name: packing ${files[*]} (zstd -19, a few minutes)" >&2
  (cd "${lib[0]}" && tar -c "${files[@]}") | zstd -q -T0 -19 --long=27 > "$work/$name.tar.zst"
  rm -rf "${OUT:?}/$name" && mkdir -p "$OUT/$name"
  sha256sum "$work/$name.tar.zst" | cut -d' ' -f1 > "$OUT/$name.sha256"
  split -b 60000000 "$work/$name.tar.zst" "$OUT/$name/part"
  echo "$name: $(du -h "$work/$name.tar.zst" | cut -f1) in $(ls "$OUT/$name" | wc -l) parts under $OUT/$name" >&2
}

pack cublas "$CUBLAS_WHEEL" 'libcublas.so.*' 'libcublasLt.so.*'
pack cudnn "$CUDNN_WHEEL" 'libcudnn.so.*' 'libcudnn_*_infer.so.*'
