"""What every layer of perftool stands on: its errors, units and limits, the names it shows, the documents
its commands return, the files it writes, and how the process starts and stops (Ctrl-C, signals)."""
