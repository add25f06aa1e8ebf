"""The command line under hostile inputs: exit 0 ok, 1 slower only, 2 a usage or input error, each
with a message naming the file (issue 57, round 3)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from gpumagic.__main__ import main
from gpumagic.cli.history import EXIT_UNREADABLE
from gpumagic.history.baseline import FORMAT
from gpumagic.history.saving import Recorder

from ..helpers import fake_result

DATA = pathlib.Path(__file__).parents[1] / "data"
MATMUL = str(DATA / "torch_matmul_4096.json.gz")


@pytest.fixture
def db(tmp_path, fresh_recorder):
    path = tmp_path / "h.sqlite"
    Recorder(str(path)).record(fake_result(1e-3), "A @ B")
    return path


@pytest.mark.parametrize(
    "entry",
    [{"samples": "abc"}, "not an object", {"samples": [1e-3], "params": {"n": 1}}, {"samples": []}],
)
def test_check_with_a_malformed_baseline_entry_exits_2_naming_the_file(db, tmp_path, entry, capsys):
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"format": FORMAT, "version": 1, "results": [entry]}))
    assert main(["check", str(baseline), "--db", str(db)]) == EXIT_UNREADABLE  # was a crash, 1
    err = capsys.readouterr().err
    assert f"{baseline}: result 1 " in err


def test_export_into_a_missing_folder_blames_that_file_not_the_history(db, tmp_path, capsys):
    target = tmp_path / "no" / "such" / "x.json"
    assert main(["history", "--db", str(db), "--export", str(target)]) == EXIT_UNREADABLE
    err = capsys.readouterr().err
    assert f"cannot write {target}" in err and "cannot read" not in err


def test_a_broken_stdout_pipe_does_not_blame_the_history(db):
    script = (
        "import sys, os; from gpumagic.__main__ import main; r, w = os.pipe(); os.close(r); "
        "sys.stdout = os.fdopen(w, 'w', buffering=1); "
        f"code = main(['history', '--db', {str(db)!r}]); sys.stderr.write(f'rc={{code}}')"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "cannot read" not in p.stderr and "broken pipe" in p.stderr and "rc=2" in p.stderr


@pytest.mark.parametrize("limit", ["-1", "-5", "0"])
def test_a_limit_below_one_is_a_usage_error(db, limit):
    with pytest.raises(SystemExit) as stop:
        main(["history", "--db", str(db), "--limit", limit])
    assert stop.value.code == 2


def test_diff_gate_refuses_a_side_that_recorded_no_kernels(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 5}
    empty.write_text(json.dumps({"traceEvents": [op]}))
    assert main(["diff", MATMUL, str(empty), "--fail-above", "5%"]) == EXIT_UNREADABLE  # was 0
    assert f"B recorded no kernels ({empty})" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--html", "--json"])
def test_diff_into_a_missing_folder_exits_2_naming_the_file(tmp_path, option, capsys):
    target = tmp_path / "no" / "such" / "x.out"
    assert main(["diff", MATMUL, MATMUL, option, str(target)]) == EXIT_UNREADABLE  # was exit 1
    assert f"cannot write {target}" in capsys.readouterr().err
