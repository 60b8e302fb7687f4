import pickle
import random

import pytest

from topiccrawl.scoring.groundtruth import TruthPaths
from topiccrawl.strategies.simple import (
    BestFirstFrontier,
    BFSFrontier,
    FrontierError,
    Link,
    OracleFrontier,
    PathOracleFrontier,
    make_frontier,
)


def drain(frontier):
    out = []
    while (link := frontier.pop()) is not None:
        out.append(link.url)
    return out


def test_bfs_is_fifo():
    f = make_frontier("bfs")
    for i, score in enumerate([0.1, 0.9, 0.5]):
        f.push(Link(f"u{i}", score))
    assert drain(f) == ["u0", "u1", "u2"]
    assert f.pop() is None and len(f) == 0


def test_bestfirst_exact_order_with_deterministic_ties():
    f = make_frontier("bestfirst")
    scores = {"a": 0.5, "b": 0.9, "c": 0.5, "d": 0.0, "e": 0.9, "f": 0.7}
    for url, s in scores.items():
        f.push(Link(url, s))
    # highest R(l) first; equal scores in insertion order
    assert drain(f) == ["b", "e", "f", "a", "c", "d"]


def test_bestfirst_matches_sorting_on_random_interleaving():
    rng = random.Random(3)
    f = BestFirstFrontier()
    pushed, popped = [], []
    for step in range(600):
        if rng.random() < 0.6:
            link = Link(f"u{step}", round(rng.random(), 2))
            pushed.append(link)
            f.push(link)
        else:
            link = f.pop()
            if link is None:
                assert not [l for l in pushed if l.url not in set(popped)]
                continue
            remaining = [l for l in pushed if l.url not in set(popped)]
            best = min(remaining, key=lambda l: (-l.score, l.seq))
            assert link.url == best.url
            popped.append(link.url)


def test_oracle_puts_truly_relevant_targets_first():
    truth = {"t1", "t2"}
    f = OracleFrontier(lambda url: url in truth)
    for url, s in [("x", 0.9), ("t1", 0.1), ("y", 0.8), ("t2", 0.3)]:
        f.push(Link(url, s))
    assert drain(f) == ["t2", "t1", "x", "y"]


#: a small web: s links to a (two hops from t1) and b (a dead end, but high R(l)); a -> m -> t1,
#: t1 -> t2 -> n; t1 and t2 are truly relevant
WEB = {"s": ["a", "b"], "a": ["m"], "b": [], "m": ["t1"], "t1": ["t2"], "t2": ["n"], "n": []}
TRUTH = {"t1", "t2"}


def _paths():
    return TruthPaths(WEB, WEB.get, lambda url: url, lambda url: url in TRUTH)


def test_truth_paths_count_hops_to_the_nearest_relevant_page_not_fetched():
    paths = _paths()
    assert [paths.hops(u) for u in ("s", "a", "m", "t1", "t2", "b", "n", "elsewhere")] == \
        [3, 2, 1, 0, 0, float("inf"), float("inf"), float("inf")]
    assert len(paths) == 7 and paths.edges == 6
    paths.fetched("t1")
    assert paths.hops("m") == 1  # until the next refresh
    paths.refresh()
    assert [paths.hops(u) for u in ("s", "m", "t1", "t2")] == [4, 2, 1, 0]
    paths.fetched("t2")
    paths.refresh()
    assert paths.hops("t2") == float("inf")


def test_path_oracle_walks_the_shortest_path_where_the_oracle_takes_the_best_scored_link():
    path, oracle = PathOracleFrontier(_paths()), OracleFrontier(lambda url: url in TRUTH)
    for f in (path, oracle):
        f.push(Link("b", 0.9))
        f.push(Link("a", 0.1))
    assert path.pop().url == "a" and oracle.pop().url == "b"
    assert path.peek()[0] == 0.0 and path.value(Link("a", 0.1)) == 1 / 3
    path.push(Link("x", 0.5))  # outside the web: leads nowhere, as b; the two by R(l)
    assert drain(path) == ["b", "x"]


@pytest.mark.parametrize("every, order", [(1, ["t2", "d", "c"]), (1000, ["t2", "c", "d"])])
def test_path_oracle_reorders_its_queue_as_relevant_pages_are_fetched(monkeypatch, every, order):
    # c is one hop from t2 and d two from t1: once t2 is fetched, c leads nowhere; only a refresh
    # of the hops (every pop here, or not within this crawl) puts d before it
    web = {"c": ["t2"], "d": ["e"], "e": ["t1"], "t1": [], "t2": []}
    monkeypatch.setattr(PathOracleFrontier, "REFRESH_EVERY", every)
    f = PathOracleFrontier(TruthPaths(web, web.get, lambda url: url, lambda url: url in TRUTH))
    for url, score in (("t2", 0.1), ("c", 0.9), ("d", 0.1)):
        f.push(Link(url, score))
    assert drain(f) == order
    assert f.stats() == {"oracle_path/refreshes": 3 if every == 1 else 1}


def test_path_oracle_state_round_trip_keeps_what_was_fetched():
    f = PathOracleFrontier(_paths())
    for url, score in (("t1", 0.1), ("m", 0.5), ("s", 0.2)):
        f.push(Link(url, score))
    assert f.pop().url == "t1"
    state = pickle.loads(pickle.dumps(f.state()))
    g = PathOracleFrontier(_paths())
    g.load_state(state)
    # restored: t1 is fetched, so m is two hops (to t2) and s four
    assert g.value(Link("m")) == 1 / 3 and g.value(Link("s")) == 1 / 5
    assert drain(g) == drain(f) == ["m", "s"]


@pytest.mark.parametrize("name", ["bfs", "bestfirst"])
def test_state_round_trip_restores_identical_order(name):
    f = make_frontier(name)
    for i in range(50):
        f.push(Link(f"u{i}", (i * 37 % 11) / 10))
    for _ in range(10):
        f.pop()
    state = pickle.loads(pickle.dumps(f.state()))
    g = make_frontier(name)
    g.load_state(state)
    g.push(Link("new", 0.55))
    f.push(Link("new", 0.55))
    assert drain(g) == drain(f)


def test_unknown_strategy_and_oracle_without_truth():
    with pytest.raises(FrontierError, match="unknown strategy 'dfs'"):
        make_frontier("dfs")
    with pytest.raises(FrontierError, match="needs ground truth"):
        make_frontier("oracle")
    with pytest.raises(FrontierError, match="needs an offline web's link graph"):
        make_frontier("oracle-path", lambda url: False)
    assert isinstance(make_frontier("bfs"), BFSFrontier)
