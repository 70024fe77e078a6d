"""Per-token feature columns (``TaggedSentence.feats``) through the store, prepare, vocabularies,
``load_tagging_task`` and ``TaggingBatch.feats``."""
import json

import pyarrow.parquet as pq
import pytest
import torch
import yaml

from components.data import store
from components.data.batching import TaggingDataset
from components.data.tasks import load_tagging_task
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab, read_vocabs
from flows.stages import prepare
from flows.stages.common import run_stage

# CoNLL-2000 layout: word POS chunk; two documents' worth of short sentences
CHUNK = [
    [("He", "PRP", "B-NP"), ("reckons", "VBZ", "B-VP"), ("the", "DT", "B-NP"), ("deficit", "NN", "I-NP")],
    [("Rockwell", "NNP", "B-NP"), ("said", "VBD", "B-VP")],
    [("the", "DT", "B-NP"), ("agreement", "NN", "I-NP"), ("calls", "VBZ", "B-VP"), ("for", "IN", "B-PP"),
     ("it", "PRP", "B-NP"), (".", ".", "O")],
]


def _conll(sents):
    return "\n\n".join("\n".join(" ".join(t) for t in s) for s in sents) + "\n"


@pytest.fixture
def chunk_root(tmp_path):
    user = tmp_path / "data" / "user" / "conll2000"
    user.mkdir(parents=True)
    (user / "train.txt").write_text(_conll(CHUNK))
    (user / "dev.txt").write_text(_conll(CHUNK[1:2]))
    # test: a POS tag never seen in training -> <unk>
    (user / "test.txt").write_text(_conll([[("Yes", "UH", "O"), ("it", "PRP", "B-NP")]]))
    params = yaml.safe_load(open("params.yaml"))
    params["base"]["tracker"] = "null"
    params["prepare"].update(glove=False, ocr_letters=False, snakes=False, cmudict=False, parallel=False)
    params["prepare"]["tasks"] = {"chunk": {
        "format": "conll", "split": "given", "train": "data/user/conll2000/train.txt",
        "dev": "data/user/conll2000/dev.txt", "test": "data/user/conll2000/test.txt",
        "feature_columns": {"pos": 1}, "features": ["pos"], "scheme": "bioes", "metric": "span_f1"}}
    return tmp_path, params


def test_store_round_trip_with_features(tmp_path):
    sents = [TaggedSentence(("a", "b"), ("X", "Y"), "s1", {"pos": ("D", "N"), "lemma": ("a", "b")}),
             TaggedSentence(("c",), ("Z",), "s2", {"pos": ("V",)})]
    path = tmp_path / "t.parquet"
    store.write_tagged(path, sents, ["pos"])
    assert pq.read_schema(path).names == ["sid", "words", "tags", "feat:pos"]
    back = store.read_tagged(path)
    assert [s.feats for s in back] == [{"pos": ("D", "N")}, {"pos": ("V",)}]   # only the asked-for column
    assert store.read_tagged(path, ["pos"]) == back
    with pytest.raises(ValueError, match=r"t.parquet: feature columns \['pos'\]; expected \[\]"):
        store.read_tagged(path, [])
    # without features: exactly the TAGGED schema, as before
    store.write_tagged(tmp_path / "plain.parquet", sents)
    assert pq.read_schema(tmp_path / "plain.parquet").equals(store.TAGGED, check_metadata=False)
    with pytest.raises(ValueError, match=r"sentence 's2' has no feature 'lemma'"):
        store.write_tagged(tmp_path / "x.parquet", sents, ["lemma"])
    with pytest.raises(ValueError, match="repeat"):
        store.tagged_schema(["pos", "pos"])


def test_prepare_round_trip_with_a_feature_column(chunk_root):
    root, params = chunk_root
    m = run_stage("prepare", prepare.run, params, root)
    assert m["chunk"]["train_sentences"] == 3 and m["chunk"]["n_feat_pos"] == 2 + 8   # <pad> <unk> + 8 POS tags
    out = root / "data/prepared/chunk"
    assert json.loads((out / "meta.json").read_text())["features"] == ["pos"]
    vocabs = read_vocabs(out / "vocab.parquet")
    assert list(vocabs) == ["word", "char", "label", "feat:pos"]
    assert vocabs["feat:pos"].tokens[:2] == ("<pad>", "<unk>")
    train = store.read_tagged(out / "train.parquet")
    assert [s.feats["pos"] for s in train] == [tuple(t[1] for t in s) for s in CHUNK]

    task = load_tagging_task(out)
    assert task.features == ("pos",) and task.feat_sizes == [len(vocabs["feat:pos"])]
    pv = vocabs["feat:pos"]
    for ds, expect in ((task.train, CHUNK), (task.test, [[("Yes", "UH", "O"), ("it", "PRP", "B-NP")]])):
        for batch in ds.batches(2):
            B, N = batch.words.shape
            assert batch.feats.shape == (B, N, 1) and batch.feats.dtype == torch.long
            assert (batch.feats[~batch.mask] == 0).all()
            for b, i in enumerate(batch.index.tolist()):
                n = len(expect[i])
                want = [pv.index(t[1], pv.unk_id) for t in expect[i]]
                assert batch.feats[b, :n, 0].tolist() == want        # aligned with the words
                assert ds.sentences[i].words == tuple(t[0] for t in expect[i])
    assert task.test.feats[0][0][0] == pv.unk_id                      # UH never seen in training
    moved = next(task.train.batches(3)).to("cpu")
    assert moved.feats.shape[-1] == 1


