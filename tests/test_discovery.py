from topiccrawl.discovery.controller import DiscoveryController


def test_harvest_segments_from_the_curve_by_hand():
    # (pages retrieved, relevant pages, relevant sites) after each result
    curve = [(1, 1, 1), (2, 1, 1), (3, 2, 2), (4, 2, 2), (5, 3, 2), (6, 3, 2), (7, 4, 3)]
    segments = DiscoveryController.harvest_segments(curve, 3)
    assert [s["pages"] for s in segments] == [3, 3, 1]
    assert [s["page_harvest_rate"] for s in segments] == [2 / 3, 1 / 3, 1.0]
    assert [s["new_relevant_sites"] for s in segments] == [2, 0, 1]
    assert DiscoveryController.harvest_segments([], 5) == []
