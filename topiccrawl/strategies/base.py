"""The strategy contract: :class:`Link`, the :class:`Frontier` hooks, strategy options, the registry.

Scrapy-free. A strategy is a frontier class deriving from :class:`FrontierBase` (which gives
every optional hook a documented default), an options dataclass deriving from
:class:`StrategyOptions` (or none), and one :class:`Strategy` entry in :data:`STRATEGIES`, the
only list of strategy names. :func:`make_frontier` builds a strategy by name.

Options are plain values named by their fields (``wl_lnf0``, ``sa_top_k``, …); the crawl layer
(:func:`topiccrawl.crawl.settings.strategy_options`) reads each field from the setting of the same
name in upper case with the project prefix. :meth:`StrategyOptions.validate` names the field;
:meth:`StrategyOptions.from_mapping`, which parses a settings mapping, names the setting.
"""

from __future__ import annotations

import importlib
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol


@dataclass(slots=True)
class Link:
    """A queued link. ``score`` is the link relevance R(l) (WL paper eq. 5)."""

    url: str
    score: float = 0.0
    depth: int = 0
    domain: str = ""  # registered domain of the URL (region competition, site statistics)
    potential: bool = False  # found on a page whose unnormalised PageRank >= 2 ("potential value")
    payload: Any = field(default=None, compare=False)
    seq: int = -1  # insertion number, assigned by the frontier

    def __lt__(self, other: Link) -> bool:
        """Best-first order: higher R(l) first, then earlier insertion. A heap of links needs no
        ``(key, link)`` tuple per entry (~120 bytes per queued URL, docs/benchmarks.md "Scale")."""
        return self.score > other.score or (self.score == other.score and self.seq < other.seq)


class FrontierError(ValueError):
    """Unknown strategy, a bad strategy option, or a strategy that lacks what it needs."""


class OptionError(FrontierError):
    """A bad strategy option (one line): ``field`` of the options dataclass, the ``value`` given,
    the ``problem`` (``" is out of range [0, 1]"``, ``": expected one of …"``) and the ``label``
    the message names (the field itself, or the setting it was read from)."""

    def __init__(self, field: str, value: Any, problem: str, label: str | None = None) -> None:
        self.field, self.value, self.problem, self.label = field, value, problem, label or field
        super().__init__(f"{self.label}={value!r}{problem}")


# ---------------------------------------------------------------------------------------------
# The frontier contract


class Frontier(Protocol):
    """Every hook a strategy offers; :class:`FrontierBase` implements the optional ones."""

    name: str
    #: the class of the links the caller builds for :meth:`push` (a strategy's own subclass of Link)
    link_type: type[Link]

    def push(self, link: Link) -> None: ...

    def pop(self) -> Link | None: ...

    def __len__(self) -> int: ...

    def state(self) -> dict: ...

    def load_state(self, state: dict) -> None: ...

    def stats(self) -> dict: ...

    def write_report(self, out_dir: Path) -> Path | None: ...

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None: ...

    def observe_page(self, url: str, domain: str, probability: float, out_links=(), *,
                     relevant: bool | None = None, terms=None, relevance: float | None = None,
                     term_ids=None) -> None: ...

    def peek(self) -> tuple[float, Link] | None: ...

    def value(self, link: Link) -> float | None: ...

    def forget_inflight(self, urls) -> None: ...


class FrontierBase(ABC):
    """Base class of every strategy: the five required members are abstract, the optional hooks
    have these defaults, so a caller calls any hook of any strategy directly."""

    name: str = "base"
    #: links are built as this class before :meth:`push` (WL's carries its queue position)
    link_type: type[Link] = Link

    @abstractmethod
    def push(self, link: Link) -> None:
        """Queue ``link`` (a strategy may drop it); assigns ``link.seq`` when it is −1."""

    @abstractmethod
    def pop(self) -> Link | None:
        """The next link to fetch, or None when nothing is queued."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of queued links."""

    @abstractmethod
    def state(self) -> dict:
        """Queued links and the strategy's variables, for :meth:`load_state` (JOBDIR)."""

    @abstractmethod
    def load_state(self, state: dict) -> None:
        """Continue from :meth:`state`, exactly where it was taken."""

    def stats(self) -> dict:
        """Strategy statistics (``"wl/lnf": …``) for the crawl stats; default: none."""
        return {}

    def write_report(self, out_dir: Path) -> Path | None:
        """Write the strategy's report into ``out_dir`` at the end of a crawl and return its path;
        default: nothing, None."""
        return None

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """A fetched page ``url`` of ``domain`` scored ``relevance`` (relevant when ≥ ``beta``);
        default: ignored (strategies that learn from harvest, such as ``fcsa-host``, use it)."""

    def observe_page(self, url: str, domain: str, probability: float, out_links=(), *,
                     relevant: bool | None = None, terms=None, relevance: float | None = None,
                     term_ids=None) -> None:
        """A fetched page with its P(relevant) and its out-links as ``(url, LinkFeatures)``, called
        before the page's links are pushed (``terms`` and ``relevance``: its text terms and R(P);
        ``term_ids``: the terms' ids in the frontier's own association vocabulary, when it has one);
        default: ignored (``learned`` learns link values from it)."""

    def peek(self) -> tuple[float, Link] | None:
        """The value and the link :meth:`pop` returns next (random exploration aside), for
        harvest-aware dispatch (:mod:`topiccrawl.strategies.dispatch`); values are ≥ 0, higher is
        fetched earlier. Default None: the strategy has no ranking value (``bfs``, the samplers),
        so its links are handed out at once."""
        return None

    def value(self, link: Link) -> float | None:
        """The value (on :meth:`peek`'s scale) the strategy gave ``link``, just pushed; default None."""
        return None

    def forget_inflight(self, urls) -> None:
        """Links handed out before a crash whose outcome will never reach the strategy (a JOBDIR
        resume found them done in the journal, or drops them); default: nothing to forget (the
        site finder stops waiting for their scores)."""


