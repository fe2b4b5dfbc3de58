"""What failed in a trial, and whether a restart can help.

Two kinds of failure reach Ray Train from a trial's workers:

- *its own code raised* (the recipe's loss, metric, model or preparation, or raylab's): a bad loss, a shape
  error, out of memory. A restart would raise it again, after paying the whole start-up once more. The
  worker turns it into a `CodeFailure` (one line: what, where, on which rank; for out of memory, whether host
  or device, at which batch, and the peak reached) and `Policy` ends the trial at once, FAILED.
- *a process was lost* (SIGKILL, a crashed or preempted node, the OOM killer): the worker is gone, and its
  peers fail on their collectives. These spend the restart budget (`--max-failures`), from the last checkpoint.

Every decision the policy takes is sent to the trial's sink and recorded as the tag `failures`.

Failure handling lives in three places, one per process: this module classifies (pure: no Ray, run anywhere),
raylab/loop/guard.py is the worker's guard around its loop, raylab/driver/policy.py the Ray Train controller's
policy and start guard.
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback
from typing import Callable

from raylab.registry import frameworks

# A peer's loss seen from a survivor: the collective or the connection it was blocked on breaks. Not the
# survivor's code: these are left to Ray Train's restart budget.
LOST_PEER = (
    "connection closed",
    "connection reset",
    "broken pipe",
    "socket closed",
    "collective ops is aborted",
    "failed to connect",
    "connection refused",
)
# Broader words, taken as a lost peer only in a traceback through distributed code.
LOST_PEER_IN_COLLECTIVE = (
    "gloo",
    "nccl",
    "peer",
    "timed out",
    "deadline exceeded",
    "unavailable",
    "aborted",
    "cancelled",
    "end of file",
    "eof",
)
LOST_PEER_TYPES = (
    "DistBackendError",
    "DistNetworkError",
    "DistStoreError",
    "UnavailableError",
    "AbortedError",
    "CancelledError",
    "DeadlineExceededError",
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "ObjectLostError",
    "OwnerDiedError",
    "GetTimeoutError",
    "WorkerCrashedError",
    "NodeDiedError",
)
OOM_TEXT = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "resource_exhausted",
    "oom when allocating",
    "std::bad_alloc",
    "failed to allocate",
)
# Failures that carry no word of memory but, under a memory cap, are an allocation that failed: XLA's CPU kernels
# (XNNPACK / YNNPACK in jaxlib 0.10) report their own allocation failure as "INTERNAL: ... operation failed", and
# TF's oneDNN kernels as an AbortedError, "could not execute a primitive" (seen at a 3,000 MB cap's edge) or "could
# not create a memory object" (the fashion CNN's convolution at batch 768 under 2,500 MB, 2026-11-27).
OOM_TEXT_UNDER_CAP = (
    "ynnpack operation failed",
    "xnnpack operation failed",
    "could not execute a primitive",
    "could not create a memory object",
    "could not create a primitive",
)
# What a worker prints as its native code aborts the process on a failed allocation, with no Python error to raise:
# an uncaught std::bad_alloc (TF's BFC allocator under a cap, from oneDNN's max-pooling gradient at batch 640 of the
# fashion CNN under 2,500 MB: Ray's terminate handler prints "Unhandled exception: St9bad_alloc. what():
# std::bad_alloc", libstdc++'s own "terminate called after throwing an instance of 'std::bad_alloc'"), XLA's CPU
# client for a buffer it could not allocate, absl's low-level allocator when mmap fails with ENOMEM (then a SIGSEGV:
# "[low_level_alloc.cc : 569] RAW: mmap error: 12", the same search at 608). The driver sees the line in the worker's
# output (raylab/runtime/console.py) and the trial's failure policy reads it from the trial's sink (Policy below).
ALLOCATOR_ABORT_TEXT = ("std::bad_alloc", "st9bad_alloc", "check failed: buffer_.isconcrete()", "raw: mmap error: 12")
# A bare segmentation fault: the signal handler Ray installs in its workers prints "*** SIGSEGV received at time=...",
# and nothing before it says why (TF's CNN at batch 584 under a 2,500 MB cap, 2026-11-27: native code that used a
# failed allocation without checking it). Under --memory-cap-mb that is likely out of memory, and named so, as
# likely; the allocator's own lines above come first when there are any (the sink keeps the first line it is told).
SEGFAULT_TEXT = ("sigsegv received",)


def allocator_abort(line: str) -> bool:
    """Whether a line of a worker's output is its allocator aborting the process (or a bare SIGSEGV: likely that)."""
    return any(m in line.lower() for m in ALLOCATOR_ABORT_TEXT + SEGFAULT_TEXT)


