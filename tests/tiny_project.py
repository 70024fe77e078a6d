"""A tiny project's raw corpora in the real raw formats (WSJ word/TAG, WNUT-16 CoNLL, GloVe), shared
by the stage smoke tests (``tests/flows/conftest.py``) and the crash harness
(``tests/reliability/crash_harness.py``)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

WORDS = ["the", "dog", "cat", "runs", "sleeps", "big", "a", "john", "paris", "in", "loves", "mary"]
POS = {"the": "DT", "a": "DT", "dog": "NN", "cat": "NN", "runs": "VBZ", "sleeps": "VBZ", "big": "JJ",
       "john": "NNP", "paris": "NNP", "in": "IN", "loves": "VBZ", "mary": "NNP"}
NER = {"john": "B-PER", "mary": "B-PER", "paris": "B-LOC"}


def write_raw(root: Path, n_sentences: int = 60) -> dict[str, str]:
    """Write ``root/data/raw/{wsj_pos,wnut16,glove50}`` (seeded random sentences over :data:`WORDS`) and
    an empty ``root/data/user`` -> the SHA-256 of each raw file (``{"<corpus>/<name>": sha}``, what
    ``prepare`` checks the files against)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(0)
    raw = Path(root) / "data" / "raw"
    sents = [[WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(1, 8))] for _ in range(n_sentences)]
    (raw / "wsj_pos").mkdir(parents=True)
    (raw / "wsj_pos" / "tagged-en-wsj.txt").write_text(
        "\n".join(" ".join(f"{w}/{POS[w]}" for w in s) for s in sents) + "\n")
    (raw / "wnut16").mkdir()
    (raw / "wnut16" / "ner.txt").write_text(
        "\n\n".join("\n".join(f"{w}\t{NER.get(w, 'O')}" for w in s) for s in sents) + "\n")
    (raw / "glove50").mkdir()
    vocab = WORDS[:8]
    np.save(raw / "glove50" / "glove_6B_50d_emb.npy", rng.standard_normal((len(vocab), 50)).astype(np.float32))
    pq.write_table(pa.table({"index": vocab}), raw / "glove50" / "glove_6B_index.parquet")
    (Path(root) / "data" / "user").mkdir()
    return {p.relative_to(raw).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.rglob("*") if p.is_file()}
