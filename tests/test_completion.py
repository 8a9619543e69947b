"""Shell completion (click's): the scripts README tells people to install are produced, and
bash, running the script, completes ``attn co`` to the copy-* commands."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ATTN


def _source(shell: str) -> str:
    proc = subprocess.run(
        [ATTN], env=dict(os.environ, _ATTN_COMPLETE=f"{shell}_source"), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    "shell, marker",
    [
        ("bash", "complete -o nosort -F _attn_completion attn"),
        ("zsh", "#compdef attn"),
        ("fish", "complete --no-files --command attn"),
    ],
)
def test_completion_script_is_produced(shell, marker):
    assert marker in _source(shell)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
@pytest.mark.parametrize(
    "words, cword, expected",
    [
        ("attn co", 1, {"copy-both", "copy-task"}),
        ("attn masks --format ", 3, {"png", "svg", "pdf"}),
    ],
)
def test_bash_completes_through_the_script(tmp_path, words, cword, expected):
    script = tmp_path / "attn-complete.bash"
    script.write_text(_source("bash"))
    program = (
        f"source {script}\nCOMP_WORDS=({words})\n"
        f'[[ "{words}" == *" " ]] && COMP_WORDS+=("")\n'
        f"COMP_CWORD={cword}\n_attn_completion attn\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    env = dict(os.environ, PATH=os.path.dirname(ATTN) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == expected
