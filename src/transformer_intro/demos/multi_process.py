r"""One process of a multi-process data-parallel run on CPU devices.

Run as::

    python -m transformer_intro.demos.multi_process --num-processes 2 --process-id i --port p \
        --out f [--report]

Every process builds the same small ViT (:data:`~transformer_intro.models.vit.SMALL_VIT`) and
the same synthetic data (:func:`~transformer_intro.datasets.synthetic.synthetic_digits`), joins
the others through ``jax.distributed``, and calls ``fit`` on one mesh over every device of every
process. Process 0 writes the per-step losses and the final parameters to ``--out`` (an .npz
file), so that a run of two processes can be compared with a run of one. With ``--report`` each
process prints what it sees: its own devices, the mesh's, the rows of each batch its devices
hold, and the losses (``scripts/two_processes.py`` starts such a run and shows it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ..datasets.synthetic import synthetic_digits
from ..models import SMALL_VIT, VisionTransformer
from ..parallel import DATA, make_mesh
from ..tasks import ImageClassification
from ..training import Recipe, fit

__all__ = ["main", "report_placement"]


def report_placement(mesh, batch_size: int) -> None:
    """Print this process's devices, the mesh's, and which rows of a batch its devices hold."""
    me = f"process {jax.process_index()}"

    def names(devices):
        return ", ".join(f"{d.platform}:{d.id}" for d in devices)

    print(
        f"{me} of {jax.process_count()}: my devices {names(jax.local_devices())}; "
        f"the mesh's {len(jax.devices())}: {names(jax.devices())}"
    )
    rows = NamedSharding(mesh, P(DATA)).addressable_devices_indices_map((batch_size,))
    held = "; ".join(
        f"{d.platform}:{d.id} rows {s[0].start}-{s[0].stop - 1}"
        for d, s in sorted(rows.items(), key=lambda item: item[0].id)
    )
    print(f"{me}: of each batch of {batch_size}, my devices hold {held}")


def main(argv: Sequence[str] | None = None) -> None:
    """Data-parallel training of a small ViT over every device of every process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--devices-per-process", type=int, default=2)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--timeout", type=int, default=60, help="seconds to wait for the others")
    parser.add_argument("--report", action="store_true", help="print what this process sees")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.process_id == 0 and not Path(args.out).resolve().parent.is_dir():
        raise SystemExit(f"--out {args.out}: its directory does not exist")
    jax.config.update("jax_num_cpu_devices", args.devices_per_process)
    if args.num_processes > 1:
        jax.distributed.initialize(
            coordinator_address=f"127.0.0.1:{args.port}",
            num_processes=args.num_processes,
            process_id=args.process_id,
            initialization_timeout=max(10, args.timeout),
        )
    model = VisionTransformer(SMALL_VIT, key=jax.random.PRNGKey(0))
    task = ImageClassification(synthetic_digits(256))
    recipe = Recipe(
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=1e-3,
        schedule="constant",
        steps_per_call=1,
    )
    mesh = make_mesh(len(jax.devices()))
    if args.report:
        report_placement(mesh, args.batch_size)
    trained, history = fit(model, task, recipe, mesh=mesh, progress=False)
    # Replicated arrays: this process's first shard is the whole value.
    leaves = jax.tree_util.tree_leaves(eqx.filter(trained, eqx.is_inexact_array))
    arrays = {f"param_{i}": np.asarray(x.addressable_data(0)) for i, x in enumerate(leaves)}
    arrays["losses"] = np.array(history.train_loss)
    if args.report:
        losses = " ".join(f"{loss:.4f}" for loss in history.train_loss)
        total = sum(float(a.sum()) for name, a in arrays.items() if name.startswith("param_"))
        print(f"process {jax.process_index()}: losses {losses}; sum of all parameters {total:.4f}")
    if args.num_processes == 1:
        # A negative control: the same run with half the batch lands elsewhere.
        half, _ = fit(
            model, task, recipe.replace(batch_size=args.batch_size // 2), mesh=mesh, progress=False
        )
        leaves = jax.tree_util.tree_leaves(eqx.filter(half, eqx.is_inexact_array))
        arrays.update(
            {f"half_param_{i}": np.asarray(x.addressable_data(0)) for i, x in enumerate(leaves)}
        )
    if jax.process_index() == 0:
        np.savez(args.out, devices=len(jax.devices()), **arrays)
    if args.num_processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
