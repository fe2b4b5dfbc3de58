"""Connecting the driver to Ray: reach or start a cluster, and set what every trial's Ray Train inherits.

`init_ray` joins RAY_ADDRESS / --address (e.g. under `ray job submit`) or starts an in-process cluster;
`driver_env` sets Ray Train's settings on the driver, where each trial's controller reads them;
`driver_imports` pays the driver's own imports once, before the first trial starts; `shut_down` ends what
`init_ray` began (raylab/runtime/stopping.py keeps a stop signal from coming in between).
"""

from __future__ import annotations

import os
from pathlib import Path

import ray

from raylab import _ray
from raylab.runtime import console, stopping
from raylab.errors import UserError
from raylab.registry import get_strategy

# How often Ray Train's controller polls its workers (Ray's default 2 s): a trial's end is noticed up to one
# poll late, and its worker group started one poll late after a restart. The driver's value reaches the
# controller of every trial (Ray Train passes it on); a user's own setting wins. Recorded as train_poll_s.
TRAIN_POLL_ENV, TRAIN_POLL_S = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2"
# Ray Train starts a preemption watcher actor per trial (it acts on a node's drain notice, so the trial's other
# nodes go on). Where every node is this one machine (an in-process cluster, `ray start` here, a simulated
# multi-node cluster) there are no other machines to go on with, and it is one more process per trial to start:
# it is turned off there (a user's own setting wins). Recorded as train_preemption_watcher.
PREEMPTION_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
# What Ray Train does per run that raylab does not use (read in Ray 2.60's ray/train/v2): its Prometheus metrics
# callbacks (driver side), JSON logs of the controller and workers under the session directory, and print()
# patched through Train's logger (worker output reaches the driver either way). Off where the user has not set them.
TRAIN_OFF = (
    "RAY_TRAIN_METRICS_ENABLED",
    "RAY_TRAIN_ENABLE_CONTROLLER_STRUCTURED_LOGGING",
    "RAY_TRAIN_ENABLE_WORKER_STRUCTURED_LOGGING",
    "RAY_TRAIN_ENABLE_PRINT_PATCH",
)
_connected: list[bool] = []  # init_ray connected this command's driver (shut_down ends it)


def init_ray(address: str | None = None) -> None:
    """Connects to RAY_ADDRESS (e.g. under `ray job submit`) or starts an in-process cluster."""
    if ray.is_initialized():
        return
    if address and address not in ("auto", "local"):
        reachable(address)
    try:
        # "local": always a new in-process cluster; plain ray.init() would silently join any cluster
        # `ray start` left registered on this machine (even a dead one, and then hang).
        # A cluster raylab starts runs its workers at normal priority (Ray's default is nice 15, which puts
        # the training step behind Ray's own control plane on a small machine); the worker records its niceness.
        extra = {} if address else {"_system_config": {"worker_niceness": 0}}
        # Workers' output still comes to the driver; the console sends it to each trial's log file.
        with stopping.held():  # a stop signal now waits until the cluster is whole (then shut_down() ends it)
            _connected.append(True)
            ray.init(
                address=address or "local",
                log_to_driver=True,
                configure_logging=console.get().verbose,
                logging_level="WARNING",
                **extra,
            )
        console.get().take_worker_output()
        if owns_cluster():
            prune_sessions(Path(_ray.global_node().get_session_dir_path()))
    except Exception as e:  # noqa: BLE001 - connection, auth and start-up failures alike
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise UserError(
            f"cannot start or reach {where} ({first}); check RAY_ADDRESS / --address, "
            "or start one with `ray start --head`."
        ) from None


# Ray keeps every cluster's session directory (its logs: 3-8 MB for an invocation here) after the cluster ends;
# raylab keeps the newest KEEP_SESSIONS of the clusters it started, removing older ones as a new one starts.
KEEP_SESSIONS = 3
OWNED_MARK = "raylab-started"  # a file in the session directories of clusters raylab started


def prune_sessions(session: Path) -> list[Path]:
    """Marks `session`, the directory of the in-process cluster just started, as raylab's and removes the older ones
    raylab started (in the same Ray temp directory) beyond the newest KEEP_SESSIONS; never one whose starting
    process is alive (the number a session directory's name ends with). Returns what it removed."""
    import shutil

    (session / OWNED_MARK).touch()
    # (a session directory's name starts with the time it started: sorted names are oldest first)
    ours = sorted(d for d in session.parent.glob("session_2*") if (d / OWNED_MARK).exists() and d != session)
    removed = []
    for old in ours[: max(len(ours) - (KEEP_SESSIONS - 1), 0)]:
        pid = old.name.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
            removed.append(old)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shut_down() -> None:
    """Ends the Ray connection init_ray made in this command (and the cluster with it where it started one); one
    it found (a test's, a notebook's) stays. A stop signal meanwhile waits: the command is ending anyway."""
    if _connected and ray.is_initialized():
        with stopping.held(raise_pending=False):
            ray.shutdown()
    _connected.clear()


def reachable(address: str, timeout_s: float = 10.0) -> None:
    """UserError unless something listens at a cluster address (HOST:PORT or ray://HOST:PORT): ray.init
    would otherwise wait for minutes on an address where nothing answers."""
    import socket

    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise UserError(
            f"the Ray address '{address}' is not HOST:PORT; give e.g. --address 127.0.0.1:6379, "
            "or 'auto' for the cluster `ray start` started here."
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UserError(
            f"nothing answers at the Ray address {address} ({e.strerror or e}); start the cluster "
            "(`ray start --head`) or fix --address / RAY_ADDRESS."
        ) from None


def owns_cluster() -> bool:
    """Whether this process started the Ray cluster (an in-process one): its death ends the cluster, placement
    groups and all, so Ray Train's placement-group cleaner (an actor per run, which the worker group's start waits
    for) has nothing to clean."""
    node = _ray.global_node()
    return bool(node is not None and getattr(node, "head", False))


def train_off() -> str:
    """What of Ray Train's own per-run work is off (the param train_off)."""
    off = [k.removeprefix("RAY_TRAIN_") for k in TRAIN_OFF if os.environ.get(k) == "0"]
    return ",".join(off + (["PLACEMENT_GROUP_CLEANER"] if owns_cluster() else [])) or "none"


def one_machine() -> bool:
    """Whether every alive node of the cluster is on one machine (in-process, `ray start` here, simulated)."""
    return len({n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}) == 1


def driver_env() -> bool:
    """Sets Ray Train's poll interval, TRAIN_OFF (and, on one machine, no preemption watcher) where the user has not;
    returns whether the cluster is one machine."""
    os.environ.setdefault(TRAIN_POLL_ENV, TRAIN_POLL_S)
    for name in TRAIN_OFF:
        os.environ.setdefault(name, "0")
    alone = one_machine()
    if alone:
        os.environ.setdefault(PREEMPTION_ENV, "0")
    return alone


def driver_imports(kinds: list[str], device: str) -> None:
    """What the driver imports to build the trials' trainers (Ray Train's trainer, each backend's config, e.g.
    ray.train.torch, which imports torch), once before the first trial rather than inside its start-up."""
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer  # noqa: F401

    for kind in kinds:
        get_strategy(kind).backend_config(device)
