"""%gputime through a real IPython InteractiveShell, on the CPU."""

from __future__ import annotations

from typing import ClassVar

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.magics import GpuMagics, split_options
from gpumagic.timing import TimingResult

FAST = "-r 5 -w 1 "  # keep the shell tests quick: fixed samples, one warm-up call


def test_line_magic_prints_one_line_on_cpu(ip):
    ip.user_ns["xs"] = list(range(100))
    with capture_output() as cap:
        out = ip.run_line_magic("gputime", "sum(xs)")
    assert out is None
    first = cap.stdout.splitlines()[0]
    assert " per call on CPU (median \u00b1 IQR of " in first


def test_o_returns_the_result_and_q_silences(ip):
    with capture_output() as cap:
        r = ip.run_line_magic("gputime", FAST + "-q -o 1 + 1")
    assert cap.stdout == ""
    assert isinstance(r, TimingResult) and len(r.samples) == 5


def test_n_and_r_set_calls_and_samples(ip):
    r = ip.run_line_magic("gputime", "-n 7 -r 4 -q -o 1 + 1")
    assert r.calls_per_sample == 7 and len(r.samples) == 4
    r = ip.run_line_magic("gputime", "-n7 -r4 -q -o 1 + 1")  # glued, as %timeit accepts
    assert r.calls_per_sample == 7 and len(r.samples) == 4


def test_statement_text_is_kept_verbatim(ip):
    ip.user_ns["d"] = {"k": 3, "-n 5": 4}
    r = ip.run_line_magic("gputime", FAST + "-q -o d['k'] + d[\"-n 5\"]")
    assert r.calls_per_sample != 5  # the -n inside the string is not an option
    assert "d" in ip.user_ns


def test_cell_mode_runs_setup_once_and_leaves_the_namespace_alone(ip):
    ip.user_ns["log"] = []
    r = ip.run_cell_magic("gputime", FAST + "-q -o acc = 0; log.append('setup')", "acc += 1\ny = acc * 2")
    assert isinstance(r, TimingResult)
    assert ip.user_ns["log"] == ["setup"]
    assert "acc" not in ip.user_ns and "y" not in ip.user_ns


def test_ipython_syntax_inside_the_statement(ip):
    r = ip.run_cell_magic("gputime", FAST + "-q -o", "x = %time 1\n")
    assert isinstance(r, TimingResult)


def test_config_changes_defaults(ip):
    ip.run_line_magic("config", "GpuMagics.precision = 5")
    ip.run_line_magic("config", "GpuMagics.time_budget = 0.05")
    magics = next(c for c in ip.configurables if isinstance(c, GpuMagics))
    assert magics.precision == 5 and magics.time_budget == 0.05
    r = ip.run_line_magic("gputime", "-q -o 1 + 1")
    assert r.precision == 5
    assert r.wall_time < 1.0
    with capture_output() as cap:
        ip.run_line_magic("config", "GpuMagics")
    assert "time_budget" in cap.stdout and "kernel_time" in cap.stdout


def test_syntax_error_is_reported_as_ipython_reports_it(ip):
    with pytest.raises(SyntaxError):
        ip.run_line_magic("gputime", "x = = 1")


def test_exception_in_the_statement_propagates_with_its_traceback(ip):
    ip.user_ns["boom"] = lambda: 1 / 0
    with pytest.raises(ZeroDivisionError):
        ip.run_line_magic("gputime", "boom()")


def test_run_cell_shows_the_traceback(ip):
    with capture_output() as cap:
        res = ip.run_cell("%gputime undefined_name_xyz + 1")
    assert isinstance(res.error_in_exec, NameError)
    assert "undefined_name_xyz" in cap.stdout + cap.stderr


@pytest.mark.parametrize(
    "line, message",
    [
        ("", "needs a statement"),
        ("-n 0 1", "calls_per_sample must be at least 1"),
        ("--flush-l2 -n 5 1", "--flush-l2 times each call alone"),
        ("--bogus 1", "unrecognized arguments: --bogus"),
        ("-n x 1", "invalid int value"),
    ],
)
def test_bad_options_are_usage_errors(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("gputime", line)


def test_empty_cell_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="statement in the cell body"):
        ip.run_cell_magic("gputime", "x = 1", "   \n")


def test_gpu_options_without_cuda_fall_back_with_a_note(ip):
    with capture_output() as cap:
        r = ip.run_line_magic("gputime", FAST + "-o --graph 1 + 1")
    assert r.backend == "host"
    assert "--graph needs CUDA" in cap.stdout


def test_cpu_flag(ip):
    r = ip.run_line_magic("gputime", FAST + "-q -o --cpu 1 + 1")
    assert r.backend == "host" and r.device == "CPU"


def test_keyboard_interrupt_prints_what_was_measured(ip):
    ip.user_ns["state"] = {"n": 0}
    stmt = "state['n'] += 1\nif state['n'] == 400: raise KeyboardInterrupt"
    with capture_output() as cap:
        r = ip.run_cell_magic("gputime", "-n 10 -r 1000 -w 0 -o", stmt)
    assert r.interrupted and 0 < len(r.samples) < 40
    assert "interrupted" in cap.stdout


def test_help_is_the_docstring_with_options(ip):
    doc = ip.find_line_magic("gputime").__doc__
    assert "%%gputime [options] [setup]" in doc
    assert "--flush-l2" in doc and "--graph" in doc


def test_unload_removes_the_magics(shell):
    shell.run_line_magic("unload_ext", "gpumagic")
    try:
        assert shell.find_line_magic("gputime") is None
    finally:
        shell.run_line_magic("load_ext", "gpumagic")
    assert shell.find_line_magic("gputime") is not None
    assert sum(isinstance(c, GpuMagics) for c in shell.configurables) == 1


class _Parser:
    _option_string_actions: ClassVar[dict[str, object]] = {
        "-n": type("A", (), {"nargs": None})(),
        "-q": type("A", (), {"nargs": 0})(),
        "--graph": type("A", (), {"nargs": 0})(),
    }


@pytest.mark.parametrize(
    "line, opts, rest",
    [
        ("-n 10 A @ B", "-n 10", "A @ B"),
        ("-n10 -q A", "-n 10 -q", "A"),
        ("--graph f(x, '-q')", "--graph", "f(x, '-q')"),
        ("-- -x + 1", "", "-x + 1"),
        ("-x + 1", "", "-x + 1"),
        ("--nope A", "--nope", "A"),
        ("torch.matmul(A, B)", "", "torch.matmul(A, B)"),
    ],
)
def test_split_options(line, opts, rest):
    assert split_options(line, _Parser) == (opts, rest)
