"""Decision cost of the ``learned`` frontier at a 10^6-link queue (docs/benchmarks.md, "Learned focus").

    python -m bench.learned_decisions [QUEUED=1000000] [PAGES=5000] [M=R=128] [--no-freeze] [--no-association]
        [--blas-threads=N] [--gc-threshold=N]

Fills the queue through the public path (``observe_page`` with 50 out-links per page, then
``push``), fits the model on a planted signal, then runs a steady crawl: pop one link, observe its
page (10 out-links), push them, a retrain (with its bounded re-scoring of M + R links) every 100
pages. Prints CPU time (``time.process_time``) per part, and best-first's at the same size; the
decision (one push + one pop + the re-scoring share) also per block of 500 pages, median and range,
since single runs of one code have spread by a factor of two (docs/benchmarks.md).
As in ``bench.bench_decisions``, the filled queue is moved out of the cyclic GC's view
(``gc.freeze``) before the steady state, so full collections re-scanning the set-up objects do not
count; ``--no-freeze`` includes them. The anchor association is on, as in a crawl (each page
reports 50 terms, each link its anchor's words); ``--no-association`` turns it off. BLAS is
limited to one thread, as a crawl limits it (``TOPICCRAWL_BLAS_THREADS``); ``--blas-threads=0``
keeps the libraries' default. The garbage collector's young generation is raised as a crawl raises
it (``TOPICCRAWL_GC_THRESHOLD``, its default); ``--gc-threshold=0`` keeps Python's.
"""
import gc
import random
import resource
import statistics
import sys
import time

from topiccrawl.crawl.runtime import raise_gc_threshold
from topiccrawl.crawl.settings import TopicCrawlConfig
from topiccrawl.learning.linkvalue import LinkFeatures, LinkValueModel, url_tokens
from topiccrawl.learning.threads import limit_blas_threads
from topiccrawl.strategies.base import Link
from topiccrawl.strategies.learned import LearnedFrontier
from topiccrawl.strategies.simple import BestFirstFrontier

FREEZE = "--no-freeze" not in sys.argv
ASSOCIATION = "off" if "--no-association" in sys.argv else "anchor"
BLAS = int(next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--blas-threads=")), 1))
GC_THRESHOLD = int(next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--gc-threshold=")),
                        TopicCrawlConfig().gc_threshold))
argv = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(argv[0]) if len(argv) > 0 else 1_000_000
STEPS = int(argv[1]) if len(argv) > 1 else 5_000
M = int(argv[2]) if len(argv) > 2 else 128
rng = random.Random(0)
V = [f"w{i}" for i in range(20_000)]
clock = time.process_time

def outlinks(page, n):
    out = []
    for j in range(n):
        url = f"http://h{rng.randrange(1000)}.test/{page}/{j}"
        anchor = rng.sample(V, 3) + (["zq"] if rng.random() < 0.05 else [])
        out.append((url, LinkFeatures(anchor=anchor, url=url_tokens(url), context=rng.sample(V, 10),
                                      depth=2, score=rng.random(), terms=tuple(anchor))))
    return out

f = LearnedFrontier(LinkValueModel(retrain_every=10**9), epsilon=0.05, rescore_top=M, rescore_sample=M,
                    association=ASSOCIATION)
print(f"anchor association: {ASSOCIATION}")
before = limit_blas_threads(BLAS)
defaults = ", ".join(map(str, sorted(set(before.values()))))
print(f"BLAS threads: {BLAS or 'the default'} (the libraries' default: {defaults})")
raise_gc_threshold(GC_THRESHOLD)
print(f"garbage collection thresholds: {gc.get_threshold()}")


def text(relevance: float) -> dict:
    """A page's terms and R(P) for the association."""
    return {"terms": rng.sample(V, 50), "relevance": relevance}


# teach: 2,000 pages whose "zq" links lead to relevant pages, so the model is fitted
t = clock()
for p in range(2000):
    holder = f"http://teach.test/{p}"
    # the holder is reported as fetched without a push and pop of its own: with the anchor
    # association a queued link can outrank a fresh push of 1.0, so "push it, pop it" would pop
    # another link and leave the holder queued (fetched again later, a page that trains nothing)
    outs = outlinks(f"t{p}", 5)
    f.observe_page(holder, "teach.test", 0.0, outs, **text(0.0))
    for url, feat in outs:
        f.push(Link(url, feat.score))
while (link := f.pop()) is not None:
    r = 1.0 if "zq" in link.url else rng.random() * 0.6
    f.observe_page(link.url, "x", r, **text(r))
assert f.retrain(), "model not fitted"
print(f"teach + first fit: {clock() - t:.1f} s CPU")

