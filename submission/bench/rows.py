"""How the bench prints: each line as soon as it is measured, and an img/s row beside the
recipe step's."""
from __future__ import annotations


def say(line: str = "") -> None:
    print(line, flush=True)


def rate_row(name: str, value: float, reference: float, beside: float | None = None) -> str:
    """One img/s row with its ratio to the recipe step (`beside`: a recipe step timed in
    turns with this row, printed beside it and used for the ratio)."""
    return (f"  {name:<40} {value:10.1f} img/s   {value / (beside or reference):6.2f}x the recipe step"
            + (f" beside it ({beside:.1f} img/s)" if beside else ""))
