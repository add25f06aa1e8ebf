"""Device peaks: name matching, the table object, achieved figures and their wording, the
measured-peak cache."""

from __future__ import annotations

import importlib
import json

import pytest

import gpumagic
from gpumagic.device_peaks import (
    DEVICES,
    PRECISIONS,
    MeasuredPeaks,
    NoGpuError,
    achieved,
    cache_path,
    cached_peak,
    format_rate,
    lookup,
    lookup_reason,
    measure_peak,
    peaks,
)
from gpumagic.device_peaks import measure as measure_mod
from gpumagic.errors import GpuMagicError


class W:  # what achieved() reads of a Work
    def __init__(self, flops, nbytes, precision):
        self.flops, self.bytes, self.precision_class = flops, nbytes, precision


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GB10", "GB10"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090"),
        ("nvidia  geforce rtx 5090", "RTX 5090"),
    ],
)
def test_device_names_match_their_entries(name, key):
    assert lookup(name) is DEVICES[key]


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GH200 480GB",
        "NVIDIA L40",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "Tesla T4",
        "NVIDIA GB100",
        "CPU",
        "",
    ],
)
def test_unknown_devices_give_none_and_say_what_to_do(name):
    entry, reason = lookup_reason(name)
    assert entry is None and lookup(name) is None
    assert "measure_peak" in reason or "no device" in reason


def test_every_entry_is_dense_and_ordered_as_the_hardware_is():
    for e in DEVICES.values():
        assert e.source and e.bandwidth > 1e11
        assert set(e.flops) <= set(PRECISIONS)
        assert e.flops["fp32"] > 1e12
        if "bf16" in e.flops:
            assert e.flops["bf16"] == e.flops["fp16"]
            assert (
                e.flops["bf16"] >= 2 * e.flops["tf32"] * 0.98
            )  # tf32 at half the 16-bit rate (L40S: 362.05 vs 183)
        if "fp8" in e.flops:
            assert e.flops["fp8"] == pytest.approx(2 * e.flops["bf16"], rel=0.02)
    h100 = DEVICES["H100 SXM"]
    assert h100.flops["bf16"] == pytest.approx(989.5e12) and h100.bandwidth == pytest.approx(
        3.35e12
    )
    assert h100.bandwidth_label == "HBM bandwidth"
    assert DEVICES["RTX 4090"].bandwidth_label == "GDDR bandwidth"
    assert DEVICES["GB10"].bandwidth_label == "LPDDR5X bandwidth"


def test_the_table_shows_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUMAGIC_CACHE_DIR", str(tmp_path))
    t = peaks("NVIDIA H100 80GB HBM3")
    text = str(t)
    assert "H100 SXM *" in text and "989.5" in text and "this device: NVIDIA H100 80GB HBM3" in text
    html = t._repr_html_()
    assert (
        "<table>" in html
        and "<b>H100 SXM *</b>" in html
        and "NVIDIA H100 Tensor Core GPU datasheet" in html
    )
    df = t.to_dataframe()
    assert len(df) == len(DEVICES)
    row = df[df["device"] == "H100 SXM"].iloc[0]
    assert row["bf16_tflops"] == pytest.approx(989.5) and bool(row["this_device"])
    unknown = peaks("Tesla T4")
    assert unknown.current is None and "Tesla T4" in str(unknown)


def test_gpumagic_exports_peaks_and_measure_peak_as_functions():
    assert gpumagic.peaks is peaks and gpumagic.measure_peak is measure_peak
    importlib.import_module(
        "gpumagic.device_peaks"
    )  # importing the package must not shadow the function
    assert callable(gpumagic.peaks) and gpumagic.peaks is peaks


def test_achieved_flops_are_flops_over_seconds_with_the_right_peak():
    n = 8192
    seconds = 1.6e-3
    a = achieved(W(2 * n**3, 3 * n * n * 2, "bf16"), seconds, "NVIDIA H100 80GB HBM3")
    assert a.flop_rate == pytest.approx(2 * n**3 / seconds, rel=1e-12)
    assert a.flop_share == pytest.approx(a.flop_rate / 989.5e12)
    assert (
        a.segment()
        == f"{a.flop_rate / 1e12:.3g} TFLOP/s bf16 = {a.flop_share:.0%} of bf16 tensor-core peak"
    )
    assert a.limiter() == "compute-bound" and a.basis == "datasheet"


def test_the_issue_example_reads_as_the_issue_writes_it():
    n = 4096
    a = achieved(W(2 * n**3, 3 * n * n * 4, "fp32"), 2.65e-3, "NVIDIA H100 80GB HBM3")
    assert a.segment() == "51.9 TFLOP/s fp32 = 77% of FFMA peak"
    assert "compute-bound" in a.explain()


def test_an_add_is_judged_by_bandwidth():
    n = 1 << 26
    seconds = 3 * n * 4 / 3.0e12
    a = achieved(W(0, 3 * n * 4, "fp32"), seconds, "NVIDIA H100 80GB HBM3")
    assert a.flop_rate is None and a.byte_rate == pytest.approx(3.0e12)
    assert a.segment() == "3 TB/s = 90% of HBM bandwidth"
    assert a.limiter() == "memory-bound"
    slow = achieved(W(0, 3 * n * 4, "fp32"), seconds * 10, "NVIDIA H100 80GB HBM3")
    assert slow.limiter() == "latency-bound"


