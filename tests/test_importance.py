"""PageRank in the WL paper's unnormalised form (mean 1) and its refresh cache."""

from __future__ import annotations

import pickle
import random

import networkx as nx
import pytest

from topiccrawl.scoring.importance import LinkGraph, PageRankCache


def test_two_nodes_with_a_dangling_one_by_hand():
    g = LinkGraph()
    g.add_page("A", ["B"])
    # PR(A) = 0.15 + 0.85·PR(B)/2 ; PR(B) = 0.15 + 0.85·(PR(A) + PR(B)/2) ; sum = 2
    pr = g.pagerank(tol=1e-12)
    assert pr["A"] == pytest.approx(1.0 / 1.425)
    assert pr["B"] == pytest.approx(2 - 1.0 / 1.425)


def test_cycle_has_rank_one_everywhere():
    g = LinkGraph()
    for a, b in [("A", "B"), ("B", "C"), ("C", "A")]:
        g.add_page(a, [b])
    assert g.pagerank() == pytest.approx({"A": 1.0, "B": 1.0, "C": 1.0})


def random_crawl(seed: int, pages: int = 200, universe: int = 400):
    rng = random.Random(seed)
    crawl = []
    for i in range(pages):
        outlinks = [f"http://s{rng.randrange(20)}.test/{rng.randrange(universe)}"
                    for _ in range(rng.randrange(0, 9))]
        crawl.append((f"http://s{i % 20}.test/{i}", outlinks))
    return crawl


@pytest.mark.parametrize("seed", [1, 2])
def test_matches_networkx_times_n_with_mean_one(seed):
    g, ref = LinkGraph(), nx.DiGraph()
    for url, outlinks in random_crawl(seed):
        g.add_page(url, outlinks)
        ref.add_node(url)
        ref.add_edges_from((url, v) for v in outlinks if v != url)
    n = ref.number_of_nodes()
    assert len(g) == n and g.n_edges == ref.number_of_edges()
    dangling = [u for u in ref if ref.out_degree(u) == 0]
    assert len(dangling) > n / 2  # most nodes are uncrawled frontier URLs
    pr = g.pagerank(d=0.85, tol=1e-12, max_iter=500)
    expected = nx.pagerank(ref, alpha=0.85, tol=1e-12, max_iter=500)
    assert pr == pytest.approx({u: v * n for u, v in expected.items()}, abs=1e-7)
    assert sum(pr.values()) / n == pytest.approx(1.0)


def test_default_tolerance_is_per_node_on_the_mean_one_scale():
    g = LinkGraph()
    for url, outlinks in random_crawl(3, pages=300, universe=300):
        g.add_page(url, outlinks)
    exact = g.pagerank(tol=1e-14, max_iter=1000)
    default = g.pagerank()
    assert max(abs(default[u] - exact[u]) for u in exact) < 1e-4


def test_self_links_duplicates_and_repeated_pages():
    g = LinkGraph()
    g.add_page("A", ["A", "B", "B", "C"])
    g.add_page("A", ["D"])  # recorded once: ignored
    assert (len(g), g.n_edges, g.n_pages, g.index("D")) == (3, 2, 1, None)
    g.add_page("B", [])
    assert (g.n_pages, g.n_edges) == (2, 2)


def test_potential_value_threshold_and_cache_refresh():
    g = LinkGraph()
    cache = PageRankCache(g, every=3)
    assert not cache.maybe_refresh()  # empty graph
    leaves = [f"L{i}" for i in range(10)]
    for leaf in leaves:
        g.add_page(leaf, ["H"])
    assert cache.maybe_refresh()
    # L = 0.15 + 0.85·H/11, 10·L + H = 11  =>  L = 1/(1 + 0.85·10/11)
    leaf_pr = 1 / (1 + 0.85 * 10 / 11)
    assert cache.score("L0") == pytest.approx(leaf_pr, abs=1e-5)
    assert cache.score("H") == pytest.approx(11 - 10 * leaf_pr, abs=1e-5)
    assert cache.potential("H") and not cache.potential("L0")
    assert cache.score("unknown") == 1.0 and not cache.potential("unknown")
    g.add_page("H", ["X"])
    g.add_page("X", ["Y"])
    assert not cache.maybe_refresh()  # 2 new pages < every
    assert cache.score("X") == 1.0    # not known at the last refresh
    g.add_page("Y", ["H"])
    assert cache.maybe_refresh()
    assert cache.score("X") != 1.0


def test_state_round_trip_through_pickle():
    g = LinkGraph()
    for url, outlinks in random_crawl(4, pages=50):
        g.add_page(url, outlinks)
    restored = LinkGraph.from_state(pickle.loads(pickle.dumps(g.state())))
    assert restored.pagerank() == g.pagerank()
    restored.add_page("http://new.test/", ["http://s1.test/1"])
    g.add_page("http://new.test/", ["http://s1.test/1"])
    assert restored.pagerank() == g.pagerank() and len(restored) == len(g)


def test_cache_state_round_trip_keeps_the_refresh_schedule():
    g = LinkGraph()
    cache = PageRankCache(g, every=2)
    for url, outlinks in random_crawl(6, pages=5):
        g.add_page(url, outlinks)
        cache.maybe_refresh()  # refreshes after pages 1, 3 and 5
    g2 = LinkGraph.from_state(pickle.loads(pickle.dumps(g.state())))
    restored = PageRankCache.from_state(pickle.loads(pickle.dumps(cache.state())), g2)
    for graph in (g, g2):
        graph.add_page("http://new.test/", ["http://s1.test/1"])
    assert restored.maybe_refresh() is cache.maybe_refresh() is False
    assert restored.score("http://s1.test/1") == cache.score("http://s1.test/1") != 1.0


def test_bad_damping_factor():
    g = LinkGraph()
    g.add_page("A", ["B"])
    with pytest.raises(ValueError, match="damping"):
        g.pagerank(d=1.0)
    assert LinkGraph().pagerank() == {}
