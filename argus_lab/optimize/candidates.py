"""Candidates, the space they come from, and the measurement budget: plain values with a JSON form.

A :class:`Candidate` is one variant of a region: a Triton config, a code variant, a launch setting, each a named
parameter.  A :class:`Space` lists the values each parameter may take (its *axes*), which parameter plays which
*role* for the evidence-guided rules (``tile_m``, ``stages``, ...), and a static validity check of the target (e.g.
a block larger than the problem, or an estimated shared memory over the SM's limit): the searches only ever ask
for valid candidates.  A :class:`Budget` bounds how many candidates a session or a search measures, and for how
long.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from argus_lab.errors import OptimizeError

Param = int | float | str | bool
"""A parameter value: JSON scalars only, so that a candidate travels as JSON."""

ROLES: tuple[str, ...] = (
    "tile_m",
    "tile_n",
    "tile_k",
    "stages",
    "warps",
    "ctas_per_sm",
    "order",
    "group",
    "split",
    "async_copy",
    "tail_split",
)
"""What a parameter means to the evidence-guided rules (docs/optimize.md, "The rule set")."""


@dataclass(frozen=True)
class Candidate:
    """One variant of a region: named parameters (JSON scalars), e.g. ``{"block_m": 128, "num_stages": 3}``.

    Two candidates with the same parameters are the same candidate, whatever their ``label``.
    """

    params: tuple[tuple[str, Param], ...]
    label: str = field(default="", compare=False)

    @classmethod
    def of(cls, params: object, label: str = "") -> Candidate:
        """A candidate from a mapping of parameters (sorted by name), or the candidate itself.

        Anything else (JSON from an agent may be anything) is refused with an :class:`OptimizeError`.
        """
        if isinstance(params, Candidate):
            return params
        if not isinstance(params, Mapping):
            msg = f"a candidate is a mapping of parameter names to values, e.g. {{'block_m': 128}}; got {params!r}"
            raise OptimizeError(msg)
        items = []
        for name, value in sorted(params.items()):
            if not isinstance(name, str) or not name:
                msg = f"parameter names are non-empty strings; got {name!r}"
                raise OptimizeError(msg)
            if not isinstance(value, int | float | str | bool) or (
                isinstance(value, float) and not math.isfinite(value)
            ):
                msg = f"parameter {name!r} has value {value!r}; values are JSON scalars (int, finite float, str, bool)"
                raise OptimizeError(msg)
            items.append((name, value))
        return cls(tuple(items), label)

    def as_dict(self) -> dict[str, Param]:
        """The parameters as a dict."""
        return dict(self.params)

    def get(self, name: str, default: Param | None = None) -> Param | None:
        """One parameter's value."""
        return self.as_dict().get(name, default)

    def with_params(self, **changes: Param) -> Candidate:
        """A copy with some parameters changed."""
        return Candidate.of({**self.as_dict(), **changes})

    @property
    def key(self) -> str:
        """The canonical text of the parameters, e.g. ``block_m=128,num_stages=3`` (the run's variant in the store)."""
        return ",".join(f"{k}={json.dumps(v)}" if isinstance(v, str) else f"{k}={_scalar(v)}" for k, v in self.params)

    def to_dict(self) -> dict[str, Any]:
        """``{"key", "params", "label"}``."""
        return {"key": self.key, "params": self.as_dict(), "label": self.label}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        """The inverse of :meth:`to_dict`; also takes a bare parameter mapping."""
        if "params" in data:
            return cls.of(data["params"], str(data.get("label", "")))
        return cls.of(data)

    def __str__(self) -> str:
        return self.key


def _scalar(v: Param) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


Constraint = Callable[[Candidate], str | None]
"""A target's static check of a candidate: ``None`` when valid, else the reason it is not."""


def _always_valid(_: Candidate) -> str | None:
    return None


