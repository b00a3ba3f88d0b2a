"""What the benchmark scripts record with their figures: the machine, and the result file."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path

import jax


def machine() -> dict:
    """The processor (its name, and whether it has AVX-512), the software and the devices."""
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


def write_json(path: str | os.PathLike, result: dict) -> Path:
    """``result`` as indented JSON at ``path``, written to a temporary file first and moved into
    place only once complete, so that an interrupted run never leaves half a result file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(f.name, path)
    return path
