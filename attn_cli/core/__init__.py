"""Pure compute core: torch/numpy only (no click, rich or matplotlib)."""
