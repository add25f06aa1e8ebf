"""A statement that raises under ``%gputime`` shows the user's own code, not gpumagic's machinery:
the frames between the magic and the statement carry ``__tracebackhide__`` (IPython folds them
into one "skipping hidden" line), wherever the error comes: the first call, warm-up, the
samples, or a ``--compare`` lane."""

from __future__ import annotations

import re

import pytest
from IPython.utils.capture import capture_output

USER = (
    "calls = [0]\n"
    "def step(fail_after):\n"
    "    calls[0] += 1\n"
    "    if calls[0] > fail_after:\n"
    "        raise ValueError('the user raised this')\n"
    "    return sum(range(200))\n"
)


@pytest.mark.parametrize(
    "cell",
    [
        "%gputime step(0)",  # the first, cold call
        "%gputime step(3)",  # warm-up
        "%gputime -w 0 -n 1 step(6)",  # the samples
        "%%gputime --compare\nsum(range(10))\nstep(5)",  # one statement of a comparison
    ],
)
def test_the_traceback_starts_at_the_users_code(ip, cell):
    ip.run_cell(USER)
    with capture_output() as shown:
        result = ip.run_cell(cell)
    assert isinstance(result.error_in_exec, ValueError)
    text = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout + shown.stderr)  # the shell's colours
    frames = re.findall(r"^File (\S+):\d+", text, re.M)
    assert frames, text
    assert not [f for f in frames if "gpumagic" in f], frames
    assert "skipping hidden" in text
    assert "raise ValueError('the user raised this')" in text


@pytest.mark.parametrize(
    "cell", ["%gputime await f()", "%%gputime\nawait f()", "%%gputime --compare\n1 + 1\nawait f()"]
)
def test_a_statement_that_awaits_is_one_line_naming_the_fix(ip, cell):
    ip.run_cell("async def f():\n    return 1\n")
    with capture_output() as shown:
        result = ip.run_cell(cell)  # was SyntaxError: 'await' outside function, through gpumagic
    text = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout + shown.stderr)
    assert "UsageError: %gputime: cannot time 'await f()': it awaits" in text, text
    assert "asyncio.run(...)" in text and "File " not in text and result.error_in_exec
