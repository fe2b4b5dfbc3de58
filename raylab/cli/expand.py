"""The command line's values parsed and each checked on its own: --trials (each kind known and its framework
installed), --workers and --batch counts, --compile and --compile-mode, --device and --accelerator-type (the
hardware axis). Every mistake is a UserError before Ray starts; what the trials run with, these values together, is
resolved in raylab/settings/resolve.py (the trial matrix, `expand_trials`)."""

from __future__ import annotations

import re

from raylab.errors import UserError
from raylab.registry import framework_of, kinds
from raylab.settings.resolve import split_trial


def parse_trials(text: str) -> list[str]:
    """framework:strategy items, each optionally ' xN' (its own worker count, instead of --workers)."""
    items = [" ".join(t.split()) for t in text.split(",") if t.strip()]
    if not items:
        raise UserError("--trials is empty; give a comma-separated list such as tf:mwms,torch:ddp.")
    for item in items:
        if split_trial(item)[0] not in kinds():
            known = ", ".join(sorted(kinds()))
            raise UserError(f"unknown trial '{item}'; choose from {known} (framework:strategy, optionally ' xN').")
    check_installed(items)
    return list(dict.fromkeys(items))


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def check_installed(items: list[str]) -> None:
    """UserError naming the extra to install when a trial's framework is not in this Python."""
    for item in items:
        fw = framework_of(split_trial(item)[0])
        if not installed(fw.package):
            raise UserError(
                f"trial '{item}' needs {fw.title}, which is not installed in this Python; install it with "
                f"`scripts/setup.sh {fw.extra}` (or `pip install -e '.[{fw.extra}]'`)."
            )


def parse_counts(text: str, flag: str, example: str) -> list[int]:
    """A comma-separated list of positive integers (--workers, --batch), deduplicated in order."""
    try:
        counts = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise UserError(f"{flag} '{text}' is not a list of integers; use e.g. {flag} {example}.") from None
    if not counts or min(counts) < 1:
        raise UserError(f"{flag} '{text}' must list counts of at least 1, e.g. {flag} {example}.")
    return list(dict.fromkeys(counts))


def parse_workers(text: str) -> list[int]:
    return parse_counts(text, "--workers", "1,2")


DEVICES = ("cpu", "gpu")
ACCELERATOR_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def parse_hardware(devices: str, types: str | None = None) -> list[str]:
    """--device (cpu, gpu, a list, DEVICE:TYPE items) x --accelerator-type: the hardware items the trials run on,
    in order ("cpu", "gpu", "cpu:T4", "gpu:H100"); a UserError for a device or type raylab cannot ask Ray for."""
    items = [" ".join(d.split()) for d in devices.split(",") if d.strip()]
    named = [t.strip() for t in (types or "").split(",") if t.strip()]
    example = "e.g. --device cpu,gpu, or --device gpu:H100 for nodes of a Ray accelerator type"
    if not items:
        raise UserError(f"--device '{devices}' is empty; give cpu, gpu or a list, {example}.")
    if types is not None and not named:
        raise UserError(f"--accelerator-type '{types}' is empty; give Ray accelerator types such as H100,A100-80G.")
    if named and any(":" in i for i in items):
        raise UserError("give accelerator types either in --device (gpu:H100) or in --accelerator-type, not both.")
    out = []
    for item in items:
        device, _, kind = item.partition(":")
        if device not in DEVICES:
            raise UserError(
                f"--device '{item}': {device or 'nothing'} is not a device raylab runs on; choose cpu or "
                f"gpu, {example}."
            )
        for t in [kind] if ":" in item else named or [""]:
            if ":" in item and not t or t and not ACCELERATOR_TYPE.match(t):
                raise UserError(
                    f"accelerator type '{t}' is not one Ray names (letters, digits, '-', '_', '.'); "
                    "give it as Ray's accelerator_type resource has it, e.g. H100, A100-80G, TPU-V4."
                )
            out.append(f"{device}:{t}" if t else device)
    return list(dict.fromkeys(out))


def parse_compile(values: str, modes: str) -> list[str]:
    """--compile best, or off,on x --compile-mode: the compile axis ("off", "on", "on:max-autotune", ...), in order;
    ["best"]: each kind's execution measured before the trials (raylab/probes/race.py)."""
    from raylab.registry import COMPILE_MODES

    asked = [v.strip() for v in values.split(",") if v.strip()]
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    if "best" in asked and (len(asked) > 1 or modes != "default"):
        raise UserError(
            f"--compile '{values}' --compile-mode '{modes}': best chooses each framework's execution "
            "itself; give --compile best alone, or force executions with --compile off, on or off,on."
        )
    if asked == ["best"]:
        return asked
    bad = [v for v in asked if v not in ("off", "on")] + [m for m in chosen if m not in COMPILE_MODES]
    if bad or not asked or not chosen:
        raise UserError(
            f"--compile '{values}' --compile-mode '{modes}': give --compile best, off, on or off,on and "
            f"--compile-mode one or more of {', '.join(COMPILE_MODES)}."
        )
    if "on" not in asked and modes != "default":
        raise UserError("--compile-mode applies to compiled trials; add --compile on (or off,on).")
    return list(
        dict.fromkeys(
            v if v == "off" else ("on" if m == "default" else f"on:{m}")
            for v in asked
            for m in (chosen if v == "on" else ["default"])
        )
    )


def check_positive(name: str, value: int) -> int:
    if value < 1:
        raise UserError(f"--{name} is {value}; it must be at least 1.")
    return value
