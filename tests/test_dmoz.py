"""Category trees: the streaming DMOZ RDF reader on the real samples, the Wikispeedia subject tree."""

from __future__ import annotations

import gzip
import shutil

import pytest

from topiccrawl.scoring.dmoz import (
    DmozAlias,
    DmozPage,
    DmozTopic,
    TopicTree,
    TreeError,
    first_sentences,
    iter_dmoz,
    read_dmoz,
    wikispeedia_tree,
)


@pytest.fixture
def samples(shared_data):
    return shared_data / "dmoz-samples"


def test_content_dump_records(samples):
    recs = list(iter_dmoz(samples / "cosr-dmoz.rdf"))
    topics = [r for r in recs if isinstance(r, DmozTopic)]
    pages = {r.url: r for r in recs if isinstance(r, DmozPage)}
    assert topics[0].id == "Top" and topics[0].catid == "1"  # r:id="" is the root
    anim = next(t for t in topics if t.id == "Top/Arts/Animation")
    assert anim.catid == "423945" and anim.links["link"][0] == "http://www.awn.com/"  # link1 -> link
    assert len(anim.links["link"]) == 5
    awn = pages["http://www.awn.com/"]
    assert (awn.title, awn.priority, awn.topic) == ("Animation World Network", 1, "Top/Arts/Animation")
    assert awn.description.startswith("Provides information resources to the international animation")
    assert (pages["http://google.com/"].title, pages["http://google.com/"].description) == (
        "Google", "Search Engine")


def test_content_tree_documents_and_non_ascii(samples):
    tree = read_dmoz(samples / "lemig-content_sample.rdf.u8")
    arm = tree["Top/World/Armenian/Առողջություն"]
    assert arm.title == "Առողջություն" and arm.parent == "Top/World/Armenian"
    assert tree.path(arm.id) == ["Top", "Top/World", "Top/World/Armenian", arm.id]
    assert "http://www.shoonch.com/" in arm.urls and len(arm.urls) == 5
    assert arm.docs == ["Շունչ Յոգայի Ստուդիա. Երևանյան կենտրոնն առաջարկում է յոգայի կանոնավոր և "
                        "փիլատեսի դասեր, մերսման և դեմքի մշակման տարբեր տեսակի ծառայություններ։"]
    otter = tree["Top/Arts/Animation/Cartoons/Titles/P/PB_&_J_Otter"]  # &amp; unescaped
    assert otter.title == "PB & J Otter" and otter.docs[0].startswith("PB &J Otter. Includes a synopsis")
    assert tree.level(otter.id) == 6 and "Top/Arts/Animation/Cartoons" in tree.nodes
    # documents of a node = those of its subtree
    assert len(tree.documents("Top/Arts")) == len(tree["Top/Arts/Animation"].docs) + 1


def test_pages_are_attached_by_their_topic_element(samples):
    tree = read_dmoz(samples / "cosr-dmoz.rdf")
    clubs = tree["Top/Arts/Animation/Anime/Clubs_and_Organizations"]
    # the Topic lists no links; its ExternalPages name it in <topic>
    assert "http://www.yale.edu/anime/" in clubs.urls
    assert any(d.startswith("Yale Anime Society. ") for d in clubs.docs)
    assert clubs.docs[-1] == "Google. Search Engine"  # "title. description"
    assert tree.siblings(clubs.id) == ["Top/Arts/Animation/Anime/Characters", clubs.id]


def test_structure_dump_links_and_aliases(samples):
    recs = list(iter_dmoz(samples / "lemig-structure_sample.rdf.u8"))
    arts = next(r for r in recs if isinstance(r, DmozTopic) and r.id == "Top/Arts")
    assert arts.title == "Arts" and "The ODP <b>Arts</b> category" in arts.description
    assert arts.links["narrow"][0] == "Top/Arts/Directories" and len(arts.links["narrow"]) == 6
    assert "Tamil:Top/World/Tamil/கலை" in arts.links["altlang"]
    assert "Typography:Top/Arts/Graphic_Design/Typography" in arts.links["symbolic"]
    aliases = [r for r in recs if isinstance(r, DmozAlias)]
    assert (aliases[0].title, aliases[0].target) == (
        "Publishers", "Top/Business/Publishing_and_Printing/Publishing/Books/Arts")
    tree = read_dmoz(samples / "lemig-structure_sample.rdf.u8")
    assert tree["Top/Arts"].children == [f"Top/Arts/{n}" for n in (
        "Directories", "News_and_Media", "Weblogs", "Chats_and_Forums", "Art_History", "Crafts")]
    assert tree["Top/Arts"].links["symbolic"][0].startswith("Publishers:")
    assert "Kids_and_Teens" not in tree.nodes  # a related link outside Top is not a node


