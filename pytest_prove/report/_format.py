"""How every renderer writes a number: proportions with 3 decimals, signed changes, q."""

from __future__ import annotations

__all__ = ["q_text", "rate", "signed"]


def rate(value: float) -> str:
    """A proportion, as 0.059."""
    return f"{value:.3f}"


def signed(value: float) -> str:
    """A change with its sign, as +0.195; a change that rounds to nothing reads 0.000."""
    return "0.000" if abs(value) < 5e-4 else f"{value:+.3f}"


def q_text(value: float) -> str:
    """An adjusted p-value, as 0.012, or <0.001 below that."""
    return "<0.001" if value < 0.001 else f"{value:.3f}"
