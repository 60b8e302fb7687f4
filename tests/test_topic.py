"""Topic files: the shipped topics and every kind of broken file."""

from __future__ import annotations

from pathlib import Path

import pytest

from topiccrawl.scoring.text import tokenize
from topiccrawl.scoring.topic import Topic, TopicError, load_topic, shipped_topics


def test_shipped_chinese_topics_have_the_papers_words_weights_and_beta():
    rain = load_topic("暴雨灾害")
    assert rain.words == {"暴雨": 0.8, "气象": 0.1, "天气": 0.1, "灾害": 0.5, "预防": 0.3}
    assert (rain.name, rain.language, rain.beta) == ("暴雨灾害", "zh", 0.62)
    assert rain.labels == frozenset({"topic:暴雨灾害"})
    typhoon = load_topic("台风灾害")
    assert typhoon.words == {"台风": 0.8, "风暴潮": 0.5, "暴雨": 0.3, "气压": 0.2, "风力": 0.2}
    assert (typhoon.language, typhoon.beta, typhoon.seeds) == ("zh", 0.67, ())
    assert typhoon.labels == frozenset({"topic:台风灾害"})
    assert Path(typhoon.path).name == "台风灾害.toml"


def test_ascii_aliases_and_listing():
    assert load_topic("typhoon") == load_topic("台风灾害")
    assert load_topic("rainstorm").name == "暴雨灾害"
    assert load_topic("realestate").labels == frozenset({"topic:房产"})
    assert {"暴雨灾害", "台风灾害", "房产", "weather-en", "natural-disasters-en"} <= set(shipped_topics())


def test_english_wikispeedia_topic():
    t = load_topic("weather-en")
    assert t.language == "en" and 0 < t.beta < 1
    assert t.seeds == ("http://en.wikispeedia.test/wiki/Earth",
                       "http://en.wikispeedia.test/wiki/United_States",
                       "http://en.wikispeedia.test/wiki/Geography")
    assert "subject.Geography.Storms" in t.labels and len(t.labels) == 3
    assert t.words["hurricane"] > 0 and all(w == w.lower() for w in t.words)
    generated = load_topic("natural-disasters-en")
    assert generated.seeds == () and generated.labels == frozenset({"topic:en-weather"})


def test_every_shipped_topic_loads_and_its_words_are_single_terms():
    for name in shipped_topics():
        topic = load_topic(name)
        assert isinstance(topic, Topic) and topic.words
        for word in topic.words:
            assert tokenize(word) == [word]