def test_tf32_and_fp8_use_their_own_peaks_and_tiny_shares_keep_digits():
    a = achieved(W(10**12, 10**9, "tf32"), 1.0, "NVIDIA H100 80GB HBM3")
    assert "TF32 tensor-core peak" in a.flop_segment() and "0.2%" in a.flop_segment()
    b = achieved(W(10**15, 10**9, "fp8"), 1.0, "NVIDIA H100 PCIe")
    assert (
        b.flop_share == pytest.approx(1e15 / 1513e12) and "fp8 tensor-core peak" in b.flop_segment()
    )


def test_unknown_device_gives_rates_without_shares(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUMAGIC_CACHE_DIR", str(tmp_path))
    a = achieved(W(2 * 10**9, 10**8, "fp32"), 1e-3, "CPU")
    assert a.flop_share is None and a.limiter() is None
    assert str(a) == "2 TFLOP/s fp32; 100 GB/s"
    assert "measure_peak" in a.explain()
    with pytest.raises(ValueError):
        achieved(W(1, 1, "fp32"), 1.0, "CPU", basis="best")


def test_format_rate():
    assert format_rate(5.19e13, "FLOP/s") == "51.9 TFLOP/s"
    assert format_rate(2.5e9, "B/s") == "2.5 GB/s"
    assert format_rate(1.2e15, "FLOP/s") == "1.2 PFLOP/s"
    assert format_rate(None, "B/s") == "—"


def test_measure_peak_needs_a_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(GpuMagicError) as info:
        measure_peak()
    assert isinstance(info.value, NoGpuError) and isinstance(info.value, RuntimeError)
    assert "needs a CUDA GPU" in str(info.value)


def test_measured_peaks_are_cached_on_disk_and_used_as_the_basis(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUMAGIC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(measure_mod, "_MEMORY", {})
    found = MeasuredPeaks(
        device="NVIDIA Fake", flops={"bf16": 600e12, "fp32": 50e12}, bandwidth=2.5e12, size=8192
    )
    kept = measure_mod._store(found)
    assert kept.path == str(cache_path()) == str(tmp_path / "peaks.json")
    assert (
        json.loads((tmp_path / "peaks.json").read_text())["NVIDIA Fake"]["flops"]["bf16"] == 600e12
    )
    monkeypatch.setattr(measure_mod, "_MEMORY", {})  # a new process: read back from disk
    again = cached_peak("NVIDIA Fake")
    assert (
        again is not None
        and again.cached
        and again.flops == found.flops
        and again.bandwidth == 2.5e12
    )
    assert (
        "cached in" in str(again)
        and "<table>" in again._repr_html_()
        and len(again.to_dataframe()) == 3
    )
    a = achieved(
        W(300 * 10**12, 10**9, "bf16"), 1.0, "NVIDIA Fake"
    )  # not in the table: the measured is used
    assert a.basis == "measured" and a.flop_share == pytest.approx(0.5)
    assert a.segment() == "300 TFLOP/s bf16 = 50% of measured bf16 GEMM peak"
    sheet = achieved(
        W(300 * 10**12, 10**9, "bf16"),
        1.0,
        "NVIDIA H100 80GB HBM3",
        basis="measured",
        measured=again,
    )
    assert sheet.basis == "measured" and sheet.flop_peak == 600e12
    table = peaks("NVIDIA Fake")
    assert (
        "NVIDIA Fake (measured)" in str(table)
        and table.to_dataframe()["basis"].iloc[-1] == "measured"
    )


def test_a_corrupt_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUMAGIC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(measure_mod, "_MEMORY", {})
    (tmp_path / "peaks.json").write_text("{not json")
    assert cached_peak("NVIDIA H100 80GB HBM3") is None


def test_a_device_peaks_entry_pickles():
    import pickle

    from gpumagic.device_peaks import lookup

    sheet = lookup("NVIDIA H100 80GB HBM3")
    back = pickle.loads(pickle.dumps(sheet))
    assert back == sheet and back.peak("bf16") == sheet.peak("bf16")
    with pytest.raises(TypeError):
        back.flops["fp4"] = 1.0


def test_gb10_has_a_rate_per_precision_and_its_memory_is_lpddr5x_shared_with_the_cpu():
    from gpumagic.device_peaks.table import lookup as find

    gb10 = find("NVIDIA GB10")
    assert gb10 is find("NVIDIA DGX Spark") and gb10.name == "GB10"
    # Blackwell's tensor cores halve the rate per doubling of operand width
    assert gb10.peak("fp4") == 2 * gb10.peak("fp8") == 4 * gb10.peak("bf16") == 500e12
    assert gb10.peak("fp16") == gb10.peak("bf16") and gb10.peak("int8") == gb10.peak("fp8")
    assert gb10.bandwidth == 273e9 and gb10.bandwidth_label == "LPDDR5X bandwidth"
    assert gb10.unified_memory and "HBM" not in gb10.bandwidth_label
    assert "derived" in gb10.source and "DGX Spark datasheet" in gb10.source
    assert not find("NVIDIA H100 80GB HBM3").unified_memory


def test_free_memory_not_reported_is_none_and_the_copy_still_runs():
    from gpumagic.device_peaks.measure import COPY_BYTES, copy_bytes, free_bytes

    class _Cuda:
        def __init__(self, answer):
            self.answer = answer

        def mem_get_info(self):
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    class _Torch:
        def __init__(self, answer):
            self.cuda = _Cuda(answer)

    assert free_bytes(_Torch(RuntimeError("NVML: Not Supported"))) is None
    assert free_bytes(_Torch((0, 0))) is None
    assert free_bytes(_Torch((8 << 30, 16 << 30))) == 8 << 30
    assert copy_bytes(None) == COPY_BYTES // 4
    assert copy_bytes(1 << 30) == int((1 << 30) * 0.2) // 16 * 16