# fill to N queued links (50 out-links per page)
t = clock()
t_push = 0.0
page = 0
while len(f) < N:
    holder = f"http://fill.test/{page}"
    # the holder is reported as fetched without a push and pop of its own: with the anchor
    # association a queued link can outrank a fresh push of 1.0, so "push it, pop it" would pop
    # another link and leave the holder queued (fetched again later, a page that trains nothing)
    outs = outlinks(f"f{page}", 50)
    f.observe_page(holder, "fill.test", 0.2, outs, **text(0.2))
    t0 = clock()
    for url, feat in outs:
        f.push(Link(url, feat.score))
    t_push += clock() - t0
    page += 1
fill = clock() - t
print(f"fill {len(f):,} links: {fill:.1f} s CPU ({fill / len(f) * 1e6:.1f} us/link incl. encoding; push alone {t_push / len(f) * 1e6:.2f} us)")  # noqa: E501
print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")

def settle() -> None:
    """Collect, then (unless --no-freeze) freeze the set-up objects as bench_decisions does: new
    objects still count, the 10^6 set-up ones are not re-scanned."""
    gc.collect()
    if FREEZE:
        gc.freeze()


# steady state
settle()
print(f"gc.freeze of the filled queue: {'yes' if FREEZE else 'no (--no-freeze)'}")
f.model.retrain_every = 100
rescore_time = [0.0]
orig = f._rescore
def timed_rescore(**kw):
    t0 = clock()
    orig(**kw)
    rescore_time[0] += clock() - t0
f._rescore = timed_rescore
retrain_time = 0.0
orig_retrain = f.model.retrain
def timed_retrain():
    global retrain_time
    t0 = clock()
    r = orig_retrain()
    retrain_time += clock() - t0
    return r
f.model.retrain = timed_retrain
t_pop = t_push = t_obs = 0.0
pops = pushes = 0
BLOCK = 500  # pages per block: five retrains each
blocks, mark = [], (0.0, 0.0, 0.0, 0, 0)
for step in range(STEPS):
    t0 = clock()
    link = f.pop()
    t_pop += clock() - t0
    pops += 1
    outs = outlinks(f"s{step}", 10)
    t0 = clock()
    r = rng.random()
    f.observe_page(link.url, link.url.split("/")[2], r, outs, **text(r))
    t_obs += clock() - t0
    t0 = clock()
    for url, feat in outs:
        f.push(Link(url, feat.score))
        pushes += 1
    t_push += clock() - t0
    if (step + 1) % BLOCK == 0:  # one push + one pop + the re-scoring share, within this block
        now = (t_pop, t_push, rescore_time[0], pops, pushes)
        d = [a - b for a, b in zip(now, mark)]
        blocks.append((d[0] / d[3] + d[1] / d[4] + d[2] / d[3]) * 1e6)
        mark = now
st = f.stats()
t_obs_only = t_obs - rescore_time[0] - retrain_time
print(f"steady state at ~{len(f):,} queued, {STEPS} pages, {st['learned/retrains']} retrains, {st['learned/rescored']:,} re-scored in all")  # noqa: E501
print(f"  pop {t_pop / pops * 1e6:.2f} us, push {t_push / pushes * 1e6:.2f} us")
print(f"  re-scoring {rescore_time[0] / max(1, STEPS // 100) * 1e3:.1f} ms per retrain = {rescore_time[0] / pops * 1e6:.2f} us per pop")  # noqa: E501
print(f"  decision (pop + push + re-scoring share): {(t_pop + t_push + rescore_time[0]) / pops * 1e6:.2f} us per pop, "
      f"{(t_pop + t_push + rescore_time[0]) / (pops + pushes) * 1e6:.2f} us per push-or-pop")
if blocks:
    print(f"  one push + one pop + the re-scoring share, per block of {BLOCK} pages: median "
          f"{statistics.median(blocks):.1f} us (range {min(blocks):.1f}-{max(blocks):.1f}, {len(blocks)} blocks: "
          + " ".join(f"{b:.0f}" for b in blocks) + ")")
print(f"  model retrain (off the decision path) {retrain_time / max(1, STEPS // 100) * 1e3:.1f} ms each; "
      f"observe_page encoding {t_obs_only / pops * 1e3:.2f} ms per page (10 links)")
print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")

# reference: BestFirstFrontier at the same size, same steady loop (pop + 10 pushes)

b = BestFirstFrontier()
for i in range(N):
    b.push(Link(f"http://b.test/{i}", rng.random()))
settle()
t_pop = t_push = 0.0
for step in range(STEPS):
    t0 = clock()
    b.pop()
    t_pop += clock() - t0
    t0 = clock()
    for j in range(10):
        b.push(Link(f"http://b.test/s{step}/{j}", rng.random()))
    t_push += clock() - t0
print(f"bestfirst at {len(b):,}: pop {t_pop / STEPS * 1e6:.2f} us, push {t_push / STEPS / 10 * 1e6:.2f} us")