# ---------------------------------------------------------------------------------------------
# Strategy options

#: prefix of the setting an option field is read from (:func:`setting_name`)
SETTING_PREFIX = "TOPICCRAWL_"
#: the spellings of a switch that is on / off, in any case (:func:`parse_switch`)
SWITCH_ON, SWITCH_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def parse_switch(raw: Any, default: bool = False) -> bool:
    """A switch's value (a setting's string, a spider argument or a bool): 1/0, true/false, yes/no,
    on/off in any case, ``default`` when empty; ValueError otherwise."""
    text = str(raw).strip().lower()
    if text in SWITCH_ON:
        return True
    if text in SWITCH_OFF:
        return False
    if not text:
        return default
    raise ValueError(raw)


def setting_name(option: str) -> str:
    """The setting an options field is read from: ``wl_lnf0`` → ``TOPICCRAWL_WL_LNF0``."""
    return SETTING_PREFIX + option.upper()


def option_field(default: Any, *, low: Any = None, high: Any = None, choices: tuple = ()) -> Any:
    """A field of an options dataclass with its checks: ``low`` ≤ value ≤ ``high`` (``high`` may
    name another field: its value is the bound), or value in ``choices``."""
    return field(default=default, metadata={"low": low, "high": high, "choices": tuple(choices)})


def _parse(kind: type, raw: Any) -> Any:
    """``raw`` (a setting's string or a value) as ``kind``; ValueError when it is not one."""
    if kind is bool:
        return parse_switch(raw or "false")
    if kind is str and isinstance(raw, str):
        return raw.strip().lower()
    return kind(raw)


def _kind_problem(kind: type) -> str:
    return " is not a boolean" if kind is bool else f" is not a valid {kind.__name__}"


@dataclass(frozen=True)
class StrategyOptions:
    """Base of the options dataclasses: fields with defaults (:func:`option_field` for checks),
    :meth:`validate`, and :meth:`coerce`, the one conversion from what a factory is given."""

    _kinds: ClassVar[dict[type, dict[str, type]]] = {}

    @classmethod
    def kinds(cls) -> dict[str, type]:
        """Field name -> its type (str, int, float or bool)."""
        if cls not in StrategyOptions._kinds:
            hints = typing.get_type_hints(cls)
            StrategyOptions._kinds[cls] = {f.name: hints[f.name] for f in fields(cls)}
        return StrategyOptions._kinds[cls]

    def validate(self) -> None:
        """Raise :class:`OptionError` naming the first bad field. A bound that names another field
        is not applied to a value left at its default (a default is never refused)."""
        kinds = self.kinds()
        for f in fields(self):
            value, kind = getattr(self, f.name), kinds[f.name]
            if kind in (int, float):
                ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
            else:
                ok = isinstance(value, kind)
            if not ok:
                raise OptionError(f.name, value, _kind_problem(kind))
            low, high, choices = f.metadata.get("low"), f.metadata.get("high"), f.metadata.get("choices")
            if choices and value not in choices:
                raise OptionError(f.name, value, f": expected one of {', '.join(choices)}")
            if isinstance(high, str):
                high = getattr(self, high) if value != f.default else None
            if (low is not None and not value >= low) or (high is not None and not value <= high):
                raise OptionError(f.name, value, f" is out of range [{low}, {high}]")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]):
        """Options from ``values``: option name -> a setting's raw value (the crawl's settings,
        lower-cased without the prefix; other keys are ignored). A missing, None or empty value
        keeps the default. Errors name the setting: ``setting TOPICCRAWL_WL_LNF0='x' is not a
        valid float``."""
        parsed: dict[str, Any] = {}
        for name, kind in cls.kinds().items():
            raw = values.get(name)
            if raw is None or raw == "":
                continue
            try:
                parsed[name] = _parse(kind, raw)
            except (TypeError, ValueError):
                raise OptionError(name, raw, _kind_problem(kind), f"setting {setting_name(name)}") from None
        options = cls(**parsed)
        try:
            options.validate()
        except OptionError as exc:
            raw = values.get(exc.field) if exc.field in parsed else exc.value
            raise OptionError(exc.field, raw, exc.problem, f"setting {setting_name(exc.field)}") from None
        return options

    @classmethod
    def coerce(cls, options: StrategyOptions | Mapping[str, Any] | None = None):
        """The options a factory was given as this class: None = the defaults, an instance is
        validated, a mapping goes through :meth:`from_mapping`."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            options.validate()
            return options
        if isinstance(options, Mapping):
            return cls.from_mapping(options)
        raise FrontierError(f"expected {cls.__name__} or a mapping of options, not {type(options).__name__}")


# ---------------------------------------------------------------------------------------------
# The registry


def _load(target: Any) -> Any:
    """``"module:attr"`` imported (on first use), anything else as it is."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True, slots=True)
