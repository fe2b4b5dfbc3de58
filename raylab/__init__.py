"""raylab: the same training job across frameworks, strategies and hardware, on Ray, in MLflow.

The public API is what each public module's `__all__` names (listed in docs/api.md): this module's, and
raylab.data, raylab.data.stream, raylab.data.scenes and raylab.models'.
"""

from raylab import _moved
from raylab.task.recipe import BenchContext, Recipe, StepBench
from raylab.task import Cast, Metric, Native, Scale, Schedule, optimizer

__version__ = "0.2.0"

_moved.install()  # old import paths (raylab.stream, raylab.scenes, raylab.backends.*, ...) warn and keep working


def main(recipe) -> None:
    """A recipe file's `if __name__ == "__main__":` body (a training Recipe or a StepBench)."""
    import sys

    from raylab.cli import bench_main, recipe_main

    sys.exit(bench_main(recipe) if isinstance(recipe, StepBench) else recipe_main(recipe))


__all__ = ["BenchContext", "Cast", "Metric", "Native", "Recipe", "Scale", "Schedule", "StepBench", "main", "optimizer"]
