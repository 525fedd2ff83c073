#!/usr/bin/env bash
# The GPU path on a CUDA host (run by hand where a GPU machine is lent; CI has none):
#   1. examples/train.py over NCCL on one GPU under plain torchrun, n times;
#   2. the same program and arguments through `tx run -s local_cwd dist.ddp -j 1x1 --gpu 1`
#      with auto_set_cuda_visible_devices=True, n times (same seed: same accuracy expected);
#   3. what auto_set_cuda_visible_devices gives a replica (CUDA_VISIBLE_DEVICES), and the
#      warning when the app asks for more GPUs than the host has;
#   4. a run that resumes from the torch.distributed.checkpoint an earlier NCCL run wrote.
# Usage: bench/gpu_check.sh [N]   (WHEELS=DIR installs tx-core/tx-scheduler-local from wheels
# into /tmp/site first; OUT=DIR receives gpu.log and gpu.json)
set -u
N=${1:-3}
OUT=${OUT:-/tmp/tx-gpu-check}; mkdir -p "$OUT"
LOG="$OUT/gpu.log"; : >"$LOG"
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl || exit 1
  export PYTHONPATH=/tmp/site PATH="/tmp/site/bin:$PATH"
fi
PYBIN=$(dirname "$(python3 -c 'import sys; print(sys.executable)')")
export PATH="$PATH:$PYBIN" PYTHONUNBUFFERED=1
W=$(mktemp -d); export TX_STATE_DIR="$W/state" HOME="$W"
TRAIN="$PWD/examples/train.py"
ARGS=(--epochs 4 --checkpoint-dir "" --seed 0)
say() { echo "$*" | tee -a "$LOG"; }
timed() {  # timed NAME CMD...: wall seconds into $W/times, output into the log
  local t0 t1; t0=$(date +%s.%N); "${@:2}" >"$W/out" 2>&1; local rc=$?; t1=$(date +%s.%N)
  cat "$W/out" >>"$LOG"
  echo "$1 $(python3 -c "print(round($t1-$t0,2))") rc=$rc $(grep -o 'test_accuracy=[0-9.]* .*backend=[a-z]* device=[a-z:0-9]*' "$W/out" | sed 's/checkpoint=[^ ]* //')" | tee -a "$LOG" >>"$W/times"
}
say "== host"; nvidia-smi -L 2>&1 | tee -a "$LOG"
python3 -c "import torch, torch.distributed as d; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'devices', torch.cuda.device_count(), 'nccl', d.is_nccl_available() and torch.cuda.nccl.version())" 2>&1 | tee -a "$LOG"
tx --version 2>&1 | tee -a "$LOG"
say "== torchrun vs tx, n=$N each, alternating"
for i in $(seq "$N"); do
  timed torchrun torchrun --standalone --nproc_per_node 1 "$TRAIN" "${ARGS[@]}" --output-dir "$W/tr$i"
  timed tx tx run -s local_cwd -cfg auto_set_cuda_visible_devices=True dist.ddp -j 1x1 --gpu 1 \
    --script "$TRAIN" -- "${ARGS[@]}" --output-dir "$W/tx$i"
done
say "== CUDA_VISIBLE_DEVICES a replica gets"
printf 'import os\nprint("CUDA_VISIBLE_DEVICES=%%s" %% os.environ.get("CUDA_VISIBLE_DEVICES"))\n' >"$W/env.py"
tx run -s local_cwd -cfg auto_set_cuda_visible_devices=True dist.ddp -j 1x1 --gpu 1 --script "$W/env.py" 2>&1 | tee -a "$LOG" | grep -E "CUDA_VISIBLE|SUCCEEDED|FAILED"
say "-- 2 replicas x 1 GPU on a host with fewer (the warning; nothing set)"
tx run -s local_cwd -cfg auto_set_cuda_visible_devices=True dist.ddp -j 2x1 --gpu 1 --script "$W/env.py" 2>&1 | tee -a "$LOG" | grep -E -i "CUDA_VISIBLE|warn|requests|SUCCEEDED|FAILED"
say "== resume over NCCL from a torch.distributed.checkpoint"
tx run -s local_cwd -cfg auto_set_cuda_visible_devices=True dist.ddp -j 1x1 --gpu 1 --script "$TRAIN" -- \
  --epochs 2 --checkpoint-dir "$W/ck" --output-dir "$W/ck-out" 2>&1 | tee -a "$LOG" | grep -E "backend=|SUCCEEDED|FAILED"
tx run -s local_cwd -cfg auto_set_cuda_visible_devices=True dist.ddp -j 1x1 --gpu 1 --script "$TRAIN" -- \
  --epochs 3 --checkpoint-dir "$W/ck" --output-dir "$W/ck-out" 2>&1 | tee -a "$LOG" | grep -E "resumed|backend=|SUCCEEDED|FAILED"
say "== summary (wall seconds per run: median [min, max])"
python3 - "$W/times" "$OUT/gpu.json" <<'PY' | tee -a "$LOG"
import json, statistics, sys
rows = [ln.split(" ", 3) for ln in open(sys.argv[1]).read().splitlines()]
out = {}
for name in ("torchrun", "tx"):
    ts = [float(r[1]) for r in rows if r[0] == name]
    out[name] = {"n": len(ts), "median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts),
                 "runs": [" ".join(r[1:]) for r in rows if r[0] == name]}
    print(f"{name}: {out[name]['median_s']:.2f} s [{out[name]['min_s']:.2f}, {out[name]['max_s']:.2f}], n={len(ts)}")
    for r in out[name]["runs"]:
        print("   ", r)
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
