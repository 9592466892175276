"""perftool's version, in a module of its own that imports nothing: any module may read it."""

__version__ = "0.1.0"
