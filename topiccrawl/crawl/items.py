"""Items, as dataclasses handled through itemadapter."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PageItem:
    """One downloaded page of a focused crawl (one line of the JSON-lines feed)."""

    url: str
    title: str = ""
    relevance: float = 0.0
    importance: float = 1.0
    depth: int = 0
    parent: str | None = None
    anchor: str = ""
    strategy: str = ""
    language: str = ""
    fetched_at: str = ""
    #: P(relevant | page) from the page classifier (None when it is off)
    probability: float | None = None
