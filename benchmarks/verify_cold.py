"""Cold `attn verify` now (seed statistics: 5 seeds per trained cell) against a baseline
revision (default: the last one before the seed statistics, one exact seed per cell), side
by side in this script, each with an empty cache; then a warm rerun of the current one.

    python benchmarks/verify_cold.py [--baseline REV] [--jobs 2]

The baseline is checked out into a temporary git worktree and run from there (same Python,
same packages).  Prints wall times, the ratio current / baseline, and each run's summary.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "2e0e782"  # main before issue 8: one exact seed per copy-task cell


def timed_verify(source: Path, out: Path, *extra: str) -> tuple[float, str, int]:
    # the per-user cache of this benchmark (cold at first), never the user's own
    env = dict(
        os.environ, PYTHONPATH=str(source), COLUMNS="120", NO_COLOR="1", ATTN_CACHE_DIR=str(out.parent / "cache")
    )
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "attn_cli", "verify", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=source,
    )
    seconds = time.perf_counter() - start
    lines = [
        ln
        for ln in proc.stdout.splitlines()
        if " checked, " in ln or " passed" in ln or "from cache" in ln or ln.startswith("numerics")
    ]
    return seconds, " | ".join(lines), proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="attn-verify-bench-") as tmp:
        tmp = Path(tmp)
        base_src = tmp / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_src), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            base = timed_verify(base_src, tmp / "out-baseline")
            cur = timed_verify(ROOT, tmp / "out-current", "--no-cache")
            warm = timed_verify(ROOT, tmp / "out-current")
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_src)], capture_output=True
            )
    print(f"baseline {args.baseline} cold: {base[0]:7.1f} s  exit {base[2]}  {base[1]}")
    print(f"current cold:        {cur[0]:7.1f} s  exit {cur[2]}  {cur[1]}")
    print(f"current warm:        {warm[0]:7.1f} s  exit {warm[2]}  {warm[1]}")
    print(f"ratio current / baseline (cold): {cur[0] / base[0]:.2f}")


if __name__ == "__main__":
    main()
