"""The one module that reaches into Ray's private API (`ray._private`, `ray.train._internal`,
`ray.train.v2._internal`); tests/unit/test_structure.py fails on a use of it anywhere else in raylab/ or bench/.

Each name is imported when first asked for (`from raylab._ray import ray_constants` inside a function), so importing
this module imports nothing of Ray: raylab/compare/ and the command line's checks stay free of it. What each name
is for, and where Ray keeps it (checked against Ray 2.60):

- `ray_logging`, `ray_worker` (ray._private.ray_logging, ray._private.worker): the driver's console takes over
  Ray's printer of worker output and of the cluster's notices (raylab/runtime/console.py), and finds the node
  this process started (raylab/runtime/cluster.py);
- `ray_utils` (ray._private.utils): `set_sigterm_handler`, held off while `ray.init` starts
  (raylab/runtime/stopping.py);
- `ray_constants` (ray._private.ray_constants): the worker-process set-up hook's variable (raylab/prewarm.py),
  the process-group shutdown's default timeout (raylab/frameworks/torch/process_group.py);
- `get_train_context` (ray.train.v2._internal.execution.context): a worker's result queue (raylab/loop/checkpoint.py);
- `get_address_and_port` (ray.train._internal.utils): a free port on this node (raylab/frameworks/rendezvous.py);
- `TrainingFramework` (ray.train.v2._internal.util): what a backend says it runs
  (raylab/frameworks/torch/process_group.py);
- `ControllerCallback`, `WorkerGroupCallback`, `FailureDecision`, `DefaultFailurePolicy`
  (ray.train.v2._internal.execution): the controller's policy and start guard (raylab/driver/policy.py).

A Ray upgrade that moves one of these breaks here, in one place.
"""

from __future__ import annotations

import importlib

_WHERE = {  # name -> (module, attribute; None: the module itself)
    "ray_logging": ("ray._private.ray_logging", None),
    "ray_worker": ("ray._private.worker", None),
    "ray_utils": ("ray._private.utils", None),
    "ray_constants": ("ray._private.ray_constants", None),
    "get_train_context": ("ray.train.v2._internal.execution.context", "get_train_context"),
    "get_address_and_port": ("ray.train._internal.utils", "get_address_and_port"),
    "TrainingFramework": ("ray.train.v2._internal.util", "TrainingFramework"),
    "ControllerCallback": ("ray.train.v2._internal.execution.callback", "ControllerCallback"),
    "WorkerGroupCallback": ("ray.train.v2._internal.execution.callback", "WorkerGroupCallback"),
    "FailureDecision": ("ray.train.v2._internal.execution.failure_handling", "FailureDecision"),
    "DefaultFailurePolicy": ("ray.train.v2._internal.execution.failure_handling.default", "DefaultFailurePolicy"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _WHERE[name]
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def global_node():
    """The Ray node this process started (an in-process cluster's head), or None."""
    return getattr(__getattr__("ray_worker"), "_global_node", None)
