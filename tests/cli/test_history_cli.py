"""``python -m gpumagic history`` and ``python -m gpumagic check``: the listing, the CSV, the
baseline, and the exit codes a CI step reads."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from gpumagic.__main__ import main
from gpumagic.cli.history import EXIT_MISSING, EXIT_SLOWER, EXIT_UNREADABLE, percentage
from gpumagic.history.baseline import FORMAT
from gpumagic.history.saving import Recorder

from ..helpers import fake_result


@pytest.fixture
def db(tmp_path, fresh_recorder):
    return tmp_path / "h.sqlite"


def save(path, statement, median, label=None, seed=0):
    return Recorder(str(path), label=label).record(fake_result(median, seed=seed), statement).ids[0]


def run(*argv):
    return main(list(argv))


def test_history_lists_saved_results(db, capsys):
    save(db, "A @ B", 1e-3, label="mm")
    save(db, "x + 1", 5e-6)
    assert run("history", "--db", str(db)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["id", "when", "label"] and len(out) == 3
    assert "mm" in out[1] and "\u00b5s \u00b1" in out[1] and "x + 1" in out[2] and "CPU" in out[2]
    assert run("history", "--db", str(db), "--label", "mm") == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert run("history", "--db", str(db), "--limit", "1") == 0
    assert "(the latest 1 results" in capsys.readouterr().out


def test_history_as_csv(db, capsys):
    save(db, "A @ B", 1e-3, label="mm")
    save(db, "x + 1", 5e-6)
    assert run("history", "--db", str(db), "--csv") == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (
        len(table) == 2
        and table[0]["label"] == "mm"
        and float(table[0]["median"]) == pytest.approx(1e-3, 0.05)
    )
    assert table[1]["statement"] == "x + 1" and table[1]["device"] == "CPU"


def test_history_of_an_empty_or_missing_store(db, capsys):
    assert run("history", "--db", str(db)) == 0
    assert "no saved results" in capsys.readouterr().out
    assert not db.exists()  # listing never creates the file


def test_the_cli_reads_the_environment_like_the_magics(db, capsys, monkeypatch):
    save(db, "A @ B", 1e-3, label="env")
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(db))
    assert run("history") == 0 and "env" in capsys.readouterr().out
    monkeypatch.setenv("GPUMAGIC_HISTORY", "off")
    assert run("history") == EXIT_UNREADABLE


def export(db, tmp_path, *extra):
    path = tmp_path / "baseline.json"
    assert run("history", "--db", str(db), "--export", str(path), *extra) == 0
    return path


def test_export_writes_the_latest_result_of_each_statement(db, tmp_path):
    save(db, "A @ B", 2e-3, label="mm")
    save(db, "A @ B", 1e-3, label="mm")
    save(db, "x + 1", 5e-6)
    doc = json.loads(export(db, tmp_path).read_text())
    assert doc["format"] == FORMAT and doc["version"] == 1
    assert [(r["label"], r["id"]) for r in doc["results"]] == [("mm", 2), (None, 3)]
    assert len(doc["results"][0]["samples"]) == 60
    assert len(json.loads(export(db, tmp_path, "--label", "mm").read_text())["results"]) == 1


def test_check_passes_without_a_slowdown(db, tmp_path, capsys):
    save(db, "A @ B", 1e-3, label="mm", seed=1)
    baseline = export(db, tmp_path)
    save(db, "A @ B", 1e-3, label="mm", seed=2)
    assert run("check", str(baseline), "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "no difference the samples can show" in out and "fail above +5.0%" in out


def test_check_fails_on_a_significant_slowdown_beyond_the_threshold(db, tmp_path, capsys):
    save(db, "A @ B", 1e-3, label="mm", seed=1)
    save(db, "x + 1", 1e-5, seed=1)
    baseline = export(db, tmp_path)
    save(db, "A @ B", 1.10e-3, label="mm", seed=2)  # 10% slower
    save(db, "x + 1", 0.9e-5, seed=2)  # faster: never a failure
    assert run("check", str(baseline), "--db", str(db)) == EXIT_SLOWER
    out = capsys.readouterr().out
    assert "FAIL" in out and "slower" in out and "1 significantly slower beyond 5.0%" in out
    assert (
        run("check", str(baseline), "--db", str(db), "--fail-above", "15%") == 0
    )  # slower, but within 15%


def test_check_says_what_differed_between_the_runs(db, tmp_path, capsys):
    save(db, "A @ B", 1e-3, label="mm", seed=1)
    baseline = export(db, tmp_path)
    doc = json.loads(baseline.read_text())
    doc["results"][0]["torch"] = "1.0"
    baseline.write_text(json.dumps(doc))
    save(db, "A @ B", 1e-3, label="mm", seed=2)
    assert run("check", str(baseline), "--db", str(db)) == 0
    assert "\u26a0 torch differs: 1.0 then" in capsys.readouterr().out


def test_check_with_nothing_new_to_compare_exits_3(db, tmp_path, capsys):
    save(db, "A @ B", 1.5e-3, label="mm")  # older than the baseline: not a result to check
    save(db, "A @ B", 1e-3, label="mm")
    baseline = export(db, tmp_path)
    assert (
        run("check", str(baseline), "--db", str(db)) == EXIT_MISSING
    )  # the baseline's own result is not "new"
    assert "MISSING" in capsys.readouterr().out
    assert run("check", str(baseline), "--db", str(db), "--allow-missing") == 0


def test_check_of_an_unreadable_baseline_or_store_exits_2(db, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert run("check", str(bad), "--db", str(db)) == EXIT_UNREADABLE
    assert "not a gpumagic baseline" in capsys.readouterr().err
    assert run("check", str(tmp_path / "none.json"), "--db", str(db)) == EXIT_UNREADABLE
    save(db, "A @ B", 1e-3)
    baseline = export(db, tmp_path)
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not sqlite" * 100)
    assert run("check", str(baseline), "--db", str(corrupt)) == EXIT_UNREADABLE
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        run("check", str(baseline), "--fail-above", "lots")
    assert exc.value.code == 2


def test_fail_above_reads_a_percentage():
    assert percentage("5%") == pytest.approx(0.05) and percentage("12.5") == pytest.approx(0.125)


def test_the_commands_run_as_a_module(db, tmp_path):
    save(db, "A @ B", 1e-3, label="mm")
    env = dict(os.environ, GPUMAGIC_HISTORY=str(db))
    cmd = [sys.executable, "-m", "gpumagic"]
    listed = subprocess.run([*cmd, "history"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "mm" in listed.stdout
    baseline = tmp_path / "b.json"
    subprocess.run([*cmd, "history", "--export", str(baseline)], env=env, check=True, timeout=60)
    checked = subprocess.run(
        [*cmd, "check", str(baseline)], env=env, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == EXIT_MISSING, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    "value, words", [("-1", "-1 results cannot be listed"), ("x", "not a whole")]
)
def test_a_limit_below_one_is_refused_with_the_fix_not_read_as_no_results(db, capsys, value, words):
    save(db, "x + 1", 5e-6)
    with pytest.raises(SystemExit) as info:
        run("history", "--db", str(db), "--limit", value)
    assert info.value.code == 2  # argparse's usage error, never 1 ("slower")
    err = capsys.readouterr().err
    assert "--limit" in err and words in err
    assert run("history", "--db", str(db), "--limit", "5") == 0
    assert "x + 1" in capsys.readouterr().out
