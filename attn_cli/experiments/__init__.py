"""Experiment modules, one per table or figure family; here, what they share: the progress event their
``run(config, progress)`` reports, and the bases of their Config and Result classes (``docs/design.md``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing_extensions import Self


@dataclass(frozen=True)
class ProgressEvent:
    done: int  # units finished (d_k values, exercises, training runs, ...)
    total: int | None  # units in all; None when not known
    label: str = ""  # what is running now, e.g. "run 3: step 120/2500, loss 0.412"
    # where units run side by side (the copy task's training runs): which unit this event is
    # about, how far that unit is, and its current value (a loss); status "running", "done" or "cached"
    item: int | None = None
    item_done: int = 0
    item_total: int | None = None
    value: float | None = None
    status: str = "running"


ProgressCallback = Callable[[ProgressEvent], None] | None  # the ``progress`` argument of every run()


@dataclass(frozen=True)
class QuickConfig:
    """Base of a frozen ``Config``: its first fields, and ``Config.quick(**overrides)``, the smoke-run
    configuration (the defaults with the fields in ``QUICK`` replaced, then ``overrides``)."""

    seed: int = 0  # torch's seed (the texts' 0), set where the text sets it: see each run()
    device: str = "cpu"  # where the computation runs; draws are made on the CPU generator, then moved
    QUICK: ClassVar[dict[str, Any]] = {}  # field -> its reduced value under --quick

    @classmethod
    def quick(cls, **overrides: Any) -> Self:
        return cls(**{**cls.QUICK, **overrides})


class MeasuredResult:
    """Base of a Result whose ``MEASURED`` maps each check ID to a dotted path in it
    (``"bank_outputs.0"``, ``"config.vocab_size"``: attributes, list indices, dict keys)."""

    MEASURED: ClassVar[dict[str, str]] = {}  # check ID -> path of its regenerated value

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value."""
        values = {}
        for check_id, path in self.MEASURED.items():
            obj: Any = self
            for part in path.split("."):
                if isinstance(obj, dict):
                    obj = obj[part]
                elif isinstance(obj, (list, tuple)):
                    obj = obj[int(part)]
                else:
                    obj = getattr(obj, part)
            values[check_id] = obj
        return values
