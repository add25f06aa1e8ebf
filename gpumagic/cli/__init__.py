"""``python -m gpumagic``'s commands: ``history`` and ``check`` (``history.py``) and ``diff``
(``diff.py``). Exit codes mean one thing each: 0 ok, 1 slower (a gate failed), 2 a usage or input
error.
"""
