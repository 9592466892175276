"""Entry point for ``python -m perftool``."""

from perftool.cli import main

main()
