"""The one-line error of a bad setting or spider argument, shared by the crawl layer, and the
masking that keeps secrets out of every message and log line."""

from __future__ import annotations

import logging
import re


class ConfigError(ValueError):
    """A setting or spider argument with a bad value (one-line message)."""


MASK = "***"
#: query parameters whose value is a secret (``?password=``, ``&token=``, ``api_key=`` …)
_SECRET_PARAM = re.compile(r"pass|pwd|secret|token|auth|key|credential", re.I)
#: a URL inside free text: scheme, ``://`` and everything up to white space or a quote
_URL_IN_TEXT = re.compile(r"""\b[a-z][a-z0-9+.-]*://[^\s'"<>]+""", re.I)
#: ``password=…`` in a text that is not a parsable URL
_SECRET_TAIL = re.compile(r"((?:pass\w*|pwd|secret|token|auth\w*|\w*key)=)[^&\s]+", re.I)


def redact(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the user info's password (everything between
    ``user:`` and the last ``@``, whatever characters it holds), a user info without a colon
    (``TOKEN@host``), and the value of every query parameter named like a secret (``?password=``,
    ``token``, ``key``, …). An ``@`` later in the URL masks more than needed, never less."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _SECRET_TAIL.sub(lambda m: m.group(1) + MASK, url)
    user, at, rest = rest.rpartition("@")
    if at:
        name, colon, _ = user.partition(":")
        user = f"{name}:{MASK}@" if colon else f"{MASK}@"
    path, q, query = rest.partition("?")
    if q and _SECRET_PARAM.search(query):
        query, hash_, fragment = query.partition("#")
        pairs = [p.partition("=") for p in query.split("&")]
        query = "&".join(k + eq + (MASK if eq and _SECRET_PARAM.search(k) else v) for k, eq, v in pairs) + hash_ + fragment
    return f"{scheme}://{user}{path}{q}{query}"


def redact_text(text: str) -> str:
    """Every URL inside ``text`` passed through :func:`redact`."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)


class RedactFilter(logging.Filter):
    """A logging filter masking the secrets of every URL in a record (e.g. Scrapy's "Error storing
    … feed in: ftp://user:PASSWORD@…", or a settings value printed by Scrapy)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: the handler reports it
            return True
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


#: loggers whose lines print settings, spider arguments or feed URIs
_SETTINGS_LOGGERS = ("scrapy.crawler", "scrapy.utils.log", "scrapy.addons", "scrapy.middleware",
                     "scrapy.extensions.feedexport")


def mask_secrets_in_logs() -> None:
    """Install :class:`RedactFilter` on the loggers that print settings (once per process)."""
    for name in _SETTINGS_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) for f in log.filters):
            log.addFilter(RedactFilter())
