"""The history store: saving, what a row keeps, migrations, concurrent writers, and a store that
cannot be written."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import gpumagic
from gpumagic.history import saving as recorder_mod
from gpumagic.history import store as store_mod
from gpumagic.history.rows import pack_samples, statement_key, unpack_clocks, unpack_samples
from gpumagic.history.saving import Recorder
from gpumagic.history.schema import CURRENT_VERSION, MIGRATIONS, migrate, version_of
from gpumagic.history.store import Store, default_path, resolve_path
from gpumagic.history.versus import differences, ratio_ci, versus

from ..helpers import fake_result

pytestmark = pytest.mark.usefixtures("fresh_recorder")


# --- where the store lives
# ---------------------------------------------------------------------------------------
def test_the_store_lives_under_xdg_data_home_and_moves_or_turns_off():
    assert default_path({"XDG_DATA_HOME": "/data"}) == default_path(
        {"XDG_DATA_HOME": "/data", "HOME": "/h"}
    )
    assert str(default_path({"XDG_DATA_HOME": "/data"})) == "/data/gpumagic/history.sqlite"
    assert str(default_path({})).endswith(".local/share/gpumagic/history.sqlite")
    assert str(resolve_path(None, {"GPUMAGIC_HISTORY": "/x/h.sqlite"})) == "/x/h.sqlite"
    assert resolve_path(None, {"GPUMAGIC_HISTORY": "off"}) is None
    assert (
        resolve_path("", {"GPUMAGIC_HISTORY": "/x/h.sqlite"}) is None
    )  # %config GpuMagics.history = ""
    assert (
        str(resolve_path("/y/h.sqlite", {"GPUMAGIC_HISTORY": "/x/h.sqlite"})) == "/y/h.sqlite"
    )  # %config wins


def test_the_test_session_never_writes_to_the_users_history():
    assert os.environ["GPUMAGIC_HISTORY"] != str(default_path())


# --- saving
# --------------------------------------------------------------------------------------------------
def test_a_saved_result_keeps_its_samples_figures_and_provenance(tmp_path):
    path = tmp_path / "h.sqlite"
    r = fake_result(sample_clocks=[1980] * 60, meta={"torch": "9.9"})
    out = Recorder(str(path), label="base").record(r, "A @ B ", setup="A = 1")
    assert out.ids == [1] and not out.notes and not out.lines
    row = Store(path).get(1)
    assert unpack_samples(row["samples"]) == r.samples  # exact: float64
    assert len(row["samples"]) == 8 * 60  # compact: 8 bytes a sample
    assert unpack_clocks(row["sample_clocks"]) == [1980] * 60
    assert row["median"] == pytest.approx(r.median) and row["iqr"] == pytest.approx(r.iqr)
    assert (row["label"], row["statement"], row["setup"], row["kind"]) == (
        "base",
        "A @ B",
        "A = 1",
        "gputime",
    )
    assert row["stmt_key"] == statement_key("A @ B")
    assert row["n_samples"] == 60 and row["calls_per_sample"] == 10
    assert row["device"] == "CPU" and row["backend"] == "host" and row["torch"] == "9.9"
    assert row["host"] and row["created"] > 0 and row["python"] and len(row["uid"]) == 16
    assert row["git_commit"] and row["git_dirty"] in (
        0,
        1,
    )  # the tests run inside the project's git tree
    assert json.loads(row["extra"])["stop_reason"] == ""
    assert Store(path).connect().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_off_history_saves_nothing(tmp_path):
    out = Recorder("").record(fake_result(), "x")
    assert out.ids == [] and not out.notes


def test_comparison_and_sweep_rows_share_a_run(tmp_path):
    from gpumagic.timing.compare_result import Comparison
    from gpumagic.timing.sweep_result import Sweep, SweepPoint

    path = tmp_path / "h.sqlite"
    comparison = Comparison(
        results={"fp32": fake_result(), "bf16": fake_result(5e-4)}, baseline="fp32"
    )
    ids = (
        Recorder(str(path), label="cmp")
        .record_many(comparison, {"fp32": "A @ A", "bf16": "Ah @ Ah"})
        .ids
    )
    points = [
        SweepPoint({"n": 1}, "s", fake_result()),
        SweepPoint({"n": 2}, "s", None, status="failed"),
    ]
    ids += Recorder(str(path)).record_many(Sweep(points, ["n"], ["s"]), {"s": "A @ A"}).ids
    rows = Store(path).query()
    assert ids == [1, 2, 3] and [r["kind"] for r in rows] == ["compare", "compare", "sweep"]
    assert rows[0]["run"] == rows[1]["run"] != rows[2]["run"]
    assert [r["variant"] for r in rows] == ["fp32", "bf16", "s"] and json.loads(
        rows[2]["params"]
    ) == {"n": 1}
    assert rows[1]["statement"] == "Ah @ Ah" and rows[0]["label"] == "cmp"


def test_history_is_a_dataframe_one_row_a_result(tmp_path):
    path = tmp_path / "h.sqlite"
    Recorder(str(path), label="a").record(fake_result(), "x + 1")
    Recorder(str(path)).record(fake_result(2e-3), "x * 2")
    df = gpumagic.history(path=path)
    assert list(df["statement"]) == ["x + 1", "x * 2"] and df["median"].iloc[1] == pytest.approx(
        2e-3, rel=0.05
    )
    assert list(gpumagic.history(label="a", path=path)["statement"]) == ["x + 1"]
    assert list(gpumagic.history(statement="x * 2", path=path)["id"]) == [2]
    assert (
        len(gpumagic.history(device="CPU", path=path)) == 2
        and len(gpumagic.history(device="GPU", path=path)) == 0
    )
    assert gpumagic.history(path=path, samples=True)["samples"].iloc[0] == fake_result().samples
    assert len(gpumagic.history(path=tmp_path / "none.sqlite")) == 0


def test_history_keeps_each_results_energy_and_shows_it_as_columns(tmp_path):
    path = tmp_path / "h.sqlite"
    # 2 s of back-to-back sampling at 500 W (readings every 0.1 s, in mJ)
    pieces = [(0.1, 50.0)] * 20
    measured = fake_result(2e-3, device="NVIDIA H200", energy_pieces=pieces, energy_counter=True)
    measured.backend = "cuda-events"
    Recorder(str(path)).record(measured, "a @ b")
    Recorder(str(path)).record(fake_result(), "x + 1")
    df = gpumagic.history(path=path)
    assert df["power_w"].iloc[0] == pytest.approx(500.0)
    assert df["energy_per_call"].iloc[0] == pytest.approx(measured.energy.joules_per_call)
    assert pd.isna(df["energy_per_call"].iloc[1]) and pd.isna(df["power_w"].iloc[1])
    cols = list(df.columns)
    assert cols.index("byte_rate") < cols.index("energy_per_call") < cols.index("device")


def test_plot_history_draws_median_and_iqr_over_time(tmp_path):
    path = tmp_path / "h.sqlite"
    for i in range(3):
        Recorder(str(path), label="m").record(fake_result(1e-3 * (1 + i / 10), seed=i), "A @ B")
    plot = gpumagic.plot_history(label="m", path=path)
    assert "3 results in 1 series" in str(plot)
    fig = plot.figure()
    assert fig.xaxis[0].__class__.__name__ == "DatetimeAxis"
    bundle = plot._repr_mimebundle_()
    assert "Bokeh" in bundle["text/html"] and "text/plain" in bundle
    assert "no saved results" in str(gpumagic.plot_history(path=tmp_path / "none.sqlite"))


# --- versus
# --------------------------------------------------------------------------------------------------
def test_the_bootstrap_interval_calls_a_real_change_and_not_noise():
    base = fake_result(1e-3, seed=1).samples
    assert (
        ratio_ci(base, fake_result(1e-3, seed=2).samples).verdict
        == "no difference the samples can show"
    )
    slower = ratio_ci(base, fake_result(1.1e-3, seed=3).samples)
    assert slower.verdict == "slower" and slower.low > 1 and 1.08 < slower.ratio < 1.12
    assert ratio_ci(base, fake_result(0.8e-3, seed=4).samples).verdict == "faster"
    # seeded: the same two runs always give the same interval
    assert ratio_ci(base, fake_result(1.1e-3, seed=3).samples) == slower
    # a real change under the noise floor (1%) is no difference worth a verdict
    tight = [1e-3] * 50 + [1.0001e-3] * 50
    assert (
        ratio_ci(tight, [s * 1.005 for s in tight]).verdict == "no difference the samples can show"
    )


def test_versus_warns_when_device_clocks_driver_or_versions_differ():
    ref = {
        "device": "NVIDIA H100",
        "device_key": "GPU-a",
        "device_uuid": "GPU-a",
        "backend": "cuda-events",
    }
    ref |= {
        "sm_clock_prevailing": 1980,
        "driver": "570.1",
        "torch": "2.5",
        "cuda": "12.4",
        "cudnn": "90100",
    }
    new = dict(
        ref,
        device_key="GPU-b",
        device_uuid="GPU-b",
        sm_clock_prevailing=1500,
        driver="575.2",
        torch="2.6",
    )
    said = differences(ref, new)
    assert any(s.startswith("device differs") and "GPU-a" in s and "GPU-b" in s for s in said)
    assert "SM clock differs: 1980 MHz then, 1500 MHz now (prevailing while sampling)" in said
    assert (
        "driver differs: 570.1 then, 575.2 now" in said
        and "torch differs: 2.5 then, 2.6 now" in said
    )
    assert not any("CUDA" in s or "cuDNN" in s for s in said)
    assert differences(ref, dict(ref, sm_clock_prevailing=1970)) == []  # within the clock band
    v = versus({**ref, "id": 3, "median": 1e-3, "samples": pack_samples([1e-3] * 20),
                "statement": "a"},
               {**new, "samples": [1e-3] * 20, "statement": "b"}, ref_name="base")  # fmt: skip
    assert (
        "vs base (#3" in str(v)
        and "\u26a0 device differs" in str(v)
        and "another statement: a" in str(v)
    )
    assert (
        v.to_dataframe().attrs["verdict"] == "no difference the samples can show"
        and "\u26a0" in v._repr_html_()
    )


# --- migrations
# --------------------------------------------------------------------------------------------------
V1_ROW = {"created": 1.0, "label": "old", "statement": "A @ B", "stmt_key": statement_key("A @ B")}
V1_ROW |= {"samples": pack_samples([1e-3, 2e-3]), "n_samples": 2, "median": 1.5e-3, "device": "CPU"}


@pytest.mark.parametrize("version", range(CURRENT_VERSION))
def test_a_store_of_every_earlier_version_migrates_with_its_rows(tmp_path, version):
    path = tmp_path / "h.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=version)
    if version >= 1:
        for i in range(3):
            row = V1_ROW | (
                {"uid": f"{i:016x}"} if version >= 2 else {}
            )  # unique from version 2 on
            cols = ", ".join(row)
            conn.execute(
                f"INSERT INTO results ({cols}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()),
            )
    conn.close()
    store = Store(path)
    rows = store.query()
    assert version_of(store.connect()) == CURRENT_VERSION == len(MIGRATIONS)
    assert len(rows) == (3 if version >= 1 else 0)
    for row in rows:
        assert row["label"] == "old" and unpack_samples(row["samples"]) == [1e-3, 2e-3]
        assert row["kind"] == "gputime" and row["run"] is None and row["sample_clocks"] is None
    assert len({r["uid"] for r in rows}) == len(rows) and all(len(r["uid"]) == 16 for r in rows)
    # and a migrated store takes new rows like a new one
    assert Recorder(str(path)).record(fake_result(), "A @ B").ids == [len(rows) + 1]


def test_the_v1_schema_is_kept_verbatim_for_the_migration_tests():
    assert MIGRATIONS[0].lstrip().startswith("CREATE TABLE results") and not re.search(
        r"\buid\b", MIGRATIONS[0]
    )


def test_a_store_from_a_newer_gpumagic_is_left_alone(tmp_path, capsys):
    path = tmp_path / "h.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    out = Recorder(str(path)).record(fake_result(), "x")
    assert out.ids == [] and "newer than this gpumagic's" in out.notes[0]


# --- a store in the way
# ------------------------------------------------------------------------------------------
def test_a_corrupt_store_costs_one_line_said_once(tmp_path):
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    out = Recorder(str(path)).record(fake_result(), "x")
    assert out.ids == [] and len(out.notes) == 1
    note = out.notes[0]
    assert "\n" not in note and "not saved (file is not a database" in note and str(path) in note
    assert "the result above is complete" in note and "GPUMAGIC_HISTORY=off" in note
    again = Recorder(str(path)).record(fake_result(), "x").notes  # in full once per cause,
    assert again == ["gpumagic history: not saved (file is not a database, as said above)."]
    assert path.read_bytes().startswith(b"this is not a database")  # never overwritten


def test_a_read_only_store_costs_one_line(tmp_path, monkeypatch):
    # Running as root, file modes do not stop a write: the read-only store is opened with SQLite's
    # mode=ro instead.
    path = tmp_path / "h.sqlite"
    Recorder(str(path)).record(fake_result(), "x")
    monkeypatch.setattr(recorder_mod, "store_for", lambda p: Store(p, readonly=True))
    out = Recorder(str(path)).record(fake_result(), "x")
    assert out.ids == [] and "attempt to write a readonly database" in out.notes[0]
    assert Store(path).count() == 1


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes through file modes"
)
def test_a_store_in_a_read_only_folder_costs_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    Recorder(str(folder / "h.sqlite")).record(fake_result(), "x")
    recorder_mod._STORES.clear()
    os.chmod(folder / "h.sqlite", 0o444)
    os.chmod(folder, 0o555)
    try:
        out = Recorder(str(folder / "h.sqlite")).record(fake_result(), "x")
        assert out.ids == [] and len(out.notes) == 1
    finally:
        os.chmod(folder, 0o755)


def test_a_store_that_cannot_be_created_costs_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    out = Recorder(str(tmp_path / "file" / "h.sqlite")).record(fake_result(), "x")
    assert out.ids == [] and "not saved" in out.notes[0]


def test_a_locked_store_waits_then_costs_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "h.sqlite"
    Recorder(str(path)).record(fake_result(), "x")
    recorder_mod._STORES.clear()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another notebook in the middle of a long write
    try:
        out = Recorder(str(path)).record(fake_result(), "x")
        assert out.ids == [] and "database is locked" in out.notes[0]
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert Recorder(str(path)).record(fake_result(), "x").ids == [2]  # open again: saved


def test_a_full_disk_costs_one_line(tmp_path):
    path = tmp_path / "h.sqlite"
    rec = Recorder(str(path))
    rec.record(fake_result(), "x")
    conn = rec.store.connect()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    out = rec.record(fake_result(n=5000), "x")
    assert out.ids == [] and "full" in out.notes[0]


def test_the_script_api_saves_and_survives_a_broken_store(tmp_path, monkeypatch, capsys):
    path = tmp_path / "h.sqlite"
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(path))
    r = gpumagic.gputime("sum(range(10))", globals={}, samples=5, calls_per_sample=10, label="api")
    assert gpumagic.history(label="api")["statement"].tolist() == ["sum(range(10))"]
    c = gpumagic.compare(
        {"a": "1 + 1", "b": "2 * 2"}, globals={}, samples=4, calls_per_sample=10, history=False
    )
    assert c is not None and len(gpumagic.history()) == 1
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"garbage" * 200)
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(broken))
    r = gpumagic.gputime("sum(range(10))", globals={}, samples=5, calls_per_sample=10)
    assert r.samples and "file is not a database" in capsys.readouterr().err


# --- two writers at once
# -----------------------------------------------------------------------------------------
WRITER = textwrap.dedent(
    """
    import sys
    from gpumagic.history.saving import Recorder
    from gpumagic.timing import TimingResult
    rec = Recorder(sys.argv[1])
    sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
    for i in range(int(sys.argv[2])):
        samples = [1e-3 + i * 1e-9] * 50
        r = TimingResult(samples=samples, calls_per_sample=1, device="CPU", backend="host")
        out = rec.record(r, f"writer {sys.argv[3]} #{i}")
        assert out.ids and not out.notes, out.notes
    """
)


def run_writers(path, n: int) -> None:
    """Two processes, each saving ``n`` results one by one, started together."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(n), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in "ab"
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:  # both start writing at once
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def test_two_processes_writing_at_once_lose_no_row(tmp_path):
    path, n = tmp_path / "h.sqlite", 150
    Store(
        path
    ).connect()  # created (and migrated) once; the writers race on rows, not on the schema
    run_writers(path, n)
    rows = Store(path).query()
    assert len(rows) == 2 * n and len({r["id"] for r in rows}) == 2 * n
    assert {r["statement"] for r in rows} == {f"writer {t} #{i}" for t in "ab" for i in range(n)}


def test_two_processes_creating_a_new_store_at_once_both_save(tmp_path):
    path = tmp_path / "new" / "h.sqlite"
    run_writers(path, 20)
    assert Store(path).count() == 40
