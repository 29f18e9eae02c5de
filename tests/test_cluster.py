"""Studies on a real multi-node Ray cluster on this machine, results in PostgreSQL.

One cluster for the module (tests/cluster.py): a head that runs no evaluation (``--num-cpus=0``)
and two worker nodes of one CPU each, every node its own ``ray start`` process with its own
raylet, agents and temp dir. Drivers are ``dse run --ray-address`` subprocesses, as on a real
cluster. Each test gets a fresh PostgreSQL database (conftest's ``postgres_url``), so reruns
never meet an earlier run's studies or cached evaluations.

What a lost node costs here: Ray's GCS marks a node dead after missing its health checks
(about 15 s with Ray's defaults); only then does the driver's ``ray.get`` of a task that ran on
it raise ``NodeDiedError``, which dse records as a fault and submits again.

Timings of each phase and the faults seen are printed when the cluster is torn down (run with
``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import func, select

from dse import load_trials
from dse.storage import ResultStore, open_store, rows
from dse.storage import models as m
from tests.cluster import LocalCluster
from tests.study_helpers import slow_study_file

POSTGRES_ENV = "DSE_TEST_POSTGRES_URL"  # as conftest's postgres_server reads it

pytestmark = [
    pytest.mark.skipif(not os.environ.get(POSTGRES_ENV),
                       reason=f"{POSTGRES_ENV} is not set: the cluster tests store results in "
                              "PostgreSQL, as a real cluster does"),
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="finds and kills a node's processes through /proc"),
]

DSE = [sys.executable, "-m", "dse.cli"]
WORK_S = 0.4  # seconds of CPU per config: a round of tasks outlasts the killing of a node
TIMINGS: list[tuple[str, float]] = []  # (phase, seconds), printed at teardown
FAULT_LOG: list[str] = []  # what `dse faults` showed, printed at teardown
NOTES: list[str] = []  # where the tasks ran, printed at teardown


@contextmanager
def phase(name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        TIMINGS.append((name, time.monotonic() - start))


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # a short folder of its own, not pytest's: Ray's socket paths below a node's temp dir must
    # stay within AF_UNIX's 107 bytes, which pytest's numbered folders pass once the count
    # reaches three digits
    root = Path(tempfile.mkdtemp(prefix="dse-ray-"))
    cluster = LocalCluster(root)
    try:
        with phase("cluster: head and two worker nodes up"):
            cluster.start_head()
            cluster.add_worker("w1")
            cluster.add_worker("w2")
        yield cluster
    finally:  # whatever failed: no Ray process of this cluster outlives the module
        with phase("cluster: torn down"):
            cluster.stop()
        print("\n== cluster test timings (s)")
        for name, seconds in TIMINGS:
            print(f"  {seconds:6.1f}  {name}")
        print("== tasks per node (Ray's task markers in each node's worker logs)")
        print("\n".join(NOTES) or "  none")
        shutil.rmtree(root, ignore_errors=True)
        print("== faults recorded (dse faults)")
        print("\n".join(FAULT_LOG) or "  none")
        assert not cluster.leftovers(), cluster.leftovers()


@pytest.fixture
def both(cluster: LocalCluster) -> LocalCluster:
    """The cluster with both worker nodes alive (an earlier test may have killed one)."""
    for name in ("w1", "w2"):
        if not cluster.nodes[name].alive:
            cluster.restart(name)
    return cluster


def study_file(tmp_path: Path, name: str, trials: int, seed: int = 7) -> Path:
    return slow_study_file(tmp_path, name, trials, WORK_S, seed)


class Driver:
    """A ``dse run --ray-address`` subprocess; its output goes to a file (no pipe to fill)."""

    def __init__(self, cluster: LocalCluster, path: Path, storage: str) -> None:
        self.log = path.with_suffix(f".{time.monotonic_ns()}.log")
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [*DSE, "run", str(path), "--storage", storage, "--ray-address",
                 cluster.address], stdout=out, stderr=subprocess.STDOUT, env=cluster.env)

    def finish(self, timeout: float = 180) -> str:
        """Its output once it exited 0."""
        try:
            self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        output = self.log.read_text(errors="replace")
        assert self.process.returncode == 0, output[-4000:]
        return output

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def store(postgres_url: str) -> Iterator[ResultStore]:
    """One store for a test's queries (its connections closed before the database is dropped)."""
    store = ResultStore(postgres_url)
    yield store
    store.engine.dispose()


