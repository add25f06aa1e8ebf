"""Files read as what they are, each on a synthetic file of its own shaped as public files are: a
rocprof kernel list is AMD kernels, not a torch.profiler trace without CUDA; a JSON list of a
server's records is refused; two captures hours apart read as one folder are timed each on its
own; a trace whose kernels match no launch says its correlation is broken, not that launches came
after the capture."""

from __future__ import annotations

import json
import re

import pytest

import gpumagic
from gpumagic.analysis import findings
from gpumagic.errors import TraceFormatError
from gpumagic.render.report import ProfileReport


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def _rocprof_list(n=40):
    events = [{"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "GPU3"}}]
    for i in range(n):
        events.append(
            {
                "ph": "X",
                "cat": "gpu",
                "name": "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI32x32x8x1_SN",
                "pid": 3,
                "tid": 1,
                "ts": 1000.0 + 30 * i,
                "dur": 25.0,
                "args": {"gpu-id": 3, "queue-id": 1},
            }
        )
    return events


def test_a_rocprof_kernel_list_is_read_as_amd_kernels_and_told_in_rocprof_terms(tmp_path):
    t = gpumagic.load_trace(_write(tmp_path / "kernels.json", _rocprof_list()))
    assert len(t.kernels) == 40 and t.recorded("kernels")
    assert t.meta["backend"] == "rocprof" and t.meta["vendor"] == "AMD"
    assert int((t.kernels["end"] - t.kernels["start"]).sum()) == 40 * 25_000
    text = str(ProfileReport(t, label="kernels"))
    assert "did not record CUDA kernels" not in text and "torch.profiler" not in text
    assert "ProfilerActivity" not in text
    assert "rocprofv3" in text  # what records what such a list lacks


def test_a_list_of_server_records_is_refused_as_not_a_trace(tmp_path):
    request_trace = [
        {"id": 1, "model_name": "resnet", "timestamps": [{"name": "HTTP_RECV_START", "ns": 1}]},
        {"id": 2, "model_name": "resnet", "timestamps": [{"name": "HTTP_RECV_START", "ns": 9}]},
    ]
    log = [{"time": "2026-01-01T00:00:00", "level": "INFO", "msg": "server started"}]
    for name, data in (("requests.json", request_trace), ("log.json", log)):
        with pytest.raises(TraceFormatError) as err:
            gpumagic.load_trace(_write(tmp_path / name, data))
        said = str(err.value)
        assert "not a Chrome trace" in said and "'ph'" in said and name in said


def _kineto(pid, t0_us, n, lost_tail=3, correlation=True, gap_us=100.0):
    """A torch.profiler trace of one process: n launches, the last ``lost_tail`` of them without a
    kernel (the capture ended); ``correlation=False``: its kernels carry ids no launch has."""
    events = []
    for i in range(n):
        ts = t0_us + gap_us * i
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": pid,
                "tid": pid,
                "ts": ts,
                "dur": 5.0,
                "args": {"correlation": i + 1},
            }
        )
        if i < n - lost_tail:
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "void add_kernel<float>()",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 10.0,
                    "dur": 50.0,
                    "args": {
                        "correlation": (i + 1) if correlation else 900_000 + i,
                        "device": 0,
                        "stream": 7,
                    },
                }
            )
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"name": "NVIDIA H100"}],
        "traceEvents": events,
    }


def test_two_captures_hours_apart_are_timed_each_on_its_own(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    hours = 1.3 * 3600 * 1e6
    _write(folder / "run0.json", _kineto(100, 1_000.0, 40))
    _write(folder / "run1.json", _kineto(200, 1_000.0 + hours, 40))
    with pytest.warns(UserWarning):
        t = gpumagic.load_trace(folder)
    said = [f for f in findings(t) if f.kind in ("launches_after_capture", "kernels_missing")]
    assert said, [f.kind for f in findings(t)]
    message = said[0].message
    # each run's own last launches, not the 1.3 hours between the two runs
    assert re.search(r"in the last [\d.]+ µs came after the capture", message), message


def test_kernels_that_match_no_launch_say_the_correlation_is_broken(tmp_path):
    t = gpumagic.load_trace(
        _write(tmp_path / "trimmed.json", _kineto(100, 0.0, 60, correlation=False))
    )
    kinds = {f.kind: f for f in findings(t)}
    assert "correlation_broken" in kinds
    assert "launches_after_capture" not in kinds and "kernels_missing" not in kinds
    message = kinds["correlation_broken"].message
    assert "57 of 57 kernels match no launch's correlation id" in message


def _kernels_only(pid, n, gap_us):
    """A process's n launches, each with its kernel, ``gap_us`` apart."""
    return _kineto(pid, 1000.0, n, lost_tail=0, gap_us=gap_us)


def test_a_rank_without_kernels_is_no_yardstick_and_no_skew_is_a_share_above_100_percent(tmp_path):
    from gpumagic.render.ranks_view import rank_text_lines

    folder = tmp_path / "job"
    folder.mkdir()
    _write(folder / "rank0.json", _kernels_only(100, 5, 200.0))  # about 1 ms of work
    _write(folder / "rank1.json", _kernels_only(200, 40, 1000.0))  # about 39 ms
    copy_only = {
        "schemaVersion": 1,
        "deviceProperties": [{"name": "NVIDIA H100"}],
        "traceEvents": [
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": 7,
                "ts": 1000.0,
                "dur": 20.0,
                "args": {"bytes": 4096, "device": 0},
            }
        ],
    }
    _write(folder / "rank2.json", copy_only)
    t = gpumagic.load_trace(folder)
    text = "\n".join(rank_text_lines(t))
    shares = [float(x) for x in re.findall(r"\((\d+(?:\.\d+)?)%\)", text)]
    assert all(x <= 100 for x in shares), text
    assert "× the shortest)" in text, text  # 39 ms against 1 ms: a multiple, not 3800%
    assert "fastest" in text and "no kernels" in text  # the copy-only rank is no yardstick


def test_a_rocm_trace_without_device_properties_names_its_gpu_from_its_kernels(tmp_path):
    events = []
    for i in range(10):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "hipLaunchKernel",
                "pid": 10,
                "tid": 10,
                "ts": 100.0 + 50 * i,
                "dur": 4.0,
                "args": {"correlation": i + 1},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "Cijk_Alik_Bljk_SB_MT64x64x16_gfx942",
                "pid": 0,
                "tid": 1,
                "ts": 110.0 + 50 * i,
                "dur": 30.0,
                "args": {"correlation": i + 1, "device": 0, "stream": 0},
            }
        )
    t = gpumagic.load_trace(
        _write(tmp_path / "rocm.json", {"roctracer_version": "4.1", "traceEvents": events})
    )
    assert t.meta["vendor"] == "AMD" and "gfx942" in t.meta["device"]
    text = str(ProfileReport(t, label="rocm"))
    assert "unknown device" not in text and text.startswith("AMD Instinct MI300")
    listed = gpumagic.load_trace(_write(tmp_path / "list.json", _rocprof_list()))
    assert listed.meta["device"] == "AMD GPU"  # its names carry no ISA target
