"""What compute time costs: dollars from minutes at the whole system's hourly price."""
from __future__ import annotations


def usd(minutes: float, price_usd_per_hour: float) -> float | None:
    """The dollars of `minutes` at `price_usd_per_hour`; None without a price (0)."""
    return minutes / 60 * price_usd_per_hour if price_usd_per_hour else None
