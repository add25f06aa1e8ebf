"""The direct CUPTI path (gpumagic.gpu_activity.cupti_direct) and its fallback
(gpumagic.gpu_activity), on the CPU.

A stand-in ``cupti`` package takes the binding's place: it keeps the callbacks and the enabled
kinds, and delivers the records a test scripts on a forced flush, as the real binding does. What it
checks is gpumagic's side of the contract: what is enabled is always disabled, refusals become a
fallback with a reason, records become activities with kineto's spelling, and launches issued before
the recording are left out by identity.
"""

from __future__ import annotations

import enum
import sys
import types
from types import SimpleNamespace

import pytest
import torch

from gpumagic import gpu_activity
from gpumagic.gpu_activity import cupti_direct
from gpumagic.gpu_activity.cupti_direct import Activity, CuptiRefused, Recording

from ..helpers import DATA


class Kind(enum.IntEnum):
    KERNEL = 3
    MEMCPY = 1
    MEMSET = 2
    RUNTIME = 5
    DRIVER = 4
    CONCURRENT_KERNEL = 10


class CopyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8


class Result(enum.IntEnum):
    SUCCESS = 0
    ERROR_NOT_COMPATIBLE = 21
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39


class cuptiError(Exception):
    def __init__(self, status):
        super().__init__(Result(status).name)
        self.status = status


class FakeCupti:
    """The binding's activity functions, with scripted records and errors."""

    ActivityKind = Kind
    ActivityMemcpyKind = CopyKind
    Result = Result
    cuptiError = cuptiError

    def __init__(self) -> None:
        self.enabled: set[int] = set()
        self.callbacks = None
        self.pending: list = []
        self.fail_enable: int | None = None  # status to raise on the second enable

    def activity_register_callbacks(self, requested, completed):
        self.callbacks = (requested, completed)

    def activity_enable(self, kind):
        if self.fail_enable is not None and self.enabled:
            raise cuptiError(self.fail_enable)
        self.enabled.add(int(kind))

    def activity_disable(self, kind):
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag):
        if self.pending:
            size, _ = self.callbacks[0]()
            assert size > 0
            records, self.pending = self.pending, []
            self.callbacks[1](records)


def _kernel(name, start, end, corr, device=0, stream=7):
    return SimpleNamespace(
        kind=Kind.CONCURRENT_KERNEL,
        name=name,
        start=start,
        end=end,
        device_id=device,
        stream_id=stream,
        correlation_id=corr,
    )


def _api(corr, kind=Kind.RUNTIME, start=1000, end=1100):
    return SimpleNamespace(kind=kind, correlation_id=corr, start=start, end=end)


ADD = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"  # noqa: E501 (a kernel name as it ran)
ADD_KINETO = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)


@pytest.fixture
def fake(monkeypatch):
    """The stand-in binding installed as ``cupti.cupti``, torch seen as a CUDA 13.0 build, nothing
    remembered."""
    binding = FakeCupti()
    package = types.ModuleType("cupti")
    package.cupti = binding
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setitem(sys.modules, "cupti.cupti", binding)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(cupti_direct, "_binding_version", lambda: "13.0.1")
    monkeypatch.setattr(cupti_direct, "_LASTING", [])
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    from gpumagic.gpu_activity import profiler_start

    monkeypatch.setattr(profiler_start, "_STATE", {"warm": False, "startup": None})
    return binding


def test_a_recording_turns_records_into_activities_and_leaves_cupti_disabled(fake):
    with cupti_direct.recording() as rec:
        assert fake.enabled == {
            Kind.CONCURRENT_KERNEL,
            Kind.MEMCPY,
            Kind.MEMSET,
            Kind.RUNTIME,
            Kind.DRIVER,
        }
        fake.pending = [
            _api(11),
            _kernel(ADD, 1000, 1500, 11),
            SimpleNamespace(
                kind=Kind.MEMCPY,
                copy_kind=CopyKind.HTOD,
                start=1600,
                end=1700,
                device_id=0,
                stream_id=7,
                correlation_id=12,
            ),
            _api(12, Kind.DRIVER),
            SimpleNamespace(
                kind=Kind.MEMSET, start=1800, end=1850, device_id=0, stream_id=7, correlation_id=13
            ),
            _kernel(
                "triton_poi_fused_add_0", 2000, 2100, 99
            ),  # launched before the recording: no API record
        ]
    assert fake.enabled == set()  # nothing left on for the user's own profiler
    assert rec.backend == "cupti" and rec.fallback is None and rec.startup is None
    assert [a.name for a in rec.activities] == [
        ADD_KINETO,
        "Memcpy HtoD",
        "Memset",
        "triton_poi_fused_add_0",
    ]
    assert rec.launched == {11, 12}
    assert [(a.kind, a.start, a.end) for a in rec.gpu()] == [
        ("kernel", 1000, 1500),
        ("memcpy", 1600, 1700),
    ]
    assert len(rec.gpu(launched_only=False)) == 4
    assert rec.intervals(exclude={ADD_KINETO}) == [(1600, 1700)]
    assert rec.gpu(device=1) == []


