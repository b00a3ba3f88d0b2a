"""What a training run records: the training loss at every logged step and the evaluations."""

from __future__ import annotations

import dataclasses
import json

__all__ = ["History"]


@dataclasses.dataclass
class History:
    """The record of a run, against steps and seconds of training.

    Seconds include compilation and exclude evaluation and callbacks.

    Attributes:
        step: the step count at each log entry (one entry per compiled call of ``fit``).
        seconds: training seconds up to that step.
        train_loss: the mean training loss over the steps since the previous entry.
        train_metrics: the means of the task's other metrics over the same steps.
        evaluations: one dict per evaluation, ``{"step": t, "seconds": s, <metric>: value, ...}``.
    """

    step: list[int] = dataclasses.field(default_factory=list)
    seconds: list[float] = dataclasses.field(default_factory=list)
    train_loss: list[float] = dataclasses.field(default_factory=list)
    train_metrics: list[dict[str, float]] = dataclasses.field(default_factory=list)
    evaluations: list[dict[str, float]] = dataclasses.field(default_factory=list)

    def to_json(self) -> str:
        """The history as a JSON object of lists."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> History:
        """The history that :meth:`to_json` wrote."""
        return cls(**json.loads(text))

    def evaluated(self, metric: str) -> tuple[list[int], list[float], list[float]]:
        """Steps, seconds and values of one evaluated metric, e.g. ``"accuracy"``."""
        rows = [row for row in self.evaluations if metric in row]
        if not rows:
            raise ValueError(
                f"no evaluation recorded {metric!r}; train with fit(..., eval_every=n) and a task "
                "whose evaluate() returns it"
            )
        return [r["step"] for r in rows], [r["seconds"] for r in rows], [r[metric] for r in rows]

    def first_reached(
        self, metric: str, value: float, *, higher_is_better: bool = True
    ) -> tuple[int, float] | None:
        """``(step, seconds)`` of the first evaluation at which ``metric`` reached ``value``.

        Reached means at or above it (at or below it when lower is better); None when it never
        was.
        """
        for step, seconds, measured in zip(*self.evaluated(metric)):
            if (measured >= value) if higher_is_better else (measured <= value):
                return step, seconds
        return None

    def held_from(
        self, metric: str, value: float, *, higher_is_better: bool = True
    ) -> tuple[int, float] | None:
        """``(step, seconds)`` from which every later evaluation of ``metric`` stays at ``value``.

        Stays means at ``value`` or better; early in training a metric can pass a mark and fall
        back. None when no such step exists.
        """
        held = None
        for step, seconds, measured in zip(*self.evaluated(metric)):
            if not ((measured >= value) if higher_is_better else (measured <= value)):
                held = None
            elif held is None:
                held = (step, seconds)
        return held
