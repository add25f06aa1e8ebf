#!/usr/bin/env bash
# The GPU-metrics fixture (run on the GPU host from the project root, after `source .gpu/on-gpu.sh`):
# a short cell (an fp32 add over 256 MiB, a bf16 GEMM, each a few times) under nsys with GPU metrics
# sampled at 10 kHz, its SQLite export and `nsys stats`' kernel table, and what nsys lists as the
# metric sets of this GPU. Writes $OUT/gpu_metrics/ (unpack into tests/data/nsys/).
set -u
work="${OUT:-/tmp}/gpu_metrics"
mkdir -p "$work"
nsys --version > "$work/gpu_metrics.nsys_version.txt" 2>&1
nsys profile --gpu-metrics-devices=all --gpu-metrics-set=help > "$work/gpu_metrics.sets.txt" 2>&1
cat > "$work/cell.py" <<'PY'
import torch
x = torch.randn(1 << 26, device="cuda")            # 256 MiB of fp32
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):                                  # warm-up, outside the range
    y = x + x; c = a @ a
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("cell:counters")
for _ in range(20):
    y = x + x
for _ in range(10):
    c = a @ a
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
PY
export NSYS_NVTX_PROFILER_REGISTER_ONLY=0
cd "$work" || exit 1
nsys profile -t cuda,nvtx --capture-range=nvtx --nvtx-capture=cell:counters --capture-range-end=stop \
  --gpu-metrics-devices=all --gpu-metrics-frequency=10000 --sample=none --cpuctxsw=none \
  --force-overwrite=true --export=sqlite -o gpu_metrics python3 cell.py > gpu_metrics.profile.log 2>&1
echo "exit $?" >> gpu_metrics.profile.log
nsys stats --force-export=true -r cuda_gpu_kern_sum -f csv -o gpu_metrics.stats gpu_metrics.nsys-rep \
  > gpu_metrics.stats.log 2>&1
python3 - <<'PY' > gpu_metrics.metrics.txt 2>&1
import sqlite3
con = sqlite3.connect("gpu_metrics.sqlite")
print([r[1] for r in con.execute("PRAGMA table_info(GPU_METRICS)")])
print([r[1] for r in con.execute("PRAGMA table_info(TARGET_INFO_GPU_METRICS)")])
for row in con.execute("SELECT typeId, sourceId, typeName, metricId, metricName FROM TARGET_INFO_GPU_METRICS ORDER BY metricId"):
    print(row)
print("samples", con.execute("SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM GPU_METRICS").fetchone())
PY
gzip -kf gpu_metrics.sqlite
rm -f gpu_metrics.sqlite gpu_metrics.nsys-rep cell.py
ls -la "$work"
