"""Prediction, the stage after the rules: an emulator config fitted to a trace (:mod:`.fitting`), and each finding's
fix re-run on the run the trace records or on that fit, for the gain it is printed with (:mod:`.gains`). Checking a
fit on what it was not fitted to is :mod:`perftool.tune.calibration`'s."""
