"""What failed in a trial, and whether a restart can help (raylab/failure.py): real exceptions of the kinds
the frameworks raise, and Ray Train's own error classes handed to the policy."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap

import pytest

from raylab import failure
from raylab.driver.policy import Policy
from raylab.failure import CodeFailure, classify, lost_peer, out_of_memory
from raylab.loop import guard


def raised(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


def bad_loss():
    raise ValueError("the loss of this recipe is broken on purpose")


def test_a_recipe_error_names_the_recipe_function_and_is_not_restarted():
    f = classify(raised(bad_loss), rank=1, batch=64)
    assert f.kind == "error"
    assert f.line.startswith(
        "ValueError: the loss of this recipe is broken on purpose raised in the recipe's `bad_loss` ("
    )
    assert "tests/unit/test_failure.py:" in f.line and f.where.startswith("the recipe's `bad_loss`")
    assert "on rank 1; not restarted" in f.line and "\n" not in f.line


def test_a_host_allocation_failure_is_out_of_host_memory_with_batch_and_peak():
    """A real allocator failure: numpy under a data-segment cap in a child process."""
    code = textwrap.dedent("""
        import resource, numpy as np
        from functools import partial
        from raylab.failure import classify
        from raylab.loop.guard import peaks
        data_kb = int(next(l for l in open("/proc/self/status") if l.startswith("VmData")).split()[1])
        resource.setrlimit(resource.RLIMIT_DATA, ((data_kb << 10) + (300 << 20), resource.RLIM_INFINITY))
        try:
            np.ones((2 << 30,), np.uint8)
        except MemoryError as e:
            print(classify(e, 0, 512, peaks=partial(peaks, None)).line)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = out.stdout.strip()
    assert line.startswith("out of host memory at batch 512 per replica (host peak RSS "), (line, out.stderr[-2000:])
    assert "MemoryError" in line and "not restarted" in line


@pytest.mark.parametrize(
    "text,where",
    [
        (
            "[enforce fail at alloc_cpu.cpp:124] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 4632608768 bytes. Error code 12 (Cannot allocate memory)",
            "host",
        ),
        (
            "OOM when allocating tensor with shape[2048,94,94,64] and type float on /job:localhost/replica:0/task:0/"
            "device:CPU:0 by allocator cpu [Op:Conv2D]",
            "host",
        ),
        (
            "OOM when allocating tensor with shape[2048,94,94,64] and type float on /job:localhost/replica:0/task:0/"
            "device:GPU:0 by allocator GPU_0_bfc",
            "device",
        ),
        ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes on TPU HBM", "device"),
        ("the loss is nan", None),
    ],
)
def test_out_of_memory_is_told_from_its_message(text, where):
    assert out_of_memory(RuntimeError(text)) == where


def test_torch_cuda_oom_class_is_device_memory():
    torch = pytest.importorskip("torch")
    assert out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) == "device"


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242"),
        RuntimeError("Connection reset by peer"),
        ConnectionResetError(104, "Connection reset by peer"),
        BrokenPipeError(32, "Broken pipe"),
    ],
)
def test_what_a_survivor_sees_of_a_lost_peer_is_left_to_the_restart_budget(exc):
    assert lost_peer(exc) and classify(exc, 0, 8) is None


def test_ray_errors_are_lost_processes_not_code():
    from ray.exceptions import ActorDiedError

    assert classify(ActorDiedError(), 0, 8) is None
    assert classify(failure.LostProcessError("a parameter server died mid-trial"), 0, 8) is None

    def wrapped():
        try:
            raise ActorDiedError()
        except ActorDiedError:
            raise RuntimeError("the server I pushed to is gone")

    assert classify(raised(wrapped), 0, 8) is None  # raised while handling a lost process


class Decisions:
    """Where the policy sends what it decided (the trial's sink in a run)."""

    def __init__(self):
        self.seen = []
        self.failure = self

    def remote(self, *args):
        self.seen.append(args)


def group_error(**by_rank):
    from ray.train.v2.api.exceptions import WorkerGroupError

    return WorkerGroupError("failed", {int(k[1:]): v for k, v in by_rank.items()})


def test_the_policy_ends_a_code_failure_at_once_and_restarts_a_lost_process():
    from ray.exceptions import ActorDiedError
    from ray.train import FailureConfig
    from ray.train.v2._internal.exceptions import UserExceptionWithTraceback, WorkerHealthCheckFailedError
    from ray.train.v2._internal.execution.failure_handling import FailureDecision

    # Ray Train hands the policy each rank's error as raised (poll.py unwraps UserExceptionWithTraceback)
    code = CodeFailure("ValueError: x raised in the recipe's `f` (r.py:1) on rank 0")
    assert failure.code_failures(group_error(r0=UserExceptionWithTraceback(code, "Traceback ..."))) == [code]
    lost = WorkerHealthCheckFailedError("worker died", ActorDiedError())
    sink = Decisions()
    policy = Policy(FailureConfig(max_failures=3), sink)
    assert policy.make_decision(group_error(r0=code, r1=code)) == FailureDecision.RAISE
    assert policy.make_decision(group_error(r1=lost)) == FailureDecision.RETRY
    # a survivor that read its peer's death as its own error still restarts: a process was lost
    assert policy.make_decision(group_error(r0=code, r1=lost)) == FailureDecision.RETRY
    what = [(w, d) for _, w, d in sink.seen]
    assert what[0] == (
        "ValueError: x raised in the recipe's `f` (r.py:1) on rank 0",
        "not restarted: the trial's own code raised",
    )
    assert what[1] == ("worker process lost (rank 1: ActorDiedError)", "restarted from the last checkpoint")
    # a survivor's own error beside its lost peer's is no code failure either: restarted
    gloo = RuntimeError("Connection closed by peer")
    assert policy.make_decision(group_error(r0=gloo, r1=lost)) == FailureDecision.RETRY
    spent = Policy(FailureConfig(max_failures=0), Decisions())
    assert spent.make_decision(group_error(r1=lost)) == FailureDecision.RAISE


