"""``%gputime`` under Nsight Systems and inside a user's own torch.profiler capture: one true note,
no false one.

nsys holds CUPTI in the process it profiles: the kernel pass cannot record there, and the tool's
report has the kernels. Before, the pass started torch.profiler (seconds), got no records, and said
both "it recorded the kernels because nsys holds CUPTI" and "The profiler saw no GPU activity from
this statement".
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SCRIPT = textwrap.dedent(
    """
    import time, torch
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.user_ns["a"] = torch.randn(2048, 2048, device="cuda")
    t = time.perf_counter()
    r = ip.run_line_magic("gputime", "-o a @ a")
    print("WALL", time.perf_counter() - t)
    print("KERNEL", r.kernel_time)
    """
)


def test_under_nsys_one_true_note_and_no_profiler_start(tmp_path):
    nsys = shutil.which("nsys")
    if nsys is None:
        pytest.skip("nsys not on PATH")
    script = tmp_path / "t.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [
            nsys,
            "profile",
            "-t",
            "cuda",
            "-o",
            str(tmp_path / "r"),
            "--force-overwrite=true",
            sys.executable,
            script,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = out.stdout + out.stderr
    assert "GPU kernel time not measured: a profiling tool (nsys or ncu) holds CUPTI" in text, text[
        -3000:
    ]
    assert "no GPU activity" not in text
    assert "first start" not in text  # torch.profiler was not started for nothing
    assert "KERNEL None" in text


def test_inside_a_users_capture_one_note(ip, capsys):
    from torch.profiler import ProfilerActivity, profile

    ip.user_ns["a"] = torch.randn(1024, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        ip.run_line_magic("gputime", "a @ a")
    seen = capsys.readouterr()
    printed = seen.out + seen.err
    assert "GPU kernel time not measured: a torch.profiler capture is running" in printed
    assert "no GPU activity" not in printed
    assert any(
        e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events()
    )  # their capture kept its kernels