def test_an_error_in_the_block_still_disables_and_propagates(fake):
    with pytest.raises(ZeroDivisionError), cupti_direct.recording():
        1 / 0  # noqa: B018
    assert fake.enabled == set()


def test_cupti_held_by_another_tool_is_refused_with_nothing_left_enabled_and_asked_again_next_time(
    fake,
):
    fake.fail_enable = Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
    with pytest.raises(CuptiRefused) as info, cupti_direct.recording():
        pytest.fail("the block must not run")
    assert "in use by another tool" in info.value.reason and not info.value.lasting
    assert fake.enabled == set()
    assert cupti_direct.refusal() is None  # transient: the next measurement tries again


def test_an_incompatible_driver_is_remembered_for_the_process(fake):
    fake.fail_enable = Result.ERROR_NOT_COMPATIBLE
    with pytest.raises(CuptiRefused), cupti_direct.recording():
        pass
    refused = cupti_direct.refusal()
    assert refused is not None and "CUPTI_ERROR_NOT_COMPATIBLE" in refused.reason and refused.fix
    assert fake.enabled == set()


def test_a_binding_for_another_cuda_major_is_refused_with_the_matching_install(fake, monkeypatch):
    monkeypatch.setattr(cupti_direct, "_binding_version", lambda: "12.8.0")
    refused = cupti_direct.refusal()
    assert refused.reason == "cupti-python 12.8.0 is for CUDA 12, torch uses CUDA 13.0"
    assert refused.fix == 'pip install "cupti-python==13.0.*"'
    assert fake.enabled == set() and fake.callbacks is None  # refused before touching CUPTI


def test_no_binding_is_refused_with_the_install_for_torch_s_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ModuleNotFoundError
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(cupti_direct, "_LASTING", [])
    refused = cupti_direct.refusal()
    assert refused.reason == "cupti-python is not installed"
    assert refused.fix == 'pip install "cupti-python==12.8.*"' and refused.lasting


def test_a_cpu_torch_or_a_running_profiler_is_not_remembered(fake, monkeypatch):
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", True)
    assert "torch.profiler capture is running" in cupti_direct.refusal().reason
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert cupti_direct.refusal().reason == "this torch has no CUDA"
    assert cupti_direct._LASTING == []


def test_a_process_that_nsys_or_ncu_injected_itself_into_is_left_to_them(fake, monkeypatch):
    monkeypatch.setenv(
        "CUDA_INJECTION64_PATH", "/opt/nvidia/nsight-systems/lib/libToolsInjection64.so"
    )
    refused = cupti_direct.refusal()
    assert "(nsys or ncu) holds CUPTI" in refused.reason and not refused.lasting
    with pytest.raises(CuptiRefused), cupti_direct.recording():
        pytest.fail("the block must not run")
    assert fake.callbacks is None and fake.enabled == set()  # never touched


def test_demangling_spells_names_as_kineto_and_leaves_others_alone():
    assert cupti_direct.demangle(ADD) == ADD_KINETO
    assert cupti_direct.demangle("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == (
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    )
    assert cupti_direct.demangle("_Znot_a_real_name(") == "_Znot_a_real_name("


# --- the fallback
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def stand_in_profiler(monkeypatch):
    """torch.profiler's side replaced by a recorder that says what it was asked."""
    used = []

    from contextlib import contextmanager

    @contextmanager
    def fake_profiler(device):
        rec = Recording(backend="torch.profiler", startup=6.8)
        used.append(device)
        yield rec
        rec.activities.append(Activity("kernel", "k", 0, 10, 0, 7, 1))

    monkeypatch.setattr(gpu_activity, "_torch_profiler", fake_profiler)
    return used


