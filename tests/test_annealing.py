import math
import pickle
import random

import pytest
from scipy import stats as scipy_stats

from topiccrawl.strategies.annealing import FCSAHostFrontier, SAFrontier, make_fcsa_host, make_sa
from topiccrawl.strategies.simple import BestFirstFrontier, FrontierError, Link


def links(n, seed=0, hosts=15, digits=2):
    rng = random.Random(seed)
    return [Link(f"u{i}", round(rng.random(), digits), domain=f"h{rng.randrange(hosts)}.test", payload=("req", i))
            for i in range(n)]


def drain(f):
    out = []
    while (link := f.pop()) is not None:
        out.append(link.url)
    return out


def test_cold_sa_is_exact_best_first():
    # distinct scores: on an exact tie (Δ = 0) Metropolis accepts the lower-ranked candidate
    sa, bf = SAFrontier(t0=1e-9, tmin=1e-9), BestFirstFrontier()
    for a, b in zip(links(400, seed=1, digits=12), links(400, seed=1, digits=12)):
        sa.push(a)
        bf.push(b)
    assert drain(sa) == drain(bf)
    assert sa.stats()["sa/accepted_worse"] == 0


def test_hot_sa_explores_below_the_best():
    sa, bf = SAFrontier(t0=10.0, alpha=1.0, tmin=1.0), BestFirstFrontier()
    for a, b in zip(links(300, seed=2), links(300, seed=2)):
        sa.push(a)
        bf.push(b)
    got, best_first = drain(sa), drain(bf)
    assert sorted(got) == sorted(best_first) and got != best_first
    assert sa.stats()["sa/accepted_worse"] > 100


def test_geometric_cooling_per_decision():
    sa = SAFrontier(t0=0.5, alpha=0.9, tmin=0.05)
    for link in links(100):
        sa.push(link)
    temps = []
    for _ in range(40):
        sa.pop()
        temps.append(sa.temperature)
    assert temps == pytest.approx([max(0.5 * 0.9 ** (i + 1), 0.05) for i in range(40)])
    assert sa.stats()["sa/decisions"] == 40


def test_metropolis_acceptance_probability():
    """Two links 0.6 and 0.5, k = 2, T = 0.1: the lower one goes first with P = ½·exp(−0.1/0.1)."""
    trials, lower_first = 3000, 0
    for seed in range(trials):
        sa = SAFrontier(t0=0.1, alpha=1.0, tmin=0.1, top_k=2, seed=seed)
        sa.push(Link("hi", 0.6, domain="a"))
        sa.push(Link("lo", 0.5, domain="b"))
        lower_first += sa.pop().url == "lo"
    p = 0.5 * math.exp(-(0.6 - 0.5) / 0.1)
    assert scipy_stats.binomtest(lower_first, trials, p).pvalue > 1e-3


def test_host_memory_shifts_order():
    def order(frontier):
        frontier.push(Link("a1", 0.52, domain="a.test"))
        frontier.push(Link("a2", 0.50, domain="a.test"))
        frontier.push(Link("b1", 0.48, domain="b.test"))
        frontier.push(Link("c1", 0.49, domain="c.test"))
        return drain(frontier)

    cold = dict(t0=1e-9, tmin=1e-9)
    assert order(SAFrontier(**cold)) == ["a1", "a2", "c1", "b1"]
    assert order(FCSAHostFrontier(**cold, host_weight=0.3)) == ["a1", "a2", "c1", "b1"]  # no feedback yet
    fc = FCSAHostFrontier(**cold, host_weight=0.3)
    for i in range(6):
        fc.feedback(f"http://a.test/{i}", "a.test", 0.05, beta=0.3)  # a.test yields nothing relevant
        fc.feedback(f"http://b.test/{i}", "b.test", 0.7, beta=0.3)  # b.test yields relevant pages
    assert fc.host_quality("a.test") == pytest.approx((0 + 2 * 0.5) / (6 + 2))
    assert fc.host_quality("b.test") == pytest.approx((6 + 2 * 0.5) / (6 + 2))
    assert order(fc) == ["b1", "c1", "a1", "a2"]
    assert fc.stats()["sa/hosts_with_feedback"] == 2


def test_feedback_reorders_already_queued_links():
    fc = FCSAHostFrontier(t0=1e-9, tmin=1e-9, host_weight=0.5)
    fc.push(Link("a1", 0.6, domain="a"))
    fc.push(Link("b1", 0.5, domain="b"))
    fc.feedback("x", "a", 0.0)  # graded relevance without β
    fc.feedback("y", "b", 1.0)
    assert drain(fc) == ["b1", "a1"]


@pytest.mark.parametrize("cls", [SAFrontier, FCSAHostFrontier])
def test_state_round_trip_continues_identically(cls):
    f = cls(t0=0.3, alpha=0.99, seed=4, **({"host_weight": 0.3} if cls is FCSAHostFrontier else {}))
    for link in links(300, seed=5):
        f.push(link)
    for _ in range(50):
        link = f.pop()
        if cls is FCSAHostFrontier:
            f.feedback(link.url, link.domain, link.score, beta=0.5)
    resumed = cls(t0=0.3, alpha=0.99, seed=99, **({"host_weight": 0.3} if cls is FCSAHostFrontier else {}))
    resumed.load_state(pickle.loads(pickle.dumps(f.state())))
    assert len(resumed) == len(f) and resumed.stats() == f.stats()
    a = [(l.url, l.payload) for l in (f.pop() for _ in range(120))]
    b = [(l.url, l.payload) for l in (resumed.pop() for _ in range(120))]
    assert a == b


def test_factories_parse_and_validate_options():
    f = make_sa({"sa_t0": "0.2", "sa_alpha": "0.95", "sa_tmin": "0.01", "sa_top_k": "4", "sa_seed": 3})
    assert (f.t0, f.alpha, f.tmin, f.top_k, f.name) == (0.2, 0.95, 0.01, 4, "sa")
    g = make_fcsa_host({"sa_host_weight": "0.4"})
    assert (g.name, g.host_weight, g.host_prior, g.host_strength) == ("fcsa-host", 0.4, 0.5, 2.0)
    for bad, needle in [({"sa_alpha": "1.5"}, "TOPICCRAWL_SA_ALPHA"), ({"sa_top_k": "0"}, "TOPICCRAWL_SA_TOP_K"),
                        ({"sa_t0": "hot"}, "TOPICCRAWL_SA_T0"), ({"sa_tmin": "5"}, "TOPICCRAWL_SA_TMIN")]:
        with pytest.raises(FrontierError, match=needle):
            make_sa(bad)
    with pytest.raises(FrontierError, match="TOPICCRAWL_SA_HOST_WEIGHT"):
        make_fcsa_host({"sa_host_weight": "2"})
