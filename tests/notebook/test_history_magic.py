"""``%gputime`` and the history: results saved, ``-l``, ``--vs`` (in a new process, against a label
and ``last``), its warnings, and a store in the way that never stops a measurement from being
shown."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from IPython.core.error import UsageError

from gpumagic.history import saving as recorder_mod
from gpumagic.history.store import Store

FAST = "-r 8 -n 20"


@pytest.fixture
def hist(ip, hist):
    """The suite's own-history fixture (conftest), with the shell loaded first."""
    return hist


def rows(path):
    return Store(path, readonly=True).query()


def test_every_gputime_compare_and_sweep_result_is_saved(ip, hist, capsys):
    ip.run_cell("x = list(range(100))")
    ip.run_line_magic("gputime", f"{FAST} -l base sum(x)")
    ip.run_line_magic("gputime", f"{FAST} --label=other max(x)")
    ip.run_cell_magic("gputime", f"--compare {FAST} -l cmp", "sum(x)  # s\nmin(x)  # m\n")
    ip.run_cell_magic("gputime", f"--sweep n=5,10 {FAST} y = list(range(n))", "sum(y)\n")
    saved = rows(hist)
    assert [r["label"] for r in saved] == ["base", "other", "cmp", "cmp", None, None]
    assert [r["kind"] for r in saved] == [
        "gputime",
        "gputime",
        "compare",
        "compare",
        "sweep",
        "sweep",
    ]
    assert (
        saved[0]["statement"] == "sum(x)"
        and saved[0]["n_samples"] == 8
        and saved[0]["calls_per_sample"] == 20
    )
    assert [r["variant"] for r in saved[2:4]] == ["s", "m"] and saved[4]["params"] == '{"n": 5}'
    assert "vs" not in capsys.readouterr().out  # no --vs: nothing more printed


def test_cell_mode_saves_the_cell_as_the_statement_and_the_line_as_setup(ip, hist):
    ip.run_cell_magic("gputime", f"{FAST} z = [1, 2, 3]", "sum(z)\n")
    row = rows(hist)[0]
    assert (row["statement"], row["setup"]) == ("sum(z)", "z = [1, 2, 3]")


def test_history_off_saves_nothing_and_vs_says_why(ip, hist):
    ip.run_line_magic("config", "GpuMagics.history = ''")
    ip.run_line_magic("gputime", f"{FAST} 1 + 1")
    assert not hist.exists()
    with pytest.raises(UsageError, match="history, which is off"):
        ip.run_line_magic("gputime", f"{FAST} --vs last 1 + 1")


def test_config_moves_the_history(ip, hist, tmp_path):
    moved = tmp_path / "elsewhere" / "h.sqlite"
    ip.run_line_magic("config", f"GpuMagics.history = '{moved}'")
    ip.run_line_magic("gputime", f"{FAST} 1 + 1")
    assert len(rows(moved)) == 1 and not hist.exists()


def test_vs_an_unknown_label_fails_before_measuring(ip, hist):
    ip.run_line_magic("gputime", f"{FAST} -l known 1 + 1")
    with pytest.raises(
        UsageError, match=r"--vs nope: no result with that label or id .*\(labels: known\)"
    ):
        ip.run_line_magic("gputime", f"{FAST} --vs nope 1 + 1")
    assert len(rows(hist)) == 1
    with pytest.raises(UsageError, match="not --compare or --sweep"):
        ip.run_cell_magic("gputime", f"--compare {FAST} --vs known", "1 + 1\n2 + 2\n")


def test_vs_last_with_nothing_before_says_so(ip, hist, capsys):
    ip.run_line_magic("gputime", f"{FAST} --vs last 3 + 3")
    assert "vs last: no earlier result of this statement on this device" in capsys.readouterr().out


