"""Click commands, one module per family, each exposing ``COMMANDS``. A run command parses its options and
returns a :class:`~attn_cli.cli.commands.execute.Job`; heavy imports (torch, matplotlib, experiments) stay
inside the command functions, so ``attn --help`` stays fast."""
