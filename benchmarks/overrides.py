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