def stored_trials(store: ResultStore, name: str) -> int:
    with store.session() as s:
        study = rows.study(s, name)
        return 0 if study is None else rows.trial_count(s, study.id)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 120,
             driver: Driver | None = None) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if driver is not None and driver.process.poll() is not None:
            raise AssertionError(f"the driver exited before {what}: "
                                 f"{driver.log.read_text(errors='replace')[-3000:]}")
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def assert_complete(store: ResultStore, name: str, trials: int) -> None:
    """Trials 0..N-1 each once, each ok or infeasible with its evaluation; one evaluation per
    config in the whole database (a config two runs or two studies asked is stored once)."""
    frame = load_trials(store.url, name)
    assert sorted(frame["number"]) == list(range(trials)), frame["number"].tolist()
    assert set(frame["status"]) <= {"ok", "infeasible"}, frame["status"].value_counts()
    assert (frame["status"] == "ok").any()
    with store.session() as s:
        study_id = rows.require_study(s, name, lambda: store.safe_url).id
        missing = s.scalar(select(func.count()).select_from(m.TrialRow).where(
            m.TrialRow.study_id == study_id, m.TrialRow.evaluation_id.is_(None)))
        evaluations = s.scalar(select(func.count()).select_from(m.EvaluationRow))
        configs = s.scalar(select(func.count(func.distinct(m.TrialRow.config_id))))
        # a config's trials (a sampler may ask one again) all point at one evaluation
        split = s.scalar(select(func.count()).select_from(
            select(m.TrialRow.config_id).group_by(m.TrialRow.config_id)
            .having(func.count(func.distinct(m.TrialRow.evaluation_id)) > 1).subquery()))
    assert missing == 0 and split == 0
    assert evaluations == configs, (evaluations, configs)


def record_faults(storage: str, name: str) -> list[dict]:
    """The study's faults as `dse faults --json` gives them (kept for the teardown's log)."""
    shown = subprocess.run([*DSE, "faults", name, "--storage", storage, "--json"],
                           capture_output=True, text=True, timeout=60, check=True)
    faults = json.loads(shown.stdout)
    for f in faults:
        FAULT_LOG.append(f"  {name}: {f['kind']} attempt {f['attempt']}, {f['configs']} "
                         f"configs, retried={f['retried']}: {f['message'].splitlines()[0][:90]}")
    return faults


def test_a_killed_worker_node_costs_a_retry_not_a_result(both, tmp_path, postgres_url, store):
    """SIGKILL of a worker node's every process while it runs an evaluation: the study finishes
    its budget on the surviving node, the loss recorded as a fault and the configs tried again."""
    trials = 40
    path = study_file(tmp_path, "node-lost", trials)
    w1, w2 = both.nodes["w1"], both.nodes["w2"]
    w1_before, w2_before = w1.logged_tasks(), w2.logged_tasks()
    with phase("1. study of 40 trials, worker node w1 killed mid-study"):
        driver = Driver(both, path, postgres_url)
        # both nodes work, and w1 holds a running evaluation when it dies: a certain loss
        wait_for(lambda: w2.logged_tasks() > w2_before and w1.running_tasks() > 0,
                 "tasks on both nodes", driver=driver)
        killed = both.kill("w1")  # at once: a 0.4 s evaluation soon ends on a loaded machine
        killed_at = time.monotonic()
        done_before = stored_trials(store, "node-lost")
        on_w1 = w1.logged_tasks() - w1_before
        output = driver.finish()
    TIMINGS.append(("1. ... of which after the kill", time.monotonic() - killed_at))
    NOTES.append(f"  1. w1 {on_w1} (killed while running its last), "
                 f"w2 {w2.logged_tasks() - w2_before}")
    assert len(killed) >= 3, killed  # ray start, raylet, agents and the task's worker
    assert done_before < trials
    assert_complete(store, "node-lost", trials)
    faults = record_faults(postgres_url, "node-lost")
    assert faults, output
    assert {f["kind"] for f in faults} <= {"NodeDiedError", "WorkerCrashedError",
                                           "ObjectLostError", "OwnerDiedError"}, faults
    assert all(f["retried"] and f["attempt"] < 3 for f in faults), faults
    assert f"{len(faults)} lost workers or nodes, their configs tried again" in output
    # the faults are the store's too, with the workload and the host they happened on
    frame = store.faults("node-lost")
    assert len(frame) == len(faults) and frame["retried"].all()
    assert store.study_header("node-lost")["status"] == "finished"


