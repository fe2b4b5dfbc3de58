"""Where Ray's forwarded worker output goes when several trials run at once (raylab/runtime/console.py)."""

from __future__ import annotations

import io

from raylab.runtime.console import Console


def batch(pid, *lines):
    return {"pid": pid, "ip": "10.0.0.1", "lines": list(lines)}


def test_with_one_trial_a_new_process_belongs_to_it(tmp_path):
    c = Console(root=tmp_path, stream=io.StringIO())
    a = c.begin_trial("a")
    c.write_batch(batch(11, "hello from a"))
    c.end_trial(a)
    c.close()
    assert "hello from a" in a.read_text()


def test_with_two_trials_lines_wait_for_their_trial_to_claim_the_process(tmp_path):
    c = Console(root=tmp_path, stream=io.StringIO())
    a, b = c.begin_trial("a"), c.begin_trial("b")
    c.write_batch(batch(11, "early b line"))
    c.write_batch(batch(12, "early a line"))
    c.write_batch(batch(13, "nobody's line"))
    c.claim("10.0.0.1", 12, a)
    c.claim("10.0.0.1", 11, b)
    c.write_batch(batch(11, "later b line"))
    c.end_trial(a)  # one trial left: what nobody claimed goes to driver.log
    c.end_trial(b)
    c.close()
    assert "early a line" in a.read_text() and "b line" not in a.read_text()
    assert "early b line" in b.read_text() and "later b line" in b.read_text()
    assert "nobody's line" in (c.dir / "driver.log").read_text()
    assert "nobody's line" not in a.read_text() + b.read_text()


def test_the_raylets_worker_pool_notice_goes_to_the_driver_log_and_its_errors_still_print(tmp_path, capsys):
    from ray._private import worker as ray_worker

    before = ray_worker.print_to_stdstream
    c = Console(root=tmp_path, stream=io.StringIO())
    try:
        c.route_cluster_notices()
        c.route_cluster_notices()  # a second invocation in one process wraps Ray's printer once
        assert ray_worker.print_to_stdstream.raylab_original is before
        notice = "WARNING: 8 PYTHON worker processes have been started on node: n with address: a, which is 4x ..."
        ray_worker.print_to_stdstream({"lines": [notice], "pid": "raylet", "is_err": False}, ignore_prefix=False)
        ray_worker.print_to_stdstream(
            {"lines": ["a task was killed: out of memory"], "pid": "raylet", "is_err": False}, ignore_prefix=False
        )
        c.close()
    finally:
        ray_worker.print_to_stdstream = before
    out = capsys.readouterr()
    assert "worker processes have been started" not in out.out + out.err
    assert "out of memory" in out.out + out.err
    assert "worker processes have been started" in c.path("driver.log").read_text()


def test_driver_log_takes_records_then_drops_them_once_its_directory_is_gone(tmp_path):
    """The driver's library logging stays on the root logger after an in-process invocation returns; when that
    invocation's log directory is removed (a passed test's tmp dir), later logging in the process goes on."""
    import logging
    import shutil

    c = Console(root=tmp_path / "logs", stream=io.StringIO())
    c.quiet_libraries()
    logging.getLogger("raylab.test").warning("kept in driver.log")
    assert "kept in driver.log" in (c.dir / "driver.log").read_text()
    logging.getLogger().handlers[-1].close()  # as at the end of a process, or when the next invocation takes over
    shutil.rmtree(tmp_path / "logs")
    logging.getLogger("raylab.test").warning("after the directory went")  # raised FileNotFoundError before
    assert not (tmp_path / "logs").exists()


def test_a_watched_trial_is_told_its_workers_allocator_aborts_and_nothing_else(tmp_path):
    """Under --memory-cap-mb a worker's native allocator can abort the process (TF's oneDNN: an uncaught
    std::bad_alloc; XLA's CPU client: a failed check); the line reaches the trial's sink through the console."""
    from raylab.failure import abort_failure, allocator_abort

    c = Console(root=tmp_path, stream=io.StringIO())
    a, b = c.begin_trial("a"), c.begin_trial("b")
    told = []
    c.watch(a, allocator_abort, told.append)
    c.claim("10.0.0.1", 11, a)
    c.claim("10.0.0.1", 12, b)
    c.write_batch(
        batch(
            11,
            "epoch 1",
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "  what():  std::bad_alloc",
        )
    )
    c.write_batch(batch(12, "F0000 00:00 pjrt_client.cc:1] Check failed: buffer_.IsConcrete()"))  # b is not watched
    c.watch(a, None)
    c.write_batch(batch(11, "terminate called after throwing an instance of 'std::bad_alloc'"))
    c.close()
    assert told == [
        "(pid=11, ip=10.0.0.1) terminate called after throwing an instance of 'std::bad_alloc'",
        "(pid=11, ip=10.0.0.1)   what():  std::bad_alloc",
    ]  # the sink keeps the first
    assert allocator_abort("F0000 00:00 pjrt_client.cc:1] Check failed: buffer_.IsConcrete()")
    assert allocator_abort(
        "[2026-11-27 06:54:57,748 E 7427 7533] logging.cc:118: Unhandled exception: St9bad_alloc. "
        "what(): std::bad_alloc"
    )  # Ray's terminate handler, the worker of a TF probe at 640
    assert allocator_abort("[low_level_alloc.cc : 569] RAW: mmap error: 12")  # absl, then a SIGSEGV (TF at 608)
    assert not allocator_abort("epoch 1 done in 0.3s")
    line = abort_failure(told[0], 512, 2500)
    assert line.kind == "out_of_memory" and line.line.startswith(
        "out of host memory at batch 512 per replica under --memory-cap-mb 2500: the worker's allocator aborted"
    )
    # A bare SIGSEGV (Ray's signal handler, nothing before it: TF at batch 584 under 2,500 MB) is named as likely.
    segv = "(pid=11, ip=10.0.0.1) *** SIGSEGV received at time=1764230097 on cpu 1 ***"
    assert allocator_abort(segv) and not allocator_abort("received SIGTERM, stopping")
    line = abort_failure(segv, 584, 2500)
    assert (
        line.kind == "out_of_memory"
        and line.line.startswith(
            "likely out of host memory at batch 584 per replica under --memory-cap-mb 2500: the worker died of a "
            "segmentation fault"
        )
        and "SIGSEGV received" in line.line
        and "without --memory-cap-mb" in line.line
    )