def test_both_dumps_gzip_and_under(samples, tmp_path):
    gz = tmp_path / "content.rdf.u8.gz"
    with open(samples / "lemig-content_sample.rdf.u8", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    tree = read_dmoz(samples / "lemig-structure_sample.rdf.u8", gz)
    assert tree["Top/Arts"].title == "Arts" and tree["Top/Arts/Animation"].docs
    sub = read_dmoz(gz, under="Top/World")
    assert "Top/Arts/Animation" not in sub and sub["Top/World/Armenian/Առողջություն"].docs
    with pytest.raises(TreeError, match="no topic 'Top/Nope'"):
        read_dmoz(gz, under="Top/Nope")


def test_bad_input_is_a_one_line_error(tmp_path):
    broken = tmp_path / "broken.rdf"
    broken.write_text('<RDF xmlns="http://dmoz.org/rdf/"><Topic r:id="Top/A">', encoding="utf-8")
    with pytest.raises(TreeError, match="broken.rdf: broken XML"):
        read_dmoz(broken)
    with pytest.raises(TreeError, match="missing.rdf: no such file"):
        read_dmoz(tmp_path / "missing.rdf")
    tree = TopicTree("Top", "/")
    tree.add("Top/Arts/Animation")
    with pytest.raises(TreeError, match="no node 'Top/Animation'.*did you mean Top/Arts/Animation"):
        tree["Top/Animation"]
    assert tree["Arts"].id == "Top/Arts"  # the root prefix may be left out


def test_first_sentences_skips_label_line_infobox_and_captions():
    raw = ("   #copyright\n\nStorm\n\n2007 Schools Wikipedia Selection. Related subjects: Storms\n\n"
           "   Formed August 23, 2005\n   Damage $81.2 billion\n\n"
           + "A shelf cloud over the town seen from the south in the evening light of summer. " * 2
           + "\n\n   A storm is any disturbed state of an astronomical body's atmosphere, especially "
             "affecting its surface, and strongly implying severe weather. It may be marked by strong "
             "wind. A third sentence follows here. And a fourth one.\n")
    assert first_sentences(raw, sentences=2) == (
        "A storm is any disturbed state of an astronomical body's atmosphere, especially affecting "
        "its surface, and strongly implying severe weather. It may be marked by strong wind.")


def test_wikispeedia_tree_is_split_without_leakage(shared_data):
    data = str(shared_data / "wikispeedia")
    tree = wikispeedia_tree(data, seed=0)
    assert len(tree) == 146  # root + 145 labels (129 full categories and their prefixes)
    assert max(tree.level(n) for n in tree.nodes) == 3
    assert tree.siblings("subject.Science.Physics") == [
        "subject.Science.Physics", "subject.Science.Biology", "subject.Science.Chemistry"]
    descriptive = {u for n in tree.nodes.values() for u in n.urls}
    assert not descriptive & set(tree.heldout)
    assert 0.45 < len(tree.heldout) / (len(tree.heldout) + len(descriptive)) < 0.5
    storms = tree["Geography.Storms"]
    assert storms.docs and all("Related subjects" not in d for d in tree.documents("subject"))
    assert tree.heldout["http://en.wikispeedia.test/wiki/Tornado"] >= {"subject.Geography"}
    assert all(tree.documents(n) for n in tree.nodes)
    assert wikispeedia_tree(data, seed=0).heldout == tree.heldout
    assert wikispeedia_tree(data, seed=1).heldout != tree.heldout
