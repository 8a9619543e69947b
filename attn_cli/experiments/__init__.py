"""One module per table or figure family: a frozen Config, a Result of plain values,
``run(config) -> Result``.  Results also expose ``measured() -> dict[str, value]`` keyed
by the published-value IDs of :mod:`attn_cli.published`, which ``attn verify`` compares."""
