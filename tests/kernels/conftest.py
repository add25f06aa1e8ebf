"""The kernel-name tests' shared measure: how long ``decode()`` takes on hostile names, in a
subprocess that a name decoding in quadratic time cannot hang the suite with."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

MB = 1_000_000

_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from gpumagic.kernels import decode
    for label, prefix, body, suffix, length in json.load(sys.stdin):
        name = prefix + body * max(1, (length - len(prefix) - len(suffix)) // len(body)) + suffix
        decode.cache_clear()
        t0 = time.process_time()
        k = decode(name)
        took = time.process_time() - t0
        assert k.name == name and "decode_error" not in k.details, (label, dict(k.details))
        print(json.dumps([label, len(name), took]), flush=True)
    """
)


def decode_times(
    shapes: list[tuple[str, str, str, str]], length: int, timeout: float
) -> list[tuple[str, int, float]]:
    """Seconds ``decode()`` takes on each shape grown to ``length`` characters, measured in a
    subprocess; fails the test naming the shape that was still running when ``timeout`` ended.

    The seconds are the subprocess's CPU time (``time.process_time``), not the wall clock's: what
    decoding costs, whatever else a loaded machine runs beside it. ``timeout`` (wall clock, the
    interpreter's start included) only stops a decoder that would never finish."""
    cases = json.dumps([[*s, length] for s in shapes])
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT],
            input=cases,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        done = [json.loads(line)[0] for line in out.splitlines()]
        stuck = next(s[0] for s in shapes if s[0] not in done)
        pytest.fail(
            f"decoding a {length:,}-character name ({stuck}) did not finish within {timeout:g} s"
        )
    assert proc.returncode == 0, proc.stderr
    return [tuple(json.loads(line)) for line in proc.stdout.splitlines()]
