import pickle
import random

import pytest

from topiccrawl.strategies.simple import (
    BestFirstFrontier,
    BFSFrontier,
    FrontierError,
    Link,
    OracleFrontier,
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
    assert isinstance(make_frontier("bfs"), BFSFrontier)