def test_loading_registers_words_with_jieba(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('beta = 0.5\n[words]\n"防汛抗旱指挥部" = 1.0\n', encoding="utf-8")
    topic = load_topic(str(path))
    assert (topic.name, topic.language) == ("t", "zh")  # defaults: file stem, detected language
    assert "防汛抗旱指挥部" in tokenize("国家防汛抗旱指挥部发布通知")


def test_unquoted_chinese_keys_are_accepted(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('beta = 0.5\n[words]\n台风 = 0.8\n  风暴潮=0.5\n"暴雨" = 0.3\n', encoding="utf-8")
    assert load_topic(str(path)).words == {"台风": 0.8, "风暴潮": 0.5, "暴雨": 0.3}
    path.write_text('beta = 0.5\n[words]\n台风 = "heavy"\n', encoding="utf-8")
    with pytest.raises(TopicError, match=r"t\.toml: \[words\] weight for '台风' must be a number$"):
        load_topic(str(path))
    path.write_text('beta = 0.5\n[words]\n台风 = 0.8 0.9\n', encoding="utf-8")
    with pytest.raises(TopicError, match=r"t\.toml: invalid TOML"):
        load_topic(str(path))


def test_seed_file_relative_to_topic_file(tmp_path):
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "s.txt").write_text(
        "# portals\nhttp://a.example/\n\n  https://b.example/x  # news\nhttp://a.example/\nhttp://a.example/#top\n",
        encoding="utf-8")
    path = tmp_path / "t.toml"
    path.write_text('beta = 0.3\nseeds = ["http://z.example/"]\nseed_file = "seeds/s.txt"\n'
                    '[words]\nStorm = 1\n', encoding="utf-8")
    topic = load_topic(str(path))
    assert topic.seeds == ("http://z.example/", "http://a.example/", "https://b.example/x")  # #top: the same page
    assert topic.words == {"storm": 1.0} and topic.language == "en"


BROKEN = [
    ("beta = 0.5\n[words\n", "invalid TOML"),
    ("beta = 0.5\n[words]\n", "[words] must be a non-empty table"),
    ('beta = 0.5\n[words]\n"台风" = "high"\n', "[words] weight for '台风' must be a number"),
    ('beta = 0.5\n[words]\n"台风" = true\n', "[words] weight for '台风' must be a number"),
    ('beta = 0.5\n[words]\n"台风" = -0.2\n', "[words] weight for '台风' must be positive"),
    ('beta = 0.5\n[words]\n"storm surge" = 0.2\n', "'storm surge' is not a single term"),
    # the message named the word as read twice ("'storm' repeats the word 'storm'"), not the key written
    ('beta = 0.5\n[words]\nStorm = 1\nstorm = 2\n', "'storm' repeats the word 'Storm' (both read as 'storm')"),
    ('beta = 0.5\n[words]\n"台风" = 1\n"颱風" = 2\n', "'颱風' repeats the word '台风' (both read as '台风')"),
    # a stop word was to be "split into separate words"
    ('beta = 0.5\nlanguage = "zh"\n[words]\n"的" = 1\n', "'的' has no term to score by (a stop word"),
    ('beta = 0.5\n[words]\n" " = 1\n', "' ' has no term to score by"),
    ('[words]\nstorm = 1\n', "missing 'beta'"),
    ('beta = 1.5\n[words]\nstorm = 1\n', "'beta' must be a number in [0, 1], got 1.5"),
    ('beta = -0.1\n[words]\nstorm = 1\n', "'beta' must be a number in [0, 1]"),
    ('beta = "high"\n[words]\nstorm = 1\n', "'beta' must be a number in [0, 1]"),
    ('beta = 0.5\nthreshold = 0.3\n[words]\nstorm = 1\n', "unknown key 'threshold'"),
    ('beta = 0.5\nlanguage = "fr"\n[words]\nstorm = 1\n', "language 'fr' must be one of"),
    ('beta = 0.5\nseed_file = "nope.txt"\n[words]\nstorm = 1\n', "seed_file 'nope.txt' not found"),
    ('beta = 0.5\nseeds = ["www.example.com"]\n[words]\nstorm = 1\n',
     "seeds[0] 'www.example.com' is not an absolute http(s) URL"),
    ('beta = 0.5\nlabels = "topic:x"\n[words]\nstorm = 1\n', "'labels' must be a list of strings"),
    ('examples = ["http://a.example/x", "http://a.example/y"]\ncounter_examples = ["http://a.example/y"]\n',
     "'http://a.example/y' is in both 'examples' and 'counter_examples'"),
    ('examples_dir = " "\n', "'examples_dir' is empty"),
    ('examples = ["http://a.example:99999/x"]\n', "examples[0] 'http://a.example:99999/x' is not an absolute http(s) URL"),
]


@pytest.mark.parametrize("content, problem", BROKEN)
def test_broken_files_raise_one_line_topic_error(tmp_path, content, problem):
    path = tmp_path / "x.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TopicError) as err:
        load_topic(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_bad_line_in_seed_file(tmp_path):
    (tmp_path / "s.txt").write_text("http://ok.example/\nftp://files.example/\n", encoding="utf-8")
    path = tmp_path / "x.toml"
    path.write_text('beta = 0.5\nseed_file = "s.txt"\n[words]\nstorm = 1\n', encoding="utf-8")
    with pytest.raises(TopicError, match=r"x\.toml: seed_file 's.txt' line 2: 'ftp://"):
        load_topic(str(path))


def test_missing_file_and_unknown_name():
    with pytest.raises(TopicError, match=r"^no/such\.toml: no such topic file$"):
        load_topic("no/such.toml")
    with pytest.raises(TopicError, match=r"^tests: a folder, not a topic file \(give the \.toml file\)$"):
        load_topic("tests")  # no slash, as `-a topic=tests` is typed
    with pytest.raises(TopicError, match=r"^tests/: a folder, not a topic file"):
        load_topic("tests/")
    with pytest.raises(TopicError, match=r"unknown topic 'volcanoes'.*台风灾害.*typhoon"):
        load_topic("volcanoes")
