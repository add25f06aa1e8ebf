"""How a --compare cell splits into labelled statements, and how --sweep values read."""

from __future__ import annotations

import pytest

from gpumagic.errors import InvalidOptionError
from gpumagic.notebook.cell_syntax import LABEL_WIDTH, labelled_statements, own_label, sweep_params


def test_trailing_and_preceding_comments_name_statements():
    cell = "A @ A  # fp32\n# bf16\nAh @ Ah\nA + 1\n"
    assert labelled_statements(cell) == {
        "fp32": "A @ A  # fp32",
        "bf16": "Ah @ Ah",
        "A + 1": "A + 1",
    }


def test_a_comment_above_a_blank_line_names_nothing():
    cell = "# the variants\n\nx + 1\n"
    assert list(labelled_statements(cell)) == ["x + 1"]


def test_a_statement_may_span_lines_and_semicolons_keep_one_line_together():
    cell = "torch.matmul(\n    A,\n    B,\n)  # two lines\nx = a + 1; y = x * 2\n"
    got = labelled_statements(cell)
    assert list(got) == ["two lines", "x = a + 1; y = x * 2"]
    assert got["two lines"].count("\n") == 3
    compile(got["two lines"], "<t>", "exec")  # each statement is valid Python on its own


def test_repeated_labels_are_numbered_and_long_text_is_cut():
    long = "f(" + ", ".join(f"argument_{i}" for i in range(12)) + ")"
    got = labelled_statements(f"a  # v\nb  # v\n{long}\n")
    assert list(got)[:2] == ["v", "v (2)"]
    cut = list(got)[2]
    assert cut.endswith("\u2026") and len(cut) == LABEL_WIDTH
    assert own_label("f(\n  x)") == "f(\u2026"


def test_hash_inside_a_string_is_not_a_label():
    assert list(labelled_statements("s.count('#')\n")) == ["s.count('#')"]


def test_no_statement_or_bad_python_is_an_error():
    with pytest.raises(InvalidOptionError, match="one per line"):
        labelled_statements("# only a comment\n")
    with pytest.raises(SyntaxError):
        labelled_statements("A @@ B\n")


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ("n=256,512,1024", [256, 512, 1024]),
        ("n=range(3)", [0, 1, 2]),
        ("n=[2**k for k in range(8, 11)]", [256, 512, 1024]),
        ("n=4096", [4096]),
        ("name='abc'", ["abc"]),
        ("d=base, base * 2", [10, 20]),
    ],
)
def test_sweep_values_are_python_read_in_the_namespace(spec, values):
    assert sweep_params([spec], {"base": 10}) == {spec.split("=")[0]: values}


def test_sweep_specs_that_cannot_be_read_say_how_to_write_them():
    with pytest.raises(InvalidOptionError, match="NAME=VALUES"):
        sweep_params(["n"], {})
    with pytest.raises(InvalidOptionError, match="twice"):
        sweep_params(["n=1", "n=2"], {})
    with pytest.raises(InvalidOptionError, match=r"NameError.*quoted if it has spaces"):
        sweep_params(["n=undefined_name"], {})


def test_reading_sweep_values_leaves_the_namespace_alone():
    ns = {"k": 3}
    sweep_params(["n=[(j := i) for i in range(k)]"], ns)
    assert ns == {"k": 3}
