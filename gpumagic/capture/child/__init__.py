"""What the tools' subprocesses share: ``shipping`` sends a cell's names over, ``runner`` is the
script each subprocess runs, and ``warm_child`` the long-lived one under ``nsys launch``.
"""
