"""Entry point for ``python -m perftool``."""

from perftool.cli.main import main

main()
