"""Every call a message of gpumagic's suggests can be made as it is written: each
``gpumagic.f(...)`` (or ``load_nsys(...)``, ``NsysOptions(...)``...) that an error, a warning or a
finding names is looked up and its keyword arguments bound to the function's own signature, so a
fix such as ``nsys_path=`` (a parameter ``load_nsys`` never had) fails here, not in a user's
notebook."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import gpumagic
from gpumagic.capture import options

from .helpers import ROOT

#: A call in a message: a gpumagic function by its public name, or a loader or an options class.
CALL = re.compile(
    r"\b(?:gpumagic\.)?(load_nsys|load_trace|load_memory_snapshot|load_ncu|read_job|replay|diff"
    r"|history|NsysOptions|TorchProfilerOptions|NcuOptions)\(([^()]*)\)"
)
KEYWORD = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*=(?!=)")


def _strings():
    """(module, text) of every string constant in the package's source, f-strings' parts joined."""
    for path in sorted((ROOT / "gpumagic").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                yield path.name, text
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path.name, node.value


def _target(name: str):
    if hasattr(gpumagic, name):
        return getattr(gpumagic, name)
    return getattr(options, name, None)


SUGGESTED = sorted(
    {(name, args, module) for module, text in _strings() for name, args in CALL.findall(text)}
)


def test_the_messages_suggest_calls():
    assert len(SUGGESTED) >= 5, SUGGESTED  # the scan reads the package's messages
    names = {name for name, _, _ in SUGGESTED}
    assert {"load_nsys", "read_job"} <= names, names


@pytest.mark.parametrize("name, args, module", SUGGESTED)
def test_each_suggested_call_binds_to_the_functions_signature(name, args, module):
    fn = _target(name)
    assert fn is not None, f"{module} suggests {name}(), which gpumagic does not have"
    keywords = dict.fromkeys(KEYWORD.findall(args))
    signature = inspect.signature(fn)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    if not takes_any:
        unknown = set(keywords) - set(signature.parameters)
        assert not unknown, f"{module} suggests {name}({args}): {name} takes no {unknown}"


def test_a_wrong_keyword_would_be_caught():
    signature = inspect.signature(gpumagic.load_nsys)
    assert "nsys_path" not in signature.parameters and "nsys" in signature.parameters
