"""The version, in a module of its own so that nothing needs the package's lazy root to read it."""

__version__ = "0.1.0"
