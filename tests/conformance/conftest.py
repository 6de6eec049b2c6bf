"""The corpus loops are imported by the runs that use them, not collected: pytest's doctest
collection would import every one (Lightning's import alone is seconds) in every process of the
fast layer."""

collect_ignore_glob = ["loops/*.py"]
