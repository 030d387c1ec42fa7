#!/usr/bin/env bash
# The CUDA path on a GPU machine, with a Python whose torch is a CUDA build (the project venv's torch is
# the CPU build): the gpu-marked tests (paged attention against its reference; greedy parity against
# transformers on the same GPU with prefix hits, chunking and preemption; bf16), then offline tokens/s
# on the GPU against transformers' generate on the same GPU (the embedded model in float32 and bf16),
# then bf16 at scale on a random checkpoint with Llama-3.1-8B's layers (`make-model --like`), each with
# its share of the GPU's measured matmul and bandwidth peaks, and decode with CUDA graphs against eager
# steps (`bench graphs`) on both models.
#   PY=python3 OUT_DIR=out/gpu_check LIKE=llama-3.1-8b benchmarks/gpu_check.sh
set -uo pipefail
PY=${PY:-python3}
OUT_DIR=${OUT_DIR:-out/gpu_check}
LIKE=${LIKE:-llama-3.1-8b}
SCALE_DIR=${SCALE_DIR:-/tmp/agent-engine-$LIKE}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
"$PY" -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())" \
  || exit 1
status=0
"$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels.py tests/test_parity.py 2>&1 \
  | tee "$OUT_DIR/gpu_tests.log" || status=1
bench() {  # name, then throughput flags
  local name=$1; shift
  "$PY" -m benchmarks.throughput --device cuda --no-progress --plot "" --json "$OUT_DIR/throughput_$name.json" \
    "$@" 2>&1 | grep -v "Loading weights" | tee "$OUT_DIR/throughput_$name.log" || status=1
}
graphs() {  # name, then bench graphs flags: CUDA graphs vs eager vs the gather path, side by side
  local name=$1; shift
  "$PY" -m benchmarks.decode_graphs --json "$OUT_DIR/graphs_$name.json" "$@" 2>&1 | grep -v "Loading weights" \
    | tee "$OUT_DIR/graphs_$name.log" || status=1
}
bench float32 --num-prompts 256 --repeats 2
bench bfloat16 --dtype bfloat16 --num-prompts 256 --repeats 2
graphs bfloat16 --streams 1,64,256 --max-tokens 64
if "$PY" -m agent_engine.cli.main make-model "$SCALE_DIR" --like "$LIKE" --device cuda; then
  bench "$LIKE" --dtype bfloat16 --model "$SCALE_DIR" --num-prompts 64 --repeats 2
  graphs "$LIKE" --model "$SCALE_DIR" --streams 1,64 --max-tokens 64
else
  status=1
fi
exit $status
