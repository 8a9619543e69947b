"""Experiment modules: one per table or figure family.

The contract every module follows (``attn all``, ``attn verify`` and the single commands
rely on it; :mod:`attn_cli.experiment_registry` reads it, nothing is guessed)::

    ARTIFACTS = ("w9-sqrt-dk", "w9-sqrt-dk-plot")   # catalogue IDs this module regenerates
    FIGURES = ("sqrt_dk.png",)       # figure files its render module writes
    ENGINES: tuple[str, ...] = ()    # ways to compute it ("exact", "fast": the copy task)
    SLOW, CACHED = False, True       # SLOW: minutes at the text's settings (verify --quick runs
                                     # Config.quick() and skips its checks); CACHED: over a
                                     # second, the pipeline keeps its Result in the cache
    CACHES_PIECES = False            # optional; True: run() gets the opened cache, store=Pieces
                                     # (attn_cli.store.cache), and keeps pieces of its work there as
                                     # they finish (the copy task: each training run)
    INTERRUPTED = None               # optional: the line said after Ctrl-C (what was kept)

    @dataclass(frozen=True)
    class Config(QuickConfig):       # defaults = the text's settings; every field commented
        seed: int = 0
        device: str = "cpu"
        ...
        QUICK = {"trials": 2000}     # what --quick shrinks (base.QuickConfig.quick)

    @dataclass
    class Result(MeasuredResult):    # plain Python values only (lists, floats, str, bool)
        config: dict                 # dataclasses.asdict(config)
        ...
        MEASURED = {"w9-sqrt-dk.4.std": "rows.0.std"}   # or a measured() method

    def run(config: Config, progress: ProgressCallback = None) -> Result: ...
        # with CACHES_PIECES: run(config, progress=None, store: Pieces | None = None)
        # progress(ProgressEvent(done, total, label)): the one event (experiments/progress.py)

    def validate(config) -> None: ...   # optional: options that do not fit together; an AttnError
                                        # here is a usage error (exit 2), before any display or file
    def preflight(config) -> None: ...  # optional: refused at run time before any work or display
                                        # (the copy task: a missing engine, the memory estimate)

The pipeline (:func:`attn_cli.pipeline.run`) calls the hooks, runs, compares the Result with the
published values once and hands the outcomes to the render module
``attn_cli/render/<same name>.py``: ``tables(result, outcomes) -> list`` (:mod:`attn_cli.render.table` blocks,
published values beside regenerated ones; ``outcomes``, check ID -> Outcome, are the verdicts
its marks show) and ``figures(result, out: Path, formats, outcomes) -> list[Path]`` (atomic PNG
+ raw numbers beside it).  Render imports nothing from here: what it needs beyond the Result's
fields comes with the Result (a method, a ``ClassVar`` constant: ``analogy.Result.TIED``) or
from :mod:`attn_cli.published`.  Every command prints ``render.files.result_json(result,
outcomes)`` for ``--json``; a Result may add the text's values beside its own there with
``published_beside(outcomes) -> dict`` (the copy task's cells).
"""
