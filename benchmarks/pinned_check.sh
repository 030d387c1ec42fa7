#!/usr/bin/env bash
# The CPU benchmarks pinned to a few cores of a bigger machine (a stand-in for a small VM of the same
# CPU) that has neither the model files nor the peers' environments. Stages, in the order given:
#   prompt  bench prompt against llama-server on one GGUF file (the 1.5B's layout rebuilt from its
#           sketch, benchmarks/gguf_sketch.py; a llama-server binary built elsewhere for this CPU's ISA)
#   serve   bench serve against the same llama-server at 1 and 8 streams
#   offline bench throughput on the embedded model in bfloat16 and float32 (against transformers)
# Each stage runs under its own time limit and prints what it measures as it goes (bench prompt also
# writes its JSON after each length); the servers' logs and the kernels' calibrations go into one archive.
#
#   SKETCH=q15.npz LLAMA=/path/to/llama-server OUT_DIR=out/pinned benchmarks/pinned_check.sh
#
# SKETCH (or MODEL=a .gguf file) and LLAMA (for the prompt and serve stages), CORES (default 2: one
# logical CPU on each of that many physical cores), WHEELS (a folder of wheels to install first,
# offline), LENGTHS (default 2048,8192), PROMPT_S / SERVE_S / OFFLINE_S (stage limits, seconds), STAGES
# (default "prompt serve offline"), PY (default python3).
set -uo pipefail
PY=${PY:-python3}
OUT_DIR=${OUT_DIR:-out/pinned}
CORES=${CORES:-2}
LENGTHS=${LENGTHS:-2048,8192}
STAGES=${STAGES:-prompt serve offline}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
T0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }

case " $STAGES " in *" prompt "*|*" serve "*) : "${LLAMA:?set LLAMA=/path/to/llama-server (or STAGES=offline)}" ;; esac
# One logical CPU per physical core among those this process may use, the first CORES of them.
pick_cpus() {
  local seen="" cpus="" n=0 c core
  for c in $("$PY" -c 'import os; print(*sorted(os.sched_getaffinity(0)))'); do
    core=$(cat /sys/devices/system/cpu/cpu$c/topology/core_id 2>/dev/null)-$(cat /sys/devices/system/cpu/cpu$c/topology/physical_package_id 2>/dev/null)
    case " $seen " in *" $core "*) continue ;; esac
    seen="$seen $core"; cpus="$cpus${cpus:+,}$c"; n=$((n + 1))
    [ "$n" -ge "$CORES" ] && break
  done
  [ "$n" -ge "$CORES" ] || { echo "only $n physical cores available, CORES=$CORES" >&2; return 1; }
  echo "$cpus"
}
PIN=$(pick_cpus) || exit 1
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread" ; echo "pinned to CPUs $PIN"
[ -n "${WHEELS:-}" ] && "$PY" -m pip install -q --no-index --find-links "$WHEELS" fastapi uvicorn pydantic httpx \
  prometheus-client gguf 2>&1 | tail -3
MODEL=${MODEL:-/tmp/agent-engine-pinned.gguf}
if [ -n "${SKETCH:-}" ]; then "$PY" -m benchmarks.gguf_sketch expand "$SKETCH" "$MODEL" || exit 1; fi
mkdir -p "$OUT_DIR/logs"
"$PY" -c "from kernels.cpp_build import ops; ops(); from kernels import amx; print('kernels built;', amx.describe())" \
  2>&1 | tail -1   # built on every core, before the pinned runs
stamp ready
export OMP_NUM_THREADS=$CORES
for stage in $STAGES; do
  uptime
  case $stage in
    prompt)
      taskset -c "$PIN" timeout "${PROMPT_S:-420}" "$PY" -m benchmarks.prompt_speed --model "$MODEL" \
        --llama-server "$LLAMA" --lengths "$LENGTHS" --repeats 1 --json "$OUT_DIR/prompt.json" \
        --log-dir "$OUT_DIR/logs/prompt" 2>&1 | grep -v "^wrote" | tail -12 ;;
    serve)
      taskset -c "$PIN" timeout "${SERVE_S:-240}" "$PY" -m benchmarks.serve_load --model "$MODEL" --device cpu \
        --llama-server "$LLAMA" --concurrency 1,8 --max-tokens 64 --num-kv-blocks 512 --repeats 1 --no-progress \
        --plot "" --json "$OUT_DIR/serve.json" --log-dir "$OUT_DIR/logs/serve" 2>&1 | tail -8 ;;
    offline)
      for dtype in bfloat16 float32; do
        taskset -c "$PIN" timeout "${OFFLINE_S:-300}" "$PY" -m benchmarks.throughput --device cpu --dtype "$dtype" \
          --repeats 1 --no-progress --plot "" --json "$OUT_DIR/offline_$dtype.json" 2>&1 \
          | grep -E "^ *(agent-engine|transformers) \||engine / |machine during|^CPU:"
      done ;;
    *) echo "unknown stage $stage" ;;
  esac
  stamp "$stage done"
done
cp -r "$("$PY" -c 'from kernels.cpp_build import cache_dir; print(cache_dir())')/routes" "$OUT_DIR/logs/calibrations" 2>/dev/null
tar czf "$OUT_DIR/logs.tgz" -C "$OUT_DIR" logs 2>/dev/null && rm -rf "$OUT_DIR/logs"
