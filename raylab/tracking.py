"""The one MLflow writer: a parent run per invocation, a child run per trial.

Workers only send numbers to the driver; this tracker owns the MlflowClient, batches what
it logs within MLflow's limits and always ends a run (FINISHED, FAILED or KILLED).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

from raylab.errors import UserError

ROLE = "raylab.role"  # "parent" or "trial"
PARENT = "mlflow.parentRunId"
MAX_TAG = 5000  # MLflow allows 8000 characters in a tag value; leave room


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_commit(where: Path) -> str:
    if os.environ.get("RAYLAB_GIT_COMMIT"):
        return os.environ["RAYLAB_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def driver_versions() -> dict:
    """Versions as installed on the driver; workers report what they actually imported."""
    return {
        "version.python": platform.python_version(),
        "version.ray": package_version("ray"),
        "version.mlflow": package_version("mlflow"),
        "version.tensorflow": package_version("tensorflow"),
        "version.torch": package_version("torch"),
        "version.torch_xla": package_version("torch-xla"),
    }


def error_summary(error: str) -> str:
    """The line of a (possibly remote, multi-worker) traceback that names the error."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    named = [i for i, line in enumerate(lines) if re.match(r"^(\(\d+\) )?([\w.]+(Error|Exception)|[A-Z_]{5,}):", line)]
    if not named:
        return (lines or ["unknown error"])[-1][:500]
    i = named[-1]
    text = lines[i]
    # "WorkerGroupError: Training failed due to worker errors:" / "[Rank 0 Error Snippet]:" say what failed below.
    for line in lines[i + 1 :]:
        if not text.endswith(":"):
            break
        text += f" {line}"
    died = next((line for line in lines if line.startswith("The actor died")), None)
    if died and died not in text:  # a process that vanished (killed, OOM) rather than raised
        text += f" {died}"
    return text[:500]


def _check_sqlite(uri: str) -> None:
    path = Path(urlparse(uri).path if uri.startswith("sqlite:////") else uri[len("sqlite:///"):])
    if not path.parent.is_dir():
        raise UserError(f"the MLflow store {uri} is in a directory that does not exist ({path.parent}); "
                        "create it or pass another --tracking-uri.")


class Tracker:
    def __init__(self, uri: str, experiment: str | None = None):
        """Opens the store; with an experiment name, gets or creates that experiment."""
        from mlflow.tracking import MlflowClient

        self.uri = uri
        if uri.startswith("sqlite:"):
            _check_sqlite(uri)
        if uri.startswith("file:") or (urlparse(uri).scheme == "" and not uri.startswith("sqlite")):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.17 refuses it otherwise
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = self._experiment(experiment)

    def _experiment(self, name: str | None) -> str | None:
        # A dead server would be retried for minutes: ask once, quickly, before anything runs.
        saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
        os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10")
        try:
            exp = self.client.get_experiment_by_name(name or "Default")
        except Exception as e:  # noqa: BLE001 - any failure here means the store is unusable
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise UserError(f"cannot reach the MLflow tracking store {self.uri} ({first}); start the server "
                            "or pass another --tracking-uri (e.g. sqlite:///mlflow.db).") from None
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        if name is None:
            return None
        if exp is None:
            return self.client.create_experiment(name)
        if exp.lifecycle_stage == "deleted":
            raise UserError(f"MLflow experiment '{name}' is deleted; restore it (mlflow experiments restore) "
                            "or choose another --experiment.")
        return exp.experiment_id

    def start_run(self, name: str, params: dict, tags: dict, parent: str | None = None) -> str:
        tags = {**tags, ROLE: "trial" if parent else "parent", **({PARENT: parent} if parent else {})}
        run = self.client.create_run(self.experiment_id, run_name=name, tags={k: str(v) for k, v in tags.items()})
        self.log_params(run.info.run_id, params)
        return run.info.run_id

    def log_params(self, run_id: str, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i : i + 100])

    def set_tags(self, run_id: str, tags: dict) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:MAX_TAG]) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, tags=items[i : i + 100])

    def log_metrics(self, run_id: str, metrics: dict, step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
        for i in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[i : i + 1000])

    def rename(self, run_id: str, name: str) -> None:
        self.client.update_run(run_id, name=name)

    def log_artifact(self, run_id: str, path: Path) -> None:
        self.client.log_artifact(run_id, str(path))

    def end(self, run_id: str, status: str, error: str | None = None) -> None:
        if error:
            self.set_tags(run_id, {"error": error, "error_summary": error_summary(error)})
        self.client.set_terminated(run_id, status)

    def ui_hint(self, experiment: str) -> str:
        if self.uri.startswith(("http://", "https://")):
            return f"MLflow UI: {self.uri}/#/experiments/{self.experiment_id}"
        return (f"MLflow UI: mlflow ui --backend-store-uri {self.uri}  then open http://127.0.0.1:5000 "
                f"(experiment '{experiment}')")
