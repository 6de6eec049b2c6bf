"""A training module that fails while it is imported (for the config checks)."""

raise RuntimeError("missing dataset path")
