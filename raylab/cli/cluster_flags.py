"""A recipe's command line, continued: where its trials run on the cluster (TPU slices, storage, how trials share
the nodes and CPUs) and what happens when they fail (restarts, checkpoints, --resume)."""

from __future__ import annotations

from raylab.cli import flags


def add_placement(g) -> None:
    """TPU slices and checkpoint storage; then how trials share the cluster (add_sharing)."""
    g.add_argument(
        "--tpu-fallback",
        choices=["error", "mirrored"],
        default="error",
        help="tf:tpu where no TPU is found: 'error' stops before training (default); 'mirrored' runs "
        "MirroredStrategy instead and records requested_strategy=tpu, actual_strategy=mirrored",
    )
    g.add_argument(
        "--tpu-type",
        default=None,
        metavar="TYPE",
        help="TPU slice type for TPU trials, e.g. v4-8: tf:tpu asks Ray for TPU-TYPE-head",
    )
    g.add_argument(
        "--tpu-topology",
        default=None,
        metavar="AxBxC",
        help="the slice's chip topology, e.g. 2x2x1: with --tpu-type, Ray reserves the whole slice for "
        "multi-worker TPU trials (xla:ddp with PJRT_DEVICE=TPU)",
    )
    g.add_argument(
        "--storage",
        default=None,
        metavar="PATH|URI",
        help="where Ray Train keeps each trial's checkpoints: a directory every node can reach, or a URI "
        "Ray Train accepts such as gs://bucket/path (default: ~/ray_results)",
    )
    add_sharing(g)


def add_sharing(g) -> None:
    """How trials share the cluster and its CPUs, and what each may use."""
    g.add_argument(
        "--concurrency",
        type=flags.concurrency,
        default=1,
        metavar="N|auto",
        help="run up to N trials at the same time, each on whole nodes no other running trial uses "
        "(its workers are placed only there, so trials never share cores); 'auto': as many as the "
        "cluster's nodes allow. Each trial records the nodes it held and the trials it overlapped "
        "with. On a single-node cluster trials still run one at a time (default: 1)",
    )
    g.add_argument(
        "--share-nodes",
        action="store_true",
        help="on a cluster other jobs use too (--address, ray job submit), run beside them: by default an "
        "invocation holds the cluster's nodes while it times anything, and a second raylab job waits "
        "for it (saying for whom), so no figure shares its cores with another job's. Recorded as the "
        "tag node_hold; what ran beside each trial is recorded either way (beside_cores)",
    )
    g.add_argument(
        "--pin-cpus",
        action="store_true",
        help="hold each trial's training processes to --threads CPUs of their own and the cluster's other "
        "processes (Ray's, raylab's, the driver) to the CPUs left, while it trains: on a small "
        "machine they otherwise run now and then on the step's CPU. Only where raylab started the "
        "cluster, on one node, with a CPU to spare; recorded as the tag cpu_pinning (what was done, "
        "or why not). Linux",
    )
    g.add_argument(
        "--fresh-processes",
        action="store_true",
        help="start every trial in worker processes of its own. By default, trials that can share processes "
        "(the same framework, workers, threads, device and resources; every repeat, batch size, --set "
        "value and --batch max probe of a kind) run one after another in a warm worker group, each "
        "still its own MLflow run, recorded with start=cold|warm and group_index",
    )
    g.add_argument(
        "--profile",
        action="store_true",
        help="profile one steady window of rank 0 in every trial with the framework's own profiler "
        "(torch.profiler, tf.profiler, jax.profiler, torch_xla's profiler and metrics report) and log "
        "its trace and "
        "profile_summary.txt (where the window's time went, the top operations) as artifacts under "
        "profile/; the trial is tagged profiled, since that window runs slower (default: off, and "
        "then nothing is profiled)",
    )
    g.add_argument(
        "--memory-cap-mb",
        type=flags.integer,
        default=None,
        metavar="MB",
        help="cap every training worker process's memory at MB (its data segment, RLIMIT_DATA, what it "
        "holds already included): an allocation beyond it fails in the allocator as on a smaller "
        "machine, and the trial ends FAILED, out of host memory. Recorded as memory_cap_mb "
        "(default: no cap)",
    )


def add_fault_tolerance(g) -> None:
    g.add_argument(
        "--max-failures",
        type=flags.integer,
        default=1,
        metavar="N",
        help="worker-group restarts per trial after a lost worker process or node: Ray Train restarts the "
        "trial from its last checkpoint (restarts, recovery_s and lost_s are recorded). An error the "
        "trial's own code raises (the recipe's or raylab's, out of memory included) ends it FAILED at "
        "once, unrestarted: it would raise again. 0 = fail at once "
        "and take no checkpoints; -1 = no limit (default: %(default)s)",
    )
    g.add_argument(
        "--checkpoint-every",
        type=float,
        default=10.0,
        metavar="MIN",
        help="besides every epoch's end, checkpoint inside an epoch every MIN minutes of training "
        "(0 = at epoch ends only; default: %(default)s)",
    )
    g.add_argument(
        "--keep-checkpoints",
        choices=["none", "last", "all"],
        default="none",
        help="which checkpoints stay in --storage after their trial: 'none' removes a finished trial's "
        "(an unfinished one's stay, for --resume), 'last' keeps each trial's last, 'all' every one "
        "taken. The end of the run says where they are and their size; recorded as keep_checkpoints "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--resume",
        default=None,
        metavar="RUN_ID|last",
        help="go on with an interrupted invocation (driver crash, `ray job stop`, lost head node): run "
        "the trials of that parent run that did not finish, under the same parent, each from its "
        "last checkpoint; finished trials are not run again. The rest of the command is the "
        "recorded one ('last': the experiment's latest invocation)",
    )
