"""A real multi-node Ray cluster on this machine, for tests: one head and worker nodes, each its
own ``ray start --block`` process (its own raylet, agents, workers, resources and temp dir).

Each node is started in a session of its own, so every process it starts (raylet, agents,
worker processes) shares its process group: killing that group is killing the node, as a lost
machine would be, without touching the other nodes or the drivers. Nothing here needs root.

Ray 2.60 turns token authentication on for ``ray start --head`` when ``~/.ray/auth_token``
exists (a local ``ray.init()`` writes one), but neither ``ray start --address`` nor a driver's
``ray.init(address=...)`` turns it on by themselves: they are refused (``InvalidAuthToken``).
The cluster therefore sets ``RAY_AUTH_MODE=token`` and a ``RAY_AUTH_TOKEN`` of its own for every
process it starts, and :attr:`LocalCluster.env` gives drivers the same.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dse.study.execution.reaper import Reaper, proc_stat

RAY = str(Path(sys.executable).with_name("ray"))
# what a node's process shows while it runs dse's task (Ray sets the title to the function)
TASK_TITLE = "ray::_remote_evaluate"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cmdline(pid: int) -> str:
    """The command line (or title) of a live process; '' once it has ended or is a zombie."""
    stat = proc_stat(pid)
    if stat is None or stat[0] == "Z":
        return ""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and stat[0] != "Z" and int(stat[3]) == pgid:
                found.append(int(entry.name))
    return found


@dataclass
class Node:
    """One ``ray start --block`` process and what it started (its process group)."""

    name: str
    temp_dir: Path
    args: list[str]  # of ray start, but those every node gets
    process: subprocess.Popen[bytes] | None = None
    incarnation: int = 0
    started_s: list[float] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def processes(self) -> list[int]:
        """The node's live processes: its process group, plus any process whose command line
        names the node's temp dir (raylet and agents do), should one have left the group."""
        if self.process is None:
            return []
        pids = set(group_members(self.process.pid))
        if self.alive:
            pids.add(self.process.pid)
        marker = str(self.temp_dir)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and marker in cmdline(int(entry.name)):
                pids.add(int(entry.name))
        return sorted(pids)

    def running_tasks(self) -> int:
        """How many of the node's worker processes run dse's task right now."""
        return sum(cmdline(pid).startswith(TASK_TITLE) for pid in self.processes())

    def logged_tasks(self) -> int:
        """How many tasks the node's workers started, from the task markers Ray writes at the
        start of each task to the worker's log (``:task_name:_remote_evaluate``)."""
        count = 0
        for log in self.temp_dir.glob("session_2*/logs/worker-*.out"):  # not session_latest
            try:
                count += log.read_text(errors="replace").count(":task_name:_remote_evaluate")
            except OSError:
                pass
        return count