def abort_cause(line: str) -> str:
    """What the worker's death is taken to be, from the line it printed (allocator_abort's)."""
    seen = line.strip()[-200:]
    if any(m in line.lower() for m in ALLOCATOR_ABORT_TEXT):
        return f"out of host memory: the worker's allocator aborted the process ({seen})"
    return (
        f"likely out of host memory: the worker died of a segmentation fault with no other word, as native code "
        f"does that uses an allocation the cap refused ({seen}); run it without --memory-cap-mb to tell"
    )


def abort_failure(line: str, batch: int, cap_mb: int | None) -> CodeFailure:
    """The trial's failure when its worker died of an allocator's abort (`line`, from its output)."""
    what, _, why = abort_cause(line).partition(": ")
    return CodeFailure(
        f"{what} at batch {batch} per replica under --memory-cap-mb {cap_mb}: {why}; not restarted: "
        "it would run out again. Lower the batch (or find the largest with --batch max).",
        "out_of_memory",
        "the worker's native code",
    )


# The host's part of a traceback: frames here are not the recipe's.
_LIBRARY_ROOTS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
_RAYLAB_ROOT = os.path.dirname(os.path.abspath(__file__))


class CodeFailure(Exception):
    """The trial's own code raised: `line` says what, where and on which rank; `kind` is "error" or
    "out_of_memory"; `where` names the function. Not worth a restart."""

    def __init__(self, line: str, kind: str = "error", where: str = ""):
        super().__init__(line)
        self.line, self.kind, self.where = line, kind, where

    def __reduce__(self):
        return (CodeFailure, (self.line, self.kind, self.where))


class LostProcessError(RuntimeError):
    """raylab's own code found a process of the trial gone (a parameter server, say): a restart may help."""


class TrialCodeError(Exception):
    """The driver's side of a CodeFailure: the trial ended FAILED, unrestarted, with its one line."""

    def __init__(self, failure: CodeFailure):
        super().__init__(failure.line)
        self.kind, self.where = failure.kind, failure.where


def _names(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__]


def lost_peer(exc: BaseException) -> bool:
    """Whether `exc` is what a survivor sees when a peer process (or the Ray object it waited on) is gone: a
    lost-process error, or one raised while handling one."""
    exc = task_cause(exc)
    chain, seen = exc, 0
    while chain is not None and seen < 10:
        if isinstance(chain, LostProcessError) or any(name in LOST_PEER_TYPES for name in _names(chain)):
            return True
        chain, seen = chain.__cause__ or chain.__context__, seen + 1
    text = str(exc).lower()
    if any(m in text for m in LOST_PEER):
        return True
    paths = ("collective", *(p for fw in frameworks() for p in fw.collective_paths))
    distributed = any(m in "".join(f.filename for f in traceback.extract_tb(exc.__traceback__)) for m in paths)
    return distributed and any(m in text for m in LOST_PEER_IN_COLLECTIVE)


def task_cause(exc: BaseException) -> BaseException:
    """What a remote task or actor method raised (a RayTaskError's cause, e.g. a parameter server's), else exc."""
    seen = 0
    while "RayTaskError" in _names(exc) and getattr(exc, "cause", None) is not None and seen < 5:
        exc, seen = exc.cause, seen + 1
    return exc


def out_of_memory(exc: BaseException) -> str | None:
    """ "device" or "host" when `exc` is an allocator's failure, else None."""
    exc = task_cause(exc)
    names, text = _names(exc), str(exc).lower()
    if "OutOfMemoryError" in names:  # torch.OutOfMemoryError: CUDA's caching allocator; Ray's: its memory monitor
        device = tuple(m for fw in frameworks() for m in fw.device_errors)
        return "device" if device and type(exc).__module__.startswith(device) else "host"
    if "MemoryError" in names:  # Python's (and numpy's) allocations on the host
        return "host"
    if "ResourceExhaustedError" in names or any(m in text for m in OOM_TEXT):
        on_device = any(m in text for m in ("gpu", "tpu", "cuda", "device:xla", "hbm"))
        return "device" if on_device and "cpu" not in text.split("device:")[-1][:8] else "host"
    return None


def user_frame(tb) -> str:
    """The innermost frame of the traceback in the user's code (a recipe), else raylab's own innermost:
    "`fn` (path:line)"."""
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if _is_users(f.filename)]
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(_RAYLAB_ROOT)]
    if mine:
        f = mine[-1]
        return f"the recipe's `{f.name}` ({_short(f.filename)}:{f.lineno})"
    if ours:
        f = ours[-1]
        return f"raylab's `{f.name}` ({_short(f.filename)}:{f.lineno})"
    return "an unknown place"


def _short(path: str) -> str:
    """raylab's files from the package, a recipe's as its path (the workers' working directory is Ray's own)."""
    if os.path.abspath(path).startswith(_RAYLAB_ROOT):
        return "raylab/" + os.path.relpath(os.path.abspath(path), _RAYLAB_ROOT)
    return path


