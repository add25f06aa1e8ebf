"""Chrome trace JSON (torch.profiler's export, rocprof's lists, any Kineto file) read into a Trace:
``reader.load_trace``, ``events`` (the events by kind, as columns) and
``code_text`` (what the file says about the user's code).
"""
