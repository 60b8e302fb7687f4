"""Cost of the anchor judge kept current at a large queue (docs/learned.md, "The anchor judge kept
current").

    python -m bench.judge_refresh [QUEUED=1000000] [PAGES=2000]

Fills a ``learned`` frontier with the judge on (λ = 0.1) to QUEUED links through ``observe_page``
and ``push`` (50 out-links per page, each with 3 anchor words and 10 words around it, judged by a
page classifier fitted on synthetic pages), then times one refresh of the whole queue (what each
refit of the page classifier costs) and PAGES steady pages that each link to 10 new and 10 queued
targets (the judged links to queued targets follow at once). Prints CPU time (``time.process_time``)
per part and the refresh amortised over the pages between two refits, which in a crawl are half
the pages so far (docs/learned.md, "The page classifier"): at 50 new links per page the queue
holds about 50 links per fetched page, so the next refit comes about QUEUED / 100 pages later.
"""
import random
import resource
import sys
import time

from topiccrawl.learning.classifier import PageClassifier, hash_terms
from topiccrawl.learning.linkvalue import LinkFeatures, LinkValueModel, url_tokens
from topiccrawl.learning.threads import limit_blas_threads
from topiccrawl.strategies.base import Link
from topiccrawl.strategies.learned import LearnedFrontier

argv = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(argv[0]) if len(argv) > 0 else 1_000_000
STEPS = int(argv[1]) if len(argv) > 1 else 2_000
rng = random.Random(0)
V = [f"w{i}" for i in range(20_000)]
clock = time.process_time
limit_blas_threads(1)

on, off = V[:200], V[200:]
classifier = PageClassifier(random_state=0).refit(
    hash_terms([rng.sample(on, 40) for _ in range(5)]),
    hash_terms([rng.sample(on, 40) for _ in range(30)] + [rng.sample(off, 40) for _ in range(970)]))
f = LearnedFrontier(LinkValueModel(retrain_every=10**9), epsilon=0.05, anchor_judge=0.1, judge_refresh=True)
judge = f.anchor_judge


def outlinks(page: str, n: int) -> tuple[list, list]:
    out = []
    for j in range(n):
        url = f"http://h{rng.randrange(1000)}.test/{page}/{j}"
        anchor = rng.sample(V, 3)
        out.append((url, LinkFeatures(anchor=anchor, url=url_tokens(url), context=rng.sample(V, 10), depth=2,
                                      score=rng.random(), terms=tuple(anchor))))
    docs = [(*feat.anchor, *feat.context) for _, feat in out]
    return out, docs


t = clock()
page = 0
while len(f) < N:
    out, docs = outlinks(f"f{page}", 50)
    for (_, feat), doc, shift in zip(out, docs, judge.shifts(classifier, 1, docs).tolist()):
        feat.shift, feat.judge_doc = shift, doc
    f.observe_page(f"http://fill.test/{page}", "fill.test", 0.2, out)
    for url, feat in out:
        f.push(Link(url, feat.score))
    page += 1
print(f"fill {len(f):,} links with the judge: {clock() - t:.1f} s CPU; max RSS "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")

t = clock()
changed = f.refresh_judge(classifier, 2)
refresh = clock() - t
between = max(1, N // 100)
print(f"one refresh of {changed:,} queued links: {refresh:.2f} s CPU; amortised over the ~{between:,} pages "
      f"to the next refit: {refresh / between * 1e6:.0f} us per page")

live = f._live
t_judge = t_follow = 0.0
for step in range(STEPS):
    out, docs = outlinks(f"s{step}", 10)
    queued = [live[rng.randrange(len(live))].link.url for _ in range(10)]
    qdocs = [tuple(rng.sample(V, 13)) for _ in queued]
    t0 = clock()
    shifts = judge.shifts(classifier, 2, docs + qdocs).tolist()
    t_judge += clock() - t0
    for (_, feat), doc, shift in zip(out, docs, shifts):
        feat.shift, feat.judge_doc = shift, doc
    t0 = clock()
    f.observe_page(f"http://s.test/{step}", "s.test", 0.2, out, judged_links=list(zip(queued, qdocs, shifts[10:])))
    t_follow += clock() - t0
    for url, feat in out:
        f.push(Link(url, feat.score))
print(f"steady, {STEPS} pages: judging 20 links {t_judge / STEPS * 1e6:.0f} us per page; "
      f"observe_page with 10 judged links to queued targets {t_follow / STEPS * 1e6:.0f} us per page")
print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
