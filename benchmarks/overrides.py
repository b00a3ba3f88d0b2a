"""Command-line overrides shared by the benchmark scripts: ``name=value`` pairs to a dict."""

import ast


def parse_overrides(pairs: list[str]) -> dict:
    """``["dim=64", "positions=rotary"]`` -> ``{"dim": 64, "positions": "rotary"}``: values that
    read as Python literals become them, anything else stays a string."""
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def with_changes(config, changes: dict):
    """``config`` with ``changes`` made, each to the model's field or to its block's.

    A name the model's configuration has changes it; ``<stack>.<name>``, or a name only the
    blocks have (``norm``, ``num_kv_heads``, ...), changes that stack's block configuration, or
    every stack's (``block``; an encoder-decoder's ``encoder`` and ``decoder``): ``--set
    norm=rms`` and the ablations' changes read as they always have. Values factored through
    D / H dimensions stay so when ``dim`` or ``num_heads`` changes.
    """
    import dataclasses

    own = {f.name for f in dataclasses.fields(config)}
    stacks = [s for s in ("block", "encoder", "decoder") if s in own]
    model, blocks = {}, {s: {} for s in stacks}
    for name, value in changes.items():
        stack, _, field = name.rpartition(".")
        if stack in blocks:
            blocks[stack][field] = value
        elif name in own:
            model[name] = value
        else:
            for stack in stacks:
                blocks[stack][name] = value
    for stack, block in blocks.items():
        if not block:
            continue
        old = getattr(config, stack)
        if ({"dim", "num_heads"} & set(block)) and old.value_dim == old.dim // old.num_heads:
            dim, heads = block.get("dim", old.dim), block.get("num_heads", old.num_heads)
            block.setdefault("value_dim", dim // heads)
        model[stack] = old.replace(**block)
    return config.replace(**model)
