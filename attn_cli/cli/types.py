"""The option types and classes of attn's commands (integers and seeds that say what is wrong, finite floats,
values from the environment, several values or old names per option) and :func:`option`, which uses them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from attn_cli.errors import SEED_MAX, SEED_MIN  # torch's seed range

if TYPE_CHECKING:
    from click.parser import _ParsingState


class IntRange(click.IntRange):
    """click's ``IntRange``, refusing ``'1e3'`` as "not an integer" (click says "not a valid integer range")."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if not isinstance(value, int):
            try:
                int(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not an integer.", param, ctx)
        return super().convert(value, param, ctx)


SEED = IntRange(SEED_MIN, SEED_MAX)
MAX_SEEDS = 100_000  # seeds one --seeds may list (a range of more is a typo: each seed is a training run)


class SeedsType(click.ParamType):
    """One ``--seeds`` value, a seed (``7``) or an inclusive range (``0-63``), as a tuple of seeds."""

    name = "seeds"
    _RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        match = self._RANGE.match(str(value))  # an int never matches: one seed
        if not match:
            return (SEED.convert(value, param, ctx),)
        first, last = (SEED.convert(v, param, ctx) for v in match.groups())
        if last < first:
            self.fail(f"{value!r}: a range runs upward (e.g. 0-63), not from {first} down to {last}", param, ctx)
        if (count := last - first + 1) > MAX_SEEDS:
            self.fail(f"{value!r} is {count:,} seeds, more than {MAX_SEEDS:,} training runs per cell", param, ctx)
        return tuple(range(first, last + 1))


SEEDS = SeedsType()


class FiniteFloatRange(click.FloatRange):
    """A ``FloatRange`` that also refuses NaN (which a plain range lets through) and infinity."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


class EnvChoice(click.Choice):
    """A ``Choice`` whose bad value from an environment variable is reported under the variable's name."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            raise from_environment(ctx, param, value, exc.message) or exc from None


def from_environment(
    ctx: click.Context | None, param: click.Parameter | None, value: Any, message: str
) -> click.UsageError | None:
    """The usage error naming ``param``'s environment variable when ``value`` came from it."""
    if ctx and param and param.envvar and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        return click.UsageError(f"{param.envvar}={value}: {message}", ctx=ctx)
    return None


def _looks_like_value(token: str) -> bool:
    """A following token belongs to a multi-value option unless it is another option (not "-5")."""
    try:
        float(token)
    except ValueError:
        return not token.startswith("-") or token == "-"
    return True


class AliasedOption(click.Option):
    """An option that still answers to hidden old names, ``aliases=("--dim",)``: only the parser sees them."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.aliases = tuple(aliases)
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:  # parser: click's private _OptionParser
        shown = self.opts
        self.opts = [*shown, *self.aliases]  # the parser registers every name; nothing else sees the aliases
        try:
            super().add_to_parser(parser, ctx)
        finally:
            self.opts = shown
        # "Did you mean ...?" never suggests a hidden alias: the parser's long-option matcher is
        # wrapped once to suggest from the other names
        hidden = getattr(parser, "_attn_unsuggested", None)
        if hidden is None:
            hidden = parser._attn_unsuggested = set()
            match = parser._match_long_opt

            def match_long_opt(opt: str, explicit_value: str | None, state: _ParsingState) -> None:
                try:
                    return match(opt, explicit_value, state)
                except click.NoSuchOption as exc:
                    raise click.NoSuchOption(
                        exc.option_name, ctx=exc.ctx, possibilities=[n for n in parser._long_opt if n not in hidden]
                    ) from None

            parser._match_long_opt = match_long_opt
        hidden.update(self.aliases)


class MultiValueOption(AliasedOption):
    """An option taking one or more values after one flag: ``--lengths 4 8 16 32`` (or ``--lengths 4 --lengths 8``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, multiple=True, **kwargs)

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for name in (*self.opts, *self.aliases):
            opt = parser._long_opt.get(name) or parser._short_opt.get(name)
            if opt is None or getattr(opt, "_greedy", False):
                continue
            original = opt.process

            def process(value: Any, state: _ParsingState, _original: Any = original, _name: str = name) -> None:
                if isinstance(value, str) and not _looks_like_value(value):
                    raise click.BadOptionUsage(_name, f"expected a value after {_name}, got the option {value}")
                _original(value, state)
                while state.rargs and _looks_like_value(state.rargs[0]):
                    _original(state.rargs.pop(0), state)

            opt.process = process
            opt._greedy = True


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def option(*decls: str, **attrs: Any) -> Decorator:
    """``click.option``: a positive integer, None unless a default is given (shown), hidden old names ``aliases``."""
    attrs.setdefault("type", IntRange(min=1))
    if attrs.get("cls") is not MultiValueOption:
        attrs.setdefault("default", None)
    if attrs.get("default") is not None:
        attrs.setdefault("show_default", True)
    if "aliases" in attrs:
        attrs.setdefault("cls", AliasedOption)
    return click.option(*decls, **attrs)
