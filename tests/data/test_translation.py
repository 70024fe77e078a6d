import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from components.data.store import PARALLEL, write_table
from components.data.translation import (EOS, ParallelDataset, SubwordVocab, TranslationBatch, TranslationConfig,
                                         decode_budget, detokenize, load_translation_task)

GREEK = ["λόγος", "θεός", "ἄνθρωπος", "καὶ", "ὁ", "ἦν", "ἐν", "ἀρχῇ", "πρὸς", "τὸν", "οὗτος", "φῶς"]
ENGLISH = ["the", "word", "was", "God", "and", "in", "beginning", "with", "this", "light", "man", "is"]


@pytest.mark.parametrize("tokens, text", [
    (["This", "is", "the", "record", "of", "Abraham", ":"], "This is the record of Abraham:"),
    (["He", "said", ",", "“", "Do", "not", "fear", ".", "”"], "He said, “Do not fear.”"),
    (["let", "your", "‘", "Yes", ",", "’", "be", "‘", "Yes", ".", "’", "”"], "let your ‘Yes,’ be ‘Yes.’”"),
    (["(", "which", "means", ",", "God", "with", "us", ")", "."], "(which means, God with us)."),
    (["[", "a", "]", "b", "?", "!", ";"], "[a] b?!;"),
    (["God", "’s", "house", "is", "n’t", "far"], "God’s house isn’t far"),
    (["John", "'s", "book", "did", "n't", "go", "'"], "John's book didn't go '"),
    (["the", "disciples", "’", "feet"], "the disciples’ feet"),
    (["He", "said", ",", '"', "Go", ".", '"', "and", '"', "Stay", '"', "!"], 'He said, "Go." and "Stay"!'),
    (['"', "a", '"', '"', "b", '"'], '"a" "b"'),
    (["Galilee", "of", "the", "Gentiles", "—", "the", "people"], "Galilee of the Gentiles — the people"),
    (["Wait", "...", "now"], "Wait... now"),
    (["", "a", " ", "b"], "a b"),
    ([], ""),
    (["", " "], ""),
    (["Βίβλος", "γενέσεως", "Ἰησοῦ"], "Βίβλος γενέσεως Ἰησοῦ"),
    (["ἐγέννησεν", ",", "καὶ", "ἦν", "·", "τί", ";"], "ἐγέννησεν, καὶ ἦν· τί;"),
])
def test_detokenize(tokens, text):
    assert detokenize(tokens) == text


def test_detokenize_rejects_a_string():
    with pytest.raises(TypeError, match="sequence of tokens"):
        detokenize("a b")


# ----------------------------------------------------------------------------- vocabulary

def _sentences(words, n, seed, punct=False):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        toks = [rng.choice(words) for _ in range(rng.randint(2, 6))]
        if punct:
            if rng.random() < 0.3:
                toks = ["“"] + toks + [",", "”"]
            toks.append(rng.choice([".", "?", "!"]))
        out.append(toks)
    return out


@pytest.fixture(scope="module")
def english_texts():
    return [detokenize(t) for t in _sentences(ENGLISH, 300, 1, punct=True)]


@pytest.fixture(scope="module")
def vocab(english_texts, tmp_path_factory):
    return SubwordVocab.train(english_texts, 50, tmp_path_factory.mktemp("v") / "tgt")


def test_vocab_special_ids_and_size(vocab):
    assert (vocab.pad, vocab.unk, vocab.eos) == (0, 1, 2)
    assert [vocab.id_to_piece(i) for i in range(3)] == ["<pad>", "<unk>", "</s>"]
    assert vocab._sp.bos_id() == -1
    assert len(vocab) == 50 and vocab.meta["size"] == 50 and vocab.meta["hard_vocab_limit"] is True
    assert vocab.meta["model_type"] == "bpe"


def test_vocab_round_trip(vocab, english_texts):
    for t in english_texts:
        ids = vocab.encode(t)
        assert vocab.unk not in ids and vocab.eos not in ids and vocab.pad not in ids
        assert vocab.decode(ids) == t
        assert "".join(vocab.pieces(t)).replace("▁", " ").strip() == t
    new = "God was with this man and the light is the word!"    # unseen sentence, seen characters
    assert vocab.decode(vocab.encode(new)) == new