class Strategy:
    """One registered strategy.

    ``factory(options, is_relevant) -> Frontier`` and ``options`` (a :class:`StrategyOptions`
    subclass, or None for a strategy without options) are objects or ``"module:attr"`` strings,
    imported on first use. ``redis``: the Redis store (``TOPICCRAWL_STORE=redis``) runs it;
    ``needs_truth``: it reads the ground-truth labels of link targets (``is_relevant``);
    ``needs_paths``: it also reads the offline web's link graph (``paths``, a
    :class:`~topiccrawl.scoring.groundtruth.TruthPaths`, passed as the factory's third argument);
    ``sites``: it queues candidate sites for the spider that checks them (its ``topiccrawl_queue``
    is ``"sites"``), not pages.
    """

    name: str
    factory: str | Callable[..., FrontierBase]
    options: str | type[StrategyOptions] | None = None
    redis: bool = False
    needs_truth: bool = False
    needs_paths: bool = False
    sites: bool = False

    def options_class(self) -> type[StrategyOptions] | None:
        return _load(self.options)

    def make_options(self, options: StrategyOptions | Mapping[str, Any] | None = None) -> StrategyOptions | None:
        """``options`` as this strategy's options class (None: the defaults; ignored when the
        strategy has none); :class:`OptionError` for a bad value."""
        cls = self.options_class()
        return None if cls is None else cls.coerce(options)

    def build(self, is_relevant: Callable[[str], bool] | None = None,
              options: StrategyOptions | Mapping[str, Any] | None = None, paths=None) -> FrontierBase:
        if self.needs_truth and is_relevant is None:
            raise FrontierError(f"strategy {self.name!r} needs ground truth: the relevance labels of the link targets")
        if self.needs_paths:
            return _load(self.factory)(self.make_options(options), is_relevant, paths)
        return _load(self.factory)(self.make_options(options), is_relevant)


#: strategy name -> :class:`Strategy`: the one list of strategies (docs/settings.md, docs/wl.md)
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("bfs", "topiccrawl.strategies.simple:make_bfs", redis=True),
    Strategy("bestfirst", "topiccrawl.strategies.simple:make_bestfirst", redis=True),
    Strategy("oracle", "topiccrawl.strategies.simple:make_oracle", redis=True, needs_truth=True),
    Strategy("oracle-path", "topiccrawl.strategies.simple:make_oracle_path", needs_truth=True, needs_paths=True),
    Strategy("wl", "topiccrawl.strategies.wanglandau:make_wl", "topiccrawl.strategies.wanglandau:WLOptions",
             redis=True),
    Strategy("sa", "topiccrawl.strategies.annealing:make_sa", "topiccrawl.strategies.annealing:SAOptions",
             redis=True),
    Strategy("fcsa-host", "topiccrawl.strategies.annealing:make_fcsa_host",
             "topiccrawl.strategies.annealing:FCSAHostOptions", redis=True),
    Strategy("learned", "topiccrawl.strategies.learned:make_learned", "topiccrawl.strategies.learned:LearnedOptions",
             redis=True),
    Strategy("sitefinder", "topiccrawl.sitefinder.frontier:make_sitefinder",
             "topiccrawl.sitefinder.frontier:SiteFinderOptions", redis=True, sites=True),
)}


def get_strategy(name: str) -> Strategy:
    """The registered strategy ``name``; :class:`FrontierError` naming the known ones otherwise."""
    strategy = STRATEGIES.get(name)
    if strategy is None:
        raise FrontierError(f"unknown strategy {name!r}; expected one of: {', '.join(STRATEGIES)}")
    return strategy


def make_frontier(name: str, is_relevant: Callable[[str], bool] | None = None,
                  options: StrategyOptions | Mapping[str, Any] | None = None, paths=None) -> FrontierBase:
    """Build strategy ``name`` (:data:`STRATEGIES`) with ``options`` (its options object, a
    mapping for :meth:`StrategyOptions.from_mapping`, or None for the defaults; ``paths``: the
    link graph a ``needs_paths`` strategy reads)."""
    return get_strategy(name).build(is_relevant, options, paths)