@dataclass(frozen=True)
class Space:
    """The values each parameter may take (ordered: the rules step along an axis), roles, and a validity check."""

    axes: tuple[tuple[str, tuple[Param, ...]], ...]
    roles: tuple[tuple[str, str], ...] = ()
    """``(role, parameter)`` pairs, e.g. ``("tile_m", "block_m")`` (roles: :data:`ROLES`)."""
    constraint: Constraint = field(default=_always_valid, compare=False, repr=False)
    note: str = ""
    """What the constraint checks, in words (it is code, so the JSON form carries this sentence)."""

    @classmethod
    def of(
        cls,
        axes: Mapping[str, tuple[Param, ...] | list[Param]],
        roles: Mapping[str, str] | None = None,
        constraint: Constraint | None = None,
        note: str = "",
    ) -> Space:
        """A space from ``{parameter: values}`` and ``{role: parameter}``."""
        ax = tuple((k, tuple(v)) for k, v in axes.items())
        for name, values in ax:
            if not values:
                msg = f"axis {name!r} has no values; give at least one"
                raise OptimizeError(msg)
        rl = tuple((roles or {}).items())
        for role, param in rl:
            if role not in ROLES:
                msg = f"unknown role {role!r}; roles are {', '.join(ROLES)}"
                raise OptimizeError(msg)
            if param not in dict(ax):
                msg = f"role {role!r} names parameter {param!r}, which is not an axis ({', '.join(dict(ax))})"
                raise OptimizeError(msg)
        return cls(ax, rl, constraint or _always_valid, note)

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names."""
        return tuple(n for n, _ in self.axes)

    def values(self, name: str) -> tuple[Param, ...]:
        """The values of one axis."""
        return dict(self.axes)[name]

    def param(self, role: str) -> str | None:
        """The parameter that plays ``role`` (``None`` when the space has none)."""
        return dict(self.roles).get(role)

    def size(self) -> int:
        """Candidates in the product of the axes (valid or not)."""
        return math.prod(len(v) for _, v in self.axes)

    def check(self, candidate: Candidate) -> None:
        """Raise :class:`OptimizeError` when a parameter is missing, unknown, or off its axis."""
        have = candidate.as_dict()
        unknown = sorted(set(have) - set(self.names))
        missing = [n for n in self.names if n not in have]
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f"unknown parameter(s) {', '.join(unknown)}")
            if missing:
                parts.append(f"missing parameter(s) {', '.join(missing)}")
            msg = f"candidate {candidate.key!r}: {'; '.join(parts)}; the space's parameters are {', '.join(self.names)}"
            raise OptimizeError(msg)
        for name, values in self.axes:
            if have[name] not in values:
                msg = (
                    f"candidate {candidate.key!r}: {name}={have[name]!r} is not in the space; "
                    f"{name} takes {', '.join(map(repr, values))}"
                )
                raise OptimizeError(msg)

    def invalid_reason(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` is not valid (off the axes or refused by the target's check), or ``None``."""
        try:
            self.check(candidate)
        except OptimizeError as exc:
            return str(exc)
        return self.constraint(candidate)

    def __iter__(self) -> Iterator[Candidate]:
        names = self.names
        for combo in itertools.product(*(v for _, v in self.axes)):
            yield Candidate.of(dict(zip(names, combo, strict=True)))

    def valid(self) -> list[Candidate]:
        """Every valid candidate, in axis order."""
        return [c for c in self if self.constraint(c) is None]

    def step(self, candidate: Candidate, name: str, direction: int) -> Candidate | None:
        """The candidate with parameter ``name`` moved ``direction`` places along its axis (``None`` off the end)."""
        values = self.values(name)
        current = candidate.get(name)
        if current not in values:
            return None
        i = values.index(current) + direction
        if not 0 <= i < len(values):
            return None
        return candidate.with_params(**{name: values[i]})

    def set(self, candidate: Candidate, name: str, value: Param) -> Candidate | None:
        """The candidate with ``name`` set to ``value`` (``None`` when the value is not on the axis)."""
        if value not in self.values(name):
            return None
        return candidate.with_params(**{name: value})

    def neighbors(self, candidate: Candidate) -> list[Candidate]:
        """Every candidate one step away along one axis (valid ones only), axis by axis."""
        out = []
        for name in self.names:
            for d in (-1, 1):
                c = self.step(candidate, name, d)
                if c is not None and self.constraint(c) is None:
                    out.append(c)
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"axes", "roles", "size", "note"}``."""
        return {
            "axes": {n: list(v) for n, v in self.axes},
            "roles": dict(self.roles),
            "size": self.size(),
            "note": self.note,
        }


@dataclass(frozen=True)
class Budget:
    """How much a session or a search may measure: candidates, seconds of wall time, or both (``None``: no bound).

    The seconds run from the first candidate asked for; a candidate started within them is finished.

    Every candidate asked for counts, whatever its outcome (a compile failure, a wrong result); asking again for
    a candidate already measured answers from the session's record and does not count.
    """

    candidates: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.candidates is not None and (
            isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 1
        ):
            msg = f"Budget(candidates=...) is a number of measured candidates >= 1, got {self.candidates!r}"
            raise OptimizeError(msg)
        if self.seconds is not None and (
            isinstance(self.seconds, bool) or not isinstance(self.seconds, int | float) or not self.seconds > 0
        ):
            msg = f"Budget(seconds=...) is a wall-clock time in seconds > 0, got {self.seconds!r}"
            raise OptimizeError(msg)

    @property
    def bounded(self) -> bool:
        """Whether anything bounds it."""
        return self.candidates is not None or self.seconds is not None

    def spent(self, measured: int, elapsed_s: float) -> str | None:
        """Why the budget is spent after ``measured`` candidates and ``elapsed_s`` seconds, or ``None``."""
        if self.candidates is not None and measured >= self.candidates:
            return f"budget spent: {measured} of {self.candidates} candidates measured"
        if self.seconds is not None and elapsed_s >= self.seconds:
            return f"budget spent: {elapsed_s:.1f} s of {self.seconds:g} s"
        return None

    def to_dict(self) -> dict[str, Any]:
        """``{"candidates", "seconds"}``."""
        return {"candidates": self.candidates, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Budget:
        """The inverse of :meth:`to_dict`."""
        seconds = data.get("seconds")
        return cls(data.get("candidates"), None if seconds is None else float(seconds))


__all__ = ["ROLES", "Budget", "Candidate", "Constraint", "OptimizeError", "Param", "Space"]
