"""What the benchmark scripts record with their figures: the machine, and the result file; and
how a result file's machine is named in the tables built from it (``tables.py``)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from transformer_intro.files import write_atomically


def machine() -> dict:
    """The processor (its name, and whether it has AVX-512), the software and the devices."""
    import jax  # here, so that naming a file's machine (describe_machine) needs no JAX

    model, flags = "unknown", ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and model == "unknown":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = line
    return {
        "cpu": model,
        "avx512": " avx512f" in flags,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def describe_machine(row: dict) -> str:
    """A result file's machine in words, from what the file records and nothing else.

    ``row`` is the file's ``machine`` entry (``machine()``'s keys; some files name the processor
    ``processor``, and a few record neither its name nor whether it has AVX-512). What the file
    does not record, the description says it does not, rather than guess.
    """
    name = row.get("cpu") or row.get("processor") or "unknown"
    named = name not in ("unknown", "x86_64")  # no model name in /proc/cpuinfo, or only the arch
    if "avx512" in row:
        isa = " with AVX-512" if row["avx512"] else " without AVX-512"
        name = (
            name + isa if named else f"an x86-64 processor{isa} (the file does not record its name)"
        )
    elif named:
        name += " (the file does not record whether it has AVX-512)"
    else:
        name = "an x86-64 processor (the file records neither its name nor whether it has AVX-512)"
    words = [name]
    if row.get("cores"):
        words.append(f"{row['cores']} cores")
    if row.get("jax"):
        words.append(f"JAX {row['jax']}")
    if row.get("xla_flags"):
        words.append(f"XLA_FLAGS={row['xla_flags']}")
    return ", ".join(words)


def write_json(path: str | os.PathLike, result: dict) -> Path:
    """``result`` as indented JSON at ``path`` (its folder made if need be), written whole or not
    at all (``transformer_intro.files.write_atomically``): an interrupted run, or a result that
    JSON cannot hold, leaves the previous file as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomically(path, json.dumps(result, indent=1) + "\n")
