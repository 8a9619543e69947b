"""Experiment modules: one per table or figure family.

The contract every module follows (``attn all`` and ``attn verify`` rely on it)::

    ARTIFACTS = ("w9-sqrt-dk", "w9-sqrt-dk-plot")   # catalogue IDs this module regenerates

    @dataclass(frozen=True)
    class Config:            # defaults = the text's settings; every field commented
        seed: int = 0
        device: str = "cpu"
        ...
        @classmethod
        def quick(cls, **overrides) -> "Config": ...   # reduced sizes for smoke runs

    @dataclass
    class Result:            # plain Python values only (lists, floats, str, bool)
        config: dict         # dataclasses.asdict(config)
        ...
        def measured(self) -> dict[str, Any]: ...   # check ID -> regenerated value

    def run(config: Config) -> Result: ...

and a render module ``attn_cli/render/<same name>.py`` with
``tables(result) -> list`` (rich renderables, published values beside regenerated ones)
and ``figures(result, out: Path) -> list[Path]`` (atomic PNG + raw numbers beside it).
"""