def test_vocab_decode_stops_at_eos_and_drops_pad(vocab):
    a, b = vocab.encode("the word was God."), vocab.encode("this is light")
    assert vocab.decode([0] + a + [EOS] + b) == "the word was God."
    assert vocab.decode(a[:2] + [0, 0] + a[2:] + [0]) == "the word was God."
    assert vocab.decode(torch.tensor(a + [EOS, 0, 0])) == "the word was God."
    assert vocab.decode([EOS] + a) == ""
    with pytest.raises(ValueError, match="outside the vocabulary"):
        vocab.decode([len(vocab)])


def test_vocab_unknown_character_is_unk(vocab):
    ids = vocab.encode("the Ж word")
    assert ids.count(vocab.unk) == 1


def test_vocab_training_is_deterministic(english_texts, tmp_path):
    a = SubwordVocab.train(english_texts, 50, tmp_path / "a", seed=1)
    b = SubwordVocab.train(english_texts, 50, tmp_path / "b", seed=1)
    c = SubwordVocab.train(english_texts, 50, tmp_path / "c", seed=7)
    ba, bb, bc = ((tmp_path / f"{p}.model").read_bytes() for p in "abc")
    assert ba == bb == bc                          # BPE draws nothing from the seed
    assert not list(tmp_path.glob(".*.tmp"))     # atomic writes leave no temp files
    loaded = SubwordVocab.load(tmp_path / "a.model")
    assert loaded.proto == a.proto and loaded.meta == a.meta and len(loaded) == len(b) == len(c)
    assert loaded.encode(english_texts[0]) == a.encode(english_texts[0])


def test_vocab_size_beyond_the_text_is_recorded(tmp_path):
    v = SubwordVocab.train(["a b", "b a c"], 50, tmp_path / "small")
    assert len(v) < 50 and v.meta["size"] == len(v) and v.meta["hard_vocab_limit"] is False
    assert v.meta["requested_size"] == 50


def test_vocab_train_errors(tmp_path):
    with pytest.raises(ValueError, match="training text 1"):
        SubwordVocab.train(["a b", ""], 10, tmp_path / "x")
    with pytest.raises(ValueError, match="no texts"):
        SubwordVocab.train([], 10, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="nothing.model"):
        SubwordVocab.load(tmp_path / "nothing.model")


# ----------------------------------------------------------------------------- task, filtering, batches

N_TRAIN = 300
MAX_SRC, MAX_TGT = 30, 40
LONG = ["λόγος"] * 60           # 60 words -> >= 60 subwords > MAX_SRC


def _write_split(path, rows):
    write_table(path, {"verse_id": [r[0] for r in rows], "source": [r[1] for r in rows],
                       "target": [r[2] for r in rows]}, PARALLEL)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("prepared")
    src, tgt = _sentences(GREEK, N_TRAIN, 2), _sentences(ENGLISH, N_TRAIN, 3, punct=True)
    train = [(f"t{i:03d}", s, t) for i, (s, t) in enumerate(zip(src, tgt))]
    train += [("t_es", [], ["the", "word"]), ("t_et", ["λόγος"], []), ("t_long", LONG, ["the", "word", "."]),
              ("t_longt", ["θεός"], ["word"] * 50)]
    _write_split(d / "train.parquet", train)
    dev = [(f"d{i}", s, t) for i, (s, t) in enumerate(zip(_sentences(GREEK, 6, 4), _sentences(ENGLISH, 6, 5)))]
    dev += [("d_long", LONG + ["θεός"], ["the", "light", "."]), ("d_es", [""], ["light"]),
            ("d_unk", ["λόγος", "ψ"], ["the", "Ж", "word"]), ("d_longt", ["θεός"], ["word"] * 50)]
    _write_split(d / "dev.parquet", dev)
    test = [(f"e{i}", s, t) for i, (s, t) in enumerate(zip(_sentences(GREEK, 5, 6), _sentences(ENGLISH, 5, 7)))]
    test += [("e_long", LONG, ["the", "word"]), ("e_et", ["θεός"], [" "])]
    _write_split(d / "test.parquet", test)
    return d


