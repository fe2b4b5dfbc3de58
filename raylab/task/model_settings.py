"""The settings of a built model that its parameter count does not show, read from the model each framework built,
and compared across the trials of a comparison (the parity report's "model settings" line, docs/comparing.md).

Each framework's folder reads its model into three lists (`raylab/frameworks/<name>/layers.py`):

- normalization layers: (name, kind, epsilon, decay), the kind one of LayerNorm, BatchNorm, GroupNorm, RMSNorm and
  the decay a batch norm's running average's (new = decay * old + (1 - decay) * batch: 0.99 is Keras's and Flax's
  momentum 0.99, torch's momentum 0.1 is a decay of 0.9; None where the layer has none);
- dropout layers: (name, rate);
- parameters as initialized: (name, array, fan in, fan out), the fans None for a vector.

`summary()` turns them into the trial's `model_settings` tag (JSON): normalization and dropout grouped by their
values, and each parameter's initial spread (its standard deviation, and the shape of its distribution: uniform,
truncated normal or normal, told apart by the kurtosis on 1,000 values or more; zeros and ones by value), named by
the initializer family it matches (LeCun, Glorot, He, torch's default) where one does. `compare()` lines trials up
where their structures do: layers of one kind in the same number, parameters of the same shape in the same number.
What does not line up is said and left to the parameter count.

Activations are read apart, from a trace of one forward pass (a Flax module and a torch forward call them as
functions, which the built model does not show): each framework's `layers.activations` counts the calls by kind
(relu, gelu (exact), gelu (tanh), silu, ...) into the trial's `activations` tag, and `compare()` calls a difference
in kind or count a mismatch. What is not read: dropout called as a function in a forward pass.
"""

from __future__ import annotations

import json
import math

import numpy as np

FAMILIES = {
    "LeCun": (1.0, "in"),
    "Glorot": (1.0, "avg"),
    "He": (math.sqrt(2.0), "in"),
    "torch default": (1 / math.sqrt(3.0), "in"),
}  # std x sqrt(fan): the family's value
CLOSE = 0.08  # a family matches within 8% of its spread
STD_TOLERANCE = 1.10  # two initial spreads differ when one is over 1.1x the other (and sampling: _unlike)
KURTOSIS_FROM = 1000  # values a parameter needs for its distribution's shape to be told
SAMPLE = 100_000  # values of a parameter read at most (evenly spaced)
TAG_LIMIT = 4900  # the tracker keeps a tag's first 5,000 characters (record/tracking.py MAX_TAG)


def distribution(a: np.ndarray) -> str:
    """zeros, ones, uniform, truncated normal, normal; "?" when too few values tell them apart."""
    if not a.any():
        return "zeros"
    if np.all(a == 1):
        return "ones"
    centred = a - a.mean()
    var = float(np.mean(centred**2))
    if var == 0:
        return "constant"
    if a.size < KURTOSIS_FROM:
        return "?"
    kurtosis = float(np.mean(centred**4)) / var**2  # uniform 1.8, normal cut at 2 sigma 2.4, normal 3
    return "uniform" if kurtosis < 2.1 else "truncated normal" if kurtosis < 2.75 else "normal"


def family(std: float, fan_in: int | None, fan_out: int | None) -> str:
    """The initializer families whose spread this one's matches ("LeCun/Glorot" on a square matrix), or ""."""
    if not fan_in or not fan_out:
        return ""
    fans = {"in": fan_in, "avg": (fan_in + fan_out) / 2}
    return "/".join(
        name for name, (value, fan) in FAMILIES.items() if abs(std * math.sqrt(fans[fan]) / value - 1) <= CLOSE
    )


