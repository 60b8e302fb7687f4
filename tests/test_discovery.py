import pytest

from topiccrawl.discovery.controller import DiscoveryController


def test_harvest_segments_from_the_curve_by_hand():
    # (pages retrieved, relevant pages, relevant sites) after each result
    curve = [(1, 1, 1), (2, 1, 1), (3, 2, 2), (4, 2, 2), (5, 3, 2), (6, 3, 2), (7, 4, 3)]
    segments = DiscoveryController.harvest_segments(curve, 3)
    assert [s["pages"] for s in segments] == [3, 3, 1]
    assert [s["page_harvest_rate"] for s in segments] == [2 / 3, 1 / 3, 1.0]
    assert [s["new_relevant_sites"] for s in segments] == [2, 0, 1]
    assert DiscoveryController.harvest_segments([], 5) == []


def test_flush_hands_out_the_pages_of_an_iteration_that_could_not_end_and_undoes_a_half_opened_one(monkeypatch):
    """A worker whose shared bandit or page count goes out of reach inside ``end_iteration`` (Redis
    gone) emits the pages found so far through :meth:`flush`: at the reward its operator stays the
    running one (a resume rewards it); once the next iteration was being opened, it is undone (no
    phantom iteration to resume: the counter, operator, top pages and expanded pages as before)."""
    from types import SimpleNamespace as NS

    import topiccrawl.discovery.controller as controller
    from topiccrawl.discovery.rankers import Ranking

    class Down(Exception):
        pass

    class Bandit:
        operators = active = ("KS", "RS")

        def __init__(self, fail):
            self.fail = fail

        def update(self, op, reward, top, found):
            if self.fail == "update":
                raise Down
            return NS(iteration=1, scores={})

        def select(self):
            if self.fail == "select":
                raise Down
            return "RS"

    class Shared:  # the page count: answers once (the reward's), then fails in the planning
        def __init__(self, fail):
            self.fail, self.calls = fail, 0

        def total(self):
            self.calls += 1
            if self.fail == "count" and self.calls >= 2:
                raise Down
            return 3

    def make(fail):
        ctl = DiscoveryController.__new__(DiscoveryController)
        page = lambda url: NS(url=url, operator="KS", iteration=1)  # noqa: E731
        ctl.__dict__.update(
            ranker=NS(rank=lambda results, graph: Ranking()), seeds={"s": page("s")},
            results={u: page(u) for u in "abc"}, found=list("abc"), operator="KS", iteration=1,
            bandit=Bandit(fail), ranking=Ranking(), reward="paper", page_limit=100, shared_results=Shared(fail),
            planner=NS(plan=lambda op, top, known: [NS(role="page", url="x")]), k=2,
            expanded={"KS": set(), "RS": set()}, known=set(), top=["t"], finished=None, _emitting=[],
            _opening=None, graph=None)
        ctl._top_for = lambda op: [page("a"), page("b")]
        return ctl

    monkeypatch.setattr(controller, "operator_reward", lambda *args: 0.5)
    for fail, operator in (("update", "KS"), ("select", None), ("count", None)):
        ctl = make(fail)
        with pytest.raises(Down):
            ctl.end_iteration()
        assert sorted(p.url for p in ctl.flush()) == ["a", "b", "c"], fail
        assert (ctl.operator, ctl.iteration, ctl.found) == (operator, 1, []), fail
        assert ctl.expanded == {"KS": set(), "RS": set()} and ctl.top == ["t"], fail
        assert ctl.flush() == []  # handed out once
    ctl = make(None)
    emitted, planned = ctl.end_iteration()  # the normal path: nothing left for flush
    assert [p.url for p in emitted] == list("abc") and planned and ctl.operator == "RS" and ctl.iteration == 2
    assert ctl.flush() == [] and ctl.expanded["RS"] == {"a", "b"}
