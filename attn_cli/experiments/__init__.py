"""Experiment modules: one per table or figure family.

The contract every module follows (``attn all``, ``attn verify`` and the single commands
rely on it; :mod:`attn_cli.runner` reads it, nothing is guessed)::

    ARTIFACTS = ("w9-sqrt-dk", "w9-sqrt-dk-plot")   # catalogue IDs this module regenerates
    FIGURES = ("sqrt_dk.png",)       # figure files its render module writes
    ENGINES: tuple[str, ...] = ()    # ways to compute it ("exact", "fast": the copy task)
    SLOW, CACHED = False, True       # SLOW: minutes at the text's settings (verify --quick runs
                                     # Config.quick() and skips its checks; CACHE_FIELD names the
                                     # Config field that receives the cache folder); CACHED: over
                                     # a second, the runner keeps its Result in the per-user cache

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

    def run(config: Config, progress: Report = None) -> Result: ...
        # progress(Progress(done, total, label)): the one event (experiments/progress.py)

and a render module ``attn_cli/render/<same name>.py`` with
``tables(result, outcomes=None) -> list`` (rich renderables, published values beside regenerated
ones; ``outcomes``, check ID -> Outcome, are the verdicts its marks show: ``attn all`` passes
those of its check table, None means the module compares the result itself)
and ``figures(result, out: Path, formats) -> list[Path]`` (atomic PNG + raw numbers beside it).
"""