def test_vs_an_id_and_its_warnings(ip, hist, capsys):
    ip.run_cell("x = list(range(100))")
    ip.run_line_magic("gputime", f"{FAST} -l ref sum(x)")
    with sqlite3.connect(hist) as conn:  # as if measured on another GPU, driver and torch
        conn.execute(
            "UPDATE results SET device = 'NVIDIA H100', device_key = 'GPU-1', device_uuid = "
            "'GPU-1', "
            "driver = '570.1', torch = '1.0', cudnn = '8000', sm_clock_prevailing = 1980, "
            "backend = 'cuda-events'"
        )
    capsys.readouterr()
    ip.run_line_magic("gputime", f"{FAST} --vs 1 sum(x)")
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("vs "))
    assert (
        line.startswith("vs (#1, 'ref',")
        and "95% CI, bootstrap of the ratio of medians, 8 vs 8 samples" in line
    )
    assert any(w in line for w in ("slower", "faster", "no difference the samples can show"))
    for said in (
        "device differs: NVIDIA H100 (GPU-1) then, CPU",
        "timer differs",
        "torch differs: 1.0 then",
    ):
        assert f"\u26a0 {said}" in out
    assert "cuDNN differs: 8000 then, unknown now" in out
    ip.run_line_magic("gputime", f"{FAST} -q --vs ref sum(x)")
    assert "vs " not in capsys.readouterr().out  # -q: nothing printed


FIRST = textwrap.dedent(
    """
    import time
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_cell("import time\\ndef work(): time.sleep(0.001)")
    ip.run_line_magic("gputime", "-r 12 -n 1 -w 1 -l before work()")
    """
)
SECOND = textwrap.dedent(
    """
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_cell("import time\\ndef work(): time.sleep(0.03)")
    ip.run_line_magic("gputime", "-r 12 -n 1 -w 1 --vs before work()")
    ip.run_cell("def work(): time.sleep(0.0005)")
    ip.run_line_magic("gputime", "-r 12 -n 1 -w 1 --vs last work()")
    """
)


def test_vs_in_a_new_process_against_a_label_and_last(tmp_path):
    # 1 ms, 30 ms, then 0.5 ms of sleep: far enough apart that 12 samples tell them apart even when
    # a loaded machine wakes a sleeper late
    env = dict(os.environ, GPUMAGIC_HISTORY=str(tmp_path / "h.sqlite"))
    first = subprocess.run(
        [sys.executable, "-c", FIRST], env=env, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    second = subprocess.run(
        [sys.executable, "-c", SECOND], env=env, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    vs = [ln for ln in second.stdout.splitlines() if ln.startswith("vs ")]
    assert len(vs) == 2, second.stdout
    assert vs[0].startswith("vs before (#1, 'before',") and ": slower, time \u00d7" in vs[0]
    assert (
        vs[1].startswith("vs last (#2,") and ": faster, time \u00d7" in vs[1]
    )  # last: the 30 ms run, this process
    assert "\u26a0" not in second.stdout  # same device, same versions: no warning


def test_a_corrupt_store_never_hides_the_measurement(ip, hist, capsys):
    hist.write_bytes(b"\0garbage" * 512)
    ip.run_line_magic("gputime", f"{FAST} 1 + 1")
    out, err = capsys.readouterr()
    assert "per call on CPU" in out
    notes = [ln for ln in err.splitlines() if "gpumagic history" in ln]
    assert len(notes) == 1 and "file is not a database" in notes[0]
    ip.run_line_magic("gputime", f"{FAST} 1 + 1")
    out, err = capsys.readouterr()
    assert "per call on CPU" in out  # in full once, then short for each result not saved
    assert err.strip() == "gpumagic history: not saved (file is not a database, as said above)."
    ip.run_line_magic(
        "gputime", f"{FAST} --vs last 1 + 1"
    )  # --vs with a broken store: measured and shown
    assert "per call on CPU" in capsys.readouterr().out


def test_a_read_only_store_never_hides_the_measurement(ip, hist, capsys, monkeypatch):
    # Tests run as root here, where file modes do not stop a write: SQLite's read-only mode stands
    # in for them.
    ip.run_line_magic("gputime", f"{FAST} -l ro 1 + 1")
    monkeypatch.setattr(recorder_mod, "store_for", lambda p: Store(p, readonly=True))
    capsys.readouterr()
    ip.run_line_magic("gputime", f"{FAST} --vs ro 1 + 1")
    out, err = capsys.readouterr()
    assert "per call on CPU" in out and "vs ro (#1" in out  # a read-only history still answers --vs
    assert "attempt to write a readonly database" in err and len(rows(hist)) == 1
