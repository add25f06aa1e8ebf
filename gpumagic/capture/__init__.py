"""Capture backends: each turns something that ran (or a saved trace) into a :class:`gpumagic.trace.Trace`."""
