"""Profiles in the history: ``%%gpuprofile`` saves each profile's summaries (``-l NAME``), ``--vs``
diffs against one, ``gpumagic.history()`` lists them, and a store made by the version-2 schema keeps
its rows through the migration that adds them. The timings' lookups (``%gputime --vs``, export,
check, plot) never meet a profile."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import gpumagic
from gpumagic.analysis.profile_summary import ProfileSummary, summarize
from gpumagic.api.diff import versus_saved
from gpumagic.capture.chrome.reader import load_trace
from gpumagic.history.baseline import export
from gpumagic.history.profiles import ProfileRecorder, UnknownProfileError, unpack_summary
from gpumagic.history.rows import pack_samples, statement_key
from gpumagic.history.saving import Recorder, UnknownReferenceError
from gpumagic.history.schema import CURRENT_VERSION, V1_SCHEMA, V2_STEP, migrate, version_of
from gpumagic.history.store import Store
from gpumagic.render.diff_view import ProfileDiff

from ..helpers import DATA, fake_result

torch = pytest.importorskip("torch")

TORCH = {"matmul": DATA / "torch_matmul_4096.json.gz", "block": DATA / "torch_block.json.gz"}


def rows(path, **kw):
    return Store(path, readonly=True).query(**kw)


# --- the migration
# ------------------------------------------------------------------------------------------------
def test_a_store_made_by_the_version_2_schema_keeps_its_rows_and_takes_profiles(tmp_path):
    path = tmp_path / "h.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for script in (V1_SCHEMA, V2_STEP):  # the old schema, verbatim, as an older gpumagic made it
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 2")
    old = []
    for i, (kind, label) in enumerate([("gputime", "base"), ("compare", "cmp"), ("sweep", None)]):
        row = {
            "created": 1.0 + i,
            "label": label,
            "statement": "A @ B",
            "stmt_key": statement_key("A @ B"),
        }
        row |= {
            "samples": pack_samples([1e-3, 2e-3 + i]),
            "n_samples": 2,
            "median": 1.5e-3,
            "device": "CPU",
        }
        row |= {"uid": f"{i:016x}", "kind": kind, "device_key": "CPU@h", "extra": "{}"}
        conn.execute(
            f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        old.append(row)
    before = [
        dict(zip([d[0] for d in c.description], r))
        for c in [conn.execute("SELECT * FROM results")]
        for r in c
    ]
    conn.close()

    saved = ProfileRecorder(str(path), label="p").record(
        SimpleNamespace(trace=load_trace(TORCH["block"])), "y = f(x)"
    )
    store = Store(path)
    assert version_of(store.connect()) == CURRENT_VERSION == 3
    after = store.query()
    assert saved.ids == [4] and len(after) == 4
    for was, now in zip(before, after[:3]):
        assert {k: now[k] for k in was} == was  # every old column, value for value
        assert now["summary"] is None and now["trace_path"] is None and now["gpu_busy"] is None
    assert after[3]["kind"] == "profile" and after[3]["label"] == "p" and after[3]["n_samples"] == 0
    # the timings' own lookups still find the old rows, never the profile
    assert store.last_labelled("base")["id"] == 1 and store.last_labelled("p") is None
    assert store.labels() == ["cmp", "base"] and store.labels(profiles=True) == ["p"]
    assert store.last_of(statement_key("A @ B"), "CPU@h")["id"] == 3
    assert (
        export(store, tmp_path / "b.json") == 3
    )  # the three timings (one per kind), not the profile


def test_a_fresh_store_runs_every_step_to_the_same_schema(tmp_path):
    a, b = sqlite3.connect(tmp_path / "a.sqlite"), sqlite3.connect(tmp_path / "b.sqlite")
    migrate(a)
    migrate(b, target=2)
    migrate(b)
    cols = [[r[1:3] for r in c.execute("PRAGMA table_info(results)")] for c in (a, b)]
    assert (
        cols[0] == cols[1] and ("summary", "BLOB") in cols[0] and ("trace_path", "TEXT") in cols[0]
    )


# --- saving and --vs, through the recorder
# ----------------------------------------------------------------------
def test_the_saved_summary_is_the_profiles_and_the_diff_against_it_is_gpumagic_diffs(tmp_path):
    path = str(tmp_path / "h.sqlite")
    a, b = (load_trace(TORCH[k]) for k in ("matmul", "block"))
    first = ProfileRecorder(path, label="fp32").record(SimpleNamespace(trace=a), "a = x @ x")
    row = Store(path).get(first.ids[0])
    back = ProfileSummary.from_dict(unpack_summary(row["summary"]))
    pd.testing.assert_frame_equal(back.kernels, summarize(a).kernels, check_dtype=False)
    assert row["gpu_busy"] == pytest.approx(a.gpu_busy_ns() * 1e-9)
    assert row["kernels"] == len(a.kernels) and row["wall"] > 0

    saved = ProfileRecorder(path, vs="fp32").record(SimpleNamespace(trace=b), "b = block(x)")
    out = SimpleNamespace(diff=versus_saved(saved), ids=saved.ids)
    assert isinstance(out.diff, ProfileDiff) and out.ids == [2]
    direct = gpumagic.diff(a, b)
    assert (out.diff.data.busy_a, out.diff.data.busy_b) == (a.gpu_busy_ns(), b.gpu_busy_ns())
    assert out.diff.data.rows["delta_ns"].sum() == b.gpu_busy_ns() - a.gpu_busy_ns()
    cols = ["kind", "name_a", "name_b", "ns_a", "ns_b", "match"]
    pd.testing.assert_frame_equal(out.diff.data.rows[cols], direct.data.rows[cols])
    assert "#1 fp32" in str(out.diff) and "#2" in str(out.diff)
    # by id, and last (the previous profile on this device, whatever its cell)
    by_id = ProfileRecorder(path, vs="1").record(SimpleNamespace(trace=b), "c")
    assert versus_saved(by_id).data.busy_a == a.gpu_busy_ns()
    last = versus_saved(ProfileRecorder(path, vs="last").record(SimpleNamespace(trace=a), "d"))
    assert (last.data.busy_a, last.data.busy_b) == (b.gpu_busy_ns(), a.gpu_busy_ns())


def test_profiles_and_timings_never_answer_each_others_vs(tmp_path):
    path = str(tmp_path / "h.sqlite")
    Recorder(path, label="t").record(fake_result(n=30), "x + 1")
    ProfileRecorder(path, label="p").record(
        SimpleNamespace(trace=load_trace(TORCH["block"])), "x + 1"
    )
    with pytest.raises(UnknownProfileError, match=r"--vs t: no profile .*\(labels: p\)"):
        ProfileRecorder(path, vs="t")
    with pytest.raises(UnknownProfileError):
        ProfileRecorder(path, vs="1")  # a timing's id
    with pytest.raises(UnknownReferenceError, match=r"no result .*\(labels: t\)"):
        Recorder(path, vs="p")
    with pytest.raises(UnknownReferenceError):
        Recorder(path, vs="2")  # a profile's id
    # %gputime --vs last of the same text finds the timing, not the later profile
    again = Recorder(path, vs="last").record(fake_result(1.01e-3, n=30), "x + 1")
    assert again.versus is not None and again.versus.ref["id"] == 1


def test_the_path_of_a_kept_trace_is_saved(tmp_path):
    path = str(tmp_path / "h.sqlite")
    kept = tmp_path / "t.json"
    kept.write_text("{}")
    trace = load_trace(TORCH["block"])
    ProfileRecorder(path).record(SimpleNamespace(trace=trace), "c", str(kept))
    ProfileRecorder(path).record(
        SimpleNamespace(trace=trace, files={"report": "/p/r.nsys-rep", "sqlite": "s"}), "c"
    )
    ProfileRecorder(path).record(
        SimpleNamespace(trace=trace, files={}), "c", str(tmp_path / "never-written.json")
    )
    assert [r["trace_path"] for r in rows(path)] == [str(kept), "/p/r.nsys-rep", None]


# --- gpumagic.history()
# --------------------------------------------------------------------------------------------
def test_history_lists_timings_and_profiles_with_their_kind(tmp_path):
    path = str(tmp_path / "h.sqlite")
    Recorder(path, label="t").record(fake_result(n=30), "x + 1")
    ProfileRecorder(path, label="p").record(
        SimpleNamespace(trace=load_trace(TORCH["block"])), "y = f(x)"
    )
    df = gpumagic.history(path=path)
    assert df["kind"].tolist() == ["gputime", "profile"]
    assert df["median"].notna().tolist() == [True, False] and df["gpu_busy"].notna().tolist() == [
        False,
        True,
    ]
    assert gpumagic.history(path=path, kind="profile")["label"].tolist() == ["p"]
    assert gpumagic.history(path=path, kind="gputime")["label"].tolist() == ["t"]
    assert gpumagic.history("p", path=path)["statement"].tolist() == ["y = f(x)"]
    with pytest.raises(ValueError, match="kind must be one of"):
        gpumagic.history(path=path, kind="profiles")
    assert len(gpumagic.plot_history(path=path).rows) == 1  # drawn from timings alone


# --- the magic, on the CPU
# ----------------------------------------------------------------------------------------
def test_every_profile_is_saved_and_l_labels_it(ip, hist):
    ip.user_ns["x"] = torch.randn(32, 32)
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", "-w 0 -l base -o rep", "y = x @ x")
        ip.run_cell_magic("gpuprofile", "-w 0", "y = x + 1")
    assert len(cap.outputs) == 2  # the reports, nothing more without --vs
    saved = rows(hist)
    assert [(r["kind"], r["label"], r["statement"]) for r in saved] == [
        ("profile", "base", "y = x @ x"),
        ("profile", None, "y = x + 1"),
    ]
    assert ip.user_ns["rep"].trace.nvtx["text"].tolist() == [
        "base"
    ]  # -l is --label: the range's name too
    assert saved[0]["device"] == "CPU" and saved[0]["backend"] == "torch.profiler"


def test_vs_shows_the_diff_after_the_report(ip, hist):
    ip.user_ns["x"] = torch.randn(32, 32)
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", "-w 0 --vs last", "y = x @ x")
    assert "vs last: no earlier profile on this device; this one is saved" in cap.stdout
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", "-w 0 -l two --vs last", "y = (x @ x).relu()")
        ip.run_cell_magic("gpuprofile", "-w 0 --vs=two", "y = x * 2")
        ip.run_cell_magic("gpuprofile", "-w 0 --vs 1", "y = x * 3")
    assert len(cap.outputs) == 6  # report, diff; three times
    assert "GPU busy 0 ns (#1) \u2192 0 ns (#2 two)" in cap.outputs[1].data["text/plain"]
    assert "(#2 two) \u2192" in cap.outputs[3].data["text/plain"]
    assert "(#1) \u2192 0 ns (#4)" in cap.outputs[5].data["text/plain"]
    assert "text/html" in cap.outputs[1].data


def test_an_unknown_reference_or_the_history_off_fails_before_the_cell_runs(ip, hist):
    ip.user_ns["calls"] = []
    with pytest.raises(
        UsageError, match=r"--vs nope: no profile with that label or id .*no labelled profiles yet"
    ):
        ip.run_cell_magic("gpuprofile", "-w 0 --vs nope", "calls.append(1)")
    ip.run_line_magic("config", "GpuMagics.history = ''")
    with pytest.raises(UsageError, match="history, which is off"):
        ip.run_cell_magic("gpuprofile", "-w 0 --vs last", "calls.append(1)")
    with capture_output():
        ip.run_cell_magic("gpuprofile", "-w 0", "calls.append(1)")  # off: runs, saves nothing
    assert ip.user_ns["calls"] == [1] and rows(hist) == []
    with pytest.raises(UsageError, match="--vs go with the other backends"):
        ip.run_cell_magic("gpuprofile", "--ncu --vs last", "calls.append(1)")


def test_a_store_in_the_way_never_hides_the_report(ip, hist, capsys):
    hist.write_bytes(b"not a database" * 100)
    ip.user_ns["x"] = torch.ones(4)
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", "-w 0", "y = x + 1")
    assert len(cap.outputs) == 1 and "gpumagic history: not saved" in cap.stderr
