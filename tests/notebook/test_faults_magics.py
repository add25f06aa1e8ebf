"""Faults a user found in the magics' command lines, each pinned by a test: -h and --help print the
magic's help and run nothing, and a statement that starts with a minus sign still times after
``--``."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_flags_print_the_magics_help_and_run_nothing(ip, flag):
    ip.user_ns["runs"] = []
    with capture_output() as cap:
        assert ip.run_line_magic("gputime", flag) is None
    assert "%gputime [-h]" in cap.stdout and "Calls per sample" in cap.stdout
    with capture_output() as cap:
        ip.run_cell_magic("gputime", flag, "runs.append(1)")
    assert "%gputime [-h]" in cap.stdout
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", f"-w 2 {flag}", "runs.append(1)")
    assert "%gpuprofile [-h]" in cap.stdout and "--nsys" in cap.stdout and not cap.outputs
    assert ip.user_ns["runs"] == []


def test_a_statement_starting_with_minus_still_times_after_double_dash(ip):
    ip.user_ns["h"] = 3
    with capture_output() as cap:
        r = ip.run_line_magic("gputime", "-q -o -r 3 -n 2 -- -h + 1")
    assert r is not None and cap.stdout == ""
