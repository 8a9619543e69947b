"""Options every subcommand shares: one decorator, one ``Common`` value (docs/design.md, ``attn_cli.cli.options``)."""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from attn_cli.cli.types import SEED, Decorator, EnvChoice, FiniteFloatRange, MultiValueOption, from_environment
from attn_cli.core.numerics import DEFAULT_MODE, DEVICE_CHOICES, MODES


class JudgedCommand(click.Command):
    """A command whose --help ends with how `attn verify` judges it (:func:`attn_cli.published.compare.judged_by`)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from attn_cli.published.compare import judged_by

        assert self.name is not None  # every attn command is named
        if text := judged_by(self.name):
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(text)


@dataclass(frozen=True)
class Common:
    device: str  # resolved: "cpu" or "cuda"
    seed: int  # the seed every experiment starts from (torch.manual_seed)
    out: Path  # output folder, exists and is writable
    json: bool  # print JSON on stdout instead of the rich table
    quick: bool  # reduced sizes for smoke runs
    numerics: str = "portable"  # "portable" (pinned AVX2 kernels: same bits on any x86-64) or "native"
    formats: tuple[str, ...] = ("png",)  # figure formats (--format on commands that draw)
    cache_dir: Path | None = None  # --cache-dir on commands that cache; None: attn_cli.store.private.user_cache_root
    scheduler: str | None = None  # --scheduler / ATTN_SCHEDULER: a Dask scheduler's address; None: local runs
    scheduler_from: str | None = None  # where that address came from: "--scheduler" or "ATTN_SCHEDULER"
    worker_wait: float = 120.0  # --worker-wait: seconds a cluster sweep waits without any worker


def _resolve_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The device, prepared before any CUDA work (deterministic, no TF32 unless ATTN_CUDA_FAST=1)."""
    from attn_cli.core.numerics import prepare_device, resolve_device
    from attn_cli.errors import AttnError

    try:
        device = resolve_device(value)
    except AttnError as exc:
        raise click.BadParameter(str(exc)) from None
    prepare_device(device)
    return device


def _apply_numerics(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Pin (or unpin) the CPU kernels before anything imports torch (an eager option)."""
    from attn_cli.core import numerics

    try:
        numerics.apply(value)
    except numerics.NumericsError as exc:
        raise from_environment(ctx, param, value, str(exc)) or click.BadParameter(str(exc)) from None
    return value


def validate_out_file(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """Check ``--junit FILE`` up front: a file name without control characters, in a folder this process can write."""
    if value is None:
        return None
    name = os.path.basename(value)
    if not value.strip() or not name.strip():
        raise click.BadParameter("give a file name (e.g. junit.xml)")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise click.BadParameter("the file name holds a control character")
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        raise click.BadParameter(f"the file name is {len(name)} characters long (255 at most)")
    if os.path.isdir(value):
        raise click.BadParameter(f"{value!r} is a folder; give a file in it (e.g. {value}/junit.xml)")
    validate_out_dir(ctx, param, os.path.dirname(value) or ".")
    return Path(value)


def validate_out_dir(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    """Check --out without creating it (the first file written makes it): it or its nearest parent is writable."""
    if not value:
        raise click.BadParameter("an empty folder name; give a folder (--out . for this one)")
    existing = path = Path(value)
    while not existing.exists() and existing.parent != existing:
        if existing.is_symlink():  # dangling, or a loop
            try:
                os.stat(existing)
            except OSError as exc:
                dangling = f"a dangling symlink (to {os.readlink(existing)!r}, which does not exist)"
                what = "a symlink loop" if exc.errno == errno.ELOOP else dangling
                raise click.BadParameter(f"{str(existing)!r} is {what}") from None
        existing = existing.parent
    if not existing.is_dir():
        raise click.BadParameter(f"{str(existing)!r} exists and is not a directory")
    import tempfile  # here, not at the top: it imports shutil, bz2, lzma, random (attn --help)

    try:  # a real probe: os.access says yes to root even on a read-only file system
        with tempfile.TemporaryFile(dir=existing, prefix=".attn-probe-"):
            pass
    except OSError as exc:
        verb = "is not writable" if existing == path else f"cannot be created in {str(existing)!r}"
        raise click.BadParameter(f"{str(path)!r} {verb}: {exc.strerror}") from None
    return path


def _cache_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A folder name that can exist (one that cannot be used is a warning later, not an error)."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter("is empty; give a folder, or leave the option out")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise click.BadParameter("contains control characters")
    raw = os.fsencode(value)
    if len(raw) >= 4096 or any(len(part) > 255 for part in raw.split(b"/")):
        raise click.BadParameter("is longer than a path (4095 bytes) or a name in it (255) can be")
    return Path(value)


# an optional scheme, a host (a name, an IPv4 or a bracketed IPv6), an optional port; nothing else, 255 at most
SCHEDULER_SCHEMES = ("tcp", "tls")  # the scheduler addresses attn connects to (a bare host:port is tcp)
SCHEDULER_ADDRESS = re.compile(
    r"(?=.{1,255}\Z)([a-z][a-z0-9+.-]*://)?([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?"
)


def _scheduler_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A Dask scheduler address, e.g. ``tcp://10.0.0.5:8786`` (reachability is checked when the command starts)."""
    if value is None:
        return None
    value = value.strip()
    if not SCHEDULER_ADDRESS.fullmatch(value):
        message = "not a scheduler address (e.g. tcp://10.0.0.5:8786)"
        raise from_environment(ctx, param, value, message) or click.BadParameter(f"{value!r} is {message}")
    scheme, sep, _ = value.partition("://")
    if sep and scheme not in SCHEDULER_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in SCHEDULER_SCHEMES)
        message = f"the scheme {scheme}:// is not supported; use one of {schemes} (or host:port, which is tcp)"
        raise from_environment(ctx, param, value, message) or click.BadParameter(message)
    return value


