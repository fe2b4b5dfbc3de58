"""The one MLflow writer: a parent run per invocation, a child run per trial.

Workers only send numbers to the driver; this tracker owns the MlflowClient, batches what
it logs within MLflow's limits and always ends a run (FINISHED, FAILED or KILLED).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

from raylab.errors import UserError
from raylab.record.ui_view import VIEW, VIEW_QUERY, comparison_view
from raylab.record.uri import check_sqlite, check_scheme

ROLE = "raylab.role"  # "parent" or "trial"
PARENT = "mlflow.parentRunId"
USER = "mlflow.user"  # whose run it is: MLflow's own tag (the UI's "User" column), set as MLflow's fluent API sets it


def user() -> str:
    """Who runs this: the tracking server's user where one is given (MLFLOW_TRACKING_USERNAME), else the login name
    (getpass: $LOGNAME, $USER, ..., as MLflow's own runs say)."""
    import getpass

    return os.environ.get("MLFLOW_TRACKING_USERNAME") or getpass.getuser()


MAX_TAG = 5000  # MLflow allows 8000 characters in a tag value; leave room


def error_summary(error: str) -> str:
    """The line of a (possibly remote, multi-worker) traceback that names the error."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    named = [i for i, line in enumerate(lines) if re.match(r"^(\(\d+\) )?([\w.]+(Error|Exception)|[A-Z_]{5,}):", line)]
    if not named:
        return (lines or ["unknown error"])[-1][:500]
    i = named[-1]
    text = lines[i].removeprefix("raylab.failure.TrialCodeError: ")  # already one line: what, where, why not restarted
    # "WorkerGroupError: Training failed due to worker errors:" / "[Rank 0 Error Snippet]:" say what failed below.
    for line in lines[i + 1 :]:
        if not text.endswith(":"):
            break
        text += f" {line}"
    died = next((line for line in lines if line.startswith("The actor died")), None)
    if died and died not in text:  # a process that vanished (killed, OOM) rather than raised
        text += f" {died}"
    return text[:1000]


def outage(error: Exception) -> bool:
    """Whether a failed write means the server could not be reached (kept for later), not that it refused it."""
    from mlflow.exceptions import RestException

    return not isinstance(error, RestException)


PENDING_EVERY_S = 10.0  # how often writes kept during an outage are tried again


class Tracker:
    """The one MLflow writer. Against a tracking server, a write that cannot reach it is kept, in order, with
    every write after it, and sent when the server answers again (tried every PENDING_EVERY_S, and at the
    end); what is still unsent when the invocation ends is saved to a file `raylab upload` sends later."""

    def __init__(self, uri: str, experiment: str | None = None):
        """Opens the store; with an experiment name, gets or creates that experiment."""
        from mlflow.tracking import MlflowClient

        self.uri = uri
        check_scheme(uri)
        if uri.startswith("sqlite:"):
            check_sqlite(uri)
        if uri.startswith("file:") or (urlparse(uri).scheme == "" and not uri.startswith("sqlite")):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.17 refuses it otherwise
        self.remote = uri.startswith(("http://", "https://"))
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = self._experiment(experiment)
        if self.remote:  # fail over to the local queue within about 30 s rather than MLflow's minutes of retries
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        self.pending: list[list] = []  # writes the server has not taken yet, in order
        self.ids: dict[str, str] = {}  # placeholder run id (made while the server was away) -> real id
        self._lock = threading.RLock()
        self._retry: threading.Thread | None = None
        self._stop = threading.Event()

    def _experiment(self, name: str | None) -> str | None:
        # A dead server would be retried for minutes: ask once, quickly, before anything runs.
        saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
        os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10")
        try:
            exp = self.client.get_experiment_by_name(name or "Default")
        except Exception as e:  # noqa: BLE001 - any failure here means the store is unusable
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise UserError(
                f"cannot reach the MLflow tracking store {self.uri} ({first}); start the server "
                "or pass another --tracking-uri (e.g. sqlite:///mlflow.db)."
            ) from None
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        if name is None:
            return None
        if exp is None:
            return self.client.create_experiment(name)
        if exp.lifecycle_stage == "deleted":
            raise UserError(
                f"MLflow experiment '{name}' is deleted; restore it (mlflow experiments restore) "
                "or choose another --experiment."
            )
        return exp.experiment_id

    # Every write goes through _write: sent now, or kept (with all later writes) while the server is away.
    def _write(self, op: list) -> None:
        with self._lock:
            if not self.pending:
                try:
                    self._send(op)
                    return
                except Exception as e:  # noqa: BLE001 - sorted below: unreachable, or refused
                    if not self.remote or not outage(e):
                        raise
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                    print(
                        f"raylab: the MLflow server {self.uri} cannot be reached ({first}); keeping its metrics "
                        f"here and sending them when it is back (tried every {PENDING_EVERY_S:g} s)",
                        file=sys.stderr,
                        flush=True,
                    )
            self.pending.append(op)
            if self._retry is None or not self._retry.is_alive():
                self._retry = threading.Thread(target=self._retry_loop, daemon=True)
                self._retry.start()

    def _send(self, op: list) -> None:
        from mlflow.entities import Metric, Param, RunTag

        kind, run_id, args = op[0], self.ids.get(op[1], op[1]), op[2]
        if kind == "create_run":
            tags = {
                **args["tags"],
                **(
                    {PARENT: self.ids.get(args["tags"][PARENT], args["tags"][PARENT])} if PARENT in args["tags"] else {}
                ),
            }
            run = self.client.create_run(
                args["experiment_id"], run_name=args["name"], tags=tags, start_time=args["start_time"]
            )
            self.ids[op[1]] = run.info.run_id
        elif kind == "log_batch":
            self.client.log_batch(
                run_id,
                metrics=[Metric(*m) for m in args.get("metrics", [])],
                params=[Param(*p) for p in args.get("params", [])],
                tags=[RunTag(*t) for t in args.get("tags", [])],
            )
        elif kind == "update_run":
            self.client.update_run(run_id, **args)
        elif kind == "set_terminated":
            self.client.set_terminated(run_id, args["status"], end_time=args["end_time"])
        elif kind == "log_artifact":
            self.client.log_artifact(run_id, args["path"], args.get("artifact_path"))
        elif kind == "comparison_view":
            self.client.set_experiment_tag(
                args["experiment_id"],
                f"mlflow.sharedViewState.{VIEW}",
                json.dumps(comparison_view(f"tags.`{PARENT}` = '{run_id}'", args["time_ms"])),
            )
        else:
            raise ValueError(f"unknown tracking write {kind}")

    def flush(self) -> bool:
        """Sends what was kept, in order, until the server refuses or is still away; True when nothing is left."""
        with self._lock:
            sent = 0
            while self.pending:
                try:
                    self._send(self.pending[0])
                except Exception as e:  # noqa: BLE001
                    if outage(e):
                        return False
                    raise
                self.pending.pop(0)
                sent += 1
            if sent:
                print(
                    f"raylab: the MLflow server {self.uri} is back; sent the {sent} write(s) kept meanwhile",
                    file=sys.stderr,
                    flush=True,
                )
            return True

    def _retry_loop(self) -> None:
        while not self._stop.wait(PENDING_EVERY_S):
            try:
                if self.flush():
                    return
            except Exception as e:  # noqa: BLE001 - a refused write is reported at close()
                print(f"raylab: MLflow refused a kept write: {e}", file=sys.stderr, flush=True)
                return

    def close(self, wait_s: float = 60.0, where: Path | None = None) -> Path | None:
        """At the end: send what is kept (trying for up to wait_s); if the server is still away, save it to a
        file and print the command that uploads it. Returns that file, or None."""
        deadline = time.monotonic() + wait_s
        while self.pending and not self.flush() and time.monotonic() < deadline:
            time.sleep(min(PENDING_EVERY_S, max(0.0, deadline - time.monotonic())))
        self._stop.set()
        if not self.pending:
            return None
        where = where or Path.cwd()
        path = where / f"raylab-pending-{uuid.uuid4().hex[:8]}.json"
        files = path.with_suffix(".files")
        for op in self.pending:  # artifacts: keep a copy beside it, the original may be a temporary file
            if op[0] == "log_artifact":
                files.mkdir(exist_ok=True)
                op[2]["path"] = str(Path(shutil.copy(op[2]["path"], files)).resolve())
        path.write_text(json.dumps({"tracking_uri": self.uri, "ids": self.ids, "writes": self.pending}))
        print(
            f"raylab: the MLflow server {self.uri} did not come back; {len(self.pending)} write(s) are saved in "
            f"{path}. Send them when it is up: raylab upload {path}",
            file=sys.stderr,
            flush=True,
        )
        return path

    def upload(self, path: Path) -> int:
        """Sends a file close() saved; returns how many writes it held."""
        data = json.loads(path.read_text())
        self.ids.update(data.get("ids", {}))
        self.pending = [list(op) for op in data["writes"]]
        with self._lock:
            while self.pending:
                self._send(self.pending[0])
                self.pending.pop(0)
        return len(data["writes"])

    def start_run(self, name: str, params: dict, tags: dict, parent: str | None = None) -> str:
        tags = {
            USER: user(),
            **tags,
            ROLE: "trial" if parent else "parent",
            **({PARENT: self.ids.get(parent, parent)} if parent else {}),
        }
        placeholder = f"pending-{uuid.uuid4().hex}"
        self._write(
            [
                "create_run",
                placeholder,
                {
                    "experiment_id": self.experiment_id,
                    "name": name,
                    "tags": {k: str(v) for k, v in tags.items()},
                    "start_time": int(time.time() * 1000),
                },
            ]
        )
        run_id = self.ids.get(placeholder, placeholder)
        self.log_params(run_id, params)
        return run_id

    def reopen(self, run_id: str) -> None:
        """A run that ends again: an interrupted trial or invocation that --resume goes on with."""
        self._write(["update_run", run_id, {"status": "RUNNING"}])

    def parent_run(self, ref: str):
        """The parent run of an invocation: its id, or 'last' (the experiment's latest); UserError if none."""
        if ref == "last":
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{ROLE}` = 'parent'",
                order_by=["attributes.start_time DESC"],
                max_results=1,
            )
            if not runs:
                raise UserError(
                    "--resume last: this experiment has no raylab invocation to resume; check "
                    "--experiment and --tracking-uri."
                )
            return runs[0]
        try:
            run = self.client.get_run(ref)
        except Exception:  # noqa: BLE001 - unknown id
            raise UserError(
                f"--resume {ref}: no such run in {self.uri}; give a parent run id from "
                "`raylab compare` or the MLflow UI, or 'last'."
            ) from None
        if run.data.tags.get(ROLE) != "parent":
            raise UserError(
                f"--resume {ref}: that run is a trial, not an invocation; give its parent run "
                f"({run.data.tags.get(PARENT, 'see the MLflow UI')})."
            )
        return run

    def log_params(self, run_id: str, params: dict) -> None:
        items = [[k, str(v)[:6000]] for k, v in params.items()]
        for i in range(0, len(items), 100):
            self._write(["log_batch", run_id, {"params": items[i : i + 100]}])

    def set_tags(self, run_id: str, tags: dict) -> None:
        items = [[k, str(v)[:MAX_TAG]] for k, v in tags.items()]
        for i in range(0, len(items), 100):
            self._write(["log_batch", run_id, {"tags": items[i : i + 100]}])

    def log_metrics(self, run_id: str, metrics: dict, step: int = 0) -> None:
        now = int(time.time() * 1000)
        items = [[k, float(v), now, step] for k, v in metrics.items() if v is not None]
        for i in range(0, len(items), 1000):
            self._write(["log_batch", run_id, {"metrics": items[i : i + 1000]}])

    def rename(self, run_id: str, name: str) -> None:
        self._write(["update_run", run_id, {"name": name}])

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        """A file as an artifact of the run, at its top level or in the folder artifact_path."""
        where = {"artifact_path": artifact_path} if artifact_path else {}
        self._write(["log_artifact", run_id, {"path": str(Path(path).resolve()), **where}])

    def end(self, run_id: str, status: str, error: str | None = None) -> None:
        if error:
            self.set_tags(run_id, {"error": error, "error_summary": error_summary(error)})
        self._write(["set_terminated", run_id, {"status": status, "end_time": int(time.time() * 1000)}])

    def show_in_ui(self, parent_id: str) -> None:
        """Points the experiment's comparison view (ui_hint's link) at this invocation's trials."""
        self._write(
            ["comparison_view", parent_id, {"experiment_id": self.experiment_id, "time_ms": int(time.time() * 1000)}]
        )

    def ui_hint(self, experiment: str) -> str:
        page = f"/#/experiments/{self.experiment_id}/runs?{VIEW_QUERY}"
        if self.uri.startswith(("http://", "https://")):
            return f"MLflow UI (this invocation's trials and charts): {self.uri.rstrip('/')}{page}"
        return (
            f"MLflow UI: mlflow ui --host 127.0.0.1 --backend-store-uri {self.uri}  then open "
            f"http://127.0.0.1:5000{page} (experiment '{experiment}': this invocation's trials and charts)"
        )