CFG = TranslationConfig(src_vocab_size=50, tgt_vocab_size=50, max_source_len=MAX_SRC, max_target_len=MAX_TGT)


@pytest.fixture(scope="module")
def task(corpus, tmp_path_factory):
    return load_translation_task(corpus, tmp_path_factory.mktemp("vocab"), CFG, seed=0)


def test_filtering_counts(task, corpus):
    s = task.stats
    assert s["pairs_raw_train"] == N_TRAIN + 4
    assert (s["empty_source_train"], s["empty_target_train"], s["too_long_train"]) == (1, 1, 2)
    assert s["too_long_source_train"] == 1 and s["too_long_target_train"] == 1
    assert s["verse_ids"]["empty_source_train"] == ["t_es"] and s["verse_ids"]["empty_target_train"] == ["t_et"]
    assert s["verse_ids"]["too_long_train"] == ["t_long", "t_longt"]
    assert s["pairs_kept_train"] == s["pairs_used_train"] == len(task.train) == N_TRAIN
    assert not {"t_es", "t_et", "t_long", "t_longt"} & set(task.train.verse_ids)
    # dev/test: empties dropped, the over-long source truncated (kept)
    assert s["pairs_raw_dev"] == 10 and s["empty_source_dev"] == 1 and s["empty_target_dev"] == 0
    assert s["truncated_source_dev"] == 1 and s["verse_ids"]["truncated_source_dev"] == ["d_long"]
    assert s["pairs_kept_dev"] == len(task.dev) == 9
    # a dev reference over max_target_len is kept whole and counted
    assert s["target_over_max_dev"] == 1 and s["verse_ids"]["target_over_max_dev"] == ["d_longt"]
    rt = task.dev.verse_ids.index("d_longt")
    assert len(task.dev.tgt_ids[rt]) > MAX_TGT and task.dev.references[rt] == " ".join(["word"] * 50)
    assert s["pairs_raw_test"] == 7 and s["empty_target_test"] == 1 and s["truncated_source_test"] == 1
    assert s["verse_ids"]["empty_target_test"] == ["e_et"] and len(task.test) == 6
    assert s["target_over_max_test"] == 0
    r = task.dev.verse_ids.index("d_long")
    assert task.dev.truncated[r] and task.dev.truncated.sum() == 1
    assert len(task.dev.src_ids[r]) == MAX_SRC
    assert task.dev.src_ids[r] == task.src_vocab.encode(" ".join(LONG + ["θεός"]))[:MAX_SRC]
    assert task.dev.sources[r] == " ".join(LONG + ["θεός"]) and task.dev.src_lengths[r] == 61
    # unknown characters: one in a dev source, one in a dev target; none in training text
    assert s["unk_source_dev"] == 1 and s["unk_target_dev"] == 1
    n_tgt = sum(len(task.tgt_vocab.encode(x)) for x in task.dev.references)
    assert s["unk_target_rate_dev"] == pytest.approx(1 / n_tgt)
    assert s["unk_source_train"] == s["unk_target_train"] == 0
    assert s["unk_source_test"] == s["unk_target_test"] == 0
    assert s["src_vocab_size"] == len(task.src_vocab) and s["tgt_vocab_size"] == len(task.tgt_vocab)


def test_text_accessors(task):
    ds = task.dev
    r = ds.verse_ids.index("d_unk")
    assert ds.sources[r] == "λόγος ψ" and ds.references[r] == "the Ж word" and ds.src_lengths[r] == 2
    for ref, ids in zip(task.train.references, task.train.tgt_ids):
        assert task.tgt_vocab.decode(ids) == ref


