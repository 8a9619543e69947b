"""attn: regenerate and verify the tables and figures of two texts on attention (design notes:
``docs/design.md``, section ``attn_cli``)."""

from typing import Any

__version__ = "0.2.0"

# the supported names, by the module that defines them (imported when a name is first asked for)
_MODULES = {
    "attn_cli.api": "run command_line Run",  # run one command; its command line; what it returns
    "attn_cli.api_catalogue": "verify regenerate_all artifacts Verification Report Entry",
    "attn_cli.published.compare": "Outcome",  # one check with its verdict
    "attn_cli.published.types": "Check",  # the published value it judges
    "attn_cli.errors": "AttnError ConfigError",  # a failure at run time; a configuration refused (a ValueError)
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names.split()}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attn_cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
