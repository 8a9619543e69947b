"""attn: regenerate and verify the tables and figures of two texts on attention (design notes:
``docs/design.md``, section ``attn_cli``)."""

from typing import Any

__version__ = "0.2.0"

__all__ = [
    "run",
    "verify",
    "regenerate_all",
    "artifacts",
    "command_line",  # functions (attn_cli.api)
    "Run",
    "Verification",
    "Report",
    "Entry",  # what they return
    "Outcome",
    "Check",  # one check with its verdict; the published value it judges
    "AttnError",  # a failure at run time; bad options raise click.UsageError / click.BadParameter
    "ConfigError",  # a configuration refused before any work (a ValueError)
]

# the module of each name, imported when first asked for (attn_cli.api for the others)
_WHERE = {"Outcome": "attn_cli.published.compare", "Check": "attn_cli.published.types"}
_WHERE |= dict.fromkeys(["AttnError", "ConfigError"], "attn_cli.errors")
_WHERE |= dict.fromkeys(
    ["verify", "regenerate_all", "artifacts", "Verification", "Report", "Entry"], "attn_cli.api_catalogue"
)


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        value = getattr(importlib.import_module(_WHERE.get(name, "attn_cli.api")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attn_cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
