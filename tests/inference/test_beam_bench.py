"""The beam benchmarks' naive baseline and figures (components.inference.beam_bench); no timing asserted."""
import pytest
import torch

from components.config import ConfigError, load_params, load_section
from components.data.batching import TaggingBatch
from components.inference.beam import beam_search
from components.bench.beam import compare_decoding, compare_train_epochs, naive_beam_search
from components.metrics.timing import TimingConfig
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig

V, N_WORDS = 6, 20


def _batch(seed=0, lengths=(5, 1, 3, 4), n_labels=V):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    B, N = len(lengths), int(lengths.max())
    mask = torch.arange(N)[None] < lengths[:, None]
    words = torch.randint(1, N_WORDS, (B, N), generator=g) * mask
    tags = torch.randint(0, n_labels, (B, N), generator=g) * mask
    return TaggingBatch(words, words[..., None], tags, mask, lengths, torch.arange(B))


def _model(normalisation="local", seed=0):
    cfg = Seq2SeqTaggerConfig(embedding_dim=6, hidden=8, label_dim=4, dropout=0.0, normalisation=normalisation)
    return Seq2SeqTagger(cfg, N_WORDS, V, seed=seed).eval()


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_naive_beam_search_equals_batched(k, normalisation):
    model, batch = _model(normalisation, seed=k), _batch(seed=k)
    with torch.no_grad():
        fast = beam_search(model, batch, k)
        slow = naive_beam_search(model, batch, k)
    assert torch.equal(fast.labels, slow.labels)
    torch.testing.assert_close(slow.score, fast.score, rtol=1e-5, atol=1e-5)
    # the whole beam, best first, agrees too (labels past each sentence's end are 0 in both)
    assert torch.equal(fast.beam_labels, slow.beam_labels)
    torch.testing.assert_close(slow.beam_scores, fast.beam_scores, rtol=1e-5, atol=1e-5)


def test_naive_beam_search_checks_its_input():
    model, batch = _model(), _batch()
    with pytest.raises(ValueError, match="beam size"):
        naive_beam_search(model, batch, 0)
    empty = _batch(lengths=(2, 1))
    empty.mask[1] = False
    with pytest.raises(ValueError, match="empty sentence"):
        naive_beam_search(model, empty, 2)


def test_compare_decoding_returns_its_figures():
    model = _model()
    batches = [_batch(0), _batch(1, lengths=(2, 6))]
    model.train()
    res = compare_decoding(model, batches, 3, target=20.0, timing=TimingConfig(min_rounds=1, max_rounds=1, warmup=0))
    assert model.training                                        # restored
    assert {"batched_s", "naive_s", "batched_sents_per_s", "naive_sents_per_s", "decode_ratio_k3",
            "decode_ratio_k3_q1", "decode_ratio_k3_q3", "decode_ratio_k3_iqr_rel", "decode_ratio_k3_converged",
            "decode_target_met", "rounds", "converged", "load_avg_start", "sentences", "max_abs_score_diff",
            "batched_calls"} <= set(res)
    assert res["sentences"] == 6 and res["rounds"] == 1 and res["batched_calls"] == 1 and res["max_abs_score_diff"] < 1e-4
    assert res["batched_s"] > 0 and res["naive_s"] > 0 and isinstance(res["decode_target_met"], bool)


def test_compare_train_epochs_returns_its_figures_and_restores_the_weights():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = [_batch(0), _batch(1, lengths=(2, 6))]
    res = compare_train_epochs(model, batches, (2, 3), o_id=0, timing=TimingConfig(min_rounds=2, max_rounds=2))
    for k in (2, 3):
        assert {f"beam_k{k}_s", f"train_ratio_k{k}", f"train_ratio_k{k}_q1", f"train_ratio_k{k}_q3",
                f"train_ratio_k{k}_iqr_rel", f"train_ratio_k{k}_converged", f"train_within_k{k}"} <= set(res)
        assert res[f"train_ratio_k{k}_q1"] <= res[f"train_ratio_k{k}"] <= res[f"train_ratio_k{k}_q3"]
    assert res["ce_s"] > 0 and res["rounds"] == 2 and res["batches"] == 2 and isinstance(res["converged"], bool)
    assert res["sentences"] == 6 and res["tokens"] == 5 + 1 + 3 + 4 + 2 + 6
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_compare_functions_reject_bad_arguments():
    model = _model()
    with pytest.raises(ValueError, match="no batches"):
        compare_decoding(model, [], 3)
    with pytest.raises(ValueError, match="beam size"):
        compare_train_epochs(model, [_batch()], (0,))


def test_bench_beam_params_load_strictly():
    from flows.stages.bench import BenchConfig
    params = load_params("params.yaml")
    cfg = load_section(BenchConfig, "bench", params)
    assert cfg.beam.task == "ner" and cfg.beam.decode_k == 5 and tuple(cfg.beam.train_ks) == (3, 5)
    assert (cfg.beam.model.hidden, cfg.beam.model.label_dim, cfg.beam.model.embedding_dim) == (64, 8, 50)
    params["bench"]["beam"]["typo"] = 1
    with pytest.raises(ConfigError):
        load_section(BenchConfig, "bench", params)
