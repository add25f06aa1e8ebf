"""Rendering: pure functions from a Trace (and findings) to HTML, text and Bokeh. No torch, no
nsys."""
