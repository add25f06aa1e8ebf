"""The history on a GPU: a %gputime result is saved with its device's UUID, clocks and driver, and
--vs compares two runs of one statement on it (python3 -m pytest tests/gpu; skips without CUDA)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_a_gpu_result_is_saved_with_its_device_and_compared(tmp_path, monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    from gpumagic.history import saving as recorder_mod
    from gpumagic.history.store import Store

    path = tmp_path / "history.sqlite"
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(path))
    recorder_mod._SAID.clear()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.user_ns["a"] = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    ip.run_line_magic("gputime", "-q -l first a @ a")
    ip.run_line_magic("gputime", "--vs first a @ a")
    out = capsys.readouterr().out
    rows = Store(path, readonly=True).query()
    assert len(rows) == 2
    first = rows[0]
    assert first["device"] == torch.cuda.get_device_name()
    assert first["device_uuid"] and str(first["device_uuid"]).startswith("GPU-")
    assert first["driver"] and first["sm_clock_high"] and first["label"] == "first"
    assert "first" in out and ("faster" in out or "slower" in out or "no difference" in out), out
    for s in recorder_mod._STORES.values():
        s.close()
    recorder_mod._STORES.clear()
