"""The portable preprocessing of a recipe's inputs, run by each worker on its numpy batches (raylab/task/common.py
prepare_inputs): `Scale` (x * scale + shift, as float32) and `Cast` (the values kept, the dtype declared: token ids
stay integer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raylab.errors import UserError


@dataclass(frozen=True)
class Scale:
    """Portable preprocessing of the inputs: x * scale + shift, as float32 (e.g. Scale(1/255) for images)."""

    scale: float = 1.0
    shift: float = 0.0

    def __call__(self, x):
        import numpy as np

        return (np.asarray(x, dtype=np.float32) * np.float32(self.scale) + np.float32(self.shift)).astype(np.float32)

    def describe(self) -> str:
        return f"x*{self.scale:.6g}+{self.shift:.6g} (float32)"


@dataclass(frozen=True)
class Cast:
    """Portable preprocessing that keeps the inputs' values and declares their dtype: `Cast("int32")` for token ids
    an embedding looks up (integer end to end: the arrays travel as they are, uint8 bytes included, and each worker
    casts its batches), or `Cast({"ids": "int32"})` for named inputs, the others float32 as without preprocessing."""

    dtype: Any = "int32"  # a numpy integer or float dtype's name, or {input name: dtype name}

    def __post_init__(self):
        import numpy as np

        for name in self.dtype.values() if isinstance(self.dtype, dict) else [self.dtype]:
            try:
                kind = np.dtype(name).kind
            except TypeError:
                kind = None
            if kind not in ("i", "u", "f"):
                raise UserError(f"Cast({name!r}): give an integer or float dtype's name, e.g. Cast('int32').")

    def dtype_of(self, name: str | None) -> str:
        """The dtype the input `name` (None: the one input) is cast to."""
        if isinstance(self.dtype, dict):
            return self.dtype.get(name, "float32")
        return self.dtype

    def __call__(self, x):
        import numpy as np

        if isinstance(x, dict):
            return {k: np.asarray(a).astype(self.dtype_of(k), copy=False) for k, a in x.items()}
        return np.asarray(x).astype(self.dtype_of(None), copy=False)

    def check(self, dtypes: dict) -> None:
        """UserError where an input is not what the cast keeps: float values cast to integers would be cut, and a
        named input the data does not have."""
        import numpy as np

        named = set(self.dtype) if isinstance(self.dtype, dict) else set()
        if named - set(dtypes):
            raise UserError(f"Cast names inputs {sorted(named - set(dtypes))}, which the data's inputs do not have.")
        for name, dtype in dtypes.items():
            to = self.dtype_of(name)
            if np.dtype(dtype).kind == "f" and np.dtype(to).kind in "iu":
                shown = f"input '{name}'" if name else "the inputs"
                raise UserError(
                    f"{shown} are {dtype}, and Cast would cut them to {to}; give integer arrays (token ids) or "
                    "preprocess float inputs without Cast."
                )

    def describe(self) -> str:
        if isinstance(self.dtype, dict):
            return "cast: " + ", ".join(f"{k} {v}" for k, v in self.dtype.items()) + ", the rest float32"
        return f"cast to {self.dtype}"
