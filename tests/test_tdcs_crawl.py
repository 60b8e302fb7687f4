"""A focused crawl scored by TD-CS (a Wikispeedia category node) over the lab's loopback proxy."""

from __future__ import annotations

import json

from conftest import run_crawl


def test_tdcs_scored_crawl_on_wikispeedia(tmp_path, shared_data):
    wiki = shared_data / "wikispeedia"
    proc, out = run_crawl(
        tmp_path,
        args={"scorer": "tdcs", "topic_tree": f"wikispeedia:{wiki}", "topic_node": "Geography.Storms",
              "max_pages": 60, "seeds": "http://en.wikispeedia.test/wiki/Earth"},
        settings={"TOPICCRAWL_WEB": f"wikispeedia:{wiki}", "TOPICCRAWL_PLOT_ENABLED": "false"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/topic"] == "Storms"
    assert stats["topiccrawl/dp"] == 60
    # evaluation labels come from the node: storm articles are a small minority of Wikispeedia
    assert stats["topiccrawl/truth/total_relevant"] < 100
    assert stats["topiccrawl/truth/relevant"] >= 1
    # and only its held-out half counts (the other half described the node: the crawl's scorer saw it);
    # the truth statistics counted every article of the node, overstating recall
    from topiccrawl.scoring.tdcs import load_tree

    tree = load_tree(f"wikispeedia:{wiki}")
    node = tree["Geography.Storms"].id
    held_out = {url for url, labels in tree.heldout.items() if node in labels}
    assert stats["topiccrawl/truth/held_out_only"] is True
    assert stats["topiccrawl/truth/total_relevant"] == len(held_out)
    fetched = [json.loads(line)["url"] for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert stats["topiccrawl/truth/relevant"] == sum(url in held_out for url in fetched)


def test_truth_picks_of_a_tree_scored_crawl_come_from_the_pages_it_is_evaluated_by(shared_data):
    # seeds=truth:N / examples=truth:N picked among every article of the node, the descriptive half
    # included, which the crawl's truth statistics count as not relevant
    from conftest import memory_scheduler
    from topiccrawl.scoring.tdcs import load_tree

    spec = f"wikispeedia:{shared_data / 'wikispeedia'}"
    scheduler = memory_scheduler("bestfirst", TOPICCRAWL_WEB=spec, TOPICCRAWL_SCORER="tdcs",
                                 TOPICCRAWL_TOPIC_TREE=spec, TOPICCRAWL_TOPIC_NODE="Geography.Storms")
    tc = scheduler.tc
    tree = load_tree(spec)
    node = tree["Geography.Storms"].id
    held_out = {url for url, labels in tree.heldout.items() if node in labels}
    picked = tc.seed_arg("truth:10")
    assert len(picked) == 10 and set(picked) <= held_out
    assert len(tc.seed_arg("truth:100")) == tc.total_relevant() == len(held_out)
