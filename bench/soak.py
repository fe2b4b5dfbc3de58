"""Soak: many trials in a row from one driver, with faults, watching for what a long run leaks (issue 48).

Runs the fashion MLP as a user would (`tests/held_recipe.py`: recipes/fashion.py's task, its models wrapped so
that each trial's Ray Train workers hold at one training step, mid-epoch 2, until the soak lets them go on), with
a HOME, TMPDIR and RAY_TMPDIR of its own (so every process, port and Ray session directory it makes can be told
from the machine's others) against a real `mlflow server` (sqlite) on a free port. The full form (default):

- one invocation of every in-memory CPU kind (tf:tpu left out: no TPU), 1 or 2 workers each, --ps 1, repeated
  --repeats times (36 trials), and then a second invocation that streams (`--data`, a `raylab data export`
  of Fashion-MNIST) torch:none 4 times: a streamed invocation streams all its trials, so the streamed kind is
  an invocation of its own, under the same HOME, server and checks;
- in every 5th trial (counted over both invocations), the Ray Train worker that holds mid-epoch 2 SIGKILLed
  while it holds: a process of that trial (the pid it wrote, checked against the trial's own `worker_pids` tag
  after the run), at a point the trial is known to be at however fast this machine runs its steps; the trial
  must restart from its checkpoint exactly once (MLflow metric `restarts`). Every other hold is let go at once;
  tf:ps holds in its graph on a worker task (its held file names the chief): no kill is planned on it, as "its Ray
  Train worker" is not the process whose steps hold;
- the MLflow server SIGKILLed at the middle trial for --outage-s seconds, then restarted on the same port and db;
- the driver SIGTERMed at about two thirds of the first invocation, while that trial holds (mid-trial), its
  session checked gone, then `--resume last` runs the rest under the same parent run.

After each trial (at the next trial's header, and at the final table) it samples: driver RSS (VmRSS), live
processes with its HOME, their listening TCP ports, /dev/shm entries (the mlflow server's own huey stores left
aside), Ray session directories, disk under HOME (ray_results apart) and the server's artifacts; each trial's
worker peak RSS and restarts come from MLflow at the end. It prints a per-trial table and a summary, writes
the samples as JSON (--out), and a line per kill: which trial's which process it hit, and what raylab did
(restarts, recovery, status). It exits 1 with one line per failure: a trial not FINISHED, a killed trial not
restarted exactly once, a planned kill that did not land in its trial (a defect of the soak, said as one), driver
RSS growing 5 MB/trial or more after the first ten (a fitted line), processes,
ports or shared memory left after a driver exits, more session directories than drivers or than the newest
KEEP_SESSIONS raylab keeps (raylab/runtime/cluster.py), or growth trends.

    flock /tmp/raylab-heavy.lock python bench/soak.py                 # full form, about 33 minutes on 2 cores
    flock /tmp/raylab-heavy.lock python bench/soak.py --short         # 3 trials, one kill: tests/e2e/test_soak.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
from tests.held_recipe import Gate  # noqa: E402 - after the repository is on the path
from raylab.runtime.cluster import KEEP_SESSIONS  # noqa: E402

KINDS = (
    "tf:none,tf:mirrored,tf:mwms x2,tf:ps,torch:none,torch:ddp x2,torch:ps-async,torch:ps-sync,"
    "xla:single,xla:ddp x2,jax:none,jax:dp x2"
)
HEADER = re.compile(r"^=== (.+?): .*\(MLflow run ([\w-]+)")  # pending-...: a run started in an outage
RSS_SLOPE_MB = 5.0  # the bound, per trial after the first ten
TREND = 0.25  # processes / ports / shm entries per trial (after the first ten) that count as growth


def processes_of(home: Path) -> dict[int, str]:
    """{pid: title} of the processes carrying this HOME: the driver, its Ray cluster, workers and actors."""
    mark, found = f"HOME={home}".encode(), {}
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def listening_ports(pids) -> set[int]:
    """TCP ports in LISTEN held by these processes (/proc/net/tcp{,6} matched to their socket fds)."""
    inodes = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":
                inodes[f[9]] = int(f[1].rsplit(":", 1)[1], 16)
    ports = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        ports |= {inodes[ln[8:-1]] for ln in links if ln.startswith("socket:[") and ln[8:-1] in inodes}
    return ports


def shm_entries() -> set[str]:
    """/dev/shm entries, less the directories of mlflow server's huey job stores (the server's, not raylab's:
    a SIGKILLed server leaves its own)."""
    out = set()
    for entry in Path("/dev/shm").iterdir():
        try:
            if entry.is_dir() and any(".mlflow-huey-store" in p.name for p in entry.iterdir()):
                continue
        except OSError:
            continue
        out.add(entry.name)
    return out


def rss_mb(pid: int) -> float | None:
    try:
        return next(
            int(ln.split()[1]) / 1024
            for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ln.startswith("VmRSS:")
        )
    except (OSError, StopIteration):
        return None


def du_mb(path: Path, skip: str = "") -> float:
    total = 0
    for dirpath, dirnames, files in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != skip]
        for name in files:
            with contextlib.suppress(OSError):  # gone meanwhile
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return round(total / 2**20, 2)


def sessions(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "tmp" / "ray").glob("session_2*"))


class Soak:
    def __init__(self, args, tmp: Path):
        self.args, self.tmp = args, tmp
        self.home, self.db, self.art = tmp / "home", tmp / "mlflow.db", tmp / "artifacts"
        (self.home / "tmp").mkdir(parents=True)
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.shm0 = shm_entries()
        self.samples: list[dict] = []
        self.events: list[str] = []
        self.failures: list[str] = []
        self.killed: dict[str, int] = {}  # run id -> the worker pid SIGKILLed
        self.killed_at: dict[str, float] = {}  # run id -> when (wall clock)
        self.gate = tmp / "gate"  # where the held recipe's workers say they hold (held-N) and wait (release-N)
        self.gate.mkdir()
        self.current: tuple[str, str] | None = None  # (run id, name) of the trial whose header came last
        self.plan: dict = {}
        self.names: dict[str, str] = {}  # run id -> trial name, as its header printed them
        self.seen: list[str] = []  # run ids in the order their trial first started
        self.drivers, self.expected, self.t0 = 0, 0, time.monotonic()
        self.server = self.outage_thread = None

    def env(self, home: Path) -> dict:
        env = {
            **os.environ,
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "RAY_TMPDIR": str(home / "tmp"),
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONUNBUFFERED": "1",
        }
        for k in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "MLFLOW_TRACKING_URI"):
            env.pop(k, None)
        return env

    def start_server(self) -> None:
        home = self.tmp / "server-home"
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        cmd = [
            str(BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.db}",
            "--artifacts-destination",
            str(self.art),
        ]
        log = (self.tmp / "server.log").open("a")
        self.server = subprocess.Popen(
            cmd, env=self.env(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        from mlflow.tracking import MlflowClient

        client, deadline = MlflowClient(tracking_uri=self.uri), time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                client.search_experiments()
                return
            except Exception:  # noqa: BLE001 - not answering yet
                time.sleep(1)
        raise TimeoutError("mlflow server did not answer in 120 s")

    def stop_server(self) -> None:
        if self.server and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(timeout=30)

    def outage(self) -> None:
        self.events.append(f"MLflow server killed at trial {len(self.seen)} for {self.args.outage_s:g} s")
        self.stop_server()
        time.sleep(self.args.outage_s)
        self.start_server()
        self.events.append("MLflow server back")

    def sample(self, driver: subprocess.Popen, label: str) -> None:
        procs = processes_of(self.home)
        self.samples.append(
            {
                "after": label,
                "driver": self.drivers,
                "t": round(time.monotonic() - self.t0, 1),
                "driver_rss_mb": rss_mb(driver.pid),
                "processes": len(procs),
                "ports": len(listening_ports(procs)),
                "shm": len(shm_entries() - self.shm0),
                "sessions": len(sessions(self.home)),
                "ray_results_mb": du_mb(self.home / "ray_results"),
                "home_mb": du_mb(self.home, skip="ray_results"),
                "artifacts_mb": du_mb(self.art),
            }
        )

    def run_driver(self, extra: list[str], plan: dict) -> int:
        """Runs one driver to its end, acting on its output: `plan` maps a global trial number to "kill",
        "outage" or "term"."""
        self.drivers += 1
        cmd = [
            sys.executable,
            str(ROOT / "tests" / "held_recipe.py"),
            *extra,
            "--tracking-uri",
            self.uri,
            "--experiment",
            "soak",
        ]
        self.events.append(f"driver {self.drivers}: {' '.join(cmd[1:])}")
        log = (self.tmp / f"driver-{self.drivers}.log").open("w", buffering=1)
        proc = subprocess.Popen(
            cmd,
            cwd=self.home,
            env={
                **self.env(self.home),
                "RAYLAB_TEST_GATE": str(self.gate),
                "RAYLAB_TEST_HOLD_AT": str(self.args.steps * 3 // 2),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        watchdog = threading.Timer(self.args.driver_timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        watchdog.start()
        stop = threading.Event()
        gate = threading.Thread(target=self.watch_gate, args=(proc, plan, stop), daemon=True)
        gate.start()
        current, name = None, None
        try:
            for line in proc.stdout:
                log.write(line)
                current, name = self.on_line(line, proc, plan, current, name)
            proc.wait(timeout=120)
        finally:
            stop.set()
            gate.join(timeout=10)
            watchdog.cancel()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            log.close()
        self.events.append(f"driver {self.drivers} exited {proc.returncode}")
        return proc.returncode

    def on_line(self, line: str, proc, plan: dict, current, name):
        m = HEADER.match(line)
        if m:
            if current is not None:
                self.sample(proc, current)
            name, current = m.group(1), m.group(2)
            self.names[current] = name
            self.current = (current, name)
            if current not in self.seen:
                self.seen.append(current)
                if plan.get(len(self.seen)) == "outage":
                    self.outage_thread = threading.Thread(target=self.outage, daemon=True)
                    self.outage_thread.start()
            return current, name
        if line.startswith("experiment '") and current is not None:
            self.sample(proc, current)  # after the last trial, with the driver still up
            return None, None
        return current, name

    def watch_gate(self, proc, plan: dict, stop: threading.Event) -> None:
        """Acts on each hold as it comes: the trial running then is the one holding (one trial at a time, and a
        warm group's other kinds sit idle). A planned kill SIGKILLs the holding process, a planned stop SIGTERMs
        the driver; then (and for every other hold at once) the hold is let go."""
        gate = Gate(self.gate)
        while not stop.is_set():
            for held, pid, *_ in gate.holds():
                self.on_hold(pid, proc, plan)
                gate.release(held)
            stop.wait(0.05)

    def on_hold(self, pid: int, proc, plan: dict) -> None:
        if self.current is None or self.current[0] not in self.seen:
            return
        run_id, name = self.current
        n = self.seen.index(run_id) + 1
        what = plan.get(n)
        at = f"held at training step {self.args.steps * 3 // 2} (mid-epoch 2)"
        if what == "kill" and run_id not in self.killed:
            os.kill(pid, signal.SIGKILL)
            self.killed[run_id], self.killed_at[run_id] = pid, time.time()
            self.events.append(f"trial {n} ({name}): its Ray Train worker {pid} SIGKILLed, {at}")
        elif what == "term" and proc.poll() is None:
            plan.pop(n)
            proc.send_signal(signal.SIGTERM)
            self.events.append(f"trial {n} ({name}): driver SIGTERMed while its worker {pid} was {at}")

    def after_driver(self, which: str) -> None:
        """Once a driver exits: nothing of its session may be left (processes, ports, shared memory), and no more
        Ray session directories than drivers started, nor than the KEEP_SESSIONS raylab keeps."""
        deadline = time.monotonic() + self.args.settle_s
        while processes_of(self.home) and time.monotonic() < deadline:
            time.sleep(2)
        procs = processes_of(self.home)
        if procs:
            self.failures.append(
                f"{which}: {len(procs)} process(es) left after {self.args.settle_s:g} s, ports "
                f"{sorted(listening_ports(procs))}: {[t[:60] for t in procs.values()]}"
            )
        shm = shm_entries() - self.shm0
        if shm:
            self.failures.append(f"{which}: /dev/shm entries left: {sorted(shm)}")
        bound = min(self.drivers, KEEP_SESSIONS)  # raylab keeps its newest KEEP_SESSIONS (cluster.prune_sessions)
        if len(sessions(self.home)) > bound:
            self.failures.append(
                f"{which}: {len(sessions(self.home))} Ray session dirs for {self.drivers} drivers "
                f"(raylab keeps at most {KEEP_SESSIONS})"
            )
        self.events.append(
            f"{which}: left {len(procs)} processes, {len(shm)} shm entries, "
            f"{len(sessions(self.home))} session dirs ({du_mb(self.home / 'tmp' / 'ray')} MB)"
        )

    def cleanup(self) -> None:
        for pid in processes_of(self.home):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.stop_server()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slope(ys: list[float]) -> float:
    """Least-squares slope of ys against 0, 1, 2, ..."""
    return statistics.linear_regression(range(len(ys)), ys).slope if len(ys) > 1 else 0.0


def plans(args) -> tuple[list[list[str]], dict, int]:
    """The invocations (argument lists), the plan (global trial number -> kill / outage / term) and the number of
    trials intended."""
    common = [
        "--quick",
        "--compile",
        "off",
        "--epochs",
        str(args.epochs),
        "--steps-per-epoch",
        str(args.steps),
        "--checkpoint-every",
        "0",
        "--workers",
        "1",
    ]
    if args.short:
        return [[*common, "--trials", "torch:none", "--repeats", str(args.repeats)]], {2: "kill"}, args.repeats
    first = [*common, "--trials", KINDS, "--ps", "1", "--repeats", str(args.repeats)]
    runs = [first, [*common, "--trials", "torch:none", "--repeats", str(args.stream_repeats), "--data", str(args.data)]]
    total = len(KINDS.split(",")) * args.repeats + args.stream_repeats
    plan = {n: "kill" for n in range(5, total + 1, 5)}
    for at, what in ((total // 2, "outage"), (round(total * 2 / 3), "term")):
        plan[at if at not in plan else at + 1] = what
    return runs, plan, total


def export_data(soak: Soak) -> Path:
    out = soak.tmp / "fashion-parquet"
    done = subprocess.run(
        [sys.executable, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"), str(out)],
        env=soak.env(soak.home),
        cwd=soak.home,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        raise RuntimeError(f"raylab data export failed: {done.stderr[-2000:]}")
    return out


def soak_run(args, soak: Soak) -> None:
    runs, plan, soak.expected = plans(args)
    soak.plan = dict(plan)
    soak.start_server()
    for i, extra in enumerate(runs):
        code = soak.run_driver(extra, plan)
        soak.after_driver(f"driver {soak.drivers}")
        if code == 130 and i == 0 and not args.short:  # the SIGTERMed one: go on with the rest
            if soak.run_driver(["--resume", "last"], plan) != 0:
                soak.failures.append(f"the resumed driver {soak.drivers} exited non-zero")
            soak.after_driver(f"driver {soak.drivers} (--resume last)")
        elif code != 0:
            soak.failures.append(f"driver {soak.drivers} exited {code} (log: {soak.tmp}/driver-{soak.drivers}.log)")
    if soak.outage_thread:
        soak.outage_thread.join(timeout=args.outage_s + 180)


def trial_rows(soak: Soak) -> list[dict]:
    """Each trial run of the store, in the order it first started, with its samples' figures."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=soak.uri)
    exp = client.get_experiment_by_name("soak").experiment_id
    runs = {r.info.run_id: r for r in client.search_runs([exp], max_results=1000)}
    resolve_pending(soak, runs)
    for r in runs.values():
        if r.info.status != "FINISHED":
            soak.failures.append(f"run {r.info.run_name} ({r.info.run_id}) is {r.info.status}")
    order = soak.seen + sorted(set(runs) - set(soak.seen), key=lambda i: runs[i].info.start_time)
    rows = []
    for n, run_id in enumerate(order, 1):
        run = runs.get(run_id)
        if run is None or run.data.tags.get("raylab.role") != "trial":
            continue
        last = [s for s in soak.samples if s["after"] == run_id][-1:] or [{}]
        m = run.data.metrics
        ended = float(run.data.tags.get("trial_ended", "inf"))
        pids = [int(p) for p in run.data.tags.get("worker_pids", "").split(",") if p]
        rows.append(
            {
                "n": n,
                "trial": run.info.run_name,
                "run_id": run_id,
                "status": run.info.status,
                "killed": run_id in soak.killed,
                "restarts": m.get("restarts"),
                "failures": run.data.tags.get("failures"),
                "killed_pid": soak.killed.get(run_id),
                "worker_pids": pids,
                "killed_after_end": soak.killed_at.get(run_id, 0) > ended,
                "recovery_s": m.get("recovery_s"),
                "lost_s": m.get("lost_s"),
                "worker_peak_mb": m.get("peak_rss_mb"),
                "wall_s": m.get("wall_s"),
                **last[0],
            }
        )
    return rows


def resolve_pending(soak: Soak, runs: dict) -> None:
    """A trial started while the server was away printed a `pending-...` id: its run is the first-started trial run
    of the same name that no header printed."""
    unseen = sorted(
        (i for i, r in runs.items() if i not in soak.seen and r.data.tags.get("raylab.role") == "trial"),
        key=lambda i: runs[i].info.start_time,
    )
    for k, old in enumerate(soak.seen):
        real = next((i for i in unseen if runs[i].info.run_name == soak.names.get(old)), None)
        if not old.startswith("pending") or real is None:
            continue
        unseen.remove(real)
        soak.seen[k] = real
        for sample in soak.samples:
            sample["after"] = real if sample["after"] == old else sample["after"]
        if old in soak.killed:
            soak.killed[real], soak.killed_at[real] = soak.killed.pop(old), soak.killed_at.pop(old)


def verdicts(soak: Soak, rows: list[dict]) -> None:
    if len(rows) < soak.expected:
        soak.failures.append(f"{len(rows)} trial runs, {soak.expected} intended")
    planned = {n for n, what in soak.plan.items() if what == "kill"}
    for r in rows:
        # A kill that missed its trial is the soak's defect, said as such: never a pass, never raylab's failure
        if r["n"] in planned and not r["killed"]:
            soak.failures.append(
                f"SOAK DEFECT: trial {r['n']} ({r['trial']}) was planned a kill, but none of its "
                "workers was found holding"
            )
        elif r["killed"] and (r["killed_pid"] not in r["worker_pids"] or r["killed_after_end"]):
            soak.failures.append(
                f"SOAK DEFECT: trial {r['n']} ({r['trial']})'s kill hit process {r['killed_pid']}, "
                f"not one of its workers ({r['worker_pids']}) while it ran"
            )
        elif r["killed"] and r["restarts"] != 1:
            soak.failures.append(
                f"trial {r['n']} ({r['trial']}) was killed, restarts={r['restarts']}, not 1; "
                f"its decisions: {r['failures'] or 'none recorded'}"
            )
        elif not r["killed"] and r["restarts"]:  # said, not failed: no kill of the soak's, yet restarted
            print(
                f"note: trial {r['n']} ({r['trial']}) was not killed, yet restarted {r['restarts']:g}x; its "
                f"decisions: {r['failures'] or 'none recorded'}"
            )
    for driver in sorted({s["driver"] for s in soak.samples}):
        mine = [s for s in soak.samples if s["driver"] == driver and s["driver_rss_mb"] is not None]
        tail = mine[10:] if len(mine) > 12 else []
        if tail and (k := slope([s["driver_rss_mb"] for s in tail])) >= RSS_SLOPE_MB:
            soak.failures.append(f"driver {driver}: RSS grows {k:.2f} MB/trial after its first ten trials")
        for key in ("processes", "ports", "shm"):
            if tail and (k := slope([s[key] for s in tail])) > TREND:
                soak.failures.append(f"driver {driver}: {key} grow {k:.2f}/trial after its first ten trials")
    if soak.samples and slope([s["ray_results_mb"] for s in soak.samples]) > 2:
        soak.failures.append("checkpoints under ray_results grow more than 2 MB/trial")


def report(soak: Soak, rows: list[dict]) -> None:
    cols = [
        "n",
        "trial",
        "status",
        "killed",
        "restarts",
        "worker_peak_mb",
        "wall_s",
        "driver",
        "driver_rss_mb",
        "processes",
        "ports",
        "shm",
        "sessions",
        "ray_results_mb",
        "home_mb",
        "artifacts_mb",
    ]
    print("\n" + "  ".join(f"{c:>10}" if c != "trial" else f"{c:<22}" for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "-")
            v = f"{v:.1f}" if isinstance(v, float) else str(v if v is not None else "-")
            cells.append(f"{v:<22}" if c == "trial" else f"{v:>10}")
        print("  ".join(cells))
    print("\nevents:\n  " + "\n  ".join(soak.events))
    print("\nkills (which trial's which process, and what raylab did):")
    for r in (r for r in rows if r["killed"]):
        mine = "one of its workers" if r["killed_pid"] in r["worker_pids"] else "NOT one of its workers"
        print(
            f"  trial {r['n']} ({r['trial']}): process {r['killed_pid']}, {mine} (worker_pids "
            f"{','.join(map(str, r['worker_pids']))}), held mid-epoch 2; raylab restarted it "
            f"{r['restarts'] or 0:g}x ({r['recovery_s'] or 0:.1f} s to recover, {r['lost_s'] or 0:.1f} s of training "
            f"done again), {r['status']}"
        )
    print("\nsummary:")
    for driver in sorted({s["driver"] for s in soak.samples}):
        mine = [s for s in soak.samples if s["driver"] == driver and s["driver_rss_mb"] is not None]
        rss = [s["driver_rss_mb"] for s in mine]
        print(
            f"  driver {driver}: {len(mine)} samples, RSS {rss[0]:.0f} -> {rss[-1]:.0f} MB, slope all "
            f"{slope(rss):.2f} MB/trial, after the first ten {slope(rss[10:]):.2f} MB/trial; processes "
            f"{min(s['processes'] for s in mine)}..{max(s['processes'] for s in mine)}, ports "
            f"{min(s['ports'] for s in mine)}..{max(s['ports'] for s in mine)}"
        )
    peaks = [r["worker_peak_mb"] for r in rows if r.get("worker_peak_mb")]
    if peaks:
        print(f"  worker peak RSS: {min(peaks):.0f}..{max(peaks):.0f} MB over {len(peaks)} trials")
    print(
        f"  disk at the end: HOME {du_mb(soak.home):.1f} MB (ray_results {du_mb(soak.home / 'ray_results'):.1f}"
        f" MB, Ray sessions {du_mb(soak.home / 'tmp' / 'ray'):.1f} MB), artifacts {du_mb(soak.art):.1f} MB, "
        f"mlflow.db {soak.db.stat().st_size / 2**20:.1f} MB"
    )
    print(
        f"  {len(rows)} trials, {len(soak.killed)} workers killed, "
        f"{time.monotonic() - soak.t0:.0f} s; " + ("PASS" if not soak.failures else "FAIL")
    )
    for f in soak.failures:
        print(f"FAIL: {f}")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", action="store_true", help="3 torch:none trials in one driver, the 2nd's worker killed")
    p.add_argument("--repeats", type=int, help="repeats of every kind (default 3; --short 3)", default=3)
    p.add_argument("--stream-repeats", type=int, default=4, help="streamed torch:none trials (default 4)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per trial (default 4)")
    p.add_argument("--steps", type=int, default=1000, help="steps per epoch (default 1000)")
    p.add_argument("--outage-s", type=float, default=30, help="MLflow outage length, s (default 30)")
    p.add_argument("--settle-s", type=float, default=120, help="wait for a driver's processes to go (default 120)")
    p.add_argument("--driver-timeout", type=float, default=3600, help="SIGKILL a driver after this many s")
    p.add_argument("--data", type=Path, help="a `raylab data export` directory (default: exported now)")
    p.add_argument("--out", type=Path, default=Path("soak.json"), help="samples and rows as JSON (soak.json)")
    p.add_argument("--keep", action="store_true", help="keep the temp directory (logs, store)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    tmp = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))  # short: Ray's socket paths live under it
    soak = Soak(args, tmp)
    try:
        if not args.short and args.data is None:
            args.data = export_data(soak)
        soak_run(args, soak)
        rows = trial_rows(soak)
        verdicts(soak, rows)
        report(soak, rows)
        args.out.write_text(
            json.dumps(
                {"rows": rows, "samples": soak.samples, "events": soak.events, "failures": soak.failures}, indent=1
            )
        )
    finally:
        soak.cleanup()
        keep = args.keep or bool(soak.failures)  # a failed soak keeps its MLflow store and the trials' logs
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if keep:
        print(
            f"kept {tmp} (its MLflow store, the trials' logs and Ray's session logs)"
            + ("" if args.keep else ": the soak failed")
        )
    return 1 if soak.failures else 0


if __name__ == "__main__":
    sys.exit(main())