def test_each_trial_of_a_warm_group_has_its_own_restart_budget(monkeypatch):
    """Ray Train counts failures over its run, a warm group's every trial; --max-failures is per trial."""
    from ray.exceptions import ActorDiedError
    from ray.train import FailureConfig
    from ray.train.v2._internal.exceptions import WorkerHealthCheckFailedError
    from ray.train.v2._internal.execution.failure_handling import FailureDecision

    lost = WorkerHealthCheckFailedError("worker died", ActorDiedError())
    policy, running = Policy(FailureConfig(max_failures=1), Decisions()), {"trial": 0}
    monkeypatch.setattr(policy, "running", lambda: running["trial"])
    assert policy.make_decision(group_error(r0=lost)) == FailureDecision.RETRY  # the first trial's restart
    running["trial"] = 1
    assert policy.make_decision(group_error(r0=lost)) == FailureDecision.RETRY  # the second's own
    assert policy.make_decision(group_error(r0=lost)) == FailureDecision.RAISE  # its budget spent
    running["trial"] = None
    assert policy.make_decision(group_error(r0=lost)) == FailureDecision.RAISE  # idle: nothing to go on with


def test_what_a_remote_task_raised_is_judged_by_its_cause():
    """A parameter server's own error reaches a worker as a RayTaskError: the recipe's bug is code, its out of
    memory is memory, and neither is a lost peer."""
    from ray.exceptions import RayTaskError

    bug = RayTaskError("ParameterServer.push", "Traceback ...", ValueError("the optimizer is broken"))
    assert not lost_peer(bug) and classify(bug, 0, 8).kind == "error"
    memory = RayTaskError("ParameterServer.push", "Traceback ...", MemoryError())
    assert out_of_memory(memory) == "host" and classify(memory, 0, 8).kind == "out_of_memory"


def test_an_allocation_failing_inside_a_collective_is_memory_not_a_lost_peer():
    exc = RuntimeError("[gloo] DefaultCPUAllocator: can't allocate memory: you tried to allocate 4 GB")
    assert classify(exc, 0, 64).kind == "out_of_memory"


def test_rays_own_out_of_memory_kill_is_host_memory():
    from ray.exceptions import OutOfMemoryError

    assert out_of_memory(OutOfMemoryError("Task was killed due to the node running low on memory.")) == "host"


def test_memory_ray_itself_could_not_allocate_in_a_capped_worker_is_out_of_memory_too():
    found = failure.code_failures(group_error(r0=MemoryError("Unable to allocate internal buffer.")))
    assert [f.kind for f in found] == ["out_of_memory"]
    assert found[0].line.startswith("out of host memory on rank 0, outside the training step")


def test_a_tf_traced_error_names_the_users_function_and_its_message():
    tf = pytest.importorskip("tensorflow")

    def user_loss(x):
        raise ValueError("no loss here")

    f = classify(raised(lambda: tf.function(lambda x: user_loss(x) * 2)(tf.constant(1.0))), 0, 8)
    assert f.line.startswith("ValueError: no loss here raised in the recipe's `user_loss` ("), f.line
    assert "test_failure.py:" in f.where


def test_the_memory_cap_is_the_process_data_limit_while_training_and_lifted_after():
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with guard.memory_cap(50_000):
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == 50_000 << 20
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_an_xla_cpu_kernel_failing_under_a_memory_cap_is_out_of_host_memory():
    """jaxlib's CPU kernels report their own failed allocation as INTERNAL ("YNNPACK operation failed", seen at the
    edge of a 3,000 MB cap): out of host memory under a cap, an error like any other without one."""
    text = "INTERNAL: Error dispatching computation: YNNPACK operation failed: error"
    assert classify(RuntimeError(text), 0, 15, capped=True).kind == "out_of_memory"
    assert "out of host memory at batch 15" in classify(RuntimeError(text), 0, 15, capped=True).line
    assert classify(RuntimeError(text), 0, 15).kind == "error"


def test_a_onednn_primitive_failing_under_a_memory_cap_is_out_of_host_memory():
    """TF's oneDNN matmul at the edge of a 3,000 MB cap raised AbortedError ("could not execute a primitive"), which
    without a cap reads as a lost peer (restartable): under a cap it is the allocation that failed."""
    import tensorflow as tf

    text = (
        "Graph execution error: Operation received an exception:Status: 5, message: could not execute a "
        "primitive, in file tensorflow/core/kernels/mkl/mkl_matmul_op_fused.cc:306"
    )
    error = tf.errors.AbortedError(None, None, text)
    assert classify(error, 0, 3, capped=True).kind == "out_of_memory"
    assert classify(error, 0, 3) is None  # an AbortedError without a cap: a lost peer, for a restart to decide
