"""%gputime through a real IPython InteractiveShell, on the CPU."""

from __future__ import annotations

import ast
import logging
import re
from typing import ClassVar

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from traitlets import TraitError

from gpumagic.errors import TimingInterrupted
from gpumagic.notebook.magics import GpuMagics, split_options
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
    r = ip.run_cell_magic(
        "gputime", FAST + "-q -o acc = 0; log.append('setup')", "acc += 1\ny = acc * 2"
    )
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
        (
            "-p -3 1",
            r"precision must be at least 1 \(significant digits in printed times\), got -3",
        ),
        ("-p 0 1", r"precision must be at least 1 \(significant digits in printed times\), got 0"),
    ],
)
def test_bad_options_are_usage_errors(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("gputime", line)


@pytest.mark.parametrize(
    "setting, value, message",
    [
        (
            "precision",
            "-1",
            "precision must be at least 1 (significant digits in printed times), got -1",
        ),
        (
            "precision",
            "0",
            "precision must be at least 1 (significant digits in printed times), got 0",
        ),
        (
            "rel_ci",
            "-1",
            "rel_ci must be more than 0 and less than 1 (a fraction of the median: 0.0025 is",
        ),
        ("rel_drift", "0.0", "rel_drift must be more than 0 and less than 1"),
        ("time_budget", "0.0", "time_budget must be positive, got 0.0"),
        ("warmup_time", "-1.0", "warmup_time must be 0 or more (seconds), got -1.0"),
        ("min_warmup_calls", "-1", "min_warmup_calls must be 0 or more, got -1"),
        ("target_sample_time", "0.0", "target_sample_time must be positive (seconds), got 0.0"),
        ("min_samples", "0", "min_samples must be at least 1, got 0"),
        ("min_time", "-1.0", "min_time must be 0 or more (seconds), got -1.0"),
        ("first_call_ratio", "0.5", "first_call_ratio must be at least 1"),
        (
            "timeline_max_glyphs",
            "0",
            "timeline_max_glyphs must be at least 1 (events drawn per timeline lane), got 0",
        ),
        ("profile_top", "0", "profile_top must be at least 1 (rows per table), got 0"),
        ("nsys_timeout", "0.0", "nsys_timeout must be positive (seconds), got 0.0"),
        ("nsys_timeout", "-5.0", "nsys_timeout must be positive (seconds), got -5.0"),
        (
            "profile_warmup",
            "-1",
            "profile_warmup must be 0 or more (runs of the cell before the capture), got -1",
        ),
    ],
)
def test_a_bad_setting_is_refused_when_set_and_says_why(ip, caplog, setting, value, message):
    magics = next(c for c in ip.configurables if isinstance(c, GpuMagics))
    before = getattr(magics, setting)
    default = magics.trait_defaults(setting)
    try:
        with caplog.at_level(logging.ERROR):
            ip.run_line_magic("config", f"GpuMagics.{setting} = {value}")
    finally:
        ip.config.GpuMagics.pop(
            setting, None
        )  # IPython keeps even a refused value in the shell's config
    assert getattr(magics, setting) == before  # refused: the setting keeps its value
    assert f"GpuMagics.{message}" in caplog.text
    assert f"; the default is {default!r}" in caplog.text
    with pytest.raises(TraitError, match=re.escape(message)):
        setattr(magics, setting, ast.literal_eval(value))


def test_a_refused_setting_does_not_keep_the_extension_from_loading_again(shell):
    shell.run_line_magic(
        "config", "GpuMagics.precision = 0"
    )  # refused, yet left in the shell's config
    try:
        shell.run_line_magic("unload_ext", "gpumagic")
        message = (
            "GpuMagics.precision must be at least 1 (significant digits in printed "
            "times), got 0; ignored"
        )
        with pytest.warns(UserWarning, match=re.escape(message)):
            shell.run_line_magic("load_ext", "gpumagic")
    finally:
        shell.config.GpuMagics.pop("precision", None)
    assert shell.find_line_magic("gputime") is not None
    magics = [c for c in shell.configurables if isinstance(c, GpuMagics)]
    assert len(magics) == 1 and magics[0].precision == 3


def test_good_settings_are_taken_and_used(ip):
    ip.run_line_magic("config", "GpuMagics.precision = 1")
    ip.run_line_magic("config", "GpuMagics.rel_ci = 0.5")
    ip.run_line_magic("config", "GpuMagics.profile_warmup = 0")
    magics = next(c for c in ip.configurables if isinstance(c, GpuMagics))
    assert (magics.precision, magics.rel_ci, magics.profile_warmup) == (1, 0.5, 0)
    r = ip.run_line_magic("gputime", FAST + "-q -o 1 + 1")
    assert r.precision == 1


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


INTERRUPTING = "state['n'] += 1\nif state['n'] == 400: raise KeyboardInterrupt"


def test_keyboard_interrupt_prints_what_was_measured_and_is_raised_again(ip):
    ip.user_ns["state"] = {"n": 0}
    # caught as any KeyboardInterrupt, so that a swallowed or plain one fails here instead of ending
    # the session
    with capture_output() as cap, pytest.raises(KeyboardInterrupt) as info:
        ip.run_cell_magic("gputime", "-n 10 -r 1000 -w 0 -o", INTERRUPTING)
    assert isinstance(info.value, TimingInterrupted)
    r = info.value.result
    assert r.interrupted and 0 < len(r.samples) < 40
    printed = cap.stdout.splitlines()
    assert printed and printed[0] == r.line() and r.line().endswith("; interrupted)"), (
        "the magic prints the partial result before it raises the interrupt again"
    )


def test_keyboard_interrupt_fails_the_cell_so_queued_cells_do_not_run(ip):
    ip.user_ns["state"] = {"n": 0}
    with capture_output() as cap:
        res = ip.run_cell("%%gputime -n 10 -r 1000 -w 0\n" + INTERRUPTING)
    assert not res.success and isinstance(res.error_in_exec, TimingInterrupted)
    assert "; interrupted)" in cap.stdout
    assert "timing interrupted after" in cap.stdout + cap.stderr


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


@pytest.mark.parametrize("kind, name", [("line", "gputime"), ("cell", "gpuprofile")])
def test_help_reads_like_ipythons_usage_options_examples(ip, kind, name):
    # IPython's own %timeit help: Usage, the options, then Examples with each output on its own
    # line (an input and its output run together on one line read as one command).
    find = ip.find_line_magic if kind == "line" else ip.find_cell_magic
    doc = find(name).__doc__
    usage, options, examples = doc.index("Usage"), doc.index("options:"), doc.index("Examples")
    assert usage < options < examples
    inputs = [line for line in doc[examples:].splitlines() if line.strip().startswith("In [")]
    assert all(line.rstrip().endswith(line.split(":", 1)[1].strip()) for line in inputs)
    for line in inputs:  # the command alone on its line, its output on the next
        assert " per call " not in line and " ms " not in line, line


@pytest.mark.parametrize("quiet", ["-q ", ""])
def test_a_statement_that_prints_is_shown_once_and_silenced_during_its_runs(ip, quiet):
    ip.run_cell("import sys\ndef loud():\n    print('x' * 10_000)\n    sys.stderr.write('e' * 10)")
    with capture_output() as cap:
        ip.run_line_magic("gputime", FAST + quiet + "loud()")
    assert cap.stdout.count("x" * 10_000) == 1 and cap.stderr == "e" * 10  # were once per call
    said = "The statement's output was shown once (its first call) and silenced during its "
    assert said + "repetitions (" in cap.stdout and " characters held back)." in cap.stdout
    assert len(cap.stdout) < 11_000 + (0 if quiet else 1_000)


def test_a_compared_statement_that_prints_is_shown_once_too(ip):
    with capture_output() as cap:
        ip.run_cell_magic("gputime", FAST + "-q --compare", "print('y' * 1000)\n1 + 1\n")
    assert cap.stdout.count("y" * 1000) == 1 and "silenced during its repetitions" in cap.stdout


def test_a_quiet_statement_that_prints_nothing_adds_no_line(ip):
    with capture_output() as cap:
        ip.run_line_magic("gputime", FAST + "-q 1 + 1")
    assert cap.stdout == ""
