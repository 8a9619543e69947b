"""Every notebook in examples/ runs headless, top to bottom, without an error (nbclient + ipykernel),
and is committed without outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
KERNEL = "attn-test-python"  # a kernelspec of this test only, for this interpreter


def test_there_is_a_notebook():
    assert NOTEBOOKS, f"no notebook in {EXAMPLES}"


@pytest.fixture
def kernel(tmp_path, monkeypatch) -> str:
    """A kernelspec that starts this interpreter (the venv's python, with attn_cli installed),
    found through JUPYTER_PATH under tmp_path: nothing is registered for the user or the system."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "attn tests",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # connection files, config and the IPython profile under tmp_path too: nothing read from or
    # left in the home folder (no user startup script runs in the kernel)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter" / "runtime"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter" / "config"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (tmp_path / "cwd").mkdir()
    return KERNEL


def _outputs_left(nb) -> list[int]:
    """Indices of code cells that carry outputs or an execution count."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]


def _execute(nb, kernel: str, folder: Path):
    from nbclient import NotebookClient

    client = NotebookClient(
        nb, kernel_name=kernel, timeout=300, allow_errors=False, resources={"metadata": {"path": str(folder)}}
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert any(c.cell_type == "code" for c in nb.cells)
    assert _outputs_left(nb) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel, tmp_path):
    import nbformat

    nb = _execute(nbformat.read(path, as_version=4), kernel, tmp_path / "cwd")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if o.get("data", {}).get("text/html")]
    assert any("data:image/png;base64," in h for h in html), "no figure shown inline"
    assert list((tmp_path / "cwd").iterdir()) == []  # the notebook wrote nothing where it ran
    assert _outputs_left(nb)  # executed: the check above sees outputs when there are some


def test_a_failing_cell_fails_the_test(kernel, tmp_path):
    from nbclient.exceptions import CellExecutionError
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("import attn_cli"), new_code_cell("attn_cli.run('heads', heads=[0])")])
    with pytest.raises(CellExecutionError, match="ConfigError"):
        _execute(nb, kernel, tmp_path / "cwd")
