"""What a kept --compile best answer holds for: the whole key of a race (`cache_key`), the host's identity
(raylab/probes/host.py), the cluster, the trial's settings, the model's source (raylab/probes/fingerprint.py) and the
task."""

from __future__ import annotations

import hashlib
import json

from raylab.probes.fingerprint import model_source


def cache_key(recipe, cfg, key: tuple, labels: list[str], x) -> str:
    """What must be equal for a kept answer to hold: the host's identity (raylab/probes/host.py: raylab, the
    framework and its compilers' and runtimes' versions), the cluster's hosts and accelerator types, the device,
    threads, the model's source (the builder's and the user's modules it imports), the task and the shapes."""
    import ray

    from raylab.data import tree_map
    from raylab.probes.host import identity
    from raylab.registry import framework

    name, batch, precision, hardware = key
    fw = framework(name)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    hosts = sorted({n.get("NodeManagerHostname", "") for n in alive})
    accelerators = sorted({r for n in alive for r in n.get("Resources", {}) if r.startswith("accelerator_type:")})
    shapes = str(tree_map(lambda a: (tuple(a.shape[1:]), str(a.dtype)), x))
    return hashlib.sha256(
        json.dumps(
            [
                identity([fw]),
                hosts,
                accelerators,
                hardware or cfg.device,
                cfg.threads,
                name,
                batch,
                precision,
                labels,
                shapes,
                model_source(recipe.models.get(fw.models)),
                repr(recipe.loss),
                repr(recipe.optimizer),
                repr(recipe.schedule),
                repr(recipe.metrics),
                repr(recipe.preprocess),
            ],
            default=str,
        ).encode()
    ).hexdigest()[:24]
