"""The evaluation harness's pure helpers (bench/strategies.py, bench/learned_focus.py) on small inputs."""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from pathlib import Path

import jieba
import pytest

from bench.compare_runs import main as compare_main
from bench.compare_runs import new_losses, paired, spread, topic_means
from bench.learned_focus import (
    VARIANTS,
    against_bestfirst,
    against_bestfirst_lines,
    average_table,
    averaged,
    checkpoints_for,
    friedman,
    friedman_checkpoint,
    main,
    mean_ranks,
    plan,
    summarise,
    topic_table,
    topic_without_words,
    value_at,
)
from bench.strategies import check_passed_through, crawl_command, ended, ended_cell, estimate_cell, load_run, name_value
from topiccrawl.scoring.topic import EXAMPLES_BETA, load_topic
from topiccrawl.strategies.base import STRATEGIES

CURVE = [(1, 0.0, 0.0), (2, 0.5, 0.1), (3, 0.333, 0.1), (4, 0.5, 0.2)]


def test_value_at_reads_the_checkpoint_row_and_carries_the_last_value_forward():
    assert value_at(CURVE, 2, 2) == 0.1
    assert value_at(CURVE, 4, 1) == 0.5
    assert value_at(CURVE, 250, 2) == 0.2  # the crawl ended at 4 pages: its final recall
    assert value_at(CURVE, 0, 2) is None
    assert value_at([], 100, 1) is None


def test_checkpoints_end_at_the_budget_and_friedman_uses_250_or_the_largest_below():
    assert checkpoints_for(1000) == [100, 250, 500, 1000]
    assert checkpoints_for(300) == [100, 250, 300]
    assert checkpoints_for(100) == [100]
    assert checkpoints_for(50) == [50]
    assert friedman_checkpoint([100, 250, 500, 1000]) == 250
    assert friedman_checkpoint([100, 200]) == 200
    assert friedman_checkpoint([50]) == 50
    assert friedman_checkpoint([300]) == 300


def test_friedman_on_a_strict_order_matches_the_textbook_statistic():
    # 4 blocks, 3 variants, a always best, c always worst: rank sums 4, 8, 12 and
    # chi2 = 12 / (n k (k+1)) * sum(R^2) - 3 n (k+1) = 0.25 * 224 - 48 = 8, df 2: p = exp(-4)
    blocks = [{"a": 0.9, "b": 0.5, "c": 0.1}, {"a": 0.8, "b": 0.7, "c": 0.2},
              {"a": 0.6, "b": 0.4, "c": 0.3}, {"a": 0.95, "b": 0.9, "c": 0.0}]
    out = friedman(blocks, ["a", "b", "c"])
    assert out["blocks"] == 4
    assert out["mean_rank"] == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert out["statistic"] == pytest.approx(8.0)
    assert out["p"] == pytest.approx(math.exp(-4))


def test_friedman_skips_incomplete_blocks_and_ties_share_ranks():
    blocks = [{"a": 0.5, "b": 0.5, "c": 0.1}, {"a": 0.9, "b": 0.2, "c": 0.3}, {"a": 0.4, "b": None, "c": 0.3}]
    assert mean_ranks(blocks[:2], ["a", "b", "c"]) == {"a": 1.25, "b": 2.25, "c": 2.5}
    out = friedman(blocks, ["a", "b", "c"])
    assert out["blocks"] == 2
    assert out["statistic"] is not None and 0 < out["p"] < 1
    two = friedman(blocks[:2], ["a", "b"])  # fewer than 3 variants: ranks only
    assert two["statistic"] is None and two["mean_rank"] == {"a": 1.25, "b": 1.75}


def test_ended_names_the_close_reason_or_a_dry_frontier():
    dry = {"dp": 412, "finish_reason": "finished", "frontier_exhausted": True}
    budget = {"dp": 1000, "finish_reason": "topiccrawl_max_pages", "frontier_exhausted": False}
    assert ended(dry) == "frontier ran dry at 412"
    assert ended(budget) == "topiccrawl_max_pages"
    assert ended_cell([budget, dry, budget]) == "topiccrawl_max_pages ×2, frontier ran dry at 412"
    assert ended_cell([]) == "–"


