import linecache
import traceback

import pytest

from gpumagic.timing.statement import compile_statement


def test_inner_runs_the_statement_n_times_without_touching_the_namespace():
    ns = {"calls": []}
    c = compile_statement("calls.append(1)\ny = 2", globals=ns)
    c.inner(5)
    assert ns["calls"] == [1] * 5
    assert "y" not in ns and "__gm_factory" not in ns


def test_once_returns_the_last_expression():
    c = compile_statement("a = 2\na * 21", globals={})
    assert c.once() == 42
    assert compile_statement("x = 1", globals={}).once() is None


def test_setup_runs_once_and_shares_names_with_the_statement():
    ns = {"log": []}
    c = compile_statement(
        "total += 1\nlog.append(total)", setup="total = 0\nlog.append('setup')", globals=ns
    )
    c.inner(3)
    assert ns["log"] == ["setup", 1, 2, 3]
    assert "total" not in ns


def test_names_read_are_reported_for_device_detection():
    c = compile_statement(
        "torch.matmul(A, B)", setup="C = A", globals={"A": 1, "B": 2, "torch": None}
    )
    assert {"torch", "A", "B"} <= c.read_names


def test_syntax_error_points_at_the_users_code():
    with pytest.raises(SyntaxError) as exc:
        compile_statement("x = = 1", globals={})
    assert exc.value.filename == "<gputime-stmt>"
    with pytest.raises(SyntaxError):
        compile_statement("return 5", globals={})  # valid inside the template, not as a statement
    with pytest.raises(SyntaxError) as exc:
        compile_statement("x", setup="for", globals={})
    assert exc.value.filename == "<gputime-setup>"


def test_traceback_through_the_statement_shows_its_source_line():
    c = compile_statement("1 / 0", globals={})
    with pytest.raises(ZeroDivisionError) as exc:
        c.inner(1)
    frames = traceback.extract_tb(exc.value.__traceback__)
    assert frames[-1].line == "1 / 0"
    assert linecache.getline(frames[-1].filename, frames[-1].lineno).strip() == "1 / 0"


def test_callables_are_accepted():
    seen = []
    c = compile_statement(lambda: seen.append(1) or 7, setup=lambda: seen.append("s"))
    c.inner(2)
    assert seen == ["s", 1, 1]
    assert c.once() == 7


@pytest.mark.parametrize(
    "stmt, setup, error",
    [
        (3, None, TypeError),
        ("x", 5, TypeError),
        (lambda: 1, "x = 1", TypeError),
        ("   ", None, ValueError),
    ],
)
def test_bad_arguments_are_named(stmt, setup, error):
    with pytest.raises(error):
        compile_statement(stmt, setup, globals={})


def test_a_statement_that_awaits_says_so_and_is_still_a_syntax_error():
    from gpumagic.errors import GpuMagicError

    with pytest.raises(GpuMagicError, match=r"cannot time 'await f\(\)': it awaits") as err:
        compile_statement("await f()", None, {})
    assert isinstance(err.value, SyntaxError)  # what it raised before
    with pytest.raises(SyntaxError, match="invalid syntax") as err:  # others stay as they were
        compile_statement("1 +", None, {})
    assert not isinstance(err.value, GpuMagicError)
