#!/usr/bin/env bash
# The `tensorrt` and `gpu` tests, the probe and the TensorRT host bench on the H200 GPU test host,
# with a real TensorRT 8.5.2 or 8.6.0 unpacked under .trt/ (run from the repository root there,
# after the .trt/cN parts were copied to /tmp/trt; see
# docs/development.md#real-tensorrt-on-an-x86-gpu-host). Results go to $OUT.
# TensorRT is made importable the way JetPack installs it, as a system package of the device's
# Python (a .pth in its site-packages), and the agent finds that Python through
# JETFLEET_TENSORRT_PYTHON, as the tensorrt_python setting would on a gateway.
set -uo pipefail
TAG=${1:?usage: h200.sh TAG [SRC], e.g. trt852 .trt852/src (default SRC: .trt/src)}
SRC=${2:-.trt/src}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export JETFLEET_FAMILY_RESULTS="$OUT/families-$TAG.jsonl"  # tests/tensorrt/test_model_families.py
bash "$SRC/build_and_run.sh" > "$OUT/$TAG-smoke.log" 2>&1 || { tail -40 "$OUT/$TAG-smoke.log"; exit 1; }
tail -5 "$OUT/$TAG-smoke.log"
# NVIDIA's real cuBLAS/cuBLASLt and cuDNN, as a JetPack has them (docs/development.md): NVLIBS
# names what tests/tensorrt/pack_nvlibs.sh made, each a folder of parts (checked against the
# DIR.sha256 beside it) or a whole zstd tar, unpacked over the stubs of the same names once
# TensorRT is unpacked.
for lib in ${NVLIBS:-}; do
  if [ -d "$lib" ]; then
    cat "$lib"/part* > "$lib.tar.zst" || exit 1
    if [ -f "$lib.sha256" ]; then
      echo "$(cat "$lib.sha256")  $lib.tar.zst" | sha256sum -c --quiet || exit 1
    fi
    lib=$lib.tar.zst
  fi
  "$SRC/zstd" -d -q --long=27 -c "$lib" | tar -x -C /tmp/trt/pkg/tensorrt || exit 1
done
[ -z "${NVLIBS:-}" ] || ls -l /tmp/trt/pkg/tensorrt/libcu*.so.* | tee "$OUT/$TAG-nvlibs.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")
echo /tmp/trt/pkg > "$SITE/jetfleet-trt-h200.pth"
export PYTHONPATH=/tmp/site:$PWD JETFLEET_TENSORRT_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/$TAG-gpu.txt"
python3 -m agent.trt_host.probe 2>&1 | tee -a "$OUT/$TAG-gpu.txt"
python3 - <<'PY' 2>&1 | grep PLAN-HEADER | tee -a "$OUT/$TAG-gpu.txt"
import tensorrt as trt
from agent.trt_host.build import BuildOptions, build
from agent.trt_host.versions import Capabilities
from bench.host_overhead import pooling_model
plan = build(trt, Capabilities.for_version(trt.__version__), pooling_model(),
             BuildOptions(disabled_tactic_sources=("CUBLAS", "CUBLAS_LT", "CUDNN"))).plan
print("PLAN-HEADER", trt.__version__, bytes(memoryview(plan)[:32]).hex())
PY
timeout 420 python3 -m pytest -p no:cacheprovider -o addopts="" -W ignore::pytest.PytestConfigWarning \
  -v -s -rs --timeout 300 ${TESTS:-tests/tensorrt tests/gpu} 2>&1 | tee "$OUT/$TAG-pytest.log" | grep -E "PASS|FAIL|ERROR|SKIP|ZOO|FAMILY|passed|failed|Error" | tail -70
[ -n "${SKIP_BENCH:-}" ] || timeout 150 python3 -m bench.trt_host_gpu --requests ${REQUESTS:-2000} --out "$OUT" 2>&1 | tail -15
# the same machine's CPU transport (ONNX Runtime backend), to tell the machine's IPC cost from TensorRT's
[ -n "${SKIP_BENCH:-}" ] || timeout 100 python3 -m bench.host_overhead --requests ${REQUESTS:-2000} --out "$OUT" 2>&1 | tail -8
# device memory and time per swap, the shared activation arena against cudaMalloc/cudaFree per swap
[ -n "${SKIP_BENCH:-}" ] || timeout 60 python3 -m bench.cuda_arena --out "$OUT" 2>&1 | tail -6
# Refit under NumPy 1 too (8.x matches dtypes by identity, agent/trt_host/refit.py): when .np1/
# holds a NumPy 1 wheel for this Python, rerun the refit tests with it first on every path.
if ls .np1/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/np1 .np1/*.whl
  echo "import sys; sys.path.insert(0, '/tmp/np1')" > "$SITE/00-jetfleet-numpy1.pth"
  python3 -c "import numpy; print('numpy', numpy.__version__)" | tee "$OUT/$TAG-numpy1.log"
  timeout 200 python3 -m pytest -p no:cacheprovider -o addopts="" -W ignore::pytest.PytestConfigWarning \
    -v -rs --timeout 150 -k refit tests/tensorrt 2>&1 | tee -a "$OUT/$TAG-numpy1.log" | grep -E "PASS|FAIL|ERROR|passed|failed|^E " | tail -20
  rm -f "$SITE/00-jetfleet-numpy1.pth"
fi
