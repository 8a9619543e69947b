"""Domain errors: the CLI turns every :class:`AttnError` into one ``Error: ...`` line (exit 1) in one place."""


class AttnError(Exception):
    """A run-time failure the user can act on (bad data, unknown word, ...)."""


class MemoryRefused(AttnError):
    """A request whose memory estimate exceeds what is available; refused up front."""


class WriteFailed(AttnError):
    """An output file or folder that could not be written (disk full, permission, read-only)."""


# what torch.manual_seed accepts: a signed or an unsigned 64-bit integer (--seed's range)
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


class SeedOutOfRange(AttnError):
    """A seed a run would hand to torch outside its range (seed + k can overflow), raised before any work."""

    def __init__(self, seed: int):
        self.seed = seed
        super().__init__(
            f"this command would seed torch with {seed}, outside torch's range "
            f"[-2**63, 2**64 - 1] (it also uses the seeds after --seed); choose a smaller seed"
        )


class BadConfig(AttnError):
    """Options that do not fit together (an experiment's ``validate`` hook): a usage error (exit 2)."""


class ConfigError(AttnError, ValueError):
    """A configuration the Python API refuses before any work; its message is the CLI's ``Error: ...`` text."""
