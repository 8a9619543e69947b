"""Input, limits and output of the CLI: bad bytes, memory limits, seeds, stdout, --out, help.

Each case is a way a careful user (or a script) can meet the CLI; each fails without the rule
it tests.  In-process (CliRunner) where the rule lives in Python, a real ``attn`` process
where it lives in the process (its argv bytes, its stdout, its rlimits).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_cli.cli import cli
from attn_cli.core import memory
from attn_cli.published.compare import REGENERATE_NOTHING

SEED_MAX = 2**64 - 1  # torch.manual_seed takes a signed or unsigned 64-bit integer

ATTN = str(Path(sys.executable).with_name("attn"))


def attn(*args, env=None, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ATTN, *args],
        capture_output="stdout" not in kwargs,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def one_error_line(text: str) -> str:
    """The single ``Error:`` line of ``text``, which must hold no traceback."""
    assert "Traceback" not in text and "Exception ignored" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, text
    return errors[0]


def not_started(*_, **__):
    raise AssertionError("work started before every argument was checked")


# --------------------------------------------------------------------------- bad bytes


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_a_word_that_is_not_utf8_is_a_usage_error_in_every_command(command):
    result = CliRunner().invoke(cli, [command, "ab\udcff", "cd"])  # how Python hands over b"ab\xff"
    assert result.exit_code == 2, result.output
    assert one_error_line(result.output) == r"Error: the argument 'ab\xff' is not valid UTF-8 text"


def test_heatmap_with_a_word_that_is_not_utf8_names_it(tmp_path):
    proc = subprocess.run(
        [os.fsencode(ATTN), b"heatmap", b"ab\xff", b"cd", b"--out", os.fsencode(tmp_path)],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert one_error_line(proc.stderr.decode()) == r"Error: the argument 'ab\xff' is not valid UTF-8 text"
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- memory limits


def _limit_address_space(nbytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def test_an_address_space_limit_below_torch_is_refused_up_front(tmp_path):
    """``ulimit -v 600000``: torch alone maps more, so the run is refused before importing it."""
    out = tmp_path / "out"
    proc = attn(
        "copy-task",
        "--lengths",
        "4",
        "--steps",
        "60",
        "--out",
        str(out),
        preexec_fn=_limit_address_space(600_000 * 1024),
        timeout=120,
    )
    line = one_error_line(proc.stderr.decode())
    assert proc.returncode == 1
    assert re.fullmatch(
        r"Error: copy-task .* needs about .* left under the address-space limit \(ulimit -v\); "
        r"refused before starting",
        line,
    ), line
    assert not out.exists()


def test_under_the_issues_address_space_limit_a_run_ends_cleanly(tmp_path):
    """``ulimit -v 6000000`` (the issue's): the run completes, or ends in one Error line."""
    proc = attn(
        "copy-task",
        "--lengths",
        "4",
        "--steps",
        "60",
        "--no-cache",
        "--json",
        "--out",
        str(tmp_path),
        preexec_fn=_limit_address_space(6_000_000 * 1024),
        timeout=300,
    )
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    if proc.returncode:
        assert proc.returncode == 1 and one_error_line(stderr), stderr


def test_the_address_space_headroom_counts_torch_when_it_is_not_imported_yet(monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or types.ModuleType("torch"))
    mapped = memory.mapped_bytes()  # this process's VmSize now (large after other tests: set the limit above it)
    monkeypatch.setattr(memory, "address_space_limit", lambda: mapped + 2 * memory.TORCH_VM_BYTES)
    with_torch = memory.address_space_headroom()
    monkeypatch.delitem(sys.modules, "torch")
    without_torch = memory.address_space_headroom()
    slack = 64 * 2**20  # VmSize moves a little between the two readings
    assert with_torch > memory.TORCH_VM_BYTES
    assert 0 <= without_torch <= with_torch - memory.TORCH_VM_BYTES + slack


def _fake_proc(tmp_path, cgroup_line: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup_line + "\n")
    (proc / "status").write_text("VmSize:\t  1000 kB\n")
    return proc


def _write(folder: Path, **files) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


def test_cgroup_v2_limit_is_the_tightest_of_the_process_and_its_parents(tmp_path, monkeypatch):
    fs = tmp_path / "cgroup"
    _write(fs, cgroup_controllers="memory")
    _write(fs / "job", memory_max=str(3 * 2**30), memory_current=str(1 * 2**30))  # 2 GB left
    _write(fs / "job" / "step", memory_max="max", memory_current=str(2**30))
    monkeypatch.setattr(memory, "CGROUP_FS", fs)
    monkeypatch.setattr(memory, "PROC_SELF", _fake_proc(tmp_path, "0::/job/step"))
    assert memory.cgroup_headroom() == 2 * 2**30
    monkeypatch.setattr(memory, "free_bytes", lambda: 100 * 2**30)
    monkeypatch.setattr(memory, "address_space_limit", lambda: None)
    assert memory.available_bytes() == 2 * 2**30
    with pytest.raises(
        memory.MemoryRefused,
        match=r"more than 50% of the 2\.\d GB left under the cgroup's "
        r"memory limit; refused before starting",
    ):
        memory.guard(1.5 * 2**30, "a test")


def test_cgroup_v1_limit_is_read_and_no_limit_means_none(tmp_path, monkeypatch):
    fs = tmp_path / "cgroup"
    _write(fs / "memory" / "slurm", memory_limit_in_bytes=str(2**30), memory_usage_in_bytes=str(2**28))
    _write(fs / "memory", memory_limit_in_bytes="9223372036854771712", memory_usage_in_bytes="5")
    monkeypatch.setattr(memory, "CGROUP_FS", fs)
    monkeypatch.setattr(memory, "PROC_SELF", _fake_proc(tmp_path, "4:memory:/slurm\n1:cpu:/"))
    assert memory.cgroup_headroom() == 2**30 - 2**28
    (fs / "memory" / "slurm" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory.cgroup_headroom() is None


def test_jobs_1024_is_refused_up_front_counting_the_worker_processes(tmp_path, monkeypatch):
    """1024 small runs on 1024 workers: the runs' tensors fit, the 1024 processes do not."""
    from attn_cli.experiments import copy_task

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 24 * 10**9)
    monkeypatch.setattr(copy_task, "run", not_started)  # the guard must refuse first
    seeds = [str(s) for s in range(512)]
    result = CliRunner().invoke(
        cli, ["copy-task", "--lengths", "4", "--jobs", "1024", "--seeds", *seeds, "--out", str(tmp_path)]
    )
    assert result.exit_code == 1, result.output
    line = one_error_line(result.output)
    assert "in 1024 worker process(es)" in line and "refused before starting" in line, line
    assert list(tmp_path.iterdir()) == []


def test_pool_cost_is_the_server_once_and_each_worker():
    assert memory.pool_bytes(0) == 0
    assert memory.pool_bytes(3) - memory.pool_bytes(2) == memory.WORKER_BYTES
    assert memory.pool_bytes(1) == memory.FORKSERVER_BYTES + memory.WORKER_BYTES


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:116] data. DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 800000000 bytes."
        ),
    ],
    ids=["MemoryError", "DefaultCPUAllocator"],
)
def test_an_allocation_that_fails_anyway_is_one_error_line(error, tmp_path, monkeypatch):
    from attn_cli.experiments import masks

    def run(config, progress=None):
        raise error

    monkeypatch.setattr(masks, "run", run)
    monkeypatch.setattr(memory, "address_space_limit", lambda: 6 * 10**9)
    result = CliRunner().invoke(cli, ["masks", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert one_error_line(result.output) == (
        "Error: out of memory: the address-space limit (ulimit -v) of 6.0 GB ran out; raise it or use smaller sizes"
    )


def test_attn_all_names_an_allocation_that_failed_in_one_experiment(tmp_path, monkeypatch):
    from attn_cli.experiments import masks

    def run(config, progress=None):
        raise MemoryError()

    monkeypatch.setattr(masks, "run", run)
    monkeypatch.setattr(memory, "address_space_limit", lambda: None)
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: None)
    result = CliRunner().invoke(cli, ["all", "--quick", "--only", "w9-masks", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "masks failed: out of memory (" in result.output and "MemoryError" not in result.output, result.output


def test_other_runtime_errors_are_not_called_out_of_memory():
    assert memory.out_of_memory(RuntimeError("shape mismatch")) is None


# --------------------------------------------------------------------------- seeds


def test_verify_refuses_a_seed_whose_extra_seeds_overflow_before_any_work(monkeypatch):
    from attn_cli.cli.commands import execute

    monkeypatch.setattr(execute, "run_plan", not_started)
    result = CliRunner().invoke(cli, ["verify", "--seed", str(SEED_MAX)])
    assert result.exit_code == 2, result.output
    assert f"would seed torch with {SEED_MAX + 1}" in one_error_line(result.output)


def test_all_and_exercise_check_the_seeds_exercise_12_adds(monkeypatch, tmp_path):
    from attn_cli.cli.commands import execute
    from attn_cli.experiments import exercises

    monkeypatch.setattr(execute, "run_plan", not_started)
    monkeypatch.setattr(exercises, "run", not_started)
    for args in (["all", "--only", "d2l"], ["exercise", "12"]):
        result = CliRunner().invoke(cli, [*args, "--seed", str(SEED_MAX - 1), "--out", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert f"would seed torch with {SEED_MAX + 1}" in one_error_line(result.output)


def test_every_seed_used_is_listed():
    from attn_cli import experiment_registry
    from attn_cli.experiments import copy_task, exercises, masks

    verify = copy_task.verify_config(copy_task.Config(seed=7))
    assert experiment_registry.seeds_used(copy_task, verify) == [7, 8, 9, 10, 11]
    assert experiment_registry.seeds_used(exercises, exercises.Config(seed=7)) == [7, 8, 9]
    assert experiment_registry.seeds_used(masks, masks.Config(seed=7)) == [7]


def test_seed_and_seeds_together_are_a_usage_error(tmp_path, monkeypatch):
    from attn_cli.experiments import copy_task

    monkeypatch.setattr(copy_task, "run", not_started)
    result = CliRunner().invoke(cli, ["copy-task", "--seed", "3", "--seeds", "1", "2", "--out", str(tmp_path / "new")])
    assert result.exit_code == 2, result.output
    assert "--seed and --seeds both given" in one_error_line(result.output)
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------------------------- stdout


def test_a_closed_stdout_is_an_error_not_a_silent_exit_0(tmp_path):
    proc = attn("list", "--json", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1
    assert one_error_line(proc.stderr.decode()) == "Error: cannot write to stdout: it is closed; the output is lost"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_a_full_stdout_is_an_error(as_json):
    with open("/dev/full", "w") as full:
        proc = attn("list", *(["--json"] if as_json else []), stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 1
    assert (
        one_error_line(proc.stderr.decode())
        == "Error: cannot write to stdout: No space left on device; the output is lost"
    )


def test_an_ascii_terminal_prints_tables_and_words_it_cannot_encode(tmp_path):
    proc = attn("heatmap", "café", "naïve", "--out", str(tmp_path), env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    assert b"caf\\xe9" in proc.stdout  # the word, escaped, in the table


# --------------------------------------------------------------------------- --out and the environment


@pytest.mark.parametrize(
    "args",
    [["masks", "--format", "bmp"], ["copy-task", "--lengths", "0"], ["sqrt-dk", "--seed", "x"]],
    ids=lambda a: a[0],
)
def test_a_usage_error_creates_no_out_folder(args, tmp_path):
    new = tmp_path / "new"
    result = CliRunner().invoke(cli, [args[0], "--out", str(new), *args[1:]])
    assert result.exit_code == 2, result.output
    assert not new.exists()
    if args[0] == "masks":  # the folder (and its parents) come with the first file written
        result = CliRunner().invoke(cli, ["masks", "--quick", "--out", str(new / "a")])
        assert result.exit_code == 0, result.output
        assert (new / "a" / "masks.png").is_file()


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda p: p.symlink_to(p.parent / "nowhere"),
            r"is a dangling symlink \(to '.*nowhere', which does not exist\)",
        ),
        (lambda p: (p.symlink_to(p.parent / "other"), (p.parent / "other").symlink_to(p)), r"is a symlink loop"),
    ],
    ids=["dangling", "loop"],
)
def test_a_broken_out_symlink_is_named_precisely(make, message, tmp_path):
    link = tmp_path / "link"
    make(link)
    result = CliRunner().invoke(cli, ["masks", "--out", str(link / "sub")])
    assert result.exit_code == 2, result.output
    line = one_error_line(result.output)
    assert re.search(message, line) and "File exists" not in line, line


def test_an_empty_out_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["masks", "--quick", "--out", ""])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--out': an empty folder name" in one_error_line(result.output)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_environment_variable_is_named(tmp_path):
    result = CliRunner().invoke(cli, ["masks", "--out", str(tmp_path)], env={"ATTN_NUMERICS": "fastest"})
    assert result.exit_code == 2, result.output
    assert one_error_line(result.output).startswith("Error: ATTN_NUMERICS=fastest: ")


# --------------------------------------------------------------------------- help


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", sorted(set(cli.commands) - set(REGENERATE_NOTHING)))
def test_every_command_help_states_the_rule_it_is_judged_by(command):
    from attn_cli.published.compare import judged_by

    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    rule = judged_by(command)
    assert rule.startswith("Judged")
    assert _flat(rule) in _flat(result.output)


def test_copy_task_help_states_the_seed_rule_from_its_constants(monkeypatch):
    from attn_cli.published import seed_rule

    result = CliRunner().invoke(cli, ["copy-task", "--help"], terminal_width=100)
    assert "matched within" not in result.output
    assert f"{seed_rule.LEVEL:.0%} prediction interval of {seed_rule.MIN_SEEDS} regenerated seeds" in _flat(
        result.output
    )
    monkeypatch.setattr(seed_rule, "FLOOR", 0.03)  # the text follows the constant, not a copy of it
    assert "max(0.03," in _flat(CliRunner().invoke(cli, ["copy-task", "--help"]).output)


def test_the_docs_state_the_seed_rule_as_published_defines_it():
    from attn_cli.published import seed_rule

    readme = _flat((Path(__file__).parents[1] / "docs" / "checking.md").read_text())
    assert f"seeds' {seed_rule.LEVEL:.0%} prediction interval, {seed_rule.formula()}" in readme


def test_a_reader_that_left_ends_the_command_quietly():
    """`attn list | head`: the pipe's reader is gone (EPIPE): exit 141 (128 + SIGPIPE), no Error
    line and no traceback (a closed or full stdout is an Error: the tests above)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before attn wrote anything
    try:
        proc = subprocess.run([ATTN, "list"], stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr.decode() == ""
