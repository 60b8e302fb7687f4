"""All ``TOPICCRAWL_*`` settings, parsed once and validated (see ``docs/settings.md``).

Spider arguments (``-a topic=… -a strategy=… -a max_pages=…``) override the matching settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

DEFAULTS: dict[str, object] = {
    "TOPICCRAWL_ENABLED": True,
    "TOPICCRAWL_TOPIC": "台风灾害",
    "TOPICCRAWL_STRATEGY": "bestfirst",
    "TOPICCRAWL_WEB": "generated:zh-disaster",
    "TOPICCRAWL_WEB_PROXY": "",
    "TOPICCRAWL_WEB_FAULTS": "",
    "TOPICCRAWL_MAX_PAGES": 1000,
    "TOPICCRAWL_LINK_THRESHOLD": 0.0,
    "TOPICCRAWL_ANCHOR_WEIGHT": 0.3,
    "TOPICCRAWL_MAX_LINKS_PER_PAGE": 0,
    "TOPICCRAWL_PAGERANK_EVERY": 500,
    "TOPICCRAWL_POTENTIAL_PAGERANK": 2.0,
    "TOPICCRAWL_GROUND_TRUTH": "",
    "TOPICCRAWL_OUTPUT_DIR": "out/%(name)s",
    "TOPICCRAWL_PLOT_ENABLED": True,
    "TOPICCRAWL_CHECKPOINTS": [100, 250, 500, 1000, 5000, 10000, 15000],
    "TOPICCRAWL_PROGRESS_INTERVAL": 10.0,
    "TOPICCRAWL_LIVE_ALLOW_PRIVATE": False,
    "TOPICCRAWL_LIVE_ALLOW_HOSTS": "",
    "TOPICCRAWL_TRAP_GUARD_ENABLED": True,
    "TOPICCRAWL_TRAP_GUARD_DEPTH": 20,
    "TOPICCRAWL_SLOW_SECONDS": 5.0,
    "TOPICCRAWL_SCORER": "vsm",
    "TOPICCRAWL_TOPIC_TREE": "",
    "TOPICCRAWL_TOPIC_NODE": "",
    "TOPICCRAWL_TDCS_K": 180,
    "TOPICCRAWL_STORE": "memory",
    "TOPICCRAWL_REDIS_URL": "redis://127.0.0.1:6379/0",
    "TOPICCRAWL_CRAWL_ID": "",
    "TOPICCRAWL_LEASE_SECONDS": 30.0,
    "TOPICCRAWL_IDLE_TIMEOUT": 60.0,
}


class ConfigError(ValueError):
    """A setting or spider argument with a bad value (one-line message)."""


@dataclass
class TopicCrawlConfig:
    enabled: bool = True
    topic: str = "台风灾害"
    strategy: str = "bestfirst"
    web: str = "generated:zh-disaster"
    web_proxy: str = ""
    web_faults: str = ""
    max_pages: int = 1000
    link_threshold: float = 0.0
    anchor_weight: float = 0.3
    max_links_per_page: int = 0
    pagerank_every: int = 500
    potential_pagerank: float = 2.0
    ground_truth: str = ""
    output_dir: str = "out/%(name)s"
    plot_enabled: bool = True
    checkpoints: list[int] = field(default_factory=list)
    progress_interval: float = 10.0
    live_allow_private: bool = False
    live_allow_hosts: str = ""
    trap_guard_enabled: bool = True
    trap_guard_depth: int = 20
    slow_seconds: float = 5.0
    scorer: str = "vsm"
    topic_tree: str = ""
    topic_node: str = ""
    tdcs_k: int = 180
    store: str = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    crawl_id: str = ""
    lease_seconds: float = 30.0
    idle_timeout: float = 60.0

    @property
    def offline(self) -> bool:
        return self.web.strip().lower() != "live"

    @classmethod
    def from_settings(cls, settings, overrides: dict | None = None) -> TopicCrawlConfig:
        """Read every ``TOPICCRAWL_*`` setting, apply spider-argument overrides, validate."""
        values: dict[str, object] = {}
        for f in fields(cls):
            key = "TOPICCRAWL_" + f.name.upper()
            default = DEFAULTS[key]
            try:
                if isinstance(default, bool):
                    values[f.name] = settings.getbool(key, default)
                elif isinstance(default, int):
                    values[f.name] = settings.getint(key, default)
                elif isinstance(default, float):
                    values[f.name] = settings.getfloat(key, default)
                elif isinstance(default, list):
                    values[f.name] = [int(x) for x in settings.getlist(key, default)]
                else:
                    values[f.name] = str(settings.get(key, default) or "")
            except (TypeError, ValueError):
                raise ConfigError(f"setting {key}={settings.get(key)!r} is not a valid value") from None
        for name, value in (overrides or {}).items():
            if value is None:
                continue
            kind = type(values[name])
            try:
                if kind is bool:
                    values[name] = str(value).lower() in {"1", "true", "yes", "on"}
                else:
                    values[name] = kind(value)
            except (TypeError, ValueError):
                raise ConfigError(f"spider argument {name}={value!r} is not a valid {kind.__name__}") from None
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.max_pages < 0:
            raise ConfigError("TOPICCRAWL_MAX_PAGES must be >= 0 (0 = no limit)")
        if not 0.0 <= self.anchor_weight <= 1.0:
            raise ConfigError("TOPICCRAWL_ANCHOR_WEIGHT (∂ of eq. 5) must lie in [0, 1]")
        if not 0.0 <= self.link_threshold <= 1.0:
            raise ConfigError("TOPICCRAWL_LINK_THRESHOLD must lie in [0, 1]")
        if self.pagerank_every < 1:
            raise ConfigError("TOPICCRAWL_PAGERANK_EVERY must be >= 1")
        if self.store not in ("memory", "redis"):
            raise ConfigError(f"TOPICCRAWL_STORE={self.store!r}: expected memory or redis")
        if self.lease_seconds <= 0 or self.idle_timeout < 0:
            raise ConfigError("TOPICCRAWL_LEASE_SECONDS must be > 0 and TOPICCRAWL_IDLE_TIMEOUT >= 0")
        if self.store == "redis":
            from topiccrawl.redis import STRATEGIES

            if self.strategy not in STRATEGIES:
                raise ConfigError(f"TOPICCRAWL_STORE=redis supports the strategies {', '.join(STRATEGIES)}, "
                                  f"not {self.strategy!r}")
        if self.trap_guard_depth < 1:
            raise ConfigError("TOPICCRAWL_TRAP_GUARD_DEPTH must be >= 1")
        if self.slow_seconds <= 0:
            raise ConfigError("TOPICCRAWL_SLOW_SECONDS must be > 0")
        from topiccrawl.crawl.middlewares import parse_allow_hosts  # raises ConfigError on a bad entry

        parse_allow_hosts(self.live_allow_hosts)