def test_settings_and_arguments_pass_through_after_the_bench_defaults(tmp_path):
    assert name_value("LOG_LEVEL=INFO") == "LOG_LEVEL=INFO"
    assert name_value("examples=http://a.test/x?a=1") == "examples=http://a.test/x?a=1"
    for bad in ("LOG_LEVEL", "=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            name_value(bad)
    cmd = crawl_command("generated:zh-disaster", "http://127.0.0.1:1", "台风灾害", "learned", 100, tmp_path,
                        settings=["LOG_LEVEL=INFO"], spider_args=["examples=truth:5"])
    assert cmd[cmd.index("crawl") + 1] == "focused"
    # Scrapy keeps the last of a repeated -s: the user's LOG_LEVEL wins over the bench's WARNING
    levels = [cmd[i + 1] for i, x in enumerate(cmd) if x == "-s" and cmd[i + 1].startswith("LOG_LEVEL=")]
    assert levels == ["LOG_LEVEL=WARNING", "LOG_LEVEL=INFO"]
    assert cmd[-2:] == ["-a", "examples=truth:5"]


def test_a_passed_through_argument_cannot_override_what_the_bench_labels_its_runs_by():
    # the table names each run by its --strategies / --pages / --topic: an -a or -s that would run
    # something else under that name is refused with one line naming the bench's option
    check_passed_through(["LOG_LEVEL=INFO", "TOPICCRAWL_CLASSIFIER=on"], ["examples=truth:5", "seeds=truth:3"])
    for settings, args, option in ((["TOPICCRAWL_OUTPUT_DIR=/tmp/x"], [], "--out"),
                                   (["TOPICCRAWL_STRATEGY=wl"], [], "--strategies"),
                                   ([], ["strategy=wl"], "--strategies"), ([], [" max_pages=50"], "--pages"),
                                   ([], ["topic=other"], "--topic"), (["TOPICCRAWL_WEB=generated:mixed"], [], "--web")):
        with pytest.raises(SystemExit, match=f"the bench sets .* for every run; use {option}$"):
            check_passed_through(settings, args)
    with pytest.raises(SystemExit, match=r"^--args topic=x: .* use --topics$"):
        check_passed_through([], ["topic=x"], {"topic": "--topics"}, "--settings", "--args")
    # nor make the topic a category node (the crawl would ignore the topic its rows are labelled by)
    for settings, args in (([], ["topic_tree=wikispeedia:/d"]), ([], ["scorer=tdcs"]), ([], ["topic_node=A.B"]),
                           (["TOPICCRAWL_SCORER=tdkw"], []), (["TOPICCRAWL_TOPIC_TREE=dmoz:x.rdf"], [])):
        with pytest.raises(SystemExit, match=r"labelled by the topic of --topic, .* python -m bench.tdcs_crawl$"):
            check_passed_through(settings, args)
    check_passed_through(["TOPICCRAWL_SCORER=vsm"], ["scorer=vsm"])  # the topic's words: the default, allowed
    with pytest.raises(SystemExit, match=r"^--args topic_node=A: the runs are labelled by the topic of --topics"):
        check_passed_through([], ["topic_node=A"], {"topic": "--topics"}, "--settings", "--args")
    # what a chosen variant sets itself (bench/learned_focus.py): its examples, its seed setting
    own = ({"examples": "the variant learned-examples"}, {"TOPICCRAWL_LEARNED_SEED": "--first-seed"})
    check_passed_through(["TOPICCRAWL_WL_SEED=1"], ["seeds=truth:3"], None, "--settings", "--args", own)
    with pytest.raises(SystemExit, match=r"^--args examples=truth:3: .* use the variant learned-examples$"):
        check_passed_through([], ["examples=truth:3"], None, "--settings", "--args", own)
    with pytest.raises(SystemExit, match=r"^--settings TOPICCRAWL_LEARNED_SEED=4: .* use --first-seed$"):
        check_passed_through(["TOPICCRAWL_LEARNED_SEED=4"], [], None, "--settings", "--args", own)


def test_the_strategies_bench_refuses_a_strategy_twice_and_an_unknown_spider_in_one_line(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    base = [sys.executable, "-m", "bench.strategies", "--web", "generated:zh-disaster", "--topic", "台风灾害",
            "--out", str(tmp_path)]
    proc = subprocess.run([*base, "--strategies", "learned,bestfirst,learned"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "--strategies names learned twice; use --repeats for more runs of one strategy"]
    proc = subprocess.run([*base, "--spider", "nospider"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "invalid choice: 'nospider'" in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing ran
    # a misspelt strategy, an --out that cannot be a folder: one line before any crawl (they came after
    # the first crawls, or as a traceback, and the finished runs were lost)
    proc = subprocess.run([*base, "--strategies", "bfs,bestfrist"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "unknown strategy 'bestfrist'; expected one of: " + ", ".join(STRATEGIES)]
    assert not any(tmp_path.iterdir())
    (tmp_path / "afile").write_text("", encoding="utf-8")
    out = tmp_path / "afile" / "out"
    for module in ("bench.strategies", "bench.learned_focus"):
        args = (["--web", "generated:zh-disaster", "--topic", "台风灾害"] if module == "bench.strategies"
                else ["--corpus", "generated"])
        proc = subprocess.run([sys.executable, "-m", module, *args, "--out", str(out)], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith(f"--out {out}: cannot write there"), proc.stderr


def test_the_estimate_cell_shows_the_classifiers_figure_and_its_unreliable_flag():
    assert estimate_cell([{"expected_harvest": None}, {}]) == "–"
    assert estimate_cell([{"expected_harvest": 0.2, "unreliable": False},
                          {"expected_harvest": 0.4, "unreliable": True}]) == "0.300 ± 0.141, unreliable 1/2"
    assert estimate_cell([{"expected_harvest": 0.25, "unreliable": False}, {"expected_harvest": None}]) \
        == "0.250 ± 0.000, none in 1 of 2 runs"


def write_run(folder, rows, **stats):
    folder.mkdir(parents=True)
    base = {"topiccrawl/dp": len(rows), "topiccrawl/accuracy": rows[-1][2], "finish_reason": "topiccrawl_max_pages",
            "topiccrawl/truth/total_relevant": 10, "elapsed_time_seconds": 2.0}
    (folder / "stats.json").write_text(json.dumps({**base, **stats}), encoding="utf-8")
    with (folder / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["dp", "lp", "accuracy", "truth_relevant", "truth_harvest_rate", "target_recall", "url",
                    "relevance", "expected_harvest"])
        for dp, lp, acc, rel, expected in rows:
            w.writerow([dp, lp, acc, rel, rel / dp, rel / 10, f"http://x.test/{dp}", 0.5, expected])


def test_load_run_reads_stats_and_the_harvest_curve(tmp_path):
    write_run(tmp_path / "r", [(1, 1, 1.0, 0, ""), (2, 1, 0.5, 1, 0.4), (3, 2, 0.667, 2, 0.5), (4, 2, 0.5, 2, 0.45)],
              **{"topiccrawl/examples/fetched": 5, "topiccrawl/classifier/expected_harvest": 0.45})
    run = load_run(tmp_path / "r", "learned")
    assert run["dp"] == 4 and run["examples_fetched"] == 5 and run["expected_harvest"] == 0.45
    assert run["pages_per_s"] == 2.0
    assert run["curve"][2] == (3, pytest.approx(2 / 3), 0.2)
    assert run["self_curve"][0] == (1, 1.0, None) and run["self_curve"][3] == (4, 0.5, 0.45)
    assert ended(run) == "topiccrawl_max_pages"


def test_summaries_give_ratios_to_the_oracle_and_self_assessment_errors(tmp_path):
    # topic t: oracle finds 3 of 10 pages in 4 fetches, learned 1 then 2 (two reps); the oracle's
    # frontier runs dry at 3 pages, so its values carry forward to checkpoint 4
    write_run(tmp_path / "o", [(1, 1, 1.0, 1, ""), (2, 2, 1.0, 2, ""), (3, 3, 1.0, 3, "")],
              **{"topiccrawl/frontier_exhausted": True, "finish_reason": "finished"})
    write_run(tmp_path / "l0", [(1, 0, 0.0, 0, 0.1), (2, 1, 0.5, 1, 0.2), (3, 1, 0.333, 1, 0.3), (4, 2, 0.5, 1, 0.3)])
    write_run(tmp_path / "l1", [(1, 0, 0.0, 0, 0.1), (2, 1, 0.5, 1, 0.2), (3, 2, 0.667, 1, 0.3), (4, 2, 0.5, 2, 0.6)])
    results = []
    for name, variant, rep in (("o", "oracle", 0), ("l0", "learned", 0), ("l1", "learned", 1)):
        run = load_run(tmp_path / name, VARIANTS[variant].strategy)
        results.append({**run, "topic": "t", "variant": variant, "rep": rep})
    per = summarise(results, ["t"], ["learned", "oracle"], [2, 4])
    learned, oracle = per["t"]["learned"], per["t"]["oracle"]
    assert oracle["recall@4"] == [0.3] and oracle["harvest@4"] == [1.0]
    assert learned["recall@4"] == [0.1, 0.2]
    assert learned["true@last"] == [0.25, 0.5]
    assert learned["acc_err"] == [pytest.approx(0.25), pytest.approx(0.0)]
    assert learned["exp_err"] == [pytest.approx(0.05), pytest.approx(0.1)]
    assert ended_cell(oracle["runs"]) == "frontier ran dry at 3"
    # ratio@100/250 are only defined when those are checkpoints
    assert "ratio@100" not in learned
    per = summarise(results, ["t"], ["learned", "oracle"], [100, 250])
    assert per["t"]["learned"]["ratio@100"] == pytest.approx(0.15 / 0.3)
    avg = averaged(per, ["t"], ["learned", "oracle"], [100, 250])
    assert avg["oracle"]["ratio@250"] == 1.0
    assert avg["learned"]["recall@250"] == pytest.approx(0.15)
    assert avg["learned"]["exp_err_max"] == pytest.approx(0.075)
    assert avg["oracle"]["exp_err"] is None
    assert "path_ratio@250" not in per["t"]["learned"] and "×oracle-path@250" not in "".join(
        average_table(avg, ["learned", "oracle"], [100, 250], None))
    # with the stronger bound crawled too (it finds 4 pages: 0.4), ratios to it beside the oracle's
    write_run(tmp_path / "p", [(1, 1, 1.0, 1, ""), (2, 2, 1.0, 2, ""), (3, 3, 1.0, 3, ""), (4, 4, 1.0, 4, "")])
    results.append({**load_run(tmp_path / "p", "oracle-path"), "topic": "t", "variant": "oracle-path", "rep": 0})
    variants = ["learned", "oracle", "oracle-path"]
    per = summarise(results, ["t"], variants, [100, 250])
    assert per["t"]["learned"]["path_ratio@250"] == pytest.approx(0.15 / 0.4)
    assert per["t"]["oracle"]["path_ratio@250"] == pytest.approx(0.3 / 0.4)
    avg = averaged(per, ["t"], variants, [100, 250])
    table = average_table(avg, variants, [100, 250], None)
    head = [c.strip() for c in table[0].split("|")]
    row = [c.strip() for c in table[2].split("|")]
    assert row[head.index("×oracle@250")] == "0.50" and row[head.index("×oracle-path@250")] == "0.38"
    assert "×oracle-path@100" in topic_table(per["t"], variants, [100, 250], None)[0]


def test_a_self_assessment_error_over_fewer_crawls_or_topics_says_how_many_lack_it(tmp_path):
    """A crawl whose page classifier never gave an estimate has no abs(P̄ − true): the mean over the
    others said nothing of it, and a topic with no estimate at all passed for one within 0.1."""
    write_run(tmp_path / "a0", [(1, 0, 0.0, 0, 0.1), (2, 1, 0.5, 1, 0.2)])
    write_run(tmp_path / "a1", [(1, 0, 0.0, 0, ""), (2, 1, 0.5, 1, "")])  # no estimate
    write_run(tmp_path / "b0", [(1, 0, 0.0, 0, ""), (2, 1, 0.5, 1, "")])  # no estimate
    results = [{**load_run(tmp_path / name, "learned"), "topic": topic, "variant": "learned", "rep": rep}
               for name, topic, rep in (("a0", "a", 0), ("a1", "a", 1), ("b0", "b", 0))]
    per = summarise(results, ["a", "b"], ["learned"], [2])
    row = [c.strip() for c in topic_table(per["a"], ["learned"], [2], None)[2].split("|")]
    head = [c.strip() for c in topic_table(per["a"], ["learned"], [2], None)[0].split("|")]
    assert row[head.index("abs(P̄ − true)")] == "0.300 ± 0.000 (1 of 2 crawls without)"
    avg = averaged(per, ["a", "b"], ["learned"], [2])
    table = average_table(avg, ["learned"], [2], None)
    cells = dict(zip([c.strip() for c in table[0].split("|")], [c.strip() for c in table[2].split("|")]))
    assert cells["abs(P̄ − true) mean / worst topic"] == "0.300 / 0.300 (1 of 2 topics without)"
    assert cells["abs(Accuracy − true) mean / worst topic"] == "0.000 / 0.000"


def test_against_bestfirst_flags_only_differences_beyond_two_standard_errors():
    def side(*recalls):
        return {"recall@100": list(recalls)}

    per = {"near": {"learned": side(0.30, 0.32, 0.34), "bestfirst": side(0.31, 0.33, 0.35),
                    "oracle": side(0.9, 0.9, 0.9), "wl": side(0.5)},
           "far": {"learned": side(0.20, 0.21, 0.22), "bestfirst": side(0.30, 0.30, 0.31),
                   "oracle": side(0.9, 0.9, 0.9), "wl": side(0.6)}}
    rows = against_bestfirst(per, ["near", "far"], ["learned", "bestfirst", "oracle", "wl"], [100])
    # the oracle is a bound, not a contender; wl's single crawl has no spread to judge by
    assert {(r["variant"], r["topic"]) for r in rows} == {("learned", "near"), ("learned", "far")}
    near, far = (next(r for r in rows if r["topic"] == t) for t in ("near", "far"))
    assert near["diff"] == pytest.approx(-0.01) and near["verdict"] == "within"
    assert far["diff"] == pytest.approx(0.21 - 0.30333333)
    assert far["two_se"] == pytest.approx(2 * math.sqrt(0.0001 / 3 + (0.0001 / 3) / 3))
    assert far["verdict"] == "below"
    lines = against_bestfirst_lines(rows)
    assert any("below beyond noise in 1 of 2 pairs" in line for line in lines)
    assert any(line.strip().startswith("far at 100 pages: 0.210 against 0.303") for line in lines)
    # the same crawls the other way round are "above"; without best-first nothing is judged
    swapped = {t: {"learned": d["bestfirst"], "bestfirst": d["learned"]} for t, d in per.items()}
    assert [r["verdict"] for r in against_bestfirst(swapped, ["near", "far"], ["learned", "bestfirst"], [100])] == [
        "within", "above"]
    assert against_bestfirst(per, ["far"], ["learned", "oracle"], [100]) == []
    assert against_bestfirst_lines([])[0].startswith("Not judged")


def test_plan_varies_only_the_seed_settings_and_strips_words_for_examples(tmp_path):
    jobs = plan({"t": ("t.toml", "t-nowords.toml")}, ["bestfirst", "learned-examples", "wl", "learned-both"], 2,
                ["TOPICCRAWL_CLASSIFIER=on"], ["seeds=truth:3"], tmp_path)
    assert len(jobs) == 8 and [j.rep for j in jobs] == [0, 0, 0, 0, 1, 1, 1, 1]
    by = {(j.variant, j.rep): j for j in jobs}
    assert by["bestfirst", 0].settings == by["bestfirst", 1].settings == ("TOPICCRAWL_CLASSIFIER=on",)
    assert by["wl", 1].settings == ("TOPICCRAWL_WL_SEED=1", "TOPICCRAWL_CLASSIFIER=on")
    assert by["learned-examples", 1].settings[0] == "TOPICCRAWL_LEARNED_SEED=1"
    assert by["learned-examples", 0].topic_arg == "t-nowords.toml" and by["bestfirst", 0].topic_arg == "t.toml"
    assert by["learned-examples", 0].args == ("examples=truth:5", "seeds=truth:3")
    # words and examples: the topic as written, the same truth:5 pick
    assert by["learned-both", 1].topic_arg == "t.toml" and by["learned-both", 1].args == by["learned-examples", 1].args
    assert by["learned-both", 1].settings == by["learned-examples", 1].settings
    assert by["wl", 1].out == tmp_path / "runs" / "t" / "wl-1"
    # repetitions numbered from another first seed: fresh seeds and folders, nothing else changes
    later = plan({"t": ("t.toml", "t-nowords.toml")}, ["wl"], 2, [], [], tmp_path, first=3)
    assert [j.rep for j in later] == [3, 4] and later[0].settings == ("TOPICCRAWL_WL_SEED=3",)
    assert later[1].out == tmp_path / "runs" / "t" / "wl-4"


def test_topic_copy_without_words_keeps_name_labels_and_seeds(tmp_path):
    original = tmp_path / "birds.toml"
    original.write_text('name = "birds-en"\nlanguage = "en"\ndescription = "Birds \\"and\\" more"\nbeta = 0.3\n'
                        'labels = ["subject.Science.Biology.Birds"]\n'
                        'seeds = ["http://en.wikispeedia.test/wiki/Earth"]\n\n[words]\nbird = 1.0\n', encoding="utf-8")
    topic = load_topic(str(original))
    copy = tmp_path / "copy.toml"
    copy.write_text(topic_without_words(topic, ["http://en.wikispeedia.test/wiki/Owl"]), encoding="utf-8")
    again = load_topic(str(copy))
    assert again.words == {} and again.beta == EXAMPLES_BETA
    assert (again.name, again.language, again.description) == ("birds-en", "en", 'Birds "and" more')
    assert again.labels == topic.labels and again.seeds == topic.seeds
    assert again.examples == ("http://en.wikispeedia.test/wiki/Owl",)
    assert "bird =" not in copy.read_text(encoding="utf-8")


# -- bench.replay_focus -------------------------------------------------------------------------------


REPLAY_WEB = "generated:zh-disaster?pages=1000&seed=1"


def _bookstore_pages(books: int) -> tuple[list[str], list[bool]]:
    """Pages of REPLAY_WEB in a crawl's order, a bookstore page in five, and whether each is one."""
    from topiccrawl.weblab.corpus import open_corpus

    corpus = open_corpus(REPLAY_WEB)
    ok = [u for u in corpus.iter_urls() if corpus.get(u).status == 200]
    shops = [u for u in ok if "kind:bookstore" in corpus.labels(u)][:books]
    others = [u for u in ok if "kind:bookstore" not in corpus.labels(u)][: 4 * books]
    urls = [u for i in range(books) for u in (shops[i], *others[4 * i: 4 * i + 4])]
    return urls, ["kind:bookstore" in corpus.labels(u) for u in urls]


def _crawl_output(out, variant: str, urls, truth, relevance, meta: dict) -> None:
    """A ``bench.learned_focus --out`` folder with one run of topic "books": its harvest.csv (the
    crawl's own P̄ 0.5 on the last row) and results.json (``spec`` and ``meta``)."""
    run = out / "runs" / "books" / f"{variant}-0"
    run.mkdir(parents=True)
    (out / "results.json").write_text(json.dumps({"spec": REPLAY_WEB, **meta}), encoding="utf-8")
    with (run / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["dp", "truth_relevant", "url", "relevance", "expected_harvest"])
        for i, (u, r) in enumerate(zip(urls, relevance)):
            w.writerow([i + 1, sum(truth[: i + 1]), u, r, 0.5 if i == len(urls) - 1 else ""])


def test_replay_feeds_a_crawls_pages_in_order_to_each_rule_and_reports_the_errors(tmp_path, capsys):
    from bench.replay_focus import Pages, main, parse_rule
    from topiccrawl.learning.classifier import PageClassifier
    from topiccrawl.learning.focus import PageFocus

    urls, truth = _bookstore_pages(24)
    relevance = [0.8 if t else 0.1 * (i % 3) for i, t in enumerate(truth)]
    assert sum(truth) == 24 and len(urls) == 120
    out = tmp_path / "out"
    _crawl_output(out, "learned", urls, truth, relevance, {})
    # a run of another variant whose name starts alike: not one of learned's (it was replayed beside them)
    other = out / "runs" / "books" / "learned-examples-0"
    other.mkdir()
    text = (out / "runs" / "books" / "learned-0" / "harvest.csv").read_text(encoding="utf-8")
    (other / "harvest.csv").write_text(text.rstrip("\r\n").rsplit(",", 1)[0] + ",0.9\n", encoding="utf-8")
    table = tmp_path / "replay.md"
    main([str(out), "--rule", "base", "--rule", "wide:pseudo_share=0.2,classifier.C=0.5", "--out", str(table)])

    true = sum(truth) / len(truth)
    pages = Pages(REPLAY_WEB)
    expected = {}
    for name, kw in (("base", {}), ("wide", {"pseudo_share": 0.2})):
        focus = PageFocus(classifier=PageClassifier(random_state=0, **({"C": 0.5} if kw else {})), **kw)
        for u, r in zip(urls, relevance):
            focus.observe(pages.terms(u), r, key=u)
        expected[name] = abs(focus.expected_harvest - true)
    assert expected["base"] != expected["wide"]  # the rules differ, so the replay must tell them apart
    lines = table.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| topic | crawl | base | wide |"
    assert lines[2] == f"| books | {abs(0.5 - true):.3f} | {expected['base']:.3f} | {expected['wide']:.3f} |"
    assert [line.split(" |")[0] for line in lines[3:]] == ["| **mean**", "| **worst**", "| **topics > 0.1**"]

    assert parse_rule("c:classifier.C=0.3,pseudo_share=0.02") == ("c", {"pseudo_share": 0.02}, {"C": 0.3})
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        parse_rule("c:C")
    with pytest.raises(SystemExit, match="no results.json"):
        main([str(tmp_path), "--rule", "base"])
    # mistakes said in one line before any replay: a rule named twice pooled its errors into one column
    # ("topics > 0.1" 2 of 1 topic), a misspelt key or a text for a number was a traceback after the
    # rules before it had run, a misspelt variant gave a table of dashes and exit 0
    for argv, said in (
            (["--rule", "base", "--rule", "base"], "--rule 'base': given twice"),
            (["--rule", "typo:pseudo_shar=0.02"], "--rule typo: unknown key 'pseudo_shar'"),
            (["--rule", "c:classifier.C=abc"], "--rule c: classifier.C='abc' is not a number"),
            (["--rule", "r:rank=titel"], "--rule r: rank=titel: expected relevance, full"),
            (["--rule", "base", "--variant", "learnd"], "no crawl of variant 'learnd'")):
        with pytest.raises(SystemExit, match=re.escape(said)):
            main([str(out), *argv])
    (out / "results.json").write_text(json.dumps({"spec": REPLAY_WEB, "variants": {"learned": {}}}), encoding="utf-8")
    with pytest.raises(SystemExit, match=re.escape("no crawl of variant 'learnd'")):
        main([str(out), "--rule", "base", "--variant", "learnd"])
    assert "no variant 'learnd' (its runs: learned); skipped" in capsys.readouterr().err



def test_title_word_counts_the_strongest_topic_word_of_a_title_fully():
    """The screened rule ``rank=word`` (docs/learned.md): a maximum over the title's terms, so one
    topic word in a title counts as much as it weighs, where a cosine over the topic vector would not."""
    from bench.replay_focus import title_word

    words = {"sport": 1.0, "cricket": 0.6, "tennis": 0.6, "league": 0.8}
    assert title_word(words, "Cricket") == pytest.approx(0.6)
    assert title_word(words, "Tennis league (sport)") == pytest.approx(1.0)
    assert title_word(words, "Cricket in Nottingham, cricket") == title_word(words, "Cricket")
    assert title_word(words, "Nottingham") == 0.0 and title_word(words, "") == 0.0 and title_word({}, "Cricket") == 0.0
    assert title_word({"cricket": 2.0}, "Cricket") == 1.0  # over the topic's largest weight


def test_replay_of_an_examples_only_crawl_adds_its_examples_and_registers_the_derived_words(tmp_path):
    from bench.learned_focus import truth_examples
    from bench.replay_focus import Pages, main
    from topiccrawl.learning.classifier import PageClassifier
    from topiccrawl.learning.examples import topic_words
    from topiccrawl.learning.focus import PageFocus
    from topiccrawl.scoring.text import has_cjk
    from topiccrawl.weblab.corpus import open_corpus

    spec, corpus = REPLAY_WEB, open_corpus(REPLAY_WEB)
    urls, truth = _bookstore_pages(30)
    relevance = [0.0] * len(urls)  # an examples-only crawl: the classifier does not read R(P)
    out = tmp_path / "out"
    topic = tmp_path / "books.toml"
    topic.write_text('name = "books"\nlabels = ["kind:bookstore"]\n', encoding="utf-8")
    variants = {"learned-examples": {"args": ["examples=truth:3"], "words": False},
                "learned": {"args": [], "words": True}}
    _crawl_output(out, "learned-examples", urls, truth, relevance,
                  {"topics": {"books": str(topic)}, "variants": variants})

    # what the crawl did: the examples and the seeds segmented first, the words derived from them
    before = Pages(spec)
    examples = truth_examples(spec, {"kind:bookstore"}, 3)
    example_terms = [before.terms(u) for u in examples]
    words = [w for w, _ in topic_words(example_terms, [before.terms(u) for u in corpus.seeds()], k=30)]
    chinese = [w for w in words if has_cjk(w)]
    assert chinese and not all((jieba.get_FREQ(w) or 0) >= 2000 for w in chinese)  # not registered yet
    table = tmp_path / "replay.md"
    main([str(out), "--variant", "learned-examples", "--examples", "--rule", "base", "--out", str(table)])

    assert all(jieba.get_FREQ(w) >= 2000 for w in chinese)  # registered as add_words does
    after = Pages(spec)
    focus = PageFocus(classifier=PageClassifier(random_state=0), use_words=False)
    for terms in example_terms:
        focus.add_example(terms)
    for u, r in zip(urls, relevance):
        focus.observe(after.terms(u), r, key=u)
    true = sum(truth) / len(truth)
    assert focus.fitted and len(examples) == 3
    row = table.read_text(encoding="utf-8").splitlines()[2]
    assert row == f"| books | {abs(0.5 - true):.3f} | {abs(focus.expected_harvest - true):.3f} |"

    with pytest.raises(SystemExit, match="was not given examples=truth:N"):
        main([str(out), "--variant", "learned", "--examples", "--rule", "base"])


def write_dry_run(folder, rows, **stats):
    """:func:`write_run` of a crawl whose frontier ran dry (what compare_runs takes of a crawl that
    stopped before 1,000 pages)."""
    write_run(folder, rows, **{"topiccrawl/frontier_exhausted": True, **stats})


def test_compare_runs_pairs_topic_means_and_tests_the_differences(tmp_path):
    # six topics of 10 relevant pages; by page 2 BEFORE's two repetitions found 0 and 1 of them,
    # AFTER's one repetition 2 on five topics and 1 on the last
    for i in range(6):
        for rep in (0, 1):
            write_dry_run(tmp_path / "before" / "runs" / f"t{i}" / f"learned-{rep}",
                      [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, rep, 0.2)],
                      **{"topiccrawl/classifier/expected_harvest": 0.2})
        gain = 0 if i == 5 else 1
        write_dry_run(tmp_path / "after" / "runs" / f"t{i}" / "learned-0",
                  [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, 1 + gain, 0.9)], **{"topiccrawl/classifier/expected_harvest": 0.9})
    # a topic only one side has is left out, and so are other variants' runs
    write_dry_run(tmp_path / "after" / "runs" / "extra" / "learned-0", [(1, 0, 0.0, 1, 0.1)])
    write_dry_run(tmp_path / "before" / "runs" / "t0" / "oracle-0", [(1, 1, 1.0, 1, "")])
    before = topic_means(str(tmp_path / "before"), "learned")
    after = topic_means(str(tmp_path / "after"), "learned")
    assert before["t0"]["n"] == 2 and after["t0"]["n"] == 1 and "extra" not in before
    # a crawl of 2 pages keeps its last recall at every checkpoint: before (0 + 0.1) / 2, after 0.2
    assert before["t0"][100] == pytest.approx(0.05) and after["t0"][1000] == pytest.approx(0.2)
    assert after["t5"][250] == pytest.approx(0.1)
    assert before["t0"]["mean"] == pytest.approx(0.05) and after["t5"]["mean"] == pytest.approx(0.1)
    assert paired(before, after, "mean")["diff"] == pytest.approx((5 * 0.15 + 0.05) / 6)
    # the mean of the four checkpoints: 1, 2, 4 and 8 of 10 found by pages 100, 250, 500 and 1,000
    write_dry_run(tmp_path / "long" / "runs" / "t" / "learned-0",
              [(dp, 0, 0.0, found, 0.1) for dp, found in ((100, 1), (250, 2), (500, 4), (1000, 8))])
    assert topic_means(str(tmp_path / "long"), "learned")["t"]["mean"] == pytest.approx((0.1 + 0.2 + 0.4 + 0.8) / 4)
    # the true harvest rate at the last page: 0 / 2 and 1 / 2 in BEFORE (self-assessed 0.2), 2 / 2 in AFTER (0.9)
    assert before["t1"]["err"] == pytest.approx((0.2 + 0.3) / 2) and after["t1"]["err"] == pytest.approx(0.1)
    s = paired(before, after, 250)
    assert s["topics"] == 6 and s["higher"] == 6 and s["lower"] == 0
    assert s["diff"] == pytest.approx((5 * 0.15 + 0.05) / 6)
    # six positive differences: the exact two-sided signed-rank p is 2 / 2**6
    assert s["p"] == pytest.approx(2 / 64)
    # a strategy without the page classifier has no self-assessed P̄: no error, and nothing to pair
    write_dry_run(tmp_path / "before" / "runs" / "t0" / "bestfirst-0", [(1, 0, 0.0, 0, "")])
    assert topic_means(str(tmp_path / "before"), "bestfirst")["t0"]["err"] is None
    assert paired(topic_means(str(tmp_path / "before"), "bestfirst"), after, "err") == {"topics": 0}
    e = paired(before, after, "err")
    # t5's rate stays 1 / 2, so its error rises to |0.9 - 0.5|: lower on five topics, higher on one
    assert e["higher"] == 1 and e["lower"] == 5 and e["diff"] == pytest.approx((5 * -0.15 + 0.15) / 6)


def test_compare_runs_judges_a_topic_against_its_crawls_spread(tmp_path, capsys):
    """Per topic with two or more crawls a side: the difference of the means against two standard
    errors of it; a side with one crawl is not judged."""
    # topic g: BEFORE found 1, 2, 3 of 10 pages by its last page, AFTER 5, 6, 7 (sd 0.1 each side)
    for side, found in (("before", (1, 2, 3)), ("after", (5, 6, 7))):
        for rep, n in enumerate(found):
            write_dry_run(tmp_path / side / "runs" / "g" / f"learned-{rep}", [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, n, 0.2)],
                      **{"topiccrawl/classifier/expected_harvest": 0.2})
    # topic w: close means, wide spread (1, 5 against 2, 6): within
    for side, found in (("before", (1, 5)), ("after", (2, 6))):
        for rep, n in enumerate(found):
            write_dry_run(tmp_path / side / "runs" / "w" / f"learned-{rep}", [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, n, 0.2)])
    # topic o: one crawl after
    for side, reps in (("before", 2), ("after", 1)):
        for rep in range(reps):
            write_dry_run(tmp_path / side / "runs" / "o" / f"learned-{rep}", [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, 1, 0.2)])
    before = topic_means(str(tmp_path / "before"), "learned")
    after = topic_means(str(tmp_path / "after"), "learned")
    assert before["g"]["runs"][1000] == pytest.approx([0.1, 0.2, 0.3])
    g = spread(before, after, "g", 1000)
    assert g["diff"] == pytest.approx(0.4) and g["verdict"] == "higher"
    assert g["two_se"] == pytest.approx(2 * math.sqrt(0.01 / 3 + 0.01 / 3))
    assert spread(after, before, "g", 1000)["verdict"] == "lower"
    w = spread(before, after, "w", 100)
    assert w["diff"] == pytest.approx(0.1) and w["two_se"] == pytest.approx(2 * math.sqrt(0.08 / 2 + 0.08 / 2))
    assert w["verdict"] == "within"
    assert spread(before, after, "o", 100) is None
    # the harvest rate 1 / 2 .. 3 / 2 against a self-assessed 0.2 on g; none reported on w: no error
    assert before["g"]["runs"]["err"] == pytest.approx([0.3, 0.8, 1.3]) and before["w"]["runs"]["err"] is None
    assert spread(before, after, "w", "err") is None
    assert compare_main([str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    table = capsys.readouterr().out.split("Per topic, the difference")[1]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert set(rows) == {"topic", "g", "w"}  # o has one crawl after: not judged
    assert "+0.400 (2 SE 0.163) **higher**" in rows["g"] and "**" not in rows["w"]


def test_compare_runs_lists_only_new_losses_to_bestfirst(tmp_path, capsys):
    """A pair counts when AFTER is below best-first beyond noise, BEFORE is not, and AFTER's mean
    moved down by more than the margin; a pair whose mean did not move (zero spread) does not."""
    found = {  # topic: (best-first, BEFORE, AFTER) pages of 10 found by the last page, three crawls each
        "lost": ((5, 5, 5), (5, 6, 5), (4, 4, 4)),  # AFTER drops below: counted
        "old": ((5, 5, 5), (4, 4, 4), (3, 3, 3)),  # BEFORE was already below: not new
        "same": ((6, 6, 6), (5, 6, 4), (5, 5, 5)),  # same mean, AFTER's spread 0: not counted
        "noisy": ((5, 5, 5), (5, 5, 5), (2, 5, 8)),  # AFTER lower but within its spread
    }
    for t, sides in found.items():
        for (side, variant), counts in zip((("before", "bestfirst"), ("before", "learned"), ("after", "learned")), sides):
            for rep, n in enumerate(counts):
                write_dry_run(tmp_path / side / "runs" / t / f"{variant}-{rep}", [(1, 0, 0.0, 0, 0.1), (2, 0, 0.0, n, 0.2)])
    before = topic_means(str(tmp_path / "before"), "learned")
    after = topic_means(str(tmp_path / "after"), "learned")
    best = topic_means(str(tmp_path / "before"), "bestfirst")
    lost = new_losses(before, after, best)
    assert sorted({r["topic"] for r in lost}) == ["lost"] and [r["at"] for r in lost] == [100, 250, 500, 1000]
    assert lost[0]["after"] == pytest.approx(0.4) and lost[0]["before"] == pytest.approx(16 / 30)
    # a margin wider than the drop (0.133) leaves nothing
    assert new_losses(before, after, best, margin=0.2) == []
    assert compare_main([str(tmp_path / "before"), str(tmp_path / "after"), "--bestfirst"]) == 0
    out = capsys.readouterr().out
    assert "New losses to best-first" in out and out.count("* lost at ") == 4 and "same at" not in out


def test_compare_runs_refuses_crawls_whose_budget_ended_before_its_checkpoints(tmp_path):
    """Two 100-page sessions: recall at 250–1,000 pages repeated their last value, and the Wilcoxon
    test ran on them; now one line (a crawl whose frontier ran dry still keeps its last recall)."""
    from bench.compare_runs import main

    for side in ("a", "b"):
        write_run(tmp_path / side / "runs" / "t" / "learned-0", [(dp, 0, 0.0, dp // 50, 0.1) for dp in (50, 100)])
    with pytest.raises(SystemExit, match=r"a learned crawl stopped at 2 pages \(topiccrawl_max_pages\), before 1000"):
        main([str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(SystemExit, match="no such folder"):
        main([str(tmp_path / "nope"), str(tmp_path / "b")])


def test_a_missing_or_broken_topic_file_is_one_line(tmp_path):
    """``--topics`` naming a file that is not there, or one that does not parse, stops the benchmark
    with the topic loader's one line before any crawl starts (no traceback, no output folder)."""
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n", encoding="utf-8")
    for path, says in ((tmp_path / "none.toml", "no such topic file"), (broken, "broken.toml")):
        with pytest.raises(SystemExit) as exc:
            main(["--corpus", "generated", "--topics", str(path), "--out", str(tmp_path / "out")])
        assert says in str(exc.value.code) and "\n" not in str(exc.value.code)
    assert not (tmp_path / "out").exists()
    # labels that match no page of the corpus (a typo): every crawl found 0 of 0 and its recall 0 was averaged in
    from conftest import REPO

    typo = tmp_path / "typo.toml"
    typo.write_text((REPO / "data" / "topics" / "台风灾害.toml").read_text(encoding="utf-8")
                    .replace('"topic:台风灾害"', '"topic:台风灾灾"'), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--corpus", "generated", "--topics", str(typo), "--out", str(tmp_path / "out")])
    assert str(exc.value.code) == (f"{typo}: its labels (topic:台风灾灾) match no page of "
                                   "generated:zh-disaster?pages=20000&seed=1: a typo in a label?")
    assert not (tmp_path / "out").exists()


def test_resume_reuses_a_run_only_when_the_same_command_made_it(tmp_path):
    """``--resume`` took any run folder with a stats.json: a session of 300 pages reused 150-page runs
    (and runs of other settings) under its own heading. The lab's port and the session's temporary
    topic copies differ between sessions of one plan; nothing else may."""
    from bench.learned_focus import TOPIC_COPIES, same_run

    out = tmp_path / "run"
    out.mkdir()

    def command(pages: int, proxy: str, copies: str, *settings: str) -> list[str]:
        return crawl_command("generated:zh-disaster", proxy, f"/tmp/{copies}/0-birds.toml", "learned", pages, out,
                             settings=settings)

    assert not same_run(out, command(150, "http://127.0.0.1:1", TOPIC_COPIES + "a"))  # no command.json
    old = command(150, "http://127.0.0.1:1", TOPIC_COPIES + "a")
    (out / "command.json").write_text(json.dumps({"command": old, "wall_s": 1.0}), encoding="utf-8")
    assert same_run(out, command(150, "http://127.0.0.1:2", TOPIC_COPIES + "b"))
    assert not same_run(out, command(300, "http://127.0.0.1:2", TOPIC_COPIES + "b"))
    assert not same_run(out, command(150, "http://127.0.0.1:2", TOPIC_COPIES + "b", "TOPICCRAWL_CLASSIFIER=off"))
    assert not same_run(out, command(150, "http://127.0.0.1:2", "elsewhere"))  # another topic file


def test_the_strategies_bench_varies_the_seed_between_repetitions_and_goes_on_after_a_failed_crawl(tmp_path):
    # repetitions of a strategy with an RNG ran with one seed (the same crawl twice), the plot showed
    # repetition 0 only, and the first failed crawl stopped the session, losing the finished runs' table
    import subprocess
    import sys

    from conftest import REPO

    base = [sys.executable, "-m", "bench.strategies", "--web", "generated:zh-disaster?pages=2000&seed=3",
            "--topic", "台风灾害", "--pages", "30"]
    proc = subprocess.run([*base, "--strategies", "learned,bfs", "--repeats", "2", "--first-seed", "4",
                           "--out", str(tmp_path / "ok")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = {p.parent.name: json.loads(p.read_text(encoding="utf-8"))["command"]
                for p in (tmp_path / "ok").glob("*/command.json")}
    assert sorted(commands) == ["bfs-4", "bfs-5", "learned-4", "learned-5"]
    assert "TOPICCRAWL_LEARNED_SEED=4" in commands["learned-4"] and "TOPICCRAWL_LEARNED_SEED=5" in commands["learned-5"]
    assert not any("_SEED=" in x for x in commands["bfs-4"])
    assert (tmp_path / "ok" / "harvest.png").stat().st_size > 0
    # the seed is the bench's: passed through, it would make the repetitions one crawl
    proc = subprocess.run([*base, "--strategies", "learned", "-s", "TOPICCRAWL_LEARNED_SEED=1",
                           "--out", str(tmp_path / "seed")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].endswith("use --first-seed (the repetitions' seeds)")
    # a crawl that fails (here every one: a truth file that is not there) is listed; the others still run
    proc = subprocess.run([*base, "--strategies", "bestfirst,bfs", "-s", f"TOPICCRAWL_GROUND_TRUTH={tmp_path}/none.txt",
                           "--out", str(tmp_path / "bad")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr.splitlines()[-1]
    assert proc.stderr.strip().splitlines()[-1] == "2 crawl(s) failed (results.md lists them)"
    assert (tmp_path / "bad" / "bestfirst-0" / "stderr.txt").exists() and (tmp_path / "bad" / "bfs-0" / "stderr.txt").exists()
    table = (tmp_path / "bad" / "results.md").read_text(encoding="utf-8")
    assert "| bestfirst | " in table and "failed: 1 of 1 runs" in table and "bfs rep 0: see " in table


def test_the_paired_throughput_bench_runs_from_another_folder_with_a_strategy_and_settings(tmp_path, shared_data):
    # --topics was read from the working directory but the crawls ran in the repository (a topic
    # given from elsewhere failed in every crawl with a traceback), and a strategy with settings
    # (NAME:SETTING=VALUE, as its usage shows) was refused as unknown
    import os
    import shutil
    import subprocess
    import sys

    from conftest import REPO

    (tmp_path / "t").mkdir()
    shutil.copy(REPO / "bench" / "topics" / "wikispeedia" / "birds-en.toml", tmp_path / "t" / "birds-en.toml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOPICCRAWL_DATA_DIR": str(shared_data)}
    proc = subprocess.run([sys.executable, "-m", "bench.throughput_paired", "--topics", "t/*.toml", "--pages", "20",
                           "--strategies", "bestfirst:TOPICCRAWL_PROGRESS_INTERVAL=0", "--out", "pairs.json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pairs = json.loads((tmp_path / "pairs.json").read_text(encoding="utf-8"))["pairs"]
    assert len(pairs) == 1 and pairs[0]["bestfirst:TOPICCRAWL_PROGRESS_INTERVAL=0"] > 0
    (tmp_path / "t" / "birds-en.toml").write_text("name = [", encoding="utf-8")  # a broken topic: one line
    proc = subprocess.run([sys.executable, "-m", "bench.throughput_paired", "--topics", "t/*.toml"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1 and "birds-en.toml" in proc.stderr


def test_a_learned_focus_session_keeps_its_topic_copies_and_writes_under_a_relative_out(tmp_path):
    # a learned-examples run's command.json named the session's temporary topic copy, deleted after
    # it (the run could not be made again as recorded); an --out relative to a folder other than the
    # repository had the crawls write under the repository while the session read its own folder
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "bench.learned_focus", "--corpus", "generated", "--web",
                           "generated:zh-disaster?pages=2000&seed=3", "--topics", "台风灾害", "--variants",
                           "learned-examples", "--pages", "20", "--repeats", "1", "--out", "out"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "out" / "runs" / "台风灾害" / "learned-examples-0"
    command = json.loads((run / "command.json").read_text(encoding="utf-8"))["command"]
    topic = Path(next(x for x in command if x.startswith("topic="))[len("topic="):])
    assert topic.parent == tmp_path / "out" / "topics-without-words" and topic.is_file()
    assert "\n[words]" not in topic.read_text(encoding="utf-8")
    assert (tmp_path / "out" / "results.md").is_file()
    # the kept copy is the same command for --resume
    from bench.learned_focus import same_run

    assert same_run(run, command)


def test_the_dwdbrm_bench_writes_under_its_out_and_refuses_mistakes_in_one_line(tmp_path):
    # its plots went to docs/img, over the committed figures, on every run; an --out relative to another
    # folder had the crawls write under the repository (FileNotFoundError); a misspelt method failed
    # after the methods before it were crawled; --report without runs was a traceback
    import os
    import subprocess
    import sys

    from conftest import REPO

    committed = {p.name: p.read_bytes() for p in (REPO / "docs" / "img").glob("dwdbrm-*.png")}
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def bench(*args, timeout=600):
        return subprocess.run([sys.executable, "-m", "bench.dwdbrm", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    proc = bench("--corpus", "realestate", "--reps", "1", "--pages", "10", "--methods", "forward", "--out", "rel")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "rel" / "runs.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert run["method"] == "forward" and len(run["curve"]) == 10
    assert (tmp_path / "rel" / "img" / "dwdbrm-realestate.png").is_file()
    assert {p.name: p.read_bytes() for p in (REPO / "docs" / "img").glob("dwdbrm-*.png")} == committed
    assert not (REPO / "rel").exists()
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    for args, said in ((("--corpus", "realestate", "--methods", "forward,forwrd"), "--methods: unknown forwrd"),
                       (("--corpus", "realestate", "--out", "afile"), "is a file, not a folder"),
                       (("--report", "--out", "nothing"), "runs.jsonl does not exist")):
        proc = bench(*args, timeout=120)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert not (tmp_path / "nothing").exists()


def test_the_strategies_bench_refuses_a_topic_it_cannot_measure_before_any_crawl(tmp_path):
    # labels with a typo gave every row a recall of 0 and exit 0; a misspelt topic name failed in every
    # crawl, after the web lab and the plain spider had run
    import os
    import subprocess
    import sys

    from conftest import REPO

    (tmp_path / "typo.toml").write_text('beta = 0.3\nlabels = ["topic:台风灾难"]\n[words]\n台风 = 1.0\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for topic, said in (("typo.toml", "typo.toml: its labels (topic:台风灾难) match no page of generated:zh-disaster"),
                        ("台风灾", "unknown topic '台风灾'")):
        proc = subprocess.run([sys.executable, "-m", "bench.strategies", "--web", "generated:zh-disaster?pages=2000",
                               "--topic", topic, "--strategies", "bestfirst", "--pages", "20", "--out", "out"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr[-2000:]
        assert said in proc.stderr and not (tmp_path / "out").exists(), proc.stderr[-2000:]
    # what the check must let through: the labels of a ground-truth file of the user's, and a topic path
    # relative to the repository (the crawls run there) given from another folder
    from topiccrawl.weblab.corpus import open_corpus

    urls = list(open_corpus("generated:zh-disaster?pages=2000").iter_urls())
    (tmp_path / "gt.tsv").write_text("".join(f"{u}\ttopic:台风灾难\n" for u in urls[::3]), encoding="utf-8")
    for topic, extra in (("typo.toml", ["-s", f"TOPICCRAWL_GROUND_TRUTH={tmp_path / 'gt.tsv'}"]),
                         ("data/topics/台风灾害.toml", [])):
        proc = subprocess.run([sys.executable, "-m", "bench.strategies", "--web", "generated:zh-disaster?pages=2000",
                               "--topic", topic, "--strategies", "bfs", "--pages", "5", "--out", "ok", *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and (tmp_path / "ok" / "results.md").is_file(), proc.stderr[-2000:]


def test_the_learned_focus_bench_refuses_variants_naming_none(tmp_path):
    # --variants '' ran no crawl and ended in a matplotlib traceback
    from bench.learned_focus import main

    for spec, said in ((",", "--variants names none"), ("learnd", "unknown variant 'learnd'")):
        with pytest.raises(SystemExit, match=said):
            main(["--variants", spec, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_the_webkb_site_finder_bench_reads_every_rules_file_before_any_run(tmp_path):
    # a bad regular expression in the second rules file was a traceback after the first had run (44 s)
    from bench.sitefinder_webkb import main

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "b"\nlabel = "class:x"\n[[rules]]\nname = "isbn"\nregex = "(ISBN"\nweight = 1\n',
                   encoding="utf-8")
    for rules, said in ((f"faculty-en,{bad}", f"{bad}: rule 'isbn': bad regular expression"),
                        ("faculty-en,nonexist-en", "rules file 'nonexist-en': no such file"), (",", "--rules names none")):
        with pytest.raises(SystemExit) as exc:
            main(["--web", "webkb:/nonexistent", "--rules", rules, "--out", str(tmp_path / "out.md")])
        assert said in str(exc.value.code) and "\n" not in str(exc.value.code)
    assert not (tmp_path / "out.md").exists()
