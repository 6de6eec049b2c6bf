"""The conformance corpus: user loops written as Ray's own guides write them (one per file,
importing nothing from sweeps), listed in ``tests/conformance/corpus.py``."""
