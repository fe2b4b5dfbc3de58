"""raylab: the same training job across frameworks, strategies and hardware, on Ray, in MLflow."""

from raylab.recipe import Recipe


def main(recipe) -> None:
    """A recipe file's `if __name__ == "__main__":` body."""
    import sys

    from raylab.cli import recipe_main

    sys.exit(recipe_main(recipe))


__all__ = ["Recipe", "main"]