def test_prepare_rejects_a_feature_the_reader_does_not_give(chunk_root):
    root, params = chunk_root
    del params["prepare"]["tasks"]["chunk"]["feature_columns"]     # the column is never read
    with pytest.raises(ValueError, match=r"prepare.tasks.chunk.features: the conll reader gives no feature "
                                         r"\['pos'\].*feature_columns"):
        run_stage("prepare", prepare.run, params, root)
    assert not (root / "data/prepared/chunk").exists()


def test_check_features_names_the_sentence_missing_a_feature():
    from components.data.prepare import check_features
    parts = {"train": [TaggedSentence(("a",), ("X",), "train.txt:1")]}
    with pytest.raises(ValueError, match=r"prepare.tasks.chunk: sentence 'train.txt:1' \(train split\) "
                                         r"has no feature 'pos'"):
        check_features("chunk", ("pos",), parts)
    check_features("chunk", (), parts)


def test_prepare_config_errors(chunk_root):
    from components.config import ConfigError
    root, params = chunk_root
    t = params["prepare"]["tasks"]["chunk"]
    t["features"] = ["pos", "pos"]
    with pytest.raises(ValueError, match="prepare.tasks.chunk.features.*repeat"):
        run_stage("prepare", prepare.run, params, root)
    t["features"] = ["pos"]
    t["feature_colums"] = {"pos": 1}
    with pytest.raises(ConfigError, match="feature_colums"):
        run_stage("prepare", prepare.run, params, root)
    params["prepare"]["tasks"]["chunk"] = {"format": "word_tag", "paths": ["x.txt"], "feature_columns": {"pos": 1}}
    with pytest.raises(ConfigError, match=r"prepare.tasks.chunk.feature_columns: the word_tag reader has no "
                                          r"option 'feature_columns'.*\['conll'\]"):
        run_stage("prepare", prepare.run, params, root)


def test_prepare_without_features_writes_the_plain_files(chunk_root):
    root, params = chunk_root
    t = params["prepare"]["tasks"]["chunk"]
    del t["features"]            # the column is read but not asked for: nothing of it is written
    run_stage("prepare", prepare.run, params, root)
    out = root / "data/prepared/chunk"
    assert pq.read_schema(out / "train.parquet").equals(store.TAGGED, check_metadata=False)
    assert "features" not in json.loads((out / "meta.json").read_text())
    assert list(read_vocabs(out / "vocab.parquet")) == ["word", "char", "label"]
    task = load_tagging_task(out)
    assert task.features == () and task.feat_sizes == []
    batch = next(task.train.batches(2))
    assert batch.feats.shape == (*batch.words.shape, 0)


def _vocabs(sents):
    return {"word": build_vocab(w.lower() for s in sents for w in s.words),
            "char": build_vocab(c for s in sents for w in s.words for c in w),
            "label": build_label_vocab(sents)}


def test_batch_feats_empty_without_features_and_errors_name_the_sentence():
    sents = [TaggedSentence(("a", "b", "c"), ("X", "Y", "X"), "s1"), TaggedSentence(("d",), ("Y",), "s2")]
    vocabs = _vocabs(sents)
    ds = TaggingDataset(sents, vocabs)
    batch = ds.collate([0, 1])
    assert batch.feats.shape == (2, 3, 0) and batch.feats.dtype == torch.long
    assert ds.features == () and ds.feat_sizes == []
    vocabs["feat:pos"] = build_vocab(["D", "N"])
    with pytest.raises(ValueError, match=r"sentence 's1' has no feature 'pos'"):
        TaggingDataset(sents, vocabs)                  # features=None: every feat:<name> vocabulary
    assert TaggingDataset(sents, vocabs, features=()).features == ()
    with pytest.raises(ValueError, match=r"feature 'lemma' has no vocabulary 'feat:lemma'"):
        TaggingDataset(sents, vocabs, features=["lemma"])


def test_batch_without_feats_argument_keeps_working():
    from components.data.batching import TaggingBatch
    w = torch.ones(2, 3, dtype=torch.long)
    b = TaggingBatch(w, w[..., None], w, w.bool(), torch.tensor([3, 3]), torch.tensor([0, 1]))
    assert b.feats.shape == (2, 3, 0)
    assert b.to("cpu").feats.shape == (2, 3, 0)
