"""docker/: the Dockerfile's base image and instructions, the run script's flags, and shellcheck."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .helpers import ROOT

DOCKER = ROOT / "docker"


def instructions() -> list[tuple[str, str]]:
    text = (DOCKER / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # join continued lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_builds_on_nvidia_pytorch_and_installs_gpumagic_and_jupyterlab():
    ins = instructions()
    assert ins[0] == ("FROM", "nvcr.io/nvidia/pytorch:25.09-py3")
    assert [op for op, _ in ins if op == "FROM"] == ["FROM"]
    runs = " ".join(rest for op, rest in ins if op == "RUN")
    assert (
        "pip install" in runs and "--no-deps -e /opt/gpumagic" in runs
    )  # torch stays the container's own
    assert "jupyterlab" in runs and "bokeh" in runs and "nvtx" in runs
    assert "extensions = ['gpumagic']" in runs
    assert ("COPY", ". /opt/gpumagic") in ins
    assert ("EXPOSE", "8888") in ins
    cmd = [rest for op, rest in ins if op == "CMD"]
    assert cmd and cmd[0].startswith('["jupyter", "lab"') and "--ip=0.0.0.0" in cmd[0]
    assert all(op in {"FROM", "COPY", "RUN", "WORKDIR", "EXPOSE", "CMD", "ENV"} for op, _ in ins)


def test_run_script_flags():
    text = (DOCKER / "run.sh").read_text()
    run = text[text.index("exec docker run") :]
    for flag in (
        "--gpus all",
        "--ipc=host",
        "--ulimit memlock=-1",
        "--ulimit stack=67108864",
        "-p 8888:8888",
        '-v "$PWD":/workspace',
        "-w /workspace",
    ):
        assert flag in run, flag
        assert f"# {flag.split()[0]}" in text, f"{flag} is not explained in a comment"
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="needs shellcheck (apt-get install shellcheck)"
)
def test_run_script_is_shellcheck_clean():
    proc = subprocess.run(["shellcheck", str(DOCKER / "run.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
