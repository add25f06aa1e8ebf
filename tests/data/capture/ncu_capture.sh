#!/usr/bin/env bash
# The tests/data/ncu fixtures (run on the GPU host, from the project root, after `source .gpu/on-gpu.sh` and with the
# project on PYTHONPATH). Writes $OUT/ncu_fixtures.tar.gz; unpack it into tests/data/ncu/.
# `bash ncu_capture.sh tensor` makes only (c), the tensor-core fixtures.
set -u
here=$PWD/tests/data/capture
work=$(mktemp -d)
cd "$work"
ncu --version > ncu_version.txt 2>&1
if [ "${1:-all}" != tensor ]; then
# what the install offers a reader without ncu: the report's .proto files, the ncu_report module
extras=$(ls -d /opt/nvidia/nsight-compute/*/extras /usr/local/cuda*/nsight-compute*/extras 2>/dev/null | head -1)
ls -la "$extras/FileFormat" "$extras/python" > install_extras.txt 2>&1
# (a) the matmul + add cell, Speed Of Light + roofline sections, only the NVTX range "cell:ncu"
ncu --nvtx --nvtx-include "cell:ncu/" --section SpeedOfLight --section SpeedOfLight_RooflineChart \
  -f -o tiny python3 "$here/ncu_workload.py" run > tiny.profile.log 2>&1
ncu --import tiny.ncu-rep --csv --page raw --print-units base > tiny.raw.csv 2> tiny.raw.err
ncu --import tiny.ncu-rep --csv --page details --print-units base > tiny.details.csv 2> tiny.details.err
# (b) a kernel filter that matches nothing: ncu's "No kernels were profiled"
ncu --nvtx --nvtx-include "cell:ncu/" --kernel-name regex:^no_such_kernel$ --section SpeedOfLight \
  -f -o nomatch python3 "$here/ncu_workload.py" run > nomatch.profile.log 2>&1
echo "exit $?" >> nomatch.profile.log
rm -f nomatch.ncu-rep
rm -f tiny.ncu-rep  # 4 MB gzipped for two kernels: over the fixtures' size limit, so not kept
fi
# (c) one 2048² GEMM per math path (bf16, TF32, fp32 FFMA, fp64 DMMA), with what the default --ncu collects: the
# two sections and the tensor-path counters (gpumagic.capture.ncu.tensor.TENSOR_METRICS); first the same without the
# counters, for the cost (passes per kernel and wall time in tensor_cost.txt; that report is not kept)
metrics=$(python3 -c "from gpumagic.capture.ncu.tensor import TENSOR_METRICS; print(','.join(TENSOR_METRICS))")
sections=(--nvtx --nvtx-include "cell:tensor/" --section SpeedOfLight --section SpeedOfLight_RooflineChart)
for run in before tensor; do
  extra=()
  [ $run = tensor ] && extra=(--metrics "$metrics")
  t0=$(date +%s%N)
  ncu "${sections[@]}" ${extra[@]+"${extra[@]}"} -f -o $run python3 "$here/ncu_tensor_workload.py" run > $run.profile.log 2>&1
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$run: $ms ms wall, per kernel: $(grep -o '[0-9]* passes' $run.profile.log | tr '\n' ' ')" >> tensor_cost.txt
done
ncu --import tensor.ncu-rep --csv --page raw --print-units base > tensor.raw.csv 2> tensor.raw.err
ncu --import tensor.ncu-rep --csv --page details --print-units base > tensor.details.csv 2> tensor.details.err
rm -f before.ncu-rep before.profile.log tensor.ncu-rep
ls -la
cd "$OLDPWD"
tar -czf "$OUT/ncu_fixtures.tar.gz" -C "$work" .
