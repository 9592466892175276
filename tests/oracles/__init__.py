"""The oracles the tests and the benchmarks share: the truths printed figures are held to."""
