"""Where and with what a result was measured: device UUID, driver, torch/CUDA/cuDNN, git commit,
host, time.

Why these: two runs can only be compared when they ran on the same device with the same software, so
each saved result carries what ``--vs`` checks before it believes a difference. Nothing here imports
torch: a GPU result was measured by a process that has torch loaded already, so it is read from
``sys.modules``; a CPU-only process pays nothing. The git call is bounded by a timeout and its
answer cached for a moment (a sweep saves many rows at once).
"""

from __future__ import annotations

import ctypes
import os
import platform
import socket
import subprocess
import sys
import time
from typing import Any

__all__ = [
    "GIT_TIMEOUT",
    "MEASURED_ON",
    "device_uuid",
    "driver_version",
    "git_state",
    "provenance",
]

#: Where and with what a saved result was measured, as the history's columns name it: the one list
#: that the history's table, a baseline file and ``--vs``'s table each show.
MEASURED_ON = (
    "device",
    "device_uuid",
    "backend",
    "sm_clock_prevailing",
    "driver",
    "torch",
    "cuda",
    "cudnn",
    "git_commit",
    "git_dirty",
)

#: Seconds a git call may take before the commit is left unknown (a network filesystem, a huge
#: repository).
GIT_TIMEOUT = 2.0
#: Seconds a git answer is reused for the same working directory.
GIT_CACHE_SECONDS = 2.0

#: cwd -> (until when the answer holds, (commit, dirty))
_git_cache: dict[str, tuple[float, tuple[str | None, bool | None]]] = {}
_driver: list[str | None] = []
_uuids: dict[int, str | None] = {}


def git_state(cwd: str | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git working tree at ``cwd``; (None, None) outside one, without git, or
    on timeout. Dirty counts changes to tracked files only: an untracked notebook checkpoint is not
    a change to the code.

    One ``git status --porcelain=v2 --branch`` says both (~2 ms here). Its answer is reused for
    :data:`GIT_CACHE_SECONDS`, or for 20 times what it took where that is longer: in a large
    repository, where ``git status`` takes a second, git costs at most a twentieth of the time
    between results.
    """
    cwd = cwd or os.getcwd()
    now = time.monotonic()
    hit = _git_cache.get(cwd)
    if hit is not None and now < hit[0]:
        return hit[1]
    found: tuple[str | None, bool | None] = (None, None)
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
        if status.returncode == 0:
            lines = status.stdout.splitlines()
            oid = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), None)
            commit = oid if oid and oid != "(initial)" else None
            found = (
                (commit, any(not ln.startswith("#") for ln in lines)) if commit else (None, None)
            )
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    took = time.monotonic() - now
    _git_cache[cwd] = (now + max(GIT_CACHE_SECONDS, 20 * took), found)
    return found


def driver_version() -> str | None:
    """The NVIDIA driver's version as NVML says it (e.g. '570.124.06'); None where there is no
    NVML."""
    if _driver:
        return _driver[0]
    found = None
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() == 0:
            buf = ctypes.create_string_buffer(96)
            if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) == 0:
                found = buf.value.decode(errors="replace") or None
    except (OSError, AttributeError):
        pass
    _driver.append(found)
    return found


def device_uuid(index: int | None) -> str | None:
    """The UUID of CUDA device ``index`` as torch reports it (stable across
    ``CUDA_VISIBLE_DEVICES``); None where torch is not loaded or cannot say."""
    torch = sys.modules.get("torch")
    if torch is None or index is None:
        return None
    if index not in _uuids:
        try:
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
            _uuids[index] = (
                f"GPU-{uuid}" if uuid is not None and not str(uuid).startswith("GPU-") else uuid
            )
        except Exception:  # noqa: BLE001 - provenance is best effort: a missing fact, never a failed save
            _uuids[index] = None
    return _uuids[index]


def _library_versions(meta: dict[str, Any]) -> dict[str, str | None]:
    torch = sys.modules.get("torch")
    versions = {"torch": meta.get("torch"), "cuda": meta.get("cuda"), "cudnn": None}
    if torch is not None:
        versions["torch"] = versions["torch"] or getattr(torch, "__version__", None)
        versions["cuda"] = versions["cuda"] or getattr(
            getattr(torch, "version", None), "cuda", None
        )
        try:
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            versions["cudnn"] = str(cudnn) if cudnn else None
        except Exception:  # noqa: BLE001
            pass
    return {k: (str(v) if v is not None else None) for k, v in versions.items()}


def provenance(device: str, backend: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The facts saved beside a result measured on ``device`` by timer ``backend`` (``meta``: the
    result's own).

    ``device_key`` names the device for "the last result on the same device": its UUID where known,
    else its name on this host (a CPU, or a GPU whose UUID torch does not report).
    """
    from ..version import __version__

    meta = meta or {}
    on_gpu = backend != "host"
    uuid = device_uuid(meta.get("device_index")) if on_gpu else None
    commit, dirty = git_state()
    host = socket.gethostname()
    return {
        "created": time.time(),
        "device": device,
        "device_uuid": uuid,
        "device_key": uuid or f"{device}@{host}",
        "backend": backend,
        "driver": driver_version() if on_gpu else None,
        **_library_versions(meta),
        "git_commit": commit,
        "git_dirty": None if dirty is None else int(dirty),
        "cwd": os.getcwd(),
        "host": host,
        "python": platform.python_version(),
        "gpumagic": __version__,
    }
