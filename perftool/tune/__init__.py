"""``perftool tune``: sweep the knobs of an emulator config and explain the best setting."""
