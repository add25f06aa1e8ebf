"""What a script calls, the same work the magics do without IPython: ``gputime``, ``compare`` and
``sweep`` (``gputime.py``: each result saved to the history, as the magics save), ``gpumagic.diff``
(``diff.py``), ``gpumagic.load_ncu`` (``ncu.py``), the memory snapshot's report (``memory.py``) and
``gpumagic.replay`` (``replay.py``: a profile row's op timed again). ``gpumagic`` itself exports
these names lazily.
"""
