"""The IPython layer: it parses a magic's line, reaches the user's namespace and displays; the work
is the core's. ``magics.py`` (the magics and their options), ``config.py`` (the ``%config`` traits,
whose defaults come from the core's option dataclasses), ``cell_syntax.py`` (how a magic's line and
a ``--compare`` cell read), ``gputime_magic.py``, ``profile_magic.py`` and ``memory_magic.py`` (each
magic's run), ``nsys_kernel.py`` (a kernel that itself runs under nsys) and ``glue.py`` (errors and
advice in notebook terms).
"""
