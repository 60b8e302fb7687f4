"""A keyword argument checked against the values it may take."""

from __future__ import annotations

from collections.abc import Sequence


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    """A one-line ``ValueError`` (``name='x': expected one of a, b``) unless ``value`` is in ``choices``."""
    if value not in choices:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(choices)}")
