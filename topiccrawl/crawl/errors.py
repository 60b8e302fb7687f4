"""The one-line error of a bad setting or spider argument, shared by the crawl layer."""


class ConfigError(ValueError):
    """A setting or spider argument with a bad value (one-line message)."""
