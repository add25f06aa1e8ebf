"""Bokeh's import started on a thread while a report's tables are read (render/bokeh_import.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_import_runs_on_a_thread_once_and_leaves_the_modules_loaded():
    out = _run(
        """
        import sys
        from gpumagic.render.bokeh_import import BOKEH_MODULES, start_bokeh_import
        assert "bokeh.plotting" not in sys.modules
        thread = start_bokeh_import()
        again = start_bokeh_import()
        from bokeh.plotting import figure  # the main thread's own import waits for the thread's
        thread.join(60)
        print(thread.name, again is None, all(m in sys.modules for m in BOKEH_MODULES))
        """
    )
    assert out == "gpumagic-bokeh-import True True"


def test_nothing_starts_where_bokeh_is_imported_already():
    out = _run(
        """
        import bokeh.embed, bokeh.models, bokeh.plotting
        from gpumagic.render.bokeh_import import start_bokeh_import
        print(start_bokeh_import())
        """
    )
    assert out == "None"


def test_a_failing_import_is_left_to_the_main_thread():
    out = _run(
        """
        import sys
        sys.modules["bokeh"] = None  # as if Bokeh were not installed
        from gpumagic.render.bokeh_import import start_bokeh_import
        thread = start_bokeh_import()
        thread.join(60)
        try:
            import bokeh.plotting
        except ImportError as exc:
            print("main thread:", type(exc).__name__)
        """
    )
    assert out == "main thread: ModuleNotFoundError"
