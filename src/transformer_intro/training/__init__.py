"""Training: one loop for every model and task.

* :class:`Recipe`: every number of a run (optimiser, schedule, decay policy, steps, batch size);
* :func:`train_step`: one step, the loss's gradient and the optimiser's update;
* :func:`fit`: the loop, steps compiled in groups on the device, evaluation, checkpoints,
  callbacks, and placement on a device mesh as a mode;
* :class:`History`: what a run records, and :func:`retrace`: a saved run's first steps trained
  again and checked against its history;
* :func:`fit_or_replay`: what a chapter's training cell calls; it replays the saved run when
  nothing differs from it, and trains the reader's variant (a :class:`Run`) when anything does;
* :func:`save_checkpoint` / :func:`load_checkpoint`: one file format for every model, and
  :func:`save_adapter` / :func:`load_adapter`: a low-rank adapter alone, in the same format.

What differs between chapters (the data, the batch, the loss, the evaluation) is a *task*, in
:mod:`transformer_intro.tasks`.
"""

from .checkpoints import (
    CheckpointError,
    CheckpointInfo,
    check_resumable,
    checkpoint_header,
    load_adapter,
    load_checkpoint,
    save_adapter,
    save_checkpoint,
    weights_fingerprint,
)
from .history import History
from .loop import (
    Every,
    NonFiniteLoss,
    Run,
    RunDiverged,
    batch_key,
    fit,
    fit_or_replay,
    loss_differences,
    retrace,
    run_steps,
)
from .recipe import Recipe, decay_mask
from .step import gradients, train_step

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "Every",
    "History",
    "NonFiniteLoss",
    "Recipe",
    "Run",
    "RunDiverged",
    "batch_key",
    "check_resumable",
    "checkpoint_header",
    "decay_mask",
    "fit",
    "fit_or_replay",
    "gradients",
    "load_adapter",
    "load_checkpoint",
    "loss_differences",
    "retrace",
    "run_steps",
    "save_adapter",
    "save_checkpoint",
    "train_step",
    "weights_fingerprint",
]
