"""Click commands, one module per family; each module exposes ``COMMANDS``.  A new or renamed
command, or a new one-line help, goes into :mod:`attn_cli.command_index` with
``python -m attn_cli.command_index --write`` (``attn --help`` lists the commands from there).

Keep heavy imports (torch, matplotlib, experiments) inside the command functions.
"""
