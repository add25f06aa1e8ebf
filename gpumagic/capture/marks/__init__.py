"""Marks the captured runs carry so the by-code views can name the code: each line of the cell
(``cell_lines``), the functions it calls with their own lines (``function_ranges``), each model's
forwards (``module_ranges``), and the one list of them a backend asks for (``code_marks``). Shared
by every backend: the marks are NVTX ranges (``nvtx_calls``) that torch.profiler and nsys both
record. ``cell_inputs`` finds the names a cell reads; ``compiled_functions`` sees through
``torch.compile``'s wrappers.
"""
