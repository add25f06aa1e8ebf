"""One copy of each rule, and functions short enough to read: the package checked for code written
twice (six or more lines alike, to the letter or in shape) and for functions over 80 lines without a
reason.

The finder here is the project's own, so CI runs it: a module's code lines (docstrings, comments,
blank lines, imports and functions' signatures left out) in windows of :data:`RUN` lines; two
windows that are the same to the letter are a copy, two that are the same once names, strings and
numbers are blanked are alike in shape. A window made mostly of thin lines (only names, literals
and punctuation: a table's rows, keyword arguments passed on) is data or a call's plumbing, not a
rule, and is not counted; nor is a window that stands in more than :data:`TOO_COMMON` places (an
idiom, not a copy). A pair is two modules (or two places of one module) that share at least one
window.
"""

from __future__ import annotations

import ast
import collections
import io
import itertools
import keyword
import pathlib
import re
import tokenize
from collections.abc import Iterable, Iterator

ROOT = pathlib.Path(__file__).parents[1]
PACKAGE = ROOT / "gpumagic"
#: Lines a run must share to count, as the duplicate finders count.
RUN = 6
#: A window standing in more places than this is an idiom of the language or the codebase.
TOO_COMMON = 8
#: Pairs of places alike in shape allowed today: a change may lower it (then lower it here), never
#: raise it. Copies to the letter: none.
SHAPE_PAIRS_CEILING = 10
#: Longest function without a reason in its docstring (def line to last line).
FUNCTION_LINES = 80
REASON = "Long because"

_THIN = re.compile(r"[NS0\s:=,.()\[\]{}*]*")
_Place = tuple[str, int]  # module, first line of the window


def code_lines(source: str) -> list[tuple[int, str, str]]:
    """(line number, text, shape) of each line of code: no docstring, comment, blank line,
    import or function signature. The shape blanks names (N), strings (S) and numbers and
    constants (0); keywords and operators stay."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a signature: a calling
            skip.update(range(node.lineno, node.body[0].lineno))  # convention, not a rule
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            doc = body[0].value
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
                skip.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    shapes: dict[int, list[str]] = collections.defaultdict(list)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        row = tok.start[0]
        if tok.type == tokenize.NAME:
            literal = tok.string in ("None", "True", "False")
            shapes[row].append(
                "0" if literal else tok.string if keyword.iskeyword(tok.string) else "N"
            )
        elif tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_START", -1):
            shapes[row].append("S")
        elif tok.type in (tokenize.NUMBER,):
            shapes[row].append("0")
        elif tok.type == tokenize.OP:
            shapes[row].append(tok.string)
    text = source.splitlines()
    return [
        (row, text[row - 1].strip(), " ".join(shape))
        for row, shape in sorted(shapes.items())
        if row not in skip and text[row - 1].strip() and not text[row - 1].strip().startswith("#")
    ]


def thin(shape: str) -> bool:
    """A line of names, literals and punctuation only: a table's row, a keyword passed on."""
    return bool(_THIN.fullmatch(shape))


def windows(module: str, source: str) -> Iterator[tuple[str, str, _Place]]:
    """(text key, shape key, place) of each window of :data:`RUN` code lines with at most half of
    them thin."""
    lines = code_lines(source)
    for i in range(len(lines) - RUN + 1):
        run = lines[i : i + RUN]
        if sum(thin(shape) for _, _, shape in run) * 2 > RUN:
            continue
        yield "\n".join(t for _, t, _ in run), "\n".join(s for _, _, s in run), (module, run[0][0])


def pairs(sources: dict[str, str]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The pairs of places sharing a window to the letter, and those sharing one in shape only: a
    place is a module, or a module's window where both sides are in one module (apart by a whole
    run at least)."""
    by_text: dict[str, list[_Place]] = collections.defaultdict(list)
    by_shape: dict[str, list[_Place]] = collections.defaultdict(list)
    for module, source in sources.items():
        for text, shape, place in windows(module, source):
            by_text[text].append(place)
            by_shape[shape].append(place)
    return _paired(by_text.values()), _paired(by_shape.values())


def _paired(groups: Iterable[list[_Place]]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for places in groups:
        if len(places) < 2 or len(places) > TOO_COMMON:
            continue
        for (a, la), (b, lb) in itertools.combinations(sorted(places), 2):
            if a != b:
                found.add((a, b))
            elif abs(la - lb) >= RUN:
                found.add((a, a))
    return found


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function over :data:`FUNCTION_LINES` lines whose
    docstring gives no reason (a sentence starting with :data:`REASON`)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES and REASON not in (ast.get_docstring(node) or ""):
                out.append((node.name, node.lineno, length))
    return out


def _package_sources() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_rule_is_written_twice_to_the_letter():
    copies, _ = pairs(_package_sources())
    assert not copies, "code written twice (six lines or more alike to the letter):\n" + "\n".join(
        f"  {a} ~ {b}" for a, b in sorted(copies)
    )


def test_few_places_are_alike_in_shape():
    copies, alike = pairs(_package_sources())
    shaped = alike - copies
    assert len(shaped) <= SHAPE_PAIRS_CEILING, (
        f"{len(shaped)} pairs of places alike in shape (ceiling {SHAPE_PAIRS_CEILING}): give the "
        "rule one home\n" + "\n".join(f"  {a} ~ {b}" for a, b in sorted(shaped))
    )


def test_no_long_function_without_a_reason():
    found = {
        module: long
        for module, source in _package_sources().items()
        if (long := long_functions(source))
    }
    assert not found, (
        f"functions over {FUNCTION_LINES} lines: split them into named steps, or say in the "
        f"docstring why not ('{REASON} ...'): {found}"
    )


_RULE = """
def check(rows):
    total = 0
    for row in rows:
        if row.size < 0:
            raise ValueError(row)
        total += row.size * row.count
    return total
"""


def test_the_finder_can_fail():
    renamed = _RULE.replace("check", "tally").replace("rows", "items").replace("row", "item")
    copies, alike = pairs({"a.py": _RULE, "b.py": _RULE, "c.py": renamed})
    assert copies == {("a.py", "b.py")}
    assert alike == {("a.py", "b.py"), ("a.py", "c.py"), ("b.py", "c.py")}
    documented = '"""Only a docstring.\n\nand more\nlines\nof\nit\nhere\n"""\n'
    assert pairs({"a.py": documented, "b.py": documented}) == (set(), set())


def test_tables_and_keyword_plumbing_are_not_counted():
    table = "T = {\n" + "".join(f'    "k{i}": "v{i}",\n' for i in range(10)) + "}\n"
    call = "f(\n" + "".join(f"    a{i}=a{i},\n" for i in range(10)) + ")\n"
    assert pairs({"a.py": table, "b.py": table, "c.py": call, "d.py": call}) == (set(), set())


def test_a_long_function_needs_its_reason():
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    bare = f"def f():\n{body}"
    reasoned = f'def f():\n    """{REASON} it is one table."""\n{body}'
    assert long_functions(bare) == [("f", 2 - 1, FUNCTION_LINES + 1)]
    assert long_functions(reasoned) == []