# the shared options, in the order --help lists them
BASE_OPTIONS: list[Decorator] = [
    click.option(
        "--numerics",
        type=EnvChoice(MODES),
        default=DEFAULT_MODE,
        show_default=True,
        envvar="ATTN_NUMERICS",
        is_eager=True,
        callback=_apply_numerics,
        help="portable: AVX2 kernels pinned, the same bits on any x86-64 CPU with AVX2; "
        "native: the host's fastest kernels (numbers depend on the CPU).",
    ),
    click.option("--quick", is_flag=True, help="Reduced sizes for a fast smoke run."),
    click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print the result as JSON on stdout instead of the table (figures are still written).",
    ),
    click.option(
        "--out",
        default="outputs",
        show_default=True,
        metavar="DIR",
        callback=validate_out_dir,
        help="Folder for figures and data files (created when the first file is written).",
    ),
    click.option(
        "--seed", type=SEED, default=0, show_default=True, help="Random seed (the texts use torch.manual_seed(0))."
    ),
    click.option(
        "--device",
        type=click.Choice(DEVICE_CHOICES),
        default="cpu",
        show_default=True,
        callback=_resolve_device,
        help="cpu, cuda (an error if CUDA is absent) or auto (CUDA when available). CUDA runs "
        "are deterministic with no TF32; ATTN_CUDA_FAST=1 trades that for speed (recorded).",
    ),
]
FORMAT = click.option(
    "--format",
    "formats",
    cls=MultiValueOption,
    type=click.Choice(("png", "svg", "pdf")),  # as attn_cli.render.files.FIGURE_FORMATS (no matplotlib here)
    default=("png",),
    show_default=True,
    metavar="png|svg|pdf...",
    help="Figure formats, one or more (--format svg pdf); svg and pdf keep text as text.",
)
NO_FIGURES = click.option(
    "--no-figures", is_flag=True, help="Write the tables and data files (CSV, JSON) but no figure: faster."
)
JUNIT = click.option(  # verify, all
    "--junit",
    callback=validate_out_file,
    metavar="FILE",
    help="Also write the checks as JUnit XML (one suite per text) for CI dashboards.",
)
CACHE_DIR = click.option(
    "--cache-dir",
    metavar="DIR",
    default=None,
    callback=_cache_dir,
    help="The per-user cache (created 0700)  [default: $ATTN_CACHE_DIR, else $XDG_CACHE_HOME/attn, else ~/.cache/attn]",
)
SCHEDULER = click.option(
    "--scheduler",
    metavar="ADDRESS",
    envvar="ATTN_SCHEDULER",
    default=None,
    callback=_scheduler_address,
    help="Train every copy-task run on the Dask distributed cluster of this scheduler "
    "(e.g. tcp://10.0.0.5:8786; needs pip install 'attn-cli[dask]')  [default: this machine]",
)
WORKER_WAIT = click.option(
    "--worker-wait",
    metavar="SECONDS",
    envvar="ATTN_WORKER_WAIT",
    default=120.0,
    show_default=True,
    type=FiniteFloatRange(min=0, max=7 * 24 * 3600),
    help="With --scheduler: how long to wait while no Dask worker is connected (said on stderr "
    "every 10 s) before giving up, keeping the finished runs.",
)
CACHED_RUNS = (CACHE_DIR, SCHEDULER, WORKER_WAIT)  # the commands whose runs are cached: verify, all, copy-task


def common_options(*extra: Decorator) -> Decorator:
    """Add the ``BASE_OPTIONS``, then ``extra`` (FORMAT, ...); the command gets them as ``common: Common``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return func(*args, common=common_of(kwargs), **kwargs)

        command: Callable[..., Any] = wrapper
        for add in reversed([*BASE_OPTIONS, *extra]):  # click lists the options last added first
            command = add(command)
        return command

    return decorate


def common_of(kwargs: dict[str, Any]) -> Common:
    """The shared options' values taken out of ``kwargs`` as one ``Common``."""
    source = click.get_current_context().get_parameter_source
    given = {f.name: kwargs.pop(f.name) for f in dataclasses.fields(Common) if f.name in kwargs}
    given["json"] = kwargs.pop("as_json")
    if kwargs.pop("no_figures", False):
        if source("formats") not in (ParameterSource.DEFAULT, None):
            raise click.UsageError("--no-figures draws no figure: give it or --format, not both")
        given["formats"] = ()
    elif "formats" in given:
        given["formats"] = tuple(dict.fromkeys(given["formats"])) or ("png",)
    if given.get("scheduler"):
        env = source("scheduler") is ParameterSource.ENVIRONMENT
        given["scheduler_from"] = "ATTN_SCHEDULER" if env else "--scheduler"
    return Common(**given)