def test_without_the_binding_torch_profiler_records_and_the_reason_carries_the_install(
    monkeypatch, stand_in_profiler
):
    monkeypatch.setitem(sys.modules, "cupti", None)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(cupti_direct, "_LASTING", [])
    with gpu_activity.recording(device="cuda:0") as rec:
        pass
    assert stand_in_profiler == ["cuda:0"]
    assert rec.backend == "torch.profiler" and rec.startup == 6.8 and len(rec.activities) == 1
    assert rec.fallback == 'cupti-python is not installed: `pip install "cupti-python==13.0.*"`'


def test_a_refusal_at_enable_falls_back_without_running_the_block_twice(fake, stand_in_profiler):
    fake.fail_enable = Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
    runs = []
    with gpu_activity.recording() as rec:
        runs.append(1)
    assert runs == [1] and rec.backend == "torch.profiler"
    assert rec.fallback.startswith("CUPTI is in use by another tool")
    assert fake.enabled == set()


def test_the_direct_path_is_taken_where_it_can_be(fake, stand_in_profiler):
    with gpu_activity.recording() as rec:
        fake.pending = [_api(1), _kernel("k", 5, 9, 1)]
    assert rec.backend == "cupti" and stand_in_profiler == [] and rec.intervals() == [(5, 9)]


def test_records_on_a_clock_that_is_not_nanoseconds_are_not_used_and_torch_profiler_records_again(
    fake, stand_in_profiler
):
    # kineto's timestamp callback (left in CUPTI once torch.profiler has started) made launches
    # inside a block of microseconds span 2.1 s of "nanoseconds": the records cannot be used, and
    # the process goes to torch.profiler
    runs = []

    def run():
        runs.append(1)
        fake.pending = [_api(1, start=0, end=2_100_000_000), _kernel("k", 5, 9, 1)]

    rec = gpu_activity.record(run)
    assert runs == [1, 1] and rec.backend == "torch.profiler" and stand_in_profiler == [None]
    assert rec.fallback == cupti_direct.FOREIGN_CLOCK
    assert (
        cupti_direct.refusal().reason == cupti_direct.FOREIGN_CLOCK
    )  # remembered: no third run next time
    assert fake.enabled == set()


def test_once_gpumagic_has_started_torch_profiler_it_records_there_without_a_note(
    fake, stand_in_profiler
):
    from gpumagic.gpu_activity import profiler_start

    profiler_start.mark_started()  # a %%gpuprofile capture ran
    with gpu_activity.recording() as rec:
        pass
    assert rec.backend == "torch.profiler" and fake.callbacks is None
    assert rec.fallback == gpu_activity.KINETO_STARTED


def test_inside_a_user_s_own_capture_neither_profiler_starts(fake, stand_in_profiler, monkeypatch):
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", True)
    with pytest.raises(CuptiRefused, match="one profiler at a time"), gpu_activity.recording():
        pytest.fail("the block must not run")
    assert stand_in_profiler == [] and fake.callbacks is None


def test_kineto_events_become_the_same_activities():
    ev = SimpleNamespace
    events = [
        ev(
            device_type=lambda: "DeviceType.CUDA",
            start_ns=lambda: 100,
            duration_ns=lambda: 50,
            name=lambda: "k",
            device_index=lambda: 0,
            device_resource_id=lambda: 7,
            correlation_id=lambda: 3,
        ),
        ev(
            device_type=lambda: "DeviceType.CUDA",
            start_ns=lambda: 200,
            duration_ns=lambda: 5,
            name=lambda: "Memset (Device)",
            device_index=lambda: 0,
            device_resource_id=lambda: 7,
            correlation_id=lambda: 4,
        ),
        ev(device_type=lambda: "DeviceType.CPU", correlation_id=lambda: 3),
    ]
    prof = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    )
    rec = gpu_activity.from_kineto(prof)
    assert rec.backend == "torch.profiler" and rec.launched == {3}
    assert [(a.kind, a.start, a.end, a.stream) for a in rec.activities] == [
        ("kernel", 100, 150, 7),
        ("memset", 200, 205, 7),
    ]
    assert rec.intervals() == [(100, 150)]  # the memset's launch was not in the capture


def test_every_mangled_name_captured_on_the_h100_demangles_to_torch_profiler_s_spelling():
    import json

    path = DATA / "cupti_names_h100.json"
    with open(path, encoding="utf-8") as f:
        pairs = json.load(f)["pairs"]
    assert len(pairs) >= 50 and sum(p["mangled"].startswith("_Z") for p in pairs) >= 40
    for p in pairs:
        assert cupti_direct.demangle(p["mangled"]) == p["kineto"], p["op"]
