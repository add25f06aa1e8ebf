#!/usr/bin/env bash
# Make every GPU-host fixture under tests/data in one go (run on the GPU host, from the project root, after
# `source .gpu/on-gpu.sh`). Writes $OUT/fixtures.tar.gz; unpack it into tests/data/.
set -u
here=tests/data/capture
work=$(mktemp -d)
mkdir -p "$work/nsys"
nsys --version > "$work/nsys/nsys_version.txt" 2>&1
python3 "$here/harvest_kernels.py" "$work/kernels_gpu_host.json" 2>&1 | grep -v Warning | tail -20
python3 "$here/torch_traces.py" "$work" 2>&1 | tail -3
export NSYS_NVTX_PROFILER_REGISTER_ONLY=0
cd "$work/nsys"
# (a) the matmul cell: NVTX capture range, CUDA + NVTX only
nsys profile -t cuda,nvtx --capture-range=nvtx --nvtx-capture=cell:matmul --capture-range-end=stop \
  --force-overwrite=true --export=sqlite -o matmul python3 "$OLDPWD/$here/nsys_workload.py" matmul > matmul.profile.log 2>&1
# (b) the block, warm-up included, OS runtime traced, memcpy/memset present
nsys profile -t cuda,nvtx,osrt --force-overwrite=true --export=sqlite -o block \
  python3 "$OLDPWD/$here/nsys_workload.py" block > block.profile.log 2>&1
for r in matmul block; do
  nsys stats --force-export=true -r cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum,osrt_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum \
    -f csv -o "$r.stats" "$r.nsys-rep" > "$r.stats.log" 2>&1
  nsys stats --force-export=true -r cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum,osrt_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum \
    "$r.nsys-rep" > "$r.stats.txt" 2>&1
done
# (c) a capture range that never opens: "No reports were generated"
nsys profile -t cuda,nvtx --capture-range=nvtx --nvtx-capture=never:opened --capture-range-end=stop \
  --force-overwrite=true -o norange python3 "$OLDPWD/$here/nsys_workload.py" matmul > norange.profile.log 2>&1
echo "exit $?" >> norange.profile.log
# (d) a report without CUDA data
nsys profile -t cuda,nvtx --force-overwrite=true --export=sqlite -o nocuda python3 "$OLDPWD/$here/nsys_workload.py" nocuda > nocuda.profile.log 2>&1
nsys stats -r cuda_gpu_kern_sum nocuda.nsys-rep > nocuda.stats.txt 2>&1
rm -f ./*.nsys-rep ./*.qdstrm
ls -la
cd "$OLDPWD"
tar -czf "$OUT/fixtures.tar.gz" -C "$work" .
ls -la "$OUT"
