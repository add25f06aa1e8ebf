"""How a magic's line, a ``%%gputime --compare`` cell and a ``--sweep`` value read: pure text,
testable without IPython.

A comparison cell holds one statement per line, each named by a ``# label`` comment, either trailing
the statement or alone on the line just above it, as people already annotate variants in a
notebook::

    %%gputime --compare A = torch.randn(4096, 4096, device="cuda"); Ah = A.bfloat16()
    A @ A        # fp32
    # bf16
    Ah @ Ah

A statement may span lines (an open bracket continues it, as in Python); statements joined by ``;``
on one line are one statement. A statement without a label is labelled by its own text.

A sweep value is ``NAME=VALUES``, the values a Python expression read in the notebook's namespace:
``n=256,512`` (a tuple), ``n=range(8)``, ``dtype=torch.float32,torch.bfloat16``, or a quoted
``"n=[2**k for k in range(8, 14)]"``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..edges import UserValue
from ..errors import InvalidOptionError

if TYPE_CHECKING:
    import argparse

__all__ = ["labelled_statements", "own_label", "split_options", "sweep_params"]

_OPTION = re.compile(r"\s*(--?[A-Za-z][\w-]*)(=\S*)?")

#: The longest label made from a statement's own text; longer text is cut with an ellipsis.
LABEL_WIDTH = 40


def split_options(line: str, parser: argparse.ArgumentParser) -> tuple[str, str]:
    """Split ``line`` into its leading options and the statement, which is kept verbatim.

    ``parse_argstring`` alone would shell-split the statement and eat its quotes (``d['k']`` ->
    ``d[k]``), so, as ``%timeit`` does, only the leading options are parsed: tokens that start with
    '-' and the values of options that take one (``-n 10``, ``-n10``, ``--flush-l2``); ``--`` ends
    the options. An unknown long option stays with the options so that argparse reports it; an
    unknown single-dash token starts the statement (``-x + 1``).
    """
    actions = (
        parser._option_string_actions
    )  # argparse keeps no public map from option string to action
    pos = 0
    taken: list[str] = []
    while True:
        end_of_options = re.match(r"\s*--(\s|$)", line[pos:])
        if end_of_options:
            pos += end_of_options.end()
            break
        m = _OPTION.match(line, pos)
        if not m:
            break
        opt, inline_value = m.group(1), m.group(2)
        action = actions.get(opt)
        if action is None and opt[1] != "-" and opt[:2] in actions and actions[opt[:2]].nargs != 0:
            # glued short option value: -n10
            taken += [opt[:2], opt[2:]]
            pos = m.end()
            continue
        if action is None:
            if opt[1] == "-":
                taken.append(
                    opt + (inline_value or "")
                )  # unknown long option: let argparse name it
                pos = m.end()
                continue
            break  # an unknown single dash starts the statement: "-x + 1"
        taken.append(opt + (inline_value or ""))
        pos = m.end()
        if action.nargs != 0 and not inline_value:
            v = re.match(
                r"""\s*("[^"]*"|'[^']*'|\S+)""", line[pos:]
            )  # a quoted value may hold spaces
            if v:
                taken.append(v.group(1))
                pos += v.end()
    return " ".join(taken), line[pos:].strip()


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Each comment by line: (its text without '#', whether it is alone on its line)."""
    out: dict[int, tuple[str, bool]] = {}
    lines = source.splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                alone = not lines[row - 1][:col].strip()
                out[row] = (tok.string.lstrip("#").strip(), alone)
    except (
        tokenize.TokenError,
        IndentationError,
    ):  # pragma: no cover - ast.parse has already accepted the text
        pass
    return out


def _spans(tree: ast.Module) -> list[tuple[int, int]]:
    """The line span of each statement; nodes that share a line (``a; b``) are one statement."""
    spans: list[tuple[int, int]] = []
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        last = node.end_lineno or node.lineno
        if spans and first <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(last, spans[-1][1]))
        else:
            spans.append((first, last))
    return spans


def own_label(text: str) -> str:
    """A statement named by its own first line, cut to :data:`LABEL_WIDTH`."""
    first = text.strip().splitlines()[0].strip()
    more = "\u2026" if len(text.strip().splitlines()) > 1 else ""
    if len(first) + len(more) > LABEL_WIDTH:
        return first[: LABEL_WIDTH - 1].rstrip() + "\u2026"
    return first + more


def labelled_statements(cell: str) -> dict[str, str]:
    """The statements of a ``--compare`` cell by label, in cell order.

    Raises ``SyntaxError`` for a cell that is not Python, and
    :class:`~gpumagic.errors.InvalidOptionError` for a cell without a statement.
    """
    tree = ast.parse(cell, "<gputime-compare>")
    lines = cell.splitlines()
    comments = _comments(cell)
    out: dict[str, str] = {}
    for first, last in _spans(tree):
        text = "\n".join(lines[first - 1 : last])
        label = next(
            (comments[r][0] for r in range(first, last + 1) if r in comments and comments[r][0]), ""
        )
        above = first - 1
        if not label and above in comments and comments[above][1]:
            label = comments[above][0]
        label = label or own_label(text)
        name, k = label, 2
        while name in out:
            name, k = f"{label} ({k})", k + 1
        out[name] = text
    if not out:
        raise InvalidOptionError(
            option="--compare",
            value=cell,
            reason="needs statements in the cell body, one per line (a '# label' comment "
            "names each)",
        )
    return out


def _as_values(value: UserValue) -> list[Any]:
    """A tuple, list, range or other iterable gives its items; a string or a single value is one
    value."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def sweep_params(specs: Iterable[str], namespace: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The parameters of ``--sweep NAME=VALUES`` options, the values read in (a copy of)
    ``namespace``."""
    params: dict[str, list[Any]] = {}
    for spec in specs:
        name, eq, expr = spec.partition("=")
        name = name.strip()
        if not eq or not name or not expr.strip():
            raise InvalidOptionError(
                option="--sweep",
                value=spec,
                reason="takes NAME=VALUES, e.g. --sweep n=256,512,1024",
            )
        if name in params:
            raise InvalidOptionError(
                option="--sweep",
                value=spec,
                reason=f"names {name!r} twice: give each parameter once",
            )
        try:
            value = eval(compile(expr.strip(), "<sweep>", "eval"), {**namespace})
        except Exception as exc:  # noqa: BLE001 - named in the error, with the value that failed
            raise InvalidOptionError(
                option=f"--sweep {name}",
                value=expr,
                reason=f"could not be read as Python ({type(exc).__name__}: {exc}); "
                "write the values as an expression, e.g. 256,512 or range(8, 14), quoted if "
                "it has spaces",
            ) from None
        params[name] = _as_values(value)
    return params
