import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.data import store
from components.data.types import TaggedSentence


def test_tagged_round_trip(tmp_path):
    sents = [TaggedSentence(("a", "b"), ("X", "Y"), "s1"), TaggedSentence(("ç",), ("Z",), "s2")]
    path = tmp_path / "t.parquet"
    assert store.write_tagged(path, sents) == 2
    assert store.read_tagged(path) == sents
    meta = pq.read_metadata(path)
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert not list(tmp_path.glob(".*tmp"))     # atomic write left no temporary file


def test_embeddings_round_trip(tmp_path):
    vecs = np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    store.write_embeddings(tmp_path / "g.parquet", [2, 5, 7], ["a", "b", "c"], vecs)
    ids, back = store.read_embeddings(tmp_path / "g.parquet")
    assert ids.tolist() == [2, 5, 7]
    np.testing.assert_array_equal(back, vecs)
    with pytest.raises(ValueError, match=r"\[2, 50\]"):
        store.write_embeddings(tmp_path / "h.parquet", [1, 2], ["a", "b"], vecs)


def test_schema_mismatch_names_the_file(tmp_path):
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"sid": ["x"]}), path)
    with pytest.raises(ValueError, match="foreign.parquet: schema"):
        store.read_tagged(path)
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        store.read_tagged(tmp_path / "missing.parquet")
    with pytest.raises(ValueError, match="do not match schema columns"):
        store.write_table(tmp_path / "x.parquet", {"sid": ["a"]}, store.TAGGED)
