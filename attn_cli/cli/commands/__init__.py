"""Click commands, one module per family; each module exposes ``COMMANDS``, and
:mod:`attn_cli.cli` names the modules.

Keep heavy imports (torch, matplotlib, experiments) inside the command functions.
"""
