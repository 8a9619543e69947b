"""Domain errors raised by the core and the experiments.

The CLI turns every :class:`AttnError` into a one-line ``Error: ...`` (exit 1) in one
place (:class:`attn_cli.cli.AttnGroup`); nothing below the CLI imports click.
"""


class AttnError(Exception):
    """A run-time failure the user can act on (bad data, unknown word, ...)."""


class MemoryRefused(AttnError):
    """A request whose memory estimate exceeds what is available; refused up front."""


class WriteFailed(AttnError):
    """An output file or folder that could not be written (disk full, permission, read-only)."""
