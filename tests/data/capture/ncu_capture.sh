#!/usr/bin/env bash
# The tests/data/ncu fixtures (run on the GPU host, from the project root, after `source .gpu/on-gpu.sh`).
# Writes $OUT/ncu_fixtures.tar.gz; unpack it into tests/data/ncu/.
set -u
here=$PWD/tests/data/capture
work=$(mktemp -d)
cd "$work"
ncu --version > ncu_version.txt 2>&1
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
ls -la
cd "$OLDPWD"
tar -czf "$OUT/ncu_fixtures.tar.gz" -C "$work" .
