"""The strategy registry (topiccrawl.strategies.base): every strategy builds from its default
options and offers every Frontier hook, bad option values are one-line errors naming the setting,
the Redis flag agrees with what the Redis store builds, and there is one list of strategy names."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from scrapy.settings import Settings

from redis_fixture import redis_server  # noqa: F401
from topiccrawl.crawl.settings import DEFAULTS, ConfigError, TopicCrawlConfig, build_frontier, strategy_options
from topiccrawl.scoring.groundtruth import TruthPaths
from topiccrawl.strategies.annealing import FCSAHostOptions, SAOptions
from topiccrawl.strategies.base import (
    STRATEGIES,
    FrontierBase,
    FrontierError,
    Link,
    OptionError,
    StrategyOptions,
    get_strategy,
    make_frontier,
    setting_name,
)
from topiccrawl.strategies.wanglandau import WLOptions

DOCS = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
HOOKS = ("name", "link_type", "push", "pop", "__len__", "state", "load_state", "stats", "write_report", "feedback")
WITH_OPTIONS = [name for name, s in STRATEGIES.items() if s.options is not None]


def _truth(url: str) -> bool:
    return url.endswith("/0")


def _paths() -> TruthPaths:
    """The link graph ``oracle-path`` reads: two pages, one truly relevant."""
    web = {"http://a.test/0": [], "http://a.test/1": ["http://a.test/0"]}
    return TruthPaths(web, web.get, lambda url: url, _truth)


def _bad_values(options: type[StrategyOptions]) -> list[tuple[str, str]]:
    """(field, a raw setting value it must refuse): not parseable, not a choice, out of range."""
    out = []
    for f in fields(options):
        kind, meta = options.kinds()[f.name], f.metadata
        if kind is bool:
            out.append((f.name, "maybe"))
        elif kind is str:
            out.append((f.name, "no-such-choice"))
        else:
            out.append((f.name, "x"))
            if meta.get("low") is not None:
                out.append((f.name, repr(kind(meta["low"]) - 1)))
            if isinstance(meta.get("high"), (int, float)):
                out.append((f.name, repr(kind(meta["high"]) + 1)))
    return out


BAD = [(name, field, raw) for name in WITH_OPTIONS for field, raw in _bad_values(get_strategy(name).options_class())]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_builds_from_its_default_options_and_offers_every_hook(name, tmp_path):
    strategy = STRATEGIES[name]
    options = strategy.make_options()
    cls = strategy.options_class()
    assert (options is None) == (cls is None) and (cls is None or options == cls())
    assert strategy_options(Settings(), name) == options  # no setting = the defaults
    frontier = make_frontier(name, _truth if strategy.needs_truth else None, options, _paths())
    assert isinstance(frontier, FrontierBase) and frontier.name == name
    assert all(hasattr(frontier, hook) for hook in HOOKS) and issubclass(frontier.link_type, Link)
    if name != "sitefinder":  # the site finder queues links of the sites it was given only
        frontier.push(frontier.link_type("http://a.test/0", 0.5, domain="a.test"))
        assert len(frontier) == 1 and frontier.pop().url == "http://a.test/0"
    assert frontier.pop() is None and len(frontier) == 0
    assert isinstance(frontier.stats(), dict) and frontier.feedback("http://a.test/0", "a.test", 1.0, 0.5) is None
    report = frontier.write_report(tmp_path)
    assert report is None or Path(report).is_file()
    again = make_frontier(name, _truth if strategy.needs_truth else None, paths=_paths())
    again.load_state(frontier.state())
    assert len(again) == 0


def test_strategies_without_their_ground_truth_are_refused():
    needy = [name for name, s in STRATEGIES.items() if s.needs_truth]
    assert needy == ["oracle", "oracle-path"]
    assert [name for name, s in STRATEGIES.items() if s.needs_paths] == ["oracle-path"]
    with pytest.raises(FrontierError, match="strategy 'oracle' needs ground truth"):
        make_frontier("oracle")
    with pytest.raises(ConfigError, match="set TOPICCRAWL_GROUND_TRUTH"):
        build_frontier(Settings(), "oracle")
    # ground truth from a labels file, but no offline web to read the link graph of
    with pytest.raises(FrontierError, match="'oracle-path' needs an offline web's link graph"):
        make_frontier("oracle-path", _truth)
    with pytest.raises(ConfigError, match="needs the whole link graph of an offline web") as exc:
        build_frontier(Settings(), "oracle-path", _truth, lambda: None)
    assert "\n" not in str(exc.value)
    assert build_frontier(Settings(), "oracle-path", _truth, _paths).name == "oracle-path"
    with pytest.raises(FrontierError, match="unknown strategy 'dfs'; expected one of: bfs, bestfirst"):
        make_frontier("dfs")
    with pytest.raises(ConfigError, match="unknown strategy 'dfs'"):
        strategy_options(Settings(), "dfs")


@pytest.mark.parametrize("name, field, raw", BAD)
def test_a_bad_option_value_is_one_line_naming_the_setting(name, field, raw):
    setting = setting_name(field)
    with pytest.raises(ConfigError) as exc:
        strategy_options(Settings({setting: raw}), name)
    message = str(exc.value)
    assert message.startswith(f"setting {setting}={raw!r}") and "\n" not in message
    with pytest.raises(ConfigError, match=re.escape(setting)):
        build_frontier({setting: raw}, name)


def test_messages_are_exact_and_the_pure_layer_names_the_field():
    with pytest.raises(ConfigError, match=r"^setting TOPICCRAWL_WL_LNF_FLOOR='x' is not a valid float$"):
        strategy_options(Settings({"TOPICCRAWL_WL_LNF_FLOOR": "x"}), "wl")
    with pytest.raises(ConfigError, match=r"^setting TOPICCRAWL_SA_ALPHA='1.5' is out of range \[1e-12, 1.0\]$"):
        strategy_options({"TOPICCRAWL_SA_ALPHA": "1.5"}, "sa")
    with pytest.raises(ConfigError, match=r"^setting TOPICCRAWL_WL_STAGE_RULE='hot': expected one of paper, flat"):
        strategy_options({"TOPICCRAWL_WL_STAGE_RULE": "hot"}, "wl")
    with pytest.raises(ConfigError, match=r"^setting TOPICCRAWL_SITES_ABSTRACT_DIGITS='maybe' is not a boolean$"):
        strategy_options({"TOPICCRAWL_SITES_ABSTRACT_DIGITS": "maybe"}, "sitefinder")
    for bad, message in [(WLOptions(wl_stage_steps=0), "wl_stage_steps=0 is out of range [1, None]"),
                         (WLOptions(wl_proposal="hot"), "wl_proposal='hot': expected one of region-roulette, uniform"),
                         (SAOptions(sa_top_k="4"), "sa_top_k='4' is not a valid int"),
                         (FCSAHostOptions(sa_host_weight=2.0), "sa_host_weight=2.0 is out of range [0.0, 1.0]")]:
        with pytest.raises(OptionError) as exc:
            bad.validate()
        assert str(exc.value) == message and "TOPICCRAWL" not in message and exc.value.field == message.split("=")[0]
        with pytest.raises(OptionError, match=re.escape(message)):
            make_frontier({WLOptions: "wl", SAOptions: "sa", FCSAHostOptions: "fcsa-host"}[type(bad)], options=bad)


def test_settings_parse_into_the_options_the_factories_use():
    settings = Settings({"TOPICCRAWL_WL_STAGE_RULE": " Flat ", "TOPICCRAWL_WL_STAGE_STEPS": "50",
                         "TOPICCRAWL_WL_SEED": 3, "TOPICCRAWL_WL_LNF0": "", "TOPICCRAWL_SA_T0": "0.5"})
    options = strategy_options(settings, "wl")
    assert options == WLOptions(wl_stage_rule="flat", wl_stage_steps=50, wl_seed=3)
    frontier = build_frontier(settings, "wl")
    assert (frontier.stage_rule, frontier.stage_steps, frontier.stats()["wl/lnf"]) == ("flat", 50, 1.0)
    assert strategy_options(settings, "bfs") is None  # no options: every setting ignored
    sites = strategy_options({"TOPICCRAWL_SITES_ABSTRACT_DIGITS": "on", "TOPICCRAWL_SITES_INFLIGHT": "2"}, "sitefinder")
    assert build_frontier({"TOPICCRAWL_SITES_ABSTRACT_DIGITS": "on"}, "sitefinder").params["digits"] is True
    assert (sites.sites_abstract_digits, sites.sites_inflight) == (True, 2)
    # a bound naming another field applies to a value given, never to a default (as before)
    assert strategy_options({"TOPICCRAWL_SA_T0": "1e-4"}, "sa").sa_tmin == 1e-3
    with pytest.raises(ConfigError, match=r"TOPICCRAWL_SA_TMIN='0.01' is out of range \[1e-12, 0.0001\]"):
        strategy_options({"TOPICCRAWL_SA_T0": "1e-4", "TOPICCRAWL_SA_TMIN": "0.01"}, "sa")


def test_redis_flag_agrees_with_what_the_redis_store_builds(redis_server):
    from topiccrawl.redis import crawl_keys
    from topiccrawl.redis.annealing import make_redis_frontier
    from topiccrawl.redis.sitefinder import SharedSiteFinderFrontier
    from topiccrawl.redis.sites import RedisSiteTasks
    from topiccrawl.sitefinder.frontier import make_sitefinder

    client = redis_server.client()
    for name, strategy in STRATEGIES.items():
        options = strategy.make_options()
        if name == "sitefinder":  # the site finder's store: shared site tasks, a local frontier per worker
            frontier = make_sitefinder(options, cls=SharedSiteFinderFrontier)
            tasks = RedisSiteTasks(client, "topiccrawl:sites:", worker="w", lease_seconds=5.0)
            assert tasks.offer_site("a.test", "http://a.test/") and "a.test" in tasks.candidates()
            built = isinstance(frontier, FrontierBase)
        else:
            try:
                frontier = make_redis_frontier(client, crawl_keys(f"c-{name}"), name, options, _truth,
                                               lease_seconds=5.0, budget=0, worker="w")
            except (ValueError, ConfigError):
                built = False
            else:
                frontier.push(Link("http://a.test/0", 0.5, domain="a.test", payload=None))
                built = frontier.name == name and frontier.pop().url == "http://a.test/0"
        assert built == strategy.redis, name
        redis_settings = Settings({"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url})
        if strategy.redis:
            assert TopicCrawlConfig.from_settings(redis_settings, {"strategy": name}).strategy == name
        else:
            with pytest.raises(ConfigError, match="TOPICCRAWL_STORE=redis supports the strategies"):
                TopicCrawlConfig.from_settings(redis_settings, {"strategy": name})


def test_one_list_of_strategy_names_and_every_setting_documented():
    import topiccrawl.crawl.commands.crawl as command
    import topiccrawl.redis
    import topiccrawl.redis.connection
    import topiccrawl.strategies.simple

    assert command.STRATEGIES is STRATEGIES
    for module in (topiccrawl.redis, topiccrawl.redis.connection, topiccrawl.strategies.simple):
        assert not hasattr(module, "STRATEGIES"), module.__name__
    assert all(name == s.name for name, s in STRATEGIES.items())
    docs = DOCS.read_text(encoding="utf-8")
    row = next(line for line in docs.splitlines() if line.startswith("| `TOPICCRAWL_STRATEGY`"))
    assert set(re.findall(r"`([a-z-]+)`", row.split("|")[3])) == set(STRATEGIES)
    documented = set(re.findall(r"^\| `(TOPICCRAWL_[A-Z0-9_]+)`", docs, re.MULTILINE))
    option_settings = {setting_name(f.name) for name in WITH_OPTIONS for f in fields(get_strategy(name).options_class())}
    assert documented == set(DEFAULTS) | option_settings
    assert DEFAULTS["TOPICCRAWL_CHECKPOINTS"] == TopicCrawlConfig().checkpoints  # defaults written once