_TRACED = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def message(exc: BaseException) -> str:
    """ "Type: first line" of an exception; for TF's traced errors ("in user code: ... ValueError: text"), the
    error at the end of the message."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0] == "in user code:":
        return lines[-1][:600]
    first = lines[0][:600] if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def traced_frame(text: str) -> str | None:
    """The user's innermost frame of a TF traced error's message (its frames are the Python source traced)."""
    if not text.lstrip().startswith("in user code:"):
        return None
    frames = [(path, int(line), fn) for path, line, fn in _TRACED.findall(text)]
    mine = [f for f in frames if _is_users(f[0])]
    ours = [f for f in frames if os.path.abspath(f[0]).startswith(_RAYLAB_ROOT)]
    if mine:
        return f"the recipe's `{mine[-1][2]}` ({_short(mine[-1][0])}:{mine[-1][1]})"
    if ours:
        return f"raylab's `{ours[-1][2]}` ({_short(ours[-1][0])}:{ours[-1][1]})"
    return None


def _is_users(path: str) -> bool:
    """A frame of the user's code: not Python's or an installed library's, not raylab's, not generated."""
    return not (
        os.path.abspath(path).startswith(_LIBRARY_ROOTS + (_RAYLAB_ROOT,))
        or path.startswith("<")
        or "__autograph_generated_file" in path
    )


def classify(
    exc: BaseException, rank: int, batch: int, capped: bool = False, peaks: Callable[[str], str] | None = None
) -> CodeFailure | None:
    """A CodeFailure for what the trial's own code raised; None for a lost peer (a restart may help). capped: the
    process ran under a memory cap (--memory-cap-mb); peaks(memory) says the peaks the process reached, for an
    out-of-memory line (the worker's guard reads them: raylab/loop/guard.py)."""
    if isinstance(exc, CodeFailure):
        return exc
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    memory = out_of_memory(exc)  # before a lost peer: an allocation that failed inside a collective is memory
    if memory is None and capped and any(m in str(task_cause(exc)).lower() for m in OOM_TEXT_UNDER_CAP):
        memory = "host"
    if memory is None and lost_peer(exc):
        return None
    what, where = message(exc), user_frame(exc.__traceback__)
    traced = traced_frame(str(exc))  # TF's "in user code:" error lists the traced frames in its message
    if traced:
        where = traced
    if memory:
        peak = f" ({peaks(memory)})" if peaks else ""
        line = (
            f"out of {memory} memory at batch {batch} per replica{peak} in {where} on rank {rank}: {what}; "
            "not restarted: it would run out again. Lower the batch (or find the largest with --batch max)."
        )
        return CodeFailure(line, "out_of_memory", where)
    line = f"{what} raised in {where} on rank {rank}; not restarted: the trial's own code would raise it again."
    return CodeFailure(line, "error", where)


def code_failures(error: BaseException) -> list[CodeFailure]:
    """The CodeFailures inside a Ray Train error (a WorkerGroupError's per-rank errors, each wrapped). An
    allocation that failed outside the training function (Ray's own threads of the worker share its memory
    and its cap) is out of memory too."""
    found = []
    for rank, err in (getattr(error, "worker_failures", None) or {}).items():
        base = getattr(err, "_base_exc", err)
        if isinstance(base, CodeFailure):
            found.append(base)
        elif (
            isinstance(base, Exception) and getattr(base, "health_check_failure", None) is None and out_of_memory(base)
        ):
            memory = out_of_memory(base)
            found.append(
                CodeFailure(
                    f"out of {memory} memory on rank {rank}, outside the training step (Ray's own "
                    f"work in the worker process): {message(base)}; not restarted: it would run "
                    "out again.",
                    "out_of_memory",
                    "Ray's worker process",
                )
            )
    return found


def lost_processes(error: BaseException) -> list[str]:
    """Ranks whose process died (Ray Train's health check failed on it, or Ray says the actor is gone), as
    "rank N: Error". Ray Train hands the policy each rank's error unwrapped: what the code raised, as raised."""
    out = []
    for rank, err in (getattr(error, "worker_failures", None) or {}).items():
        inner = getattr(err, "health_check_failure", None)
        if inner is not None or any(
            n in ("RayActorError", "ActorDiedError", "WorkerCrashedError", "ActorUnavailableError") for n in _names(err)
        ):
            out.append(f"rank {rank}: {type(inner if inner is not None else err).__name__}")
    return out


def describe(error: BaseException) -> str:
    """One line for a Ray Train failure: the code failures first, else what was lost."""
    code = code_failures(error)
    if code:
        return code[0].line
    lost = lost_processes(error)
    if lost:
        return "worker process lost (" + ", ".join(lost) + ")"
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
