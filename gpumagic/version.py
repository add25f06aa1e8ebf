"""The package's version, in a module of its own: what records a result's provenance reads it
without importing the package root above it."""

__version__ = "0.1.0"
