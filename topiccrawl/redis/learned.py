"""The ``learned`` strategy in Redis: N workers share one queue, their labels and one model version.

The memory strategy :class:`topiccrawl.strategies.learned.LearnedFrontier` (docs/learned.md, "On
Redis") with its shared parts under the crawl's key prefix (``topiccrawl:<crawl_id>:``):

* **Queue.** The frontier's ``requests`` ZSET, scored with −value (the link value the pushing
  worker computed with its model copy, R(l) until the first fit; ties in seq order, as the memory
  heap), with the push and lease scripts of :class:`~topiccrawl.redis.frontier.RedisFrontier`.
  The encoded feature row (:meth:`LinkValueModel.encode`) and the holder page travel with the
  request, so the worker that fetches a link labels it. A decision is ONE Lua script
  (``lua/learned_pop.lua``): the best link, or with probability ε the link of a uniform rank
  (the uniforms come from the worker's seeded Python RNG).
* **Labels.** Each worker appends its training events to one Redis LIST (``learned:events``):
  a fetched page (URL, P(relevant), the holder it was fetched through, the row of that link), the
  rows of its links to pages fetched before (labelled examples and graph edges), and the fetched
  pages' P(relevant) after a refit of its page classifier (``page_probabilities``). Every worker
  applies every event, its own included, in list order to its local
  :class:`~topiccrawl.learning.linkvalue.LinkValueModel`, so all workers hold the same graph,
  replay buffer and host counts. Appending and reading are one script (``lua/learned_sync.lua``)
  per fetched page, which also answers the published model version: the cheap version check.
* **One model version.** The worker holding the trainer lease (:mod:`topiccrawl.redis.leases`,
  one member ``trainer``, renewed at each of its pages, taken over when it expires) retrains every
  ``retrain_every`` pages of the whole crawl and publishes the weights (numpy arrays, no pickle)
  under a version number (``lua/learned_publish.lua``: only the lease holder, only a newer
  version, and not once the global budget is spent). The others load a newer version as soon as
  their next step sees it; a worker that joins loads it before its first push.
* **Re-scoring** after a retrain, by the trainer, bounded: the whole queue on the first fit or
  when it holds at most ``rescore_all`` links, else the ``rescore_top`` best and ``rescore_sample``
  random queued links (ZRANDMEMBER); a link popped meanwhile keeps its value
  (``lua/learned_rescore.lua``).
* **Anchor association** (``association="anchor"``): the term statistics are shared
  (:mod:`topiccrawl.redis.association`); a link's priority is its value plus the shift of its
  anchor terms, stored with it, recomputed by the trainer for the links it re-scores and for the
  whole queue (at most ``rescore_all`` links) every ``association_every`` pages of the crawl.
* **Holder refresh** (``holder_refresh``): after a refit of its page classifier, a worker moves the
  queued links of the pages it has new P for, as the memory strategy does
  (:meth:`RedisLearnedFrontier.refresh_holders`).
* **The anchors' prior taken out** (``TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE``): when the prior
  stops, a worker moves the queued links it scored under it by their parts, as the memory strategy
  does (:meth:`RedisLearnedFrontier.shift_scores`).

Keys besides the frontier's (``learned:`` + name): ``prio`` HASH member -> ZSET score, ``rows``
HASH member -> ``base64(row) holder``, ``assoc`` HASH member -> ``shift SEP term SEP ...``,
``state`` HASH (options JSON, explored, rescored, holder_refreshed, anchor_rescored, trainer_expired, assoc_pages,
assoc_total, the example pages counted), ``events`` LIST, ``model`` HASH (version, weights, meta), ``trainer`` /
``trainer:owner`` the trainer's lease set, ``terms:n`` / ``terms:s`` HASHes term -> n_t / s_t.
All of them live as long as the crawl id: a restarted worker replays the events and loads the
model; JOBDIR is not used.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import time
from collections import Counter, OrderedDict
from dataclasses import asdict

import numpy as np

from topiccrawl.learning.linkvalue import LinkFeatures, LinkValueModel, refreshed_row, shifted_score_row
from topiccrawl.redis.association import RedisTermAssociation
from topiccrawl.redis.frontier import RedisFrontier
from topiccrawl.strategies.base import FrontierError, Link
from topiccrawl.strategies.learned import (
    LearnedOptions,
    example_link_stats,
    example_pages,
    fallback_features,
    make_learned,
    push_value,
    remember,
    smoothed_yield,
)
from topiccrawl.strategies.wanglandau import clip01

#: the learned keys (``learned:`` + name) after the frontier's in the queue scripts, in the order
#: ``lua/learned.lua`` names them
NAMES = ("prio", "rows", "state", "assoc")
#: the anchor association's term statistics (:mod:`topiccrawl.redis.association`)
TERM_NAMES = ("terms:n", "terms:s")
#: separates the fields of an ``assoc`` entry: the link's shift at its last scoring, then its anchor terms
SEP = "\x1f"
#: the keys of ``lua/learned_sync.lua`` (the frontier's ``stats`` follows)
SYNC_NAMES = ("events", "model", "trainer", "trainer:owner", "state")
#: events read per script call (a joining worker replays the list in chunks of this size)
CHUNK = 10_000


def _b64(row: bytes) -> str:
    return base64.b64encode(row).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _score(value: float) -> str:
    """The ZSET score of a link value: −value, exact."""
    return repr(-float(value) + 0.0)


def pack_weights(model: LinkValueModel) -> str:
    """The fitted weights of ``model`` as base64 ``.npz`` (no pickle): per model (``classifier_``,
    and ``plain_`` with ``words="auto"``) the non-zero coefficients, the intercept and the SGD step
    count ``t_`` (so another worker can continue ``partial_fit``)."""
    arrays = {}
    for prefix, clf in (("", model.classifier_), ("plain_", model.plain_)):
        if clf is None:
            continue
        coef = np.asarray(clf.coef_, dtype=np.float64).ravel()
        idx = np.flatnonzero(coef).astype(np.uint32)
        arrays.update({f"{prefix}idx": idx, f"{prefix}val": coef[idx],
                       f"{prefix}intercept": np.array([float(clf.intercept_[0])]),
                       f"{prefix}t": np.array([float(getattr(clf, "t_", 1.0))]), "width": np.array([coef.size])})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return _b64(buf.getvalue())


def unpack_weights(model: LinkValueModel, weights: str, meta: dict) -> None:
    """Load published weights and ``meta`` (version, blend, which model predicts) into ``model``:
    its prediction and its estimators, ready to continue ``partial_fit`` when this worker becomes
    the trainer."""
    from sklearn.linear_model import SGDClassifier

    with np.load(io.BytesIO(_unb64(weights)), allow_pickle=False) as z:
        width = int(z["width"][0])
        for prefix, attr in (("", "classifier_"), ("plain_", "plain_")):
            if f"{prefix}idx" not in z.files:
                continue
            coef = np.zeros(width)
            coef[z[f"{prefix}idx"].astype(np.int64)] = z[f"{prefix}val"]
            clf = getattr(model, attr)
            if clf is None:  # the estimator LinkValueModel.retrain builds
                clf = SGDClassifier(loss="log_loss", alpha=model.alpha, random_state=model.random_state)
            clf.classes_ = np.array([0.0, 1.0])
            clf.coef_ = coef.reshape(1, -1)
            clf.intercept_ = np.array([float(z[f"{prefix}intercept"][0])])
            clf.t_ = float(z[f"{prefix}t"][0])
            clf.n_features_in_ = width
            setattr(model, attr, clf)
    model.blend_ = float(meta["blend"])
    model.blend_auc_ = {float(w): float(auc) for w, auc in meta.get("blend_auc", [])}
    model.plain_auc_ = {float(w): float(auc) for w, auc in meta.get("plain_auc", [])}
    model.words_ = bool(meta.get("words", model.words != "off"))
    model.version_ = int(meta["version"])
    # the links the published model trained on are not fresh for this worker's validation
    model._fresh = max(0, model.n_examples - int(meta.get("examples", model.n_examples)))
    model.activate()


def check_redis_options(options) -> None:
    """A one-line :class:`FrontierError` for a ``TOPICCRAWL_LEARNED_*`` option the Redis store does
    not have yet (``scrapy crawl`` checks it before the crawl starts)."""
    options = LearnedOptions.coerce(options)
    if options.learned_siblings != "off":
        raise FrontierError("TOPICCRAWL_LEARNED_SIBLINGS is not available with TOPICCRAWL_STORE=redis yet "
                            "(in memory only, docs/learned.md)")
    if options.learned_guard != "off":
        raise FrontierError("TOPICCRAWL_LEARNED_GUARD is not available with TOPICCRAWL_STORE=redis yet "
                            "(in memory only, docs/learned.md)")
    if options.learned_holder_mean:
        raise FrontierError("TOPICCRAWL_LEARNED_HOLDER_MEAN is not available with TOPICCRAWL_STORE=redis yet "
                            "(in memory only, docs/learned.md)")
    if options.learned_anchor_judge not in (0.0, LearnedOptions.learned_anchor_judge):  # the default: off here
        raise FrontierError("TOPICCRAWL_LEARNED_ANCHOR_JUDGE is not available with TOPICCRAWL_STORE=redis yet "
                            "(in memory only, docs/learned.md)")


class RedisLearnedFrontier(RedisFrontier):
    """``learned`` over Redis (module docstring); the arguments are those of
    :class:`~topiccrawl.strategies.learned.LearnedFrontier` plus RedisFrontier's lease arguments.

    ``rng`` gives this worker's uniforms (default ``random.Random(f"{seed}|{worker}")``);
    ``options``: the crawl's learned options (a worker with other options is refused).
    """

    STRATEGIES = ("learned",)
    LIB = ("learned.lua",)

    def __init__(self, client, keys: dict[str, str], *, model: LinkValueModel | None = None, epsilon: float = 0.05,
                 rescore_all: int = 4096, rescore_top: int = 128, rescore_sample: int = 128, seed: int = 0,
                 max_pending: int = 20_000, host_strength: float = 2.0, rng: random.Random | None = None,
                 options: dict | None = None, lease_seconds: float = 30.0, budget: int = 0,
                 worker: str = "worker", explore_sample: int = 1, association: str = "off",
                 association_every: int = 25, association_examples: bool = False,
                 holder_refresh: bool = False, example_links: bool = False) -> None:
        self._base = keys["requests"][: -len("requests")] + "learned:"
        self.learned_keys = {name: self._base + name for name in (*NAMES, *SYNC_NAMES, *TERM_NAMES)}
        super().__init__(client, keys, self.STRATEGIES[0], None, lease_seconds, budget, worker)
        self.model = model if model is not None else LinkValueModel(random_state=seed)
        self.epsilon, self.rescore_all, self.rescore_top, self.rescore_sample = \
            epsilon, rescore_all, rescore_top, rescore_sample
        self.max_pending, self.host_strength = max_pending, host_strength
        self.explore_sample = max(1, int(explore_sample))
        self.options = options if options is not None else {"seed": seed}
        self.rng = rng if rng is not None else random.Random(f"{seed}|{worker}")
        k = self.learned_keys
        self.association = (RedisTermAssociation(client, {"n": k["terms:n"], "s": k["terms:s"], "state": k["state"]})
                            if association == "anchor" else None)
        self.association_every = max(1, int(association_every))
        self.association_examples = association_examples
        self.example_links = example_links
        self.holder_refresh = holder_refresh
        self._refreshed = 0  # crawl pages at this worker's last association refresh
        self._decide = self._script("learned_pop.lua")
        self._rescore_script = self._script("learned_rescore.lua")
        self._sync_script = self.leases.script("learned_sync.lua")
        self._publish = self.leases.script("learned_publish.lua")
        self._sync_keys = [*(self.learned_keys[name] for name in SYNC_NAMES), keys["stats"]]
        self._publish_keys = [self.learned_keys["model"], self.learned_keys["trainer"],
                              self.learned_keys["trainer:owner"], keys["stats"]]
        #: target URL -> (row, holder URL, value, model version) of an observed, not yet pushed link
        self._incoming: OrderedDict[str, tuple] = OrderedDict()
        #: URL -> (row, holder URL) of a link this worker leased whose page is not observed yet
        self._inflight: OrderedDict[str, tuple] = OrderedDict()
        self._queued: set[str] = set()  # pushed by this worker, not fetched by anyone yet
        self._outbox: list[str] = []  # events waiting for the next step (a page's labelled out-links)
        self._applied = 0  # events of the list applied to the model
        self._hosts: dict[str, list[int]] = {}
        self._good = self._seen = 0
        self._by_worker: Counter[str] = Counter()  # pages applied, per fetching worker
        self.trainer = False
        self._trainer_when_left: bool | None = None  # whether it held the lease when it stopped
        self._stale = False  # a publish was refused: load the published model whatever its version
        self._trained = 0
        self._retrain_ms = 0.0
        self._model_meta: dict = {}
        self._claim()
        self._step(lease=0)  # replay the crawl's events and load its model before the first push
        self.start_version = self.model.version_

    @classmethod
    def from_options(cls, client, keys: dict[str, str], options, shared: dict | None = None,
                     **lease) -> RedisLearnedFrontier:
        """From the ``TOPICCRAWL_LEARNED_*`` options, checked by the memory factory (one-line errors).
        ``shared``: crawl settings outside those options that shape what the workers share (the
        scheduler's ``TOPICCRAWL_HOLDER_SCORE`` and ``TOPICCRAWL_ASSOCIATION_SCORE``: the page score
        the link model and the shared association are fed), claimed with them."""
        options = LearnedOptions.coerce(options)
        check_redis_options(options)
        memory = make_learned(options)
        return cls(client, keys, model=memory.model, epsilon=memory.epsilon, rescore_all=memory.rescore_all,
                   rescore_top=memory.rescore_top, rescore_sample=memory.rescore_sample, seed=options.learned_seed,
                   max_pending=memory.max_pending, host_strength=memory.host_strength,
                   options={**asdict(options), **(shared or {})},
                   explore_sample=memory.explore_sample,
                   association="off" if memory.association is None else "anchor",
                   association_every=memory.association_every,
                   association_examples=memory.association_examples, holder_refresh=memory.holder_refresh,
                   example_links=memory.example_links, **lease)

    def extra_keys(self) -> list[str]:
        return [self.learned_keys[name] for name in NAMES]

    def own_keys(self) -> list[str]:
        return list(self.learned_keys.values())

    def _claim(self) -> None:
        """Join the crawl's model: the first worker sets the options; a worker with others is
        refused (one model cannot learn with two label rules)."""
        self.claim_options(self.learned_keys["state"], "the learned model")

    # -- order and the Frontier protocol ----------------------------------------------------------
    def prefix(self, link: Link) -> str:
        return ""  # the member is the seq; the ZSET score is the value

    def _fallback_features(self, link: Link) -> LinkFeatures:
        return fallback_features(link, self.model.k)

    def push_args(self, link: Link) -> list:
        """The ZSET score (−priority), the row field (``base64(row) holder``) and the association
        field of ``link`` (``shift SEP term SEP term ...``; '' without anchor terms): the priority
        is the link value plus, with the association, the shift of its anchor terms."""
        model = self.model
        waiting = self._incoming.get(link.url)
        shift, terms = waiting[4:6] if waiting is not None and len(waiting) > 5 else (0.0, ())
        row, holder, priority = push_value(model, self._incoming, link)
        if model.page(link.url) is None:
            self._queued.add(link.url)
        return [_score(priority + shift), f"{_b64(row)} {holder}" if holder else _b64(row),
                SEP.join((repr(shift), *terms)) if terms else ""]

    def pop(self) -> Link | None:
        """One decision (atomic, leased): the best link, or with probability ε a random one (the
        best of ``explore_sample`` uniform picks)."""
        explore = bool(self.epsilon) and self.rng.random() < self.epsilon
        # the best of k uniform picks is the link of rank floor(min(u_1..u_k) · n)
        u = min(self.rng.random() for _ in range(self.explore_sample)) if explore else -1.0
        res = self._decide(keys=self._keys, args=[self.lease_seconds, self.budget, self.worker, repr(u)])
        self.last = {"blocked": res[0] == -1, "dp": int(res[1]), "reclaimed": int(res[2]), "queued": int(res[3])}
        if res[0] != 1:
            return None
        link = self._link(res[4], res[5])
        if res[6]:
            row, _, holder = res[6].partition(" ")
            self._remember(self._inflight, link.url, (_unb64(row), holder or None))
        return link

    @property
    def queued_urls(self) -> set[str]:
        """URLs this worker pushed and nobody fetched yet: :meth:`observe_page` ignores out-links
        to them (read-only)."""
        return self._queued

    def _remember(self, table: OrderedDict, key: str, value: tuple) -> None:
        remember(table, key, value, self.max_pending)

    # -- what the crawler reports -----------------------------------------------------------------
    def host_yield(self, domain: str) -> float:
        """(good + a·g) / (seen + a) of a host over every worker's pages, g = (Σ good + 1) / (Σ seen + 2)."""
        return smoothed_yield(self._hosts, self._good, self._seen, domain, self.host_strength)

    def observe_page(self, url: str, domain: str, probability: float, out_links=(), *,
                     relevant: bool | None = None, terms=None, relevance: float | None = None,
                     term_ids=None) -> None:
        """A fetched page (as :meth:`LearnedFrontier.observe_page`; ``term_ids`` is not used: the
        shared association is keyed by term): its event goes to the shared
        list and every event not applied yet is applied (one round trip), then its out-links are
        encoded and valued; those to fetched pages become the next step's event."""
        model = self.model
        via = self._inflight.pop(url, None)
        self._queued.discard(url)
        holder_value = 0.0
        new = model.page(url) is None
        shifts: dict[str, float] = {}
        if self.association is not None:  # count the page's terms, read its anchors' (one round trip)
            out_links = list(out_links)
            lookup = (t for target, f in out_links if target not in self._queued for t in f.terms)
            shifts = self.association.exchange(terms if new else None,
                                               probability if relevance is None else relevance, lookup)
        if new:
            event = ["p", self.worker, url, domain, probability, relevant, via[1] if via else None,
                     _b64(via[0]) if via else None]
            self._step(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
            if via is not None and model.fitted:
                holder_value = model.predict_row(via[0])
        targets, features = [], []
        p, hy, since = clip01(probability), self.host_yield(domain), model.since(url)
        queued = self._queued
        for target, f in out_links:
            if target in queued:
                continue
            f.holder_probability, f.host_yield, f.distance, f.holder_value = p, hy, since, holder_value
            targets.append(target)
            features.append(f)
        if not features:
            return
        rows = model.encode(features)
        values = model.predict_rows(rows).tolist() if model.fitted else [None] * len(rows)
        version, examples = model.version_, []
        for target, f, row, value in zip(targets, features, rows, values, strict=True):
            if model.page(target) is not None:  # fetched before: an example and an edge, for every worker
                examples.append([target, _b64(row)])
            else:
                terms = tuple(f.terms) if self.association is not None else ()
                shift = max((shifts[t] for t in terms), default=0.0)
                self._remember(self._incoming, target, (row, url, value, version, shift, terms))
        if examples:
            self._outbox.append(json.dumps(["x", url, examples], ensure_ascii=False, separators=(",", ":")))

    def observe_examples(self, examples, counter_examples=()) -> int:
        """The example pages into the shared association (as :meth:`LearnedFrontier.observe_examples`);
        every worker fetches the examples, each page counts once (named by a digest of its terms).
        Returns the number of pages given."""
        if self.association is None or not self.association_examples:
            return 0
        pages = example_pages(examples, counter_examples)
        for terms, relevance in pages:
            digest = hashlib.sha1("\x1f".join(terms).encode("utf-8")).hexdigest()
            self.association.exchange(terms, relevance, once=f"{relevance:g}:{digest}")
        return len(pages)

    def page_probabilities(self, probabilities: dict[str, float], holder_weight: float | None = None) -> None:
        """Fetched pages' P(relevant) under this worker's refitted page classifier (URL -> P): an
        event for every worker's model (the link labels follow them from the next retrain).
        ``holder_weight`` (1 − ∂, when R(l)'s holder term is P) with ``holder_refresh``: the queued
        links of these pages follow them (:meth:`refresh_holders`)."""
        if probabilities and hasattr(self.model, "set_probabilities"):
            self._outbox.append(json.dumps(["q", self.worker, probabilities], ensure_ascii=False,
                                           separators=(",", ":")))
        if self.holder_refresh and holder_weight and probabilities:
            self.refresh_holders(probabilities, holder_weight)

    def refresh_holders(self, probabilities: dict[str, float], weight: float) -> int:
        """The shared queue's links whose holder page has a new P (this worker's pages): the
        memory strategy's :meth:`~topiccrawl.strategies.learned.LearnedFrontier.refresh_holders`,
        each link's association shift kept; a link popped meanwhile is left alone. Returns how
        many links this call moved."""
        def move(row: bytes, holder: str, url: str | None) -> bytes:
            p = probabilities.get(holder) if holder else None
            return row if p is None else refreshed_row(row, p, weight)

        return self._move_rows(move, "holder_refreshed")

    def shift_scores(self, deltas: dict[str, float]) -> int:
        """The shared queue's links to the URLs in ``deltas``: R(l) moved by each one's delta, as
        the memory strategy's :meth:`~topiccrawl.strategies.learned.LearnedFrontier.shift_scores`
        (the crawler gives the links it scored; their URLs are read back from the queue's data).
        Returns how many links this call moved."""
        only = {url: delta for url, delta in deltas.items() if delta}
        if not only:
            return 0
        return self._move_rows(lambda row, holder, url: shifted_score_row(row, only[url]), "anchor_rescored", only)

    def _move_rows(self, move, counter: str, only: dict | None = None) -> int:
        """Every queued link whose row ``move(row, holder, url)`` changes gets the new row and the
        model's value of it (R(l) while unfitted) plus its association shift, in batches of 4,096
        (``lua/learned_rescore.lua``: a link popped meanwhile is left alone; ``counter`` is the state
        field counting them). With ``only``, just the links to its URLs (``url`` is None without)."""
        moved = 0
        queued = self.r.zrange(self.keys["requests"], 0, -1)
        for i in range(0, len(queued), 4096):
            members, urls = queued[i:i + 4096], None
            if only is not None:
                data = self.r.hmget(self.keys["requests:data"], members)
                picked = [(m, url) for m, d in zip(members, data, strict=True)
                          if d and (url := self._link(m, d).url) in only]
                members, urls = [m for m, _ in picked], [url for _, url in picked]
                if not members:
                    continue
            fields = self.r.hmget(self.learned_keys["rows"], members)
            changed = []
            for j, (member, field) in enumerate(zip(members, fields, strict=True)):
                if not field:
                    continue
                encoded, _, holder = field.partition(" ")
                row = _unb64(encoded)
                new = move(row, holder, urls[j] if urls else None)
                if new is not row:
                    changed.append((member, new, holder))
            if not changed:
                continue
            rows = [row for _, row, _ in changed]
            values = self.model.predict_rows(rows).tolist()  # R(l) while unfitted
            assoc = self.r.hmget(self.learned_keys["assoc"], [m for m, _, _ in changed])
            args = [counter]
            for (member, row, holder), value, field in zip(changed, values, assoc, strict=True):
                shift = float(field.split(SEP, 1)[0]) if field else 0.0
                args += [member, _score(value + shift), "", f"{_b64(row)} {holder}" if holder else _b64(row)]
            moved += self._rescore_script(keys=self._keys, args=args)
        return moved

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """A counted page :meth:`observe_page` did not see is recorded (as in memory)."""
        if self.model.page(url) is None:
            self.observe_page(url, domain, clip01(relevance), relevant=None if beta is None else relevance >= beta)

    # -- the shared labels and model -------------------------------------------------------------
    def _step(self, *events: str, lease: float | None = None) -> None:
        """Send the outbox and ``events``, take or renew the trainer lease (``lease`` seconds;
        default the frontier's; 0 leaves it, −1 gives it up), apply every event not applied yet,
        load a newer model, and retrain when this worker is the trainer and a retrain is due."""
        seconds = self.lease_seconds if lease is None else lease
        send, self._outbox = [*self._outbox, *events], []
        while True:
            res = self._sync_script(keys=self._sync_keys, args=[self._applied, self.worker, seconds, *send])
            send = []
            trainer, version, dp, entries = bool(res[0]), int(res[1]), int(res[2]), res[3:]
            for entry in entries:
                self._apply(json.loads(entry))
            self._applied += len(entries)
            if len(entries) < CHUNK:
                break
        self.trainer = trainer
        if self._stale or version > self.model.version_:
            self._load()
        trained = trainer and self.model.retrain_due and not (self.budget and dp >= self.budget)
        if trained:
            self._train()
        pages, every = self.model.n_pages, self.association_every
        if self.association is not None and trainer and pages // every > self._refreshed // every:
            self._refreshed = pages
            if not trained:  # a retrain's re-scoring recomputed the shifts already
                self._refresh_association()

    def _apply(self, event: list) -> None:
        """One training event, in list order (every worker the same)."""
        model = self.model
        if event[0] == "p":
            _, worker, url, domain, probability, relevant, parent, via = event
            if model.page(url) is not None:  # fetched twice (an expired lease): labelled once
                return
            model.add_page(url, probability, relevant=relevant, parent=parent)
            rel = model.is_relevant(url)
            host = self._hosts.setdefault(domain, [0, 0])
            host[0] += bool(rel)
            host[1] += 1
            self._good += bool(rel)
            self._seen += 1
            self._by_worker[worker] += 1
            if via:
                model.add_example(_unb64(via), url)
            self._queued.discard(url)
        elif event[0] == "x":
            _, holder, examples = event
            for target, row in examples:
                if model.page(target) is not None:
                    model.add_example(_unb64(row), target)
                    model.add_edge(holder, target)
        elif event[0] == "q" and hasattr(model, "set_probabilities"):
            model.set_probabilities(event[2])

    def _load(self) -> None:
        """The published model (weights and version) into the local copy."""
        version, weights, meta = self.r.hmget(self.learned_keys["model"], "version", "weights", "meta")
        self._stale = False
        if version is None or weights is None:
            return
        meta = json.loads(meta)
        unpack_weights(self.model, weights, meta)
        self._model_meta = meta
        # the next retrain is RETRAIN_EVERY pages after this version's, whoever trains it
        self.model.trained_pages_ago(self.model.n_pages - int(meta.get("pages", 0)))

    def _train(self) -> None:
        """Retrain on the shared buffer, publish the version, re-score the shared queue."""
        model = self.model
        t0 = time.perf_counter()
        first = not model.fitted
        if model.retrain():
            meta = {"version": model.version_, "blend": model.blend_, "words": model.words_,
                    "blend_auc": sorted(model.blend_auc_.items()),
                    "plain_auc": sorted(model.plain_auc_.items()), "pages": model.n_pages,
                    "examples": model.n_examples, "events": self._applied, "trainer": self.worker,
                    "by_worker": dict(self._by_worker)}
            ok = self._publish(keys=self._publish_keys,
                               args=[self.worker, model.version_, self.budget, pack_weights(model),
                                     json.dumps(meta, sort_keys=True)])
            if ok:
                self._trained += 1
                self._model_meta = meta
                self._rescore(everything=first)
            else:  # another trainer published meanwhile, or the budget is spent: its model is the one
                self._stale = True
                self._load()
        self._retrain_ms = (time.perf_counter() - t0) * 1e3

    def _rescore(self, everything: bool = False) -> None:
        """New values for queued links, bounded (module docstring)."""
        requests = self.keys["requests"]
        n = self.r.zcard(requests)
        if everything or n <= max(self.rescore_all, self.rescore_top + self.rescore_sample):
            # the members read once: re-scoring a chunk moves the ranks of the next ones
            queued = self.r.zrange(requests, 0, -1)
            chunks = (queued[i:i + 4096] for i in range(0, len(queued), 4096))
        else:
            top = self.r.zrange(requests, 0, self.rescore_top - 1) if self.rescore_top else []
            sample = self.r.zrandmember(requests, self.rescore_sample) or []
            chosen = set(top)
            chunks = iter([top + [m for m in dict.fromkeys(sample) if m not in chosen]])
        for members in chunks:
            if not members:
                continue
            fields = self.r.hmget(self.learned_keys["rows"], members)
            pairs = [(m, _unb64(f.partition(" ")[0])) for m, f in zip(members, fields) if f]
            if not pairs:
                continue
            values = self.model.predict_rows([row for _, row in pairs]).tolist()
            shifts, assoc = self._shifts([m for m, _ in pairs])
            args = ["rescored"]
            for (member, _), value, shift, field in zip(pairs, values, shifts, assoc, strict=True):
                args += [member, _score(value + shift), field, ""]
            self._rescore_script(keys=self._keys, args=args)

    def _shifts(self, members: list[str], fields: list[str | None] | None = None) -> tuple[list[float], list[str]]:
        """The association shifts of queued ``members`` from the shared statistics now, and their
        new ``assoc`` fields ('': none, left as it is); zeros without the association. ``fields``:
        their current ``assoc`` fields when already read."""
        if self.association is None:
            return [0.0] * len(members), [""] * len(members)
        if fields is None:
            fields = self.r.hmget(self.learned_keys["assoc"], members)
        terms = [f.split(SEP)[1:] if f else [] for f in fields]
        shifts = self.association.shifts(terms).tolist()
        return shifts, [SEP.join((repr(a), *t)) if t else "" for a, t in zip(shifts, terms, strict=True)]

    def _refresh_association(self) -> None:
        """Every queued link's association shift recomputed (a queue of at most ``rescore_all``
        links; the link values stay): its score moves by the change of its shift."""
        requests = self.keys["requests"]
        if self.r.zcard(requests) > self.rescore_all:
            return
        queued = self.r.zrange(requests, 0, -1, withscores=True)
        for i in range(0, len(queued), 4096):
            chunk = queued[i:i + 4096]
            members = [m for m, _ in chunk]
            old = self.r.hmget(self.learned_keys["assoc"], members)
            shifts, fields = self._shifts(members, old)
            args = ["rescored"]
            for (member, score), before, shift, field in zip(chunk, old, shifts, fields, strict=True):
                if field:
                    was = float(before.split(SEP, 1)[0])
                    if shift != was:
                        args += [member, _score(-score + shift - was), field, ""]
            if len(args) > 1:
                self._rescore_script(keys=self._keys, args=args)

    def leave(self) -> None:
        """This worker stops: its last labels are sent, the newest model loaded, the trainer
        lease given up (another worker takes over at once)."""
        held = self.trainer or bool(self._trainer_when_left)  # a second leave() keeps the first's answer
        self._step(lease=-1)
        self._trainer_when_left = held

    # -- reporting ---------------------------------------------------------------------------------
    def stats(self) -> dict:
        """The memory strategy's ``learned/*`` statistics (explored and rescored: all workers'),
        and this worker's part: trainer, retrains here, the version it joined at."""
        m = self.model
        m.refresh_labels()  # only the trainer relabels as it trains: every worker reports the same count
        explored, rescored, refreshed = self.r.hmget(self.learned_keys["state"], "explored", "rescored",
                                                     "holder_refreshed")
        return {
            "learned/model_version": m.version_,
            "learned/blend": m.blend_,
            "learned/words": int(m.words_),
            "learned/retrains": m.version_,
            "learned/retrain_ms": round(self._retrain_ms, 3),
            "learned/labelled_links": m.n_examples,
            "learned/pages": m.n_pages,
            "learned/relevant_pages": m.n_relevant,
            "learned/explored": int(explored or 0),
            "learned/rescored": int(rescored or 0),
            **({"learned/holder_refreshed": int(refreshed or 0)} if self.holder_refresh else {}),
            # after leave(): whether it was the trainer until then (it gave the lease up)
            "learned/trainer": self.trainer if self._trainer_when_left is None else self._trainer_when_left,
            "learned/trained_here": self._trained,
            "learned/start_version": self.start_version,
            "learned/model_pages": int(self._model_meta.get("pages", 0)),
            **({"learned/association_pages": self.association.pages, "learned/association_terms": len(self.association)}
               if self.association is not None else {}),
            **example_link_stats(self),
        }

    def model_meta(self) -> dict:
        """What the published version was trained on: version, pages, examples, events, trainer,
        and pages per fetching worker (``by_worker``); {} before the first version."""
        meta = self.r.hget(self.learned_keys["model"], "meta")
        return json.loads(meta) if meta else {}
