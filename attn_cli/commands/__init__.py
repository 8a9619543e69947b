"""Click commands, one module per family; each module exposes ``COMMANDS``.

Keep heavy imports (torch, matplotlib, experiments) inside the command functions.
"""
