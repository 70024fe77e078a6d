import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.data.readers import bio_to_bioes
from components.metrics.tagging import accuracy, span_f1, spans, tagging_scores


@pytest.mark.parametrize("tags, expected", [
    (["B-PER", "I-PER", "O", "B-LOC"], {(0, 2, "PER"), (3, 4, "LOC")}),
    (["I-PER", "I-PER", "O"], {(0, 2, "PER")}),                      # I- opens a chunk (conlleval)
    (["B-PER", "I-LOC", "I-LOC"], {(0, 1, "PER"), (1, 3, "LOC")}),   # type change starts a new chunk
    (["B-PER", "B-PER"], {(0, 1, "PER"), (1, 2, "PER")}),
    (["S-PER", "B-LOC", "E-LOC", "E-LOC"], {(0, 1, "PER"), (1, 3, "LOC"), (3, 4, "LOC")}),
    (["O", "O"], set()),
    (["B-X"], {(0, 1, "X")}),
])
def test_spans_follow_conlleval(tags, expected):
    assert spans(tags) == expected


def test_span_f1_counts():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-LOC"]]
    m = span_f1(gold, pred)
    assert m["precision"] == pytest.approx(50.0)
    assert m["recall"] == pytest.approx(100 / 3)
    assert m["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3) * 100)
    assert span_f1([["O"]], [["O"]])["f1"] == 0.0
    with pytest.raises(ValueError, match="2 tags"):
        span_f1([["O", "O"]], [["O"]])


def test_accuracy_and_dispatch():
    assert accuracy([["A", "B"], ["C"]], [["A", "A"], ["C"]])["accuracy"] == pytest.approx(200 / 3)
    assert tagging_scores("accuracy", [["A"]], [["A"]])["score"] == 100.0
    assert tagging_scores("span_f1", [["B-X"]], [["B-X"]])["score"] == 100.0
    with pytest.raises(ValueError, match="unknown tagging metric"):
        tagging_scores("bleu", [], [])


bio_tag = st.sampled_from(["O", "B-A", "I-A", "B-B", "I-B"])


@settings(max_examples=200, deadline=None)
@given(st.lists(bio_tag, min_size=1, max_size=8))
def test_bioes_conversion_preserves_spans(tags):
    # two independent implementations (the reader's converter and the metric's chunker) agree
    assert spans(bio_to_bioes(tags)) == spans(tags)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(bio_tag, min_size=1, max_size=6), min_size=1, max_size=4))
def test_self_f1_is_100_when_spans_exist(seqs):
    m = span_f1(seqs, seqs)
    n = sum(len(spans(s)) for s in seqs)
    assert m["f1"] == (100.0 if n else 0.0)


def test_per_sentence_statistics_sum_to_the_corpus_score():
    import numpy as np
    from components.metrics.tagging import sentence_stats, stats_columns, stats_score, tagging_scores
    gold = [["B-PER", "I-PER", "O"], ["O", "B-LOC"], ["B-ORG", "O", "B-PER", "I-PER"]]
    pred = [["B-PER", "I-PER", "O"], ["B-LOC", "O"], ["B-ORG", "O", "B-PER", "O"]]
    for metric in ("accuracy", "span_f1"):
        st = sentence_stats(metric, gold, pred)
        assert st.shape == (3, len(stats_columns(metric)))
        assert float(stats_score(metric)(st.sum(0))) == pytest.approx(tagging_scores(metric, gold, pred)["score"])
    assert np.array_equal(sentence_stats("span_f1", gold, pred)[2], [1, 2, 2])   # B-ORG right, PER cut short
    with pytest.raises(ValueError, match="sentence 1"):
        sentence_stats("accuracy", gold, [pred[0], ["O"], pred[2]])