def test_a_restarted_worker_node_takes_tasks_again(cluster, tmp_path, postgres_url, store):
    """A study that starts with one worker node; the other, killed before, is started again
    (`ray start --address ...`) mid-study and runs evaluations from then on."""
    if not cluster.nodes["w2"].alive:
        cluster.restart("w2")
    if cluster.nodes["w1"].alive:  # run alone, the test kills w1 itself, before the study
        cluster.kill("w1")
        cluster.wait_for_nodes()
    trials = 48
    path = study_file(tmp_path, "node-back", trials)
    w2 = cluster.nodes["w2"]
    w2_before = w2.logged_tasks()
    with phase("2. study of 48 trials, worker node w1 restarted mid-study"):
        driver = Driver(cluster, path, postgres_url)
        wait_for(lambda: w2.logged_tasks() > w2_before, "tasks on w2", driver=driver)
        w2_alone = w2.logged_tasks() - w2_before
        with phase("2. ... of which restarting w1 (ray start until the GCS lists it)"):
            w1 = cluster.restart("w1")
        output = driver.finish()
    assert_complete(store, "node-back", trials)
    NOTES.append(f"  2. w2 alone {w2_alone}, then w1 restarted {w1.logged_tasks()}, "
                 f"w2 {w2.logged_tasks() - w2_before} in all")
    assert w1.logged_tasks() > 0, "no task ran on the restarted node"
    assert not record_faults(postgres_url, "node-back")
    assert "lost workers" not in output


def test_a_killed_driver_is_resumed_by_another(both, tmp_path, postgres_url, store):
    """SIGKILL of `dse run` mid-study; another `dse run` of the same file finishes the budget
    with nothing lost or done twice (the dead driver's lease on this host is void at once)."""
    trials = 48
    path = study_file(tmp_path, "driver-lost", trials)
    with phase("3. study of 48 trials, driver killed, resumed by a second driver"):
        first = Driver(both, path, postgres_url)
        wait_for(lambda: stored_trials(store, "driver-lost") >= 8, "8 stored trials",
                 driver=first)
        first.kill()
        done_before = stored_trials(store, "driver-lost")
        with phase("3. ... of which the resuming driver"):
            output = Driver(both, path, postgres_url).finish()
    assert 8 <= done_before < trials
    assert_complete(store, "driver-lost", trials)
    frame = load_trials(postgres_url, "driver-lost")
    # the resumed run continued the numbering: what the first stored it did not ask again
    assert (frame["number"] >= done_before).sum() == trials - done_before
    assert f"{trials} trials" in output and not record_faults(postgres_url, "driver-lost")


def test_two_drivers_share_the_cluster_and_the_store(both, tmp_path, postgres_url, store):
    """Two `dse run` of different studies at once on one cluster and one database. The same
    seed on purpose: both ask the same configs at the same time, the hardest case for storing
    each evaluation once."""
    trials = 32
    paths = [study_file(tmp_path, name, trials, seed=11) for name in ("pair-a", "pair-b")]
    w1, w2 = both.nodes["w1"], both.nodes["w2"]
    before = {"w1": w1.logged_tasks(), "w2": w2.logged_tasks()}
    with phase("4. two studies of 32 trials by two drivers at once"):
        drivers = [Driver(both, p, postgres_url) for p in paths]
        outputs = [d.finish() for d in drivers]
    for name in ("pair-a", "pair-b"):
        assert_complete(store, name, trials)
        assert not record_faults(postgres_url, name)
    assert all(f"{trials} trials" in out for out in outputs)
    ran = {"w1": w1.logged_tasks() - before["w1"], "w2": w2.logged_tasks() - before["w2"]}
    NOTES.append(f"  4. (both drivers) w1 {ran['w1']}, w2 {ran['w2']}")
    assert ran["w1"] > 0 and ran["w2"] > 0, ran
    statuses = open_store(postgres_url).list_studies().set_index("study")["status"]
    assert statuses.to_dict() == {"pair-a": "finished", "pair-b": "finished"}