def test_vocab_files_reused_or_retrained(task, corpus, tmp_path):
    again = load_translation_task(corpus, task.src_vocab.path.parent, CFG, seed=0)
    assert again.stats["vocab_trained"] is False and task.stats["vocab_trained"] is True
    assert again.src_vocab.proto == task.src_vocab.proto and again.tgt_vocab.proto == task.tgt_vocab.proto
    assert {p.name for p in task.src_vocab.path.parent.iterdir()} == {"src.model", "src.json", "tgt.model", "tgt.json"}
    bigger = TranslationConfig(src_vocab_size=50, tgt_vocab_size=60, max_source_len=MAX_SRC, max_target_len=MAX_TGT)
    # copy the vocab dir so the module's task keeps its files
    vd = tmp_path / "v"
    vd.mkdir()
    for p in task.src_vocab.path.parent.iterdir():
        (vd / p.name).write_bytes(p.read_bytes())
    other = load_translation_task(corpus, vd, bigger, seed=0)
    assert other.stats["vocab_trained"] is True and other.stats["tgt_vocab_requested"] == 60
    assert other.src_vocab.proto == task.src_vocab.proto and other.tgt_vocab.proto != task.tgt_vocab.proto


def _budget(s):
    # ceil(1.5 * s + 5) in integers
    return min(MAX_TGT, (3 * s + 1) // 2 + 5)


def test_batches_shapes_and_masks(task):
    ds = task.train
    seen = []
    for b in ds.batches(16, shuffle=True, seed=3):
        assert isinstance(b, TranslationBatch)
        B = len(b)
        seen += b.index.tolist()
        src_len = [len(ds.src_ids[i]) for i in b.index.tolist()]
        tgt_len = [len(ds.tgt_ids[i]) for i in b.index.tolist()]
        assert b.words.shape == b.src_mask.shape == (B, max(src_len))
        assert b.tags.shape == b.mask.shape == (B, max(tgt_len))
        assert b.decode_mask.shape == (B, max(_budget(s) for s in src_len))
        assert b.lengths.tolist() == tgt_len and b.src_lengths.tolist() == src_len
        for r, i in enumerate(b.index.tolist()):
            n, m, k = tgt_len[r], src_len[r], _budget(src_len[r])
            assert b.tags[r, :n].tolist() == ds.tgt_ids[i] and b.tags[r, n - 1] == EOS
            assert EOS not in b.tags[r, :n - 1].tolist() and not b.tags[r, n:].any()
            assert b.mask[r, :n].all() and not b.mask[r, n:].any()
            assert b.words[r, :m].tolist() == ds.src_ids[i] and not b.words[r, m:].any()
            assert b.src_mask[r, :m].all() and not b.src_mask[r, m:].any()
            assert b.decode_mask[r, :k].all() and not b.decode_mask[r, k:].any()
            assert b.tags[r, :n].tolist() == task.tgt_vocab.encode(ds.references[i]) + [EOS]
        for f in ("words", "tags", "lengths", "src_lengths", "index"):
            assert getattr(b, f).dtype == torch.long
        for f in ("src_mask", "mask", "decode_mask"):
            assert getattr(b, f).dtype == torch.bool
    assert sorted(seen) == list(range(len(ds)))
    moved = b.to("cpu")
    assert all(torch.equal(getattr(moved, f), getattr(b, f)) for f in ("words", "tags", "decode_mask"))


def test_decode_mask_is_capped(task):
    ds = task.dev
    r = ds.verse_ids.index("d_long")          # 30 source subwords -> ceil(50) = 50 > MAX_TGT
    b = ds.collate([r])
    assert int(b.decode_mask.sum()) == MAX_TGT == b.decode_mask.shape[1]


def test_decode_budget_is_exact():
    assert decode_budget(10, len_a=1.2, len_b=0, max_target_len=100) == 12   # 1.2 * 10 = 12.000000000000002
    assert decode_budget(3, len_a=1.5, len_b=5, max_target_len=100) == 10    # ceil(9.5)
    assert decode_budget(4, len_a=1.5, len_b=5, max_target_len=100) == 11
    assert decode_budget(40, len_a=1.5, len_b=5, max_target_len=20) == 20


def test_subsample_and_subset(corpus, task, tmp_path):
    cfg = TranslationConfig(src_vocab_size=50, tgt_vocab_size=50, max_source_len=MAX_SRC, max_target_len=MAX_TGT,
                            max_train_pairs=10, max_dev_pairs=3)
    a = load_translation_task(corpus, task.src_vocab.path.parent, cfg, seed=5)
    b = load_translation_task(corpus, task.src_vocab.path.parent, cfg, seed=5)
    assert len(a.train) == 10 and a.stats["pairs_used_train"] == 10 and a.stats["pairs_kept_train"] == N_TRAIN
    assert len(a.dev) == 3 and a.stats["pairs_used_dev"] == 3 and len(a.test) == len(task.test)
    assert a.train.verse_ids == b.train.verse_ids and set(a.train.verse_ids) <= set(task.train.verse_ids)
    sub = task.train.subset([4, 1])
    assert sub.verse_ids == [task.train.verse_ids[4], task.train.verse_ids[1]]
    assert sub.collate([0, 1]).index.tolist() == [0, 1]
    assert sub.tgt_ids[0] == task.train.tgt_ids[4]


def test_missing_file_and_column(corpus, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    for s in ("train", "dev"):
        (d / f"{s}.parquet").write_bytes((corpus / f"{s}.parquet").read_bytes())
    with pytest.raises(FileNotFoundError, match="test.parquet"):
        load_translation_task(d, tmp_path / "v", CFG, seed=0)
    t = pq.read_table(corpus / "test.parquet").drop_columns(["target"])
    pq.write_table(t, d / "test.parquet")
    with pytest.raises(ValueError, match=r"test\.parquet: missing column 'target'"):
        load_translation_task(d, tmp_path / "v", CFG, seed=0)
    bad = pa.table({"verse_id": ["x"], "source": ["λόγος"], "target": [["a"]]})
    pq.write_table(bad, d / "test.parquet")
    with pytest.raises(ValueError, match=r"test\.parquet: column 'source' has type string"):
        load_translation_task(d, tmp_path / "v", CFG, seed=0)


def test_repeated_or_shared_verse_ids(corpus, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    for s in ("train", "test"):
        (d / f"{s}.parquet").write_bytes((corpus / f"{s}.parquet").read_bytes())
    _write_split(d / "dev.parquet", [("d0", ["θεός"], ["God"]), ("d0", ["φῶς"], ["light"])])
    with pytest.raises(ValueError, match=r"dev\.parquet: verse id 'd0' repeated"):
        load_translation_task(d, tmp_path / "v", CFG, seed=0)
    _write_split(d / "dev.parquet", [("t000", ["θεός"], ["God"])])
    with pytest.raises(ValueError, match=r"dev\.parquet: verse id 't000' is also in .*train\.parquet"):
        load_translation_task(d, tmp_path / "v", CFG, seed=0)


@pytest.mark.parametrize("kw, msg", [
    ({"max_target_len": 1}, "max_target_len must be an int >= 2"),
    ({"src_vocab_size": 3}, "src_vocab_size must be an int >= 4"),
    ({"len_a": -1.0}, "len_a must be a finite number >= 0"),
    ({"len_a": 0.0, "len_b": 0}, "len_a \\+ len_b must be > 0"),
    ({"max_train_pairs": -1}, "max_train_pairs must be an int >= 0"),
    ({"max_source_len": 2.5}, "max_source_len must be an int"),
])
def test_config_checks(kw, msg):
    with pytest.raises(ValueError, match=msg):
        TranslationConfig(**kw)


def test_dataset_rejects_bad_rows():
    common = dict(max_target_len=10, len_a=1.5, len_b=5)
    with pytest.raises(ValueError, match="v1: target ids"):
        ParallelDataset(["v1"], ["a"], ["b"], [1], [[5]], [[6, 7]], **common)    # no eos
    with pytest.raises(ValueError, match="v1: source ids"):
        ParallelDataset(["v1"], ["a"], ["b"], [1], [[]], [[6, EOS]], **common)
    ds = ParallelDataset(["v1"], ["a"], ["b"], [1], [[5]], [[6, EOS]], **common)
    assert np.array_equal(ds.src_lengths, [1])
