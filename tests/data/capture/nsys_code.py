"""The by-code fixture under Nsight Systems (run on the GPU host from the project root, after
`source .gpu/on-gpu.sh` and with the project on PYTHONPATH): `%%gpuprofile --nsys` of the training
step of `tests/gpu/test_nsys_code_gpu.py`, its SQLite export copied to $OUT/nsys_code.sqlite
(gzip it into tests/data/nsys/)."""

import glob
import os
import shutil
import sys
import tempfile

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "gpu"))
from test_nsys_code_gpu import MODEL, STEP

where = tempfile.mkdtemp()
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.run_line_magic("config", f"GpuMagics.profile_dir = {where!r}")
ip.run_cell(MODEL)
with capture_output():
    ip.run_cell_magic("gpuprofile", "--nsys -w 1 -o rep --no-timeline", STEP)
shutil.copy(sorted(glob.glob(os.path.join(where, "*.sqlite")))[-1], os.environ["OUT"])
print(ip.user_ns["rep"].trace.by_module(memops=False).to_string())