class LocalCluster:
    """A head (``--num-cpus=0``: it runs no evaluation) and worker nodes of one CPU each, every
    node with a custom resource named after it (``node_w1: 1``), the web dashboard off."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: dict[str, Node] = {}
        # should this process die before stop (a SIGKILLed pytest), the nodes end with it
        self._reaper = Reaper()
        token = secrets.token_hex(32)
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
                    "RAY_USAGE_STATS_ENABLED": "0"}

    # -- starting and stopping ------------------------------------------------------------------
    def start_head(self) -> Node:
        args = ["--head", f"--port={self.port}", "--num-cpus=0", "--include-dashboard=false"]
        return self._start("head", args)

    def add_worker(self, name: str) -> Node:
        args = [f"--address={self.address}", "--num-cpus=1",
                f"--resources={json.dumps({f'node_{name}': 1})}"]
        return self._start(name, args)

    def _start(self, name: str, args: list[str]) -> Node:
        node = self.nodes.get(name)
        incarnation = 0 if node is None else node.incarnation + 1
        # a fresh temp dir per incarnation: a node's logs (counted by logged_tasks) are its own
        temp_dir = self.root / f"{name}.{incarnation}"
        temp_dir.mkdir(parents=True)
        # each node binds its own agent ports: several nodes share this host's address
        full = [RAY, "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                f"--temp-dir={temp_dir}", f"--dashboard-agent-listen-port={free_port()}",
                f"--metrics-export-port={free_port()}", *args]
        node = Node(name, temp_dir, args, incarnation=incarnation,
                    started_s=[] if node is None else node.started_s)
        log = open(self.root / f"{name}.{incarnation}.log", "wb")  # noqa: SIM115 - child holds it
        start = time.monotonic()
        node.process = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True)
        log.close()
        self.nodes[name] = node
        self.wait_for_nodes()
        node.started_s.append(time.monotonic() - start)
        self._reaper.watch(node.processes())  # raylet and agents: a raylet's workers end with it
        return node

    def kill(self, name: str) -> list[int]:
        """SIGKILL every process of node ``name`` at once (its raylet, agents and workers), as
        a machine that loses power; the pids killed."""
        node = self.nodes[name]
        assert node.process is not None
        pids = node.processes()
        try:
            os.killpg(node.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in pids:  # any that left the group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        node.process.wait(30)
        deadline = time.monotonic() + 30
        while node.processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not node.processes(), f"node {name} left processes behind: {node.processes()}"
        return pids

    def restart(self, name: str) -> Node:
        """Start node ``name`` again (a fresh node to Ray, under the same name)."""
        assert not self.nodes[name].alive, f"node {name} still runs"
        return self._start(name, self.nodes[name].args)

    def stop(self) -> None:
        """End every node at once with SIGKILL, workers first. A graceful stop is not what is
        tested, and costs here about 10 s: a raylet given SIGTERM drains before it exits, and
        ``ray start --block`` waits for it."""
        problems = []
        for name in sorted(self.nodes, key=lambda n: n == "head"):
            if self.nodes[name].process is not None:
                try:
                    self.kill(name)
                except AssertionError as exc:  # the other nodes are ended all the same
                    problems.append(str(exc))
        self._reaper.release()
        assert not problems, problems

    def leftovers(self) -> list[str]:
        """The command lines of any process of the cluster still alive."""
        return [cmdline(pid) for node in self.nodes.values() for pid in node.processes()]

    # -- what the cluster holds -------------------------------------------------------------------
    def wait_for_nodes(self, timeout: float = 120) -> dict[str, dict[str, float]]:
        """Until the GCS holds exactly the nodes that run here as alive (a killed one dead);
        their resources by name. Asked from a process of its own: Ray's GCS client caches the
        token of the first cluster it meets, which must not be this test process's."""
        want = sorted(name for name, node in self.nodes.items() if node.alive)
        probe = subprocess.Popen([sys.executable, "-m", "tests.cluster", self.address,
                                  json.dumps(want), str(timeout)], env=self.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while probe.poll() is None:  # a node whose ray start fails is reported at once
            for name in want:
                if not self.nodes[name].alive:
                    probe.kill()
                    raise AssertionError(f"ray start of {name} exited: "
                                         f"{self._log_tail(self.nodes[name])}")
            time.sleep(0.2)
        out, err = probe.communicate()
        assert probe.returncode == 0, f"nodes not as wanted ({want}): {out} {err[-3000:]}"
        return json.loads(out)

    def _log_tail(self, node: Node) -> str:
        log = self.root / f"{node.name}.{node.incarnation}.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def _alive_nodes(address: str) -> dict[str, dict[str, float]]:
    """The resources of each node the GCS at ``address`` holds alive, by node name (the
    worker's custom resource ``node_NAME``; the head is 'head')."""
    from ray._raylet import GcsClient
    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    out = {}
    for info in GcsClient(address=address).get_all_node_info(timeout=10).values():
        if info.state == GcsNodeInfo.ALIVE:
            resources = dict(info.resources_total)
            names = [k.removeprefix("node_") for k in resources if k.startswith("node_")]
            out[names[0] if names else "head"] = resources
    return out


def _wait(address: str, want: list[str], timeout: float) -> None:
    """Print the alive nodes as JSON once they are ``want``; exit 1 if not within timeout."""
    deadline = time.monotonic() + timeout
    nodes: dict[str, dict[str, float]] = {}
    while time.monotonic() < deadline:
        try:
            nodes = _alive_nodes(address)
        except Exception as exc:  # noqa: BLE001 - the GCS is not up yet
            nodes = {"error": {str(exc)[:200]: 0}}
        if sorted(nodes) == want:
            print(json.dumps(nodes))
            return
        time.sleep(0.3)
    print(json.dumps(nodes))
    sys.exit(1)


if __name__ == "__main__":  # python -m tests.cluster ADDRESS '["head", "w1"]' TIMEOUT_S
    _wait(sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]))
