"""raylab: the same training job across frameworks, strategies and hardware, on Ray, in MLflow."""

from raylab.driver.stepbench import StepBench
from raylab.recipe import Recipe
from raylab.task import Metric, Native, Scale, Schedule, optimizer


def main(recipe) -> None:
    """A recipe file's `if __name__ == "__main__":` body (a training Recipe or a StepBench)."""
    import sys

    from raylab.cli import bench_main, recipe_main

    sys.exit(bench_main(recipe) if isinstance(recipe, StepBench) else recipe_main(recipe))


__all__ = ["Metric", "Native", "Recipe", "Scale", "Schedule", "StepBench", "main", "optimizer"]
