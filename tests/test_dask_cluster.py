"""``--scheduler``: copy-task runs on a real Dask distributed cluster (issue 16).

A real scheduler and two single-thread workers (``dask scheduler``, ``dask worker --nthreads 1``)
on loopback, started by the test as subprocesses and always stopped (by their ids) at the end:

- a sweep of 2 seeds x 2 lengths through ``attn copy-task --scheduler`` equals the same runs
  computed locally, bit for bit (every loss and accuracy; both engines), and each run says
  where it ran;
- a rerun finds every run in the cache and computes nothing;
- a worker killed mid-sweep costs only its run: the sweep finishes with the same numbers;
- a scheduler gone mid-sweep is one ``Error:`` line, with the finished runs cached;
- an unreachable scheduler is one ``Error:`` line naming where its address came from;
- a worker whose torch already runs other kernels, other code, or another ISA is refused;
- each run announces its start (the progress bar's running count), and a run restarted after
  its worker was killed counts as one failed attempt;
- a worker started with attn's preload (``--preload attn_cli.dask_worker``) has torch loaded
  under its numeric mode before its first run, trains a run bit for bit like a local run, and
  refuses a run in the other mode naming its own and the fix;
- the README's Slurm set-up (dask-jobqueue): its job script's worker command, run by hand
  against the SLURMCluster's own scheduler, trains a run bit for bit like a local run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ATTN, assert_user_error, run_attn, run_copy_task

distributed = pytest.importorskip("distributed")

BIN = Path(sys.executable).parent
SWEEP = ["--lengths", "3", "4", "--seeds", "0", "1", "--steps", "20", "--eval-size", "50"]
METRICS = ("teacher_forced", "free_running", "exact", "diagonal")


def scheduler_address(file: Path, timeout: float = 60) -> str:
    """The address a starting scheduler writes into its ``--scheduler-file`` (written in pieces:
    read until it parses)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class LoopbackCluster:
    """A scheduler and two single-thread workers (no nanny: a killed worker stays dead) on
    127.0.0.1, as subprocesses; :meth:`ensure` restarts what a test killed; :meth:`stop`
    stops every process it started (by its id)."""

    def __init__(self, tmp: Path, workers: int = 2, worker_args: tuple[str, ...] = ()):
        self.tmp, self.n_workers, self.worker_args = tmp, workers, worker_args
        self.env = dict(os.environ)
        self.procs: list[subprocess.Popen] = []
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address = ""

    def _start(self, *args) -> subprocess.Popen:
        with open(self.tmp / f"dask-{len(self.procs)}.log", "w") as log:
            proc = subprocess.Popen([str(BIN / "dask"), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(proc)
        return proc

    def ensure(self) -> str:
        """A live scheduler with two live workers; its address."""
        if self.scheduler is None or self.scheduler.poll() is not None:
            for proc in self.workers:
                self._stop(proc)
            self.workers = []
            file = self.tmp / f"scheduler-{len(self.procs)}.json"
            self.scheduler = self._start(
                "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)
            )
            self.address = scheduler_address(file)
        self.workers = [w for w in self.workers if w.poll() is None]
        while len(self.workers) < self.n_workers:
            self.workers.append(
                self._start(
                    "worker",
                    self.address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                    *self.worker_args,
                )
            )
        with distributed.Client(self.address, timeout=30) as client:
            client.wait_for_workers(self.n_workers, timeout=60)
            while len(client.scheduler_info()["workers"]) > self.n_workers:  # a killed worker not yet removed
                time.sleep(0.1)
        return self.address

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        for proc in reversed(self.procs):
            self._stop(proc)


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    cluster = LoopbackCluster(tmp_path_factory.mktemp("dask"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(loopback) -> str:
    return loopback.ensure()


def copy_task(tmp: Path, cache: str, *args: str, timeout: float = 180) -> dict:
    proc = run_attn(
        "copy-task", *args, "--json", "--out", tmp / f"out-{cache}", "--cache-dir", tmp / cache, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def numbers(result: dict) -> list:
    """Every loss and accuracy of every run, in plan order (floats compared exactly)."""
    return [(r["model"], r["length"], r["seed"], r["engine"], *(r[m] for m in METRICS)) for r in result["rows"]] + [
        (r["model"], r["length"], r["seed"], r["final_loss"], r["isa"], r["backend"]) for r in result["runs"]
    ]


@pytest.mark.parametrize("engine, model", [("exact", "attention"), ("fast", "both")])
def test_a_sweep_on_the_cluster_equals_local_runs_bit_for_bit_and_a_rerun_computes_nothing(
    cluster, tmp_path, engine, model
):
    args = [*SWEEP, "--engine", engine, "--model", model]
    start = time.perf_counter()
    remote = copy_task(tmp_path, "remote", *args, "--scheduler", cluster)
    remote_s = time.perf_counter() - start
    start = time.perf_counter()
    local = copy_task(tmp_path, "local", *args, "--jobs", "1")
    local_s = time.perf_counter() - start
    print(f"{engine}: cluster {remote_s:.1f} s, local {local_s:.1f} s")  # README: measured

    assert numbers(remote) == numbers(local)
    assert remote["cells"] == local["cells"] and remote["maps"] == local["maps"]
    assert all(not r["cached"] for r in remote["runs"])
    for run in remote["runs"]:  # where it ran: one of the two loopback workers, this host, its CPU
        assert set(run["ran_on"]) == {"worker", "host", "cpu"}
        assert run["ran_on"]["worker"].startswith("tcp://127.0.0.1:") and run["ran_on"]["cpu"]
    assert all("ran_on" not in r for r in local["runs"])  # a local run's record is unchanged
    assert "scheduler" not in remote["config"]  # the address is this machine's set-up, never recorded

    if engine == "fast":
        return
    # resume: every run is in the cache, none is computed again (each keeps where it ran)
    again = copy_task(tmp_path, "remote", *args, "--scheduler", cluster)
    assert all(r["cached"] for r in again["runs"])
    assert numbers(again) == numbers(local)
    assert [r["ran_on"] for r in again["runs"]] == [r["ran_on"] for r in remote["runs"]]


def test_an_unreachable_scheduler_is_one_error_line_naming_its_source(tmp_path):
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s")
    for args, extra, source in (
        (["--scheduler", "tcp://127.0.0.1:1"], {}, "--scheduler"),
        ([], {"ATTN_SCHEDULER": "tcp://127.0.0.1:1"}, "ATTN_SCHEDULER"),
    ):
        start = time.monotonic()
        proc = subprocess.run(
            [ATTN, "copy-task", *SWEEP, *args, "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=60,
        )
        assert time.monotonic() - start < 30
        assert proc.returncode == 1
        assert_user_error(proc, "cannot reach the Dask scheduler at tcp://127.0.0.1:1", f"(from {source})")
        assert not (tmp_path / "out").exists()


def test_a_malformed_scheduler_address_is_a_usage_error(tmp_path):
    proc = run_attn("copy-task", "--scheduler", "   ", "--out", tmp_path / "out", timeout=60)
    assert proc.returncode == 2
    assert_user_error(proc, "--scheduler", "not a scheduler address")


def test_a_worker_killed_mid_sweep_costs_only_its_run(loopback, tmp_path):
    args = ["--lengths", "3", "4", "--seeds", "0", "1", "--steps", "150", "--eval-size", "50", "--model", "attention"]
    address = loopback.ensure()
    proc = subprocess.Popen(
        [
            ATTN,
            "copy-task",
            *args,
            "--scheduler",
            address,
            "--json",
            "--out",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "remote"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        killed = None
        with distributed.Client(address, timeout=30) as client:
            deadline = time.monotonic() + 120
            while killed is None and time.monotonic() < deadline and proc.poll() is None:
                busy = [w for w, keys in client.processing().items() if keys]
                if busy:
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    time.sleep(0.2)  # inside its run
                    assert pid in [w.pid for w in loopback.workers], "the busy worker is not one this test started"
                    os.kill(pid, signal.SIGKILL)
                    killed = busy[0]
                time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed, "no run was seen on a worker"
    assert proc.returncode == 0, stderr
    remote = json.loads(stdout)
    assert any(w.poll() is not None for w in loopback.workers)  # one worker is gone for good (no nanny)
    survivors = {r["ran_on"]["worker"] for r in remote["runs"]} - {killed}
    assert survivors, "no run finished on the other worker"
    local = copy_task(tmp_path, "local", *args, "--jobs", "1")
    assert numbers(remote) == numbers(local)


def test_a_scheduler_gone_mid_sweep_is_one_error_line_and_the_finished_runs_stay_cached(loopback, tmp_path):
    address = loopback.ensure()
    cache = tmp_path / "cache"
    args = ["--lengths", "3", "--seeds", "0-5", "--steps", "300", "--eval-size", "20", "--model", "plain"]
    proc = subprocess.Popen(
        [ATTN, "copy-task", *args, "--scheduler", address, "--out", str(tmp_path / "out"), "--cache-dir", str(cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(cache.glob("copy_task/*.json")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before the scheduler could be stopped"
        os.kill(loopback.scheduler.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    assert_user_error(
        subprocess.CompletedProcess(proc.args, 1, "", stderr),
        f"lost the Dask scheduler at {address} (from --scheduler) mid-sweep",
        "a rerun resumes from them",
    )
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr
    kept = list(cache.glob("copy_task/*.json"))
    assert 1 <= len(kept) < 6


def test_each_run_announces_its_start_so_the_progress_bar_counts_running_runs(cluster, tmp_path):
    """The events behind ``--scheduler``'s progress bar, heard in this process: every run says
    when it starts on a worker (counted running), then finishes (counted done); none failed."""
    from attn_cli.cli.commands.copy_task import RunCounts
    from attn_cli.experiments import copy_task as exp

    config = exp.Config(
        lengths=(3,),
        seeds=(0, 1, 2),
        steps=20,
        eval_size=20,
        model="attention",
        scheduler=cluster,
        scheduler_from="--scheduler",
    )
    counts, heard = RunCounts(3), []

    def progress(event):
        heard.append((event.item, event.status))
        counts.update(event)

    exp.run(config, progress=progress)
    assert {item for item, status in heard if status == "started"} == {0, 1, 2}
    assert counts.line() == "3/3 done, 0 running, 0 failed"
    again = RunCounts(3)
    run_copy_task(config, tmp_path, progress=again.update)  # nothing cached: trains
    run_copy_task(config, tmp_path, progress=(cached := RunCounts(3)).update)
    assert again.line() == cached.line() == "3/3 done, 0 running, 0 failed"


def test_a_run_restarted_after_its_worker_was_killed_counts_as_one_failed_attempt(loopback, tmp_path):
    import threading

    from attn_cli.cli.commands.copy_task import RunCounts
    from attn_cli.experiments import copy_task as exp

    address = loopback.ensure()
    config = exp.Config(
        lengths=(3, 4),
        seeds=(0, 1),
        steps=150,
        eval_size=50,
        model="attention",
        scheduler=address,
        scheduler_from="--scheduler",
    )
    counts, failure = RunCounts(4), []

    def sweep():
        try:
            exp.run(config, progress=counts.update)
        except BaseException as exc:  # handed to the test
            failure.append(exc)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    killed = None
    with distributed.Client(address, timeout=30) as client:
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and thread.is_alive():
            if counts.running:  # a run announced its start: kill a worker that executes one
                executing = client.run(lambda dask_worker: len(dask_worker.state.executing))
                busy = [w for w, n in executing.items() if n]
                if busy:
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    assert pid in [w.pid for w in loopback.workers], "the busy worker is not one this test started"
                    time.sleep(0.2)
                    os.kill(pid, signal.SIGKILL)
                    killed = busy[0]
            time.sleep(0.05)
    thread.join(timeout=240)
    assert killed and not thread.is_alive() and not failure, failure
    assert len(counts.done) == 4 and not counts.running
    assert counts.failed >= 1, counts.line()  # the killed run started again on the other worker


# --------------------------------------------------------------------------- refusals (no cluster)


def test_a_worker_whose_torch_runs_other_kernels_is_refused_not_mixed():
    from attn_cli.core import numerics

    if not numerics.is_x86_64() or numerics.expected_capability("portable") != "AVX2":
        pytest.skip("needs an x86-64 CPU with AVX2 (portable mode's AVX2 against torch's DEFAULT kernels)")
    script = (
        "import torch; torch.ones(2).sum();"  # torch committed to the DEFAULT kernels first
        "from attn_cli.experiments.copy_task.cluster import train_on_worker;"
        "import json;"
        "print(json.dumps(train_on_worker({'length': 3, 'steps': 2, 'eval_size': 4}, 'exact', 'portable')))"
    )
    env = {k: v for k, v in os.environ.items() if k not in numerics.PIN_VARS and k != numerics.MODE_VAR}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "ATEN_CPU_CAPABILITY": "default"},
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.splitlines()[-1])
    assert "outcome" not in answer
    assert "needs AVX2 kernels" in answer["refused"] and "DEFAULT" in answer["refused"]
    assert answer["where"]["host"] and answer["where"]["cpu"]


def _answer(**changes) -> tuple[dict, dict]:
    """A worker's answer for a tiny exact run, made in this process, and its cache key."""
    from attn_cli.core.copy_spec import RunOutcome, RunSpec
    from attn_cli.experiments.copy_task.config import cache_key, code_digest

    spec = RunSpec(model="plain", length=3, steps=2, eval_size=4)
    outcome = RunOutcome(
        spec=spec,
        teacher_forced=0.5,
        free_running=0.5,
        exact=0.0,
        seconds=0.1,
        final_loss=2.0,
        isa=changes.pop("isa", "AVX2"),
    )

    key = cache_key(spec, "exact", "cpu")
    key["numerics"]["isa"] = "AVX2"
    answer = {
        "outcome": dataclasses.asdict(outcome),
        "code": code_digest(),
        "where": {"worker": "tcp://10.0.0.9:4000", "host": "node9", "cpu": "Some CPU"},
        **changes,
    }
    return answer, key


def _check(answer, key):
    from attn_cli.experiments.copy_task import cluster
    from attn_cli.experiments.copy_task.config import code_digest

    return cluster._outcome(answer, key, "the run", code_digest())


def test_a_workers_answer_is_accepted_with_where_it_ran():
    answer, key = _answer()
    outcome = _check(answer, key)
    assert outcome.ran_on == {"worker": "tcp://10.0.0.9:4000", "host": "node9", "cpu": "Some CPU"}


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"code": "0" * 64}, "other code"),
        ({"isa": "AVX512"}, "ran the run on AVX512 kernels"),
        ({"refused": "torch already runs AVX512 kernels"}, "refused the run: torch already"),
    ],
)
def test_a_worker_with_other_code_another_isa_or_a_refusal_is_named_and_refused(changes, fragment):
    from attn_cli.experiments.copy_task.cluster import ClusterError

    answer, key = _answer(**changes)
    with pytest.raises(ClusterError, match="worker tcp://10.0.0.9:4000 on node9") as info:
        _check(answer, key)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- verify and all


def test_verify_and_all_hand_the_scheduler_to_the_copy_task_alone_and_record_it_nowhere(monkeypatch):
    from attn_cli import experiment_registry
    from attn_cli.experiments import copy_task as exp
    from attn_cli.experiments.copy_task import cluster as cluster_mod

    answered = lambda scheduler, source, wait: {"scheduler": scheduler, "scheduler_from": source}  # noqa: E731
    monkeypatch.setattr(cluster_mod, "plan_keywords", answered)  # the scheduler answers
    registry = experiment_registry.Registry.load()
    cluster = {"scheduler": "tcp://10.0.0.5:8786", "scheduler_from": "ATTN_SCHEDULER"}
    args = dict(seed=0, device="cpu")
    for made in (
        experiment_registry.plan(registry.experiments, **args, **cluster),
        experiment_registry.plan(registry.experiments, **args, smoke=True, **cluster),
    ):
        configs = {e.name: c for e, c, _ in made}
        assert configs["copy_task"].scheduler == "tcp://10.0.0.5:8786"
        assert configs["copy_task"].scheduler_from == "ATTN_SCHEDULER"
        copy_task = registry.by_artifact["w9-copy-task"]
        assert "scheduler" not in copy_task.recorded_config(configs["copy_task"])  # not in a manifest
        assert "scheduler" not in exp.config.recorded(configs["copy_task"])  # nor in a Result
    # the same runs, so the same cache keys, as without a scheduler
    local = experiment_registry.plan([registry.by_artifact["w9-copy-task"]], **args)[0][1]
    remote = experiment_registry.plan([registry.by_artifact["w9-copy-task"]], **args, **cluster)[0][1]
    assert local.plan() == remote.plan()


@pytest.mark.parametrize("command", ["verify", "all"])
def test_verify_and_all_refuse_an_unreachable_scheduler_before_any_work(tmp_path, command):
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s", ATTN_SCHEDULER="tcp://127.0.0.1:1")
    proc = subprocess.run(
        [
            ATTN,
            command,
            "--only",
            "w9-copy-task",
            "--out",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1
    assert_user_error(proc, "cannot reach the Dask scheduler at tcp://127.0.0.1:1 (from ATTN_SCHEDULER)")
    assert not (tmp_path / "out").exists()


def test_the_local_memory_guard_is_not_applied_to_runs_that_train_on_the_cluster():
    from attn_cli.errors import AttnError
    from attn_cli.experiments.copy_task import Config, check_memory

    huge = Config(lengths=(4,), eval_size=2_000_000_000)
    with pytest.raises(AttnError, match="refused"):
        check_memory(huge)
    check_memory(Config(lengths=(4,), eval_size=2_000_000_000, scheduler="tcp://10.0.0.5:8786"))


# --------------------------------------------------------------------------- attn's worker preload, Slurm

ONE_RUN = ["--lengths", "3", "--seeds", "0", "--steps", "20", "--eval-size", "50", "--model", "attention"]


@pytest.fixture(scope="module")
def one_local_run(tmp_path_factory) -> dict:
    """:data:`ONE_RUN` computed locally: the bits a worker must give."""
    return copy_task(tmp_path_factory.mktemp("local"), "local", *ONE_RUN, "--jobs", "1")


@pytest.fixture(scope="module")
def preloaded(tmp_path_factory):
    """A scheduler and one worker started as the README says: ``--preload attn_cli.dask_worker``."""
    cluster = LoopbackCluster(
        tmp_path_factory.mktemp("dask-preloaded"), workers=1, worker_args=("--preload", "attn_cli.dask_worker")
    )
    try:
        yield cluster.ensure()
    finally:
        cluster.stop()


def worker_state(address: str) -> tuple:
    """The one worker's state before a run: training code loaded, preloaded mode, ATTN_NUMERICS,
    intra-op threads, torch's ISA."""

    def state() -> tuple:  # nested: shipped by value (the workers cannot import this test module)
        import os
        import sys

        torch = sys.modules.get("torch")
        from attn_cli.experiments.copy_task import cluster

        return (
            "attn_cli.core.copy_train" in sys.modules,
            cluster.PRELOADED_MODE,
            os.environ.get("ATTN_NUMERICS"),
            torch and torch.get_num_threads(),
            torch and torch.backends.cpu.get_cpu_capability(),
        )

    with distributed.Client(address, timeout=30) as client:
        client.wait_for_workers(1, timeout=120)
        (answer,) = client.run(state).values()
    return answer


def test_a_preloaded_worker_has_torch_loaded_under_its_mode_and_trains_bit_for_bit_like_a_local_run(
    preloaded, one_local_run, tmp_path
):
    from attn_cli.core import numerics

    state = worker_state(preloaded)  # before its first run
    assert state == (True, "portable", "portable", 1, numerics.expected_capability("portable"))
    remote = copy_task(tmp_path, "remote", *ONE_RUN, "--scheduler", preloaded)
    assert numbers(remote) == numbers(one_local_run)
    assert remote["runs"][0]["ran_on"]["worker"].startswith("tcp://127.0.0.1:")


def test_a_preloaded_worker_refuses_a_run_in_the_other_mode_naming_its_mode_and_the_fix(preloaded, tmp_path):
    proc = run_attn(
        "copy-task",
        *ONE_RUN,
        "--numerics",
        "native",
        "--scheduler",
        preloaded,
        "--out",
        tmp_path / "out",
        "--cache-dir",
        tmp_path / "cache",
        timeout=120,
    )
    assert proc.returncode == 1
    assert_user_error(
        proc,
        "refused the attention run at length 3, seed 0",
        "started with --preload attn_cli.dask_worker --attn-numerics portable",
        "restart the worker with --attn-numerics native",
    )
    assert not list((tmp_path / "cache").glob("copy_task/*.json"))


def test_the_preloads_mode_comes_from_its_option_else_attn_numerics_else_portable(monkeypatch):
    import click

    from attn_cli.dask_worker import dask_setup

    def mode(*argv):
        return dask_setup.make_context("dask_setup", list(argv)).params["attn_numerics"]

    monkeypatch.delenv("ATTN_NUMERICS", raising=False)
    assert mode() == "portable"
    monkeypatch.setenv("ATTN_NUMERICS", "native")
    assert mode() == "native" and mode("--attn-numerics", "portable") == "portable"
    with pytest.raises(click.BadParameter):
        mode("--attn-numerics", "fastest")


SLURM = dict(
    cores=1,
    processes=1,
    memory="2GB",
    walltime="02:00:00",  # README, "Seeds on a cluster"
    worker_extra_args=["--preload", "attn_cli.dask_worker"],
)


def test_the_readme_slurm_cluster_job_script_starts_a_worker_that_trains_bit_for_bit_like_a_local_run(
    one_local_run, tmp_path
):
    """Everything but ``sbatch``: the README's SLURMCluster, its job script, the script's worker
    command run here against the cluster's own scheduler, one run through ``--scheduler``."""
    import shlex

    jobqueue = pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (pip install -e '.[test]')")
    # on loopback here (a real allocation's nodes reach the scheduler on the submitting host's network)
    with jobqueue.SLURMCluster(
        **SLURM, scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    ) as slurm:
        script = slurm.job_script()
        for line in ("#SBATCH -n 1", "#SBATCH --cpus-per-task=1", "#SBATCH --mem=2G", "#SBATCH -t 02:00:00"):
            assert line in script.splitlines(), script
        command = shlex.split(script.strip().splitlines()[-1])
        assert command[:3] == [sys.executable, "-m", "distributed.cli.dask_worker"], command
        assert command[3] == slurm.scheduler_address
        joined = " ".join(command)
        assert "--nthreads 1" in joined and "--preload attn_cli.dask_worker" in joined, joined

        with open(tmp_path / "worker.log", "w") as log:
            worker = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            assert worker_state(slurm.scheduler_address)[:2] == (True, "portable")
            remote = copy_task(tmp_path, "remote", *ONE_RUN, "--scheduler", slurm.scheduler_address)
        finally:
            worker.terminate()  # the nanny stops its worker process
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)  # the session this test started
                worker.wait()
    assert numbers(remote) == numbers(one_local_run)