def summary(norms: list, dropouts: list, weights: list) -> str:
    """The `model_settings` tag: {"norm": [[kind, eps, decay, count, first name]], "dropout": [[rate, count, first
    name]], "init": {shape: [[std, distribution, family, name, values read]]}}, shapes as "fan x fan" (the smaller
    first: a transposed convolution's layout swaps them) or the length of a vector."""
    grouped: dict = {}
    for name, kind, eps, decay in norms:
        key = (kind, _round(eps), None if decay is None else _round(decay))
        grouped.setdefault(key, [0, name])[0] += 1
    dropped: dict = {}
    for name, rate in dropouts:
        dropped.setdefault(_round(rate), [0, name])[0] += 1
    init: dict = {}
    for name, a, fan_in, fan_out in weights:
        a = np.asarray(a).ravel()
        a = a[:: max(1, a.size // SAMPLE)].astype(np.float64)  # a large tensor's spread from an even sample
        std = float(a.std())
        key = "x".join(map(str, sorted((fan_in, fan_out)))) if fan_in else str(a.size)
        init.setdefault(key, []).append([_round(std), distribution(a), family(std, fan_in, fan_out), name, a.size])
    out = {
        "norm": [[*k, *v] for k, v in grouped.items()],
        "dropout": [[k, *v] for k, v in dropped.items()],
        "init": init,
    }
    text = json.dumps(out, separators=(",", ":"))
    for entries in init.values():  # over the tag limit: each shape's first parameter named, then no spreads
        for e in entries[1:]:
            e[3] = ""
    if len(text) > TAG_LIMIT:
        text = json.dumps(out, separators=(",", ":"))
    if len(text) > TAG_LIMIT:
        out["init"], out["init_omitted"] = {}, sum(map(len, init.values()))
        text = json.dumps(out, separators=(",", ":"))
    return text


def fans_last(shape: tuple) -> tuple[int | None, int | None]:
    """(fan in, fan out) of a kernel laid out (kernel..., in, out), as Keras and Flax lay them; (None, None) for a
    vector."""
    if len(shape) < 2:
        return None, None
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def compare(settings: dict[str, str], activations: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(report lines, differences) over {trial: its model_settings tag} and {trial: its activations tag}: each
    difference names the layer (or parameter, or activation) and each trial's value."""
    read, unread = {}, []
    for t, s in settings.items():
        try:
            read[t] = json.loads(s) if s else None
        except ValueError:  # cut short (a tag over the tracker's limit): not compared, and said
            unread.append(t)
    read = {t: s for t, s in read.items() if s}
    if len(read) < 2:
        return ([f"    model settings not read: {', '.join(unread)}"] if unread and read else []), []
    lines, differences, apart = [], [], []
    if unread:
        apart.append(f"{', '.join(unread)} (its record was cut short)")
    if any(s.get("init_omitted") for s in read.values()):  # too many to keep: none compared
        apart.append("initial parameters (too many to record)")
        read = {t: {**s, "init": {}} for t, s in read.items()}
    _norms(read, differences, apart)
    _dropouts(read, differences, apart)
    _inits(read, differences, apart)
    acts = _activations(activations or {}, read, differences, apart)
    if differences:
        lines += [f"  ! model settings: {d}" for d in differences]
        lines.append('    (set the same value in each framework\'s model: docs/comparing.md, "Model settings")')
    else:
        counts = next(iter(read.values()))
        lines.append(
            f"    model settings: alike ({len(counts['norm'])} normalization setting(s), "
            f"{len(counts['dropout'])} dropout rate(s), {sum(map(len, counts['init'].values()))} "
            f"initial parameter spreads{acts} compared)"
        )
    if apart:
        lines.append(f"    model settings not lined up one to one: {'; '.join(apart)}")
    return lines, differences


def _norms(read: dict, differences: list, apart: list) -> None:
    for kind in sorted({g[0] for s in read.values() for g in s["norm"]}):
        per = {t: sorted((tuple(g[1:]) for g in s["norm"] if g[0] == kind), key=repr) for t, s in read.items()}
        shown = [
            (
                t,
                " ".join(
                    f"{eps:g}" + ("" if decay is None else f"/{decay:g}") + f" ({name})" for eps, decay, _, name in gs
                ),
            )
            for t, gs in per.items()
        ]
        if _differ({t: [(eps, decay, n) for eps, decay, n, _ in gs] for t, gs in per.items()}, kind, apart):
            decays = any(decay is not None for gs in per.values() for _, decay, _, _ in gs)
            differences.append(
                f"{kind} epsilon{'/decay' if decays else ''}: " + ", ".join(f"{t} {v}" for t, v in shown)
            )


def _dropouts(read: dict, differences: list, apart: list) -> None:
    per = {t: sorted(tuple(g) for g in s["dropout"]) for t, s in read.items()}
    if _differ({t: [(rate, n) for rate, n, _ in gs] for t, gs in per.items()}, "dropout", apart):
        differences.append(
            "dropout rate: "
            + ", ".join(f"{t} " + " ".join(f"{r:g} ({name})" for r, _, name in v) for t, v in per.items())
        )


def _differ(values: dict, what: str, apart: list) -> bool:
    """Whether the trials' (value..., count) groups differ; where the layers' counts differ (a module called twice,
    or another structure), the values are compared as sets."""
    counts = {t: sum(v[-1] for v in vs) for t, vs in values.items()}
    if len(set(counts.values())) == 1:
        return len({json.dumps(vs) for vs in values.values()}) > 1
    listed = ", ".join(f"{t} {n}" for t, n in counts.items())
    if 0 in counts.values():  # none in a model: called as a function (dropout in a forward pass), or not there
        apart.append(f"{what} layers {listed} (not compared: a model without them may call them as functions)")
        return False
    apart.append(f"{what} layers {listed} (values compared as sets)")
    return len({json.dumps(sorted({v[:-1] for v in vs}, key=repr)) for vs in values.values()}) > 1


def _inits(read: dict, differences: list, apart: list) -> None:
    for shape in sorted({k for s in read.values() for k in s["init"]}):
        per = {t: sorted(s["init"].get(shape, []), key=lambda e: (e[0], e[1])) for t, s in read.items()}
        if len({len(v) for v in per.values()}) > 1:
            apart.append(f"{shape} parameters " + ", ".join(f"{t} {len(v)}" for t, v in per.items()))
            continue
        first, *others = per.items()
        for t, entries in others:
            for a, b in zip(first[1], entries):
                if _unlike(a, b):
                    differences.append(f"initial {shape} parameter: {first[0]} {_shown(a)}, {t} {_shown(b)}")
                    break


def _unlike(a: list, b: list) -> bool:
    """Unlike beyond what sampling explains: the spread of n values drawn alike differs by about 0.7/sqrt(n) of
    itself (a normal's; a uniform's by less), so three of those are allowed on top of STD_TOLERANCE."""
    (sa, da, _, _, na), (sb, db, _, _, nb) = a, b
    if {da, db} & {"zeros", "ones", "constant"}:
        return da != db
    if "?" not in (da, db) and da != db:
        return True
    return max(sa, sb) > (STD_TOLERANCE + 3 * 0.71 / math.sqrt(min(na, nb))) * min(sa, sb)


def _shown(entry: list) -> str:
    std, dist, fam, name, _ = entry
    if dist in ("zeros", "ones"):
        return f"{dist} ({name})"
    what = " ".join(w for w in (fam, dist if dist != "?" else "") if w)
    return f"{what + ', ' if what else ''}std {std:g} ({name})"


def _activations(tags: dict, read: dict, differences: list, apart: list) -> str:
    """Each trial's activation calls by kind, compared where two or more were read; the alike line's words."""
    found = {}
    for t in read:
        try:
            found[t] = json.loads(tags.get(t) or "")
        except ValueError:  # "not read: ...", "not counted: ...", or a trial from before the tag
            continue
    if len(found) < 2:
        if found or any(tags.get(t) for t in read):
            apart.append("activations (read in fewer than two trials: a streamed trial's are not read)")
        return ""
    if len({json.dumps(v, sort_keys=True) for v in found.values()}) > 1:
        shown = ", ".join(
            f"{t} " + (", ".join(f"{k} x{n}" for k, n in sorted(v.items())) or "none") for t, v in found.items()
        )
        differences.append(f"activations: {shown}")
    return f" and {sum(next(iter(found.values())).values())} activation call(s)"
