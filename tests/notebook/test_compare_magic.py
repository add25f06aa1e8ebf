"""%%gputime --compare and --sweep through a real IPython shell, on the CPU."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.timing.compare_result import Comparison
from gpumagic.timing.sweep_result import Sweep

FAST = "-r 4 -w 1 "


def test_compare_cell_times_each_labelled_line_and_leaves_the_namespace(ip):
    ip.user_ns["log"] = []
    r = ip.run_cell_magic(
        "gputime",
        FAST + "-o --compare log.append(1); xs = list(range(300))",
        "sum(xs)  # sum\n# sorted\nsorted(xs)\n",
    )
    assert isinstance(r, Comparison)
    assert list(r.results) == ["sum", "sorted"] and r.baseline == "sum"
    assert all(len(x.samples) == 4 for x in r.results.values())
    assert ip.user_ns["log"] == [1, 1]  # the setup runs once per statement
    assert "xs" not in ip.user_ns
    assert r.speedup("sorted") == pytest.approx(
        r.results["sum"].median / r.results["sorted"].median
    )


def test_compare_displays_a_table_with_notebook_advice(ip):
    with capture_output() as cap:
        out = ip.run_cell_magic(
            "gputime", FAST + "--compare --baseline b", "1 + 1  # a\n2 * 2  # b\n"
        )
    assert out is None
    (shown,) = cap.outputs
    text, page = shown.data["text/plain"], shown.data["text/html"]
    assert "2 statements on CPU" in text and "speed-up against 'b'" in text
    assert "1\u00d7 (baseline)" in text and "Timed interleaved" in text
    assert "<table" in page and "Timed interleaved" in page


def test_advice_is_written_as_the_notebooks_config_in_text_and_html(ip):
    ip.run_line_magic("config", "GpuMagics.time_budget = 0.3")
    ip.run_line_magic(
        "config", "GpuMagics.rel_ci = 1e-9"
    )  # never settles: the budget ends every statement
    ip.run_line_magic(
        "config", "GpuMagics.min_time = 0.001"
    )  # even on a machine too busy to measure 100 ms
    try:
        with capture_output() as cap:
            ip.run_cell_magic("gputime", "-w 1 --compare", "1 + 1  # a\n2 * 2  # b\n")
    finally:
        ip.run_line_magic("config", "GpuMagics.time_budget = 0.5")
        ip.run_line_magic("config", "GpuMagics.rel_ci = 0.005")
    (shown,) = cap.outputs
    for form in ("text/plain", "text/html"):
        assert "%config GpuMagics.time_budget = 2" in shown.data[form]
        assert "time_budget=2" not in shown.data[form]
    ip.run_line_magic("config", "GpuMagics.time_budget = 0.3")
    ip.run_line_magic("config", "GpuMagics.rel_ci = 1e-9")
    try:
        # a median known only roughly, whatever the machine
        noisy = "sum(range(random.randint(1, 3000)))\n"
        returned = ip.run_cell_magic("gputime", "-o -w 1 --sweep n=1,2 import random", noisy)
    finally:
        ip.run_line_magic("config", "GpuMagics.time_budget = 0.5")
        ip.run_line_magic("config", "GpuMagics.rel_ci = 0.005")
        ip.run_line_magic("config", "GpuMagics.min_time = 0.1")
    as_value = ip.display_formatter.format(returned)[0]  # what Out[n] shows
    assert "%config GpuMagics.time_budget = 2" in as_value["text/plain"]
    assert "%config GpuMagics.time_budget = 2" in as_value["text/html"]
    assert "time_budget=2" in str(returned)  # the object itself keeps the core's words for scripts


def test_compare_usage_errors_name_the_fix(ip):
    with pytest.raises(UsageError, match="cell form"):
        ip.run_line_magic("gputime", "--compare 1 + 1")
    with pytest.raises(UsageError, match=r"baseline.*one of the labels"):
        ip.run_cell_magic("gputime", FAST + "--compare --baseline zz", "1 + 1  # a\n")
    with pytest.raises(UsageError, match="--baseline goes with --compare"):
        ip.run_cell_magic("gputime", "--baseline a", "1 + 1\n")
    with pytest.raises(UsageError, match="--zip goes with --sweep"):
        ip.run_cell_magic("gputime", "--zip", "1 + 1\n")


def test_sweep_cell_times_each_point_with_its_setup(ip):
    line = FAST + '-o --sweep n=10,100,1000 --sweep "k=[1, 2]" xs = list(range(n))'
    r = ip.run_cell_magic("gputime", line, "sum(xs) * k")
    assert isinstance(r, Sweep)
    df = r.to_dataframe()
    assert [tuple(x) for x in df[["n", "k"]].to_numpy()] == [
        (10, 1),
        (10, 2),
        (100, 1),
        (100, 2),
        (1000, 1),
        (1000, 2),
    ]
    assert (df["status"] == "ok").all()
    head = str(r).splitlines()[1].split()
    assert (
        head[:2] == ["n", "k"] and "peak" not in head and "Rate" not in head
    )  # no FLOPs counted, no peak on CPU
    assert "n" not in ip.user_ns and "xs" not in ip.user_ns


def test_sweep_with_compare_draws_one_line_per_statement_and_zip_pairs_values(ip):
    line = FAST + "-o --compare --zip --sweep n=10,20 --sweep m=1,2"
    r = ip.run_cell_magic("gputime", line, "sum(range(n))  # sum\nlist(range(m))  # list\n")
    assert r.labels == ["sum", "list"]
    assert sorted((p.params["n"], p.params["m"], p.label) for p in r.points) == [
        (10, 1, "list"),
        (10, 1, "sum"),
        (20, 2, "list"),
        (20, 2, "sum"),
    ]


def test_sweep_of_unequal_zipped_lists_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="same number of values"):
        ip.run_cell_magic("gputime", "--zip --sweep n=1,2 --sweep m=1", "n + m\n")


def test_a_failing_point_is_marked_and_the_rest_kept(ip):
    r = ip.run_cell_magic("gputime", FAST + "-o --sweep n=1,0,2", "10 // n\n")
    assert [p.status for p in r.points] == ["ok", "failed", "ok"]
    assert "ZeroDivisionError" in r.points[1].error


def test_functions_are_reachable_from_the_package_even_after_their_modules_load():
    import gpumagic.timing.compare
    import gpumagic.timing.sweep
    from gpumagic.api import gputime as recorded  # the timing core's functions, results saved

    assert gpumagic.compare is recorded.compare and gpumagic.sweep is recorded.sweep
    assert callable(gpumagic.compare) and callable(gpumagic.sweep)


def test_an_interrupted_comparison_is_shown_then_the_interrupt_goes_on(ip, monkeypatch):
    from gpumagic.timing import compare as compare_module

    done = ip.run_cell_magic("gputime", FAST + "-o --compare", "1 + 1  # a\n2 * 2  # b\n")

    def interrupted(*args, **kwargs):
        raise compare_module.ComparisonInterrupted(done)

    monkeypatch.setattr(compare_module, "compare_compiled", interrupted)
    with capture_output() as cap, pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("gputime", "--compare", "1 + 1  # a\n2 * 2  # b\n")
    (shown,) = cap.outputs
    assert "2 statements on CPU" in shown.data["text/plain"]


def test_a_returned_timing_result_shows_its_advice_as_config_and_still_pickles(ip):
    import pickle

    ip.run_cell("import random")
    ip.run_line_magic("config", "GpuMagics.time_budget = 0.3")
    ip.run_line_magic("config", "GpuMagics.rel_ci = 1e-9")
    ip.run_line_magic("config", "GpuMagics.min_time = 0.001")
    r = ip.run_line_magic(
        "gputime", "-q -o -w 1 sum(range(random.randint(1, 3000)))"
    )  # never settles
    shown = ip.display_formatter.format(r)[0]
    assert "%config GpuMagics.time_budget = 2" in shown["text/plain"]
    assert "%config GpuMagics.time_budget = 2" in shown["text/html"]
    assert "time_budget=2" in str(r)
    back = pickle.loads(pickle.dumps(r))
    assert (
        back.samples == r.samples
        and "time_budget=2" in ip.display_formatter.format(back)[0]["text/plain"]
    )


FLAKY = (
    "calls = [0]\n"
    "def flaky(fail_at):\n"
    "    calls[0] += 1\n"
    "    if calls[0] >= fail_at:\n"
    "        raise ValueError(f'call {calls[0]}')\n"
)


def test_a_statement_failing_in_its_samples_keeps_what_was_measured_then_raises(ip):
    ip.run_cell(FLAKY)
    with capture_output() as cap:
        result = ip.run_cell(
            "%%gputime -n 1 -r 20 -w 1 --compare\n1 + 1  # ok\nflaky(8)  # flaky\n"
        )
    error = result.error_in_exec  # the statement's own error, from its own code (was: all lost)
    assert isinstance(error, ValueError) and str(error) == "call 8"
    (shown,) = cap.outputs
    text = shown.data["text/plain"]
    assert "'flaky' failed" in text and "failed: ValueError: call 8" in text
    assert "ok " in text and " ns \u00b1 " in text  # the statement that completed, measured
    assert "'flaky' raised ValueError: call 8" in error.__notes__[-1]


def test_a_failing_statement_with_o_returns_the_partial_comparison_and_says_why(ip):
    ip.run_cell(FLAKY)
    with capture_output() as cap:
        r = ip.run_cell_magic("gputime", "-n 1 -r 20 -w 1 -o --compare", "1 + 1  # ok\nflaky(8)\n")
    assert isinstance(r, Comparison) and r.failed == {"flaky(8)": "ValueError: call 8"}
    assert len(r.results["ok"].samples) >= 1 and r.to_dataframe()["error"].tolist()[1:] == [
        "ValueError: call 8"
    ]
    said = cap.stdout + cap.stderr  # the statement's traceback, then one line
    assert "ValueError: call 8" in said and "returned (-o), not saved" in said


def test_a_long_sweep_says_its_estimate_then_updates_one_display(ip, monkeypatch):
    from gpumagic.timing import sweep as sweep_module

    monkeypatch.setattr(sweep_module, "LONG_SWEEP", 0.0)  # three fast points read as a long sweep
    with capture_output() as cap:
        ip.run_cell_magic("gputime", FAST + "--sweep n=[1,2,3]", "sum(range(n))")
    progress = [o for o in cap.outputs if "Sweep of 3 measurements" in o.data["text/plain"]]
    assert progress, cap.outputs  # was nothing until the end
    last = progress[-1].data["text/plain"].splitlines()
    assert len(last) == 2 and last[1].startswith("[3/3] n=3: ") and "(from the first)" in last[0]
