"""The chapter's findings on the report kit: verdicts from per-item statistics where the answer is known
(a clear win, a clear loss, a straddle), shape claims and their not-testable reasons, the stage-side
per-sentence statistics (``sentence_stats``) and per-sequence statistics (``save_exact_stats``)."""
import numpy as np
import pytest

from components.inference.mcmc.traces import sentence_stats
from components.metrics.correlation import spearman
from components.metrics.significance import (BLEU_COLUMNS, Stats, bleu_score, load_stats, mean_score, paired_interval,
                                             pearson_score)
from components.reports import kit
from components.reports.goyal_mlm import (CLAIMS, EXACT_CLAIMS, MIN_BLEU, PAPER_TABLE6_1, bleu_energy_ranks, readme,
                                          report_verdicts, write_report)

C, N = 5, 12          # chains, sentences
RNG = np.random.default_rng(0)


def _mean(value, noise=0.3, shape=(C, N)):
    """[C, N, 2] per-sentence means around ``value``."""
    x = value + noise * RNG.standard_normal(shape)
    return np.stack([x, np.ones_like(x)], axis=-1)


def _bleu(correct_frac):
    """[C, N, 10] BLEU statistics of 10-word hypotheses with about ``correct_frac`` matching n-grams."""
    out = np.zeros((C, N, 10))
    out[..., 0] = out[..., 1] = 10
    for k in range(4):
        total = 10 - k
        out[..., 6 + k] = total
        out[..., 2 + k] = np.clip(np.round(total * correct_frac + RNG.integers(-1, 2, (C, N))), 0, total)
    return out


def _run(group, scheme, value=None):
    return {"name": f"{group}/{scheme}" + ("" if value is None else f"/{value}"), "group": group, "scheme": scheme,
            "value": value, "block": "annealed" if group == "block" else "single"}


def _design(temps=(2.0, 1.0, 0.5)):
    runs = [_run("main", s) for s in ("raw", "norm", "deg")]
    runs += [_run("random_start", s) for s in ("raw", "norm", "deg")]
    runs += [_run("temperature", s, t) for t in temps for s in ("norm", "deg")]
    runs += [_run("nucleus", s, p) for p in (1.0, 0.9, 0.8) for s in ("norm", "deg")]
    runs += [_run("block", s) for s in ("deg", "raw", "norm")]
    runs += [_run("anneal", s, a) for a in (0.02, 0.06) for s in ("norm", "raw")]
    runs += [_run("full", s) for s in ("deg", "norm", "raw")]
    return {"model": {"dev_bleu_mask_predict": 25.0}, "settings": {"burn_in": 2, "sweeps": 6}, "runs": runs}


def _stats(m, e_norm=None, novel=None, accept=None, bleu=None):
    """Statistics of every short-set run: E_norm 20, novel 0.2, accept 0.8, BLEU ~0.3 unless overridden
    (name -> value); the drift windows equal the run's mean unless overridden ("<name>@late")."""
    e_norm, novel, accept, bleu = e_norm or {}, novel or {}, accept or {}, bleu or {}
    short = [r["name"] for r in m["runs"] if r["group"] != "full"]
    en = {}
    for n in short:
        en[n] = _mean(e_norm.get(n, 20.0))
        en[f"{n}@early"] = _mean(e_norm.get(f"{n}@early", 20.0))
        en[f"{n}@late"] = _mean(e_norm.get(f"{n}@late", 20.0))
    full = {r["name"]: _bleu(bleu.get(r["name"], 0.3)) for r in m["runs"] if r["group"] == "full"}
    full |= {"mask_predict": _bleu(bleu.get("mask_predict", 0.3)), "warm_start": _bleu(bleu.get("warm_start", 0.3))}
    rate = ("value", "count")
    return {"mcmc/e_norm": Stats(rate, en),
            "mcmc/novel": Stats(rate, {n: _mean(novel.get(n, 0.2), 0.02) for n in short}),
            "mcmc/accept": Stats(rate, {n: _mean(accept.get(n, 0.8), 0.02) for n in short}),
            "mcmc/bleu": Stats(BLEU_COLUMNS, {n: _bleu(bleu.get(n, 0.3)) for n in short}),
            "mcmc/bleu_full": Stats(BLEU_COLUMNS, full)}


def _by_id(verdicts):
    return {v.claim.id: v for v in verdicts}


def test_every_claim_is_data_and_every_verdict_is_in_the_kits_vocabulary():
    assert len(CLAIMS) == 31 and all(isinstance(c, kit.Claim) for c in CLAIMS.values())
    assert {"mlm_closer", "bleu_low_energy", "deg_low_T_energy"} <= set(CLAIMS)          # issue 50's omitted claims
    assert CLAIMS["pll_equals_mlm"].kind == "equivalence" and CLAIMS["pll_equals_mlm"].margin == 0.5
    # every claim quotes its sentence and section; none states a size beyond the thesis's own measurements, and
    # nothing is timed (so none is hardware-bound); the premises are the kit's
    for c in CLAIMS.values():
        assert c.quote.startswith("Sec. 6.") and '"' in c.quote, c.id
        assert c.size == 0 and not c.hardware and not c.by_construction, c.id
    assert {c.id: c.presumes for c in CLAIMS.values() if c.presumes} == {
        "mlm_closer": ("mlm_worse",), "raw_bleu_anneal": ("raw_accepts_more",)}
    bleu = {c.id for c in CLAIMS.values() if c.premise}
    assert bleu == {"mh_bleu", "bleu_low_energy", "mh_robust_T", "mh_robust_p", "anneal_step_bleu", "raw_bleu_anneal",
                    "mh_beats_mask_predict", "mh_beats_deg_full", "beats_warm_start"}
    # "as the data grows" is a trend, not an equivalence at the largest size
    assert CLAIMS["pll_near_ll"].kind == "direction" and CLAIMS["pll_near_ll"].sign == 1
    assert CLAIMS["mlm_closer"].kind == "direction" and CLAIMS["bleu_low_energy"].sign == -1
    # the paper column by the same rule: the thesis's own numbers pass its claims, but for its palindrome rows'
    # PLL − LL gap, which widens (0.27 → 0.36), and the MLM − LL / MLM − PLL gaps of two generators
    assert kit.judge_paper(CLAIMS["pll_equals_mlm"])[0] == kit.REPRODUCED
    assert kit.judge_paper(CLAIMS["novel_peak_T"])[0] == kit.REPRODUCED
    assert kit.judge_paper(CLAIMS["deg_low_T_energy"])[0] == kit.REPRODUCED
    assert CLAIMS["pll_near_ll"].paper.delta == pytest.approx(0.27 - 0.36)
    assert kit.judge_paper(CLAIMS["pll_near_ll"])[0] == kit.NOT_REPRODUCED
    assert CLAIMS["mlm_closer"].paper.delta == pytest.approx(-0.05)
    assert kit.judge_paper(CLAIMS["mlm_closer"])[0] == kit.NOT_REPRODUCED
    m = _design()
    vs = report_verdicts(None, m, _stats(m))
    assert [v.claim.id for v in vs] == list(CLAIMS)
    for v in vs:
        assert v.verdict in kit.VERDICTS
        assert v.verdict == kit.NOT_TESTABLE or v.interval is not None or v.parts, v
        assert v.verdict != kit.NOT_TESTABLE or v.reason, v


def test_mh_energy_a_clear_win_a_clear_loss_and_a_straddle():
    m = _design()
    win = _by_id(report_verdicts(None, m, _stats(m, e_norm={"main/deg": 30.0})))["mh_energy"]
    assert win.verdict == kit.REPRODUCED and all(iv.high < 0 for _, iv in win.parts)
    loss = _by_id(report_verdicts(None, m, _stats(m, e_norm={"main/deg": 10.0})))["mh_energy"]
    assert loss.verdict == kit.NOT_REPRODUCED and all(iv.low > 0 for _, iv in loss.parts)
    tie = _by_id(report_verdicts(None, m, _stats(m)))["mh_energy"]
    assert tie.verdict == kit.INCONCLUSIVE and all(iv.low < 0 < iv.high for _, iv in tie.parts)
    assert tie.parts[0][1].n == N and tie.parts[0][1].seeds == C          # chains, then sentences


def test_the_samplers_chains_are_nested_in_their_sentences():
    """Every sampler interval takes the sentence as the unit (``units="chains"``), never the chains as seeds:
    the same interval as ``paired_interval(..., units="chains")``, not counted as one-model evidence."""
    m = _design()
    st = _stats(m, e_norm={"main/deg": 20.5})
    vs = report_verdicts(None, m, st)
    for v in vs:
        for _, iv in v.parts or ((("", v.interval),) if v.interval else ()):
            assert iv.units == "chains" and iv.n == N and iv.seeds == C and not iv.one_model, v.claim.id
    raw = _by_id(vs)["mh_energy"].parts[0][1]
    want = paired_interval(st["mcmc/e_norm"]["main/raw"], st["mcmc/e_norm"]["main/deg"], mean_score, units="chains")
    assert (raw.low, raw.high, raw.df) == (want.low, want.high, want.df) and want.df == N - 1
    seeds = paired_interval(st["mcmc/e_norm"]["main/raw"], st["mcmc/e_norm"]["main/deg"], mean_score)
    assert (seeds.low, seeds.high) != (raw.low, raw.high)                 # the seeds design would differ


def test_the_novel_rate_peak_at_t1_is_a_shape_and_needs_the_thesis_neighbours():
    m = _design()
    v = _by_id(report_verdicts(None, m, _stats(m)))["novel_peak_T"]
    assert v.verdict == kit.NOT_TESTABLE and "1.5, 0.8" in v.reason       # default scale: T in {2, 1, 0.5}
    m5 = _design((2.0, 1.5, 1.0, 0.8, 0.5))
    peak = {"temperature/norm/2.0": 0.03, "temperature/norm/1.5": 0.05, "temperature/norm/1.0": 0.11,
            "temperature/norm/0.8": 0.06, "temperature/norm/0.5": 0.03}      # the thesis's Table 6.2
    v = _by_id(report_verdicts(None, m5, _stats(m5, novel=peak)))["novel_peak_T"]
    assert v.verdict == kit.REPRODUCED and len(v.parts) == 4
    rising = {f"temperature/norm/{t}": x for t, x in zip((2.0, 1.5, 1.0, 0.8, 0.5), (0.3, 0.25, 0.2, 0.15, 0.1))}
    v = _by_id(report_verdicts(None, m5, _stats(m5, novel=rising)))["novel_peak_T"]
    assert v.verdict == kit.NOT_REPRODUCED                                # monotone, no peak


def test_robustness_degradation_block_and_annealing_claims():
    m = _design()
    e = {"temperature/deg/2.0": 40.0, "temperature/deg/0.5": 20.0,           # deg drops 20, norm 0
         "random_start/deg@late": 30.0,                                    # deg rises by 10, MH flat
         "block/raw": 15.0, "block/norm": 15.0, "block/deg": 35.0,
         "anneal/norm/0.02": 12.0, "anneal/norm/0.06": 10.0, "anneal/raw/0.02": 12.0, "anneal/raw/0.06": 10.0}
    a = {"anneal/raw/0.02": 0.9, "anneal/raw/0.06": 0.8, "anneal/norm/0.02": 0.7, "anneal/norm/0.06": 0.6}
    v = _by_id(report_verdicts(None, m, _stats(m, e_norm=e, accept=a, novel={"block/raw": 0.5, "block/norm": 0.5})))
    for cid in ("deg_not_robust_T", "deg_degrades", "block_energy", "block_deg_poor", "block_novel", "anneal_energy",
                "anneal_step_accept", "anneal_step_energy", "raw_accepts_more"):
        assert v[cid].verdict == kit.REPRODUCED, (cid, v[cid].evidence())
    assert v["deg_not_robust_p"].verdict == kit.INCONCLUSIVE
    # the block sampler's novel rate below single-site: the claim fails, with its interval
    v = _by_id(report_verdicts(None, m, _stats(m, novel={"block/raw": 0.1, "block/norm": 0.1})))["block_novel"]
    assert v.verdict == kit.NOT_REPRODUCED and all(iv.high < 0 for _, iv in v.parts)


def test_bleu_claims_are_not_testable_when_the_model_did_not_learn():
    m = _design()
    st = _stats(m, bleu={"main/raw": 0.6, "main/norm": 0.6, "main/deg": 0.1, "full/raw": 0.6, "full/norm": 0.6,
                         "mask_predict": 0.3, "full/deg": 0.2, "warm_start": 0.1})
    v = _by_id(report_verdicts(None, m, st))
    assert v["mh_bleu"].verdict == kit.REPRODUCED and v["mh_beats_mask_predict"].verdict == kit.REPRODUCED
    assert v["beats_warm_start"].verdict == kit.REPRODUCED
    same = st["mcmc/bleu"]["temperature/norm/1.0"]
    for t in (2.0, 0.5):
        st["mcmc/bleu"].systems[f"temperature/norm/{t}"] = same
    v = _by_id(report_verdicts(None, m, st))["mh_robust_T"]                # the same numbers: identical systems
    assert v.verdict == kit.NOT_TESTABLE and v.why == kit.IDENTICAL
    near = same.copy()
    near[0, 0, 2] -= 1                                                      # one unigram fewer in one chain's sentence
    st["mcmc/bleu"].systems["temperature/norm/2.0"] = near
    st["mcmc/bleu"].systems["temperature/norm/0.5"] = near
    assert _by_id(report_verdicts(None, m, st))["mh_robust_T"].verdict == kit.REPRODUCED   # about the same: inside ±3
    m["model"]["dev_bleu_mask_predict"] = MIN_BLEU - 1
    v = _by_id(report_verdicts(None, m, st))
    for cid in ("mh_bleu", "bleu_low_energy", "mh_robust_T", "mh_robust_p", "anneal_step_bleu", "raw_bleu_anneal",
                "mh_beats_mask_predict", "mh_beats_deg_full", "beats_warm_start"):
        assert v[cid].verdict == kit.NOT_TESTABLE and v[cid].why == kit.PREMISE and "did not learn" in v[cid].reason
        assert CLAIMS[cid].premise                                          # the premise the gate checks, in words
    assert v["mh_energy"].verdict != kit.NOT_TESTABLE and v["deg_low_T_energy"].verdict != kit.NOT_TESTABLE


def _exact_metrics(rows):
    return {"table": [{"row": r, "data": "palindrome", "train_size": 1000 if r.endswith("1k") else 3000,
                       "by_objective": {o: {"nll": 5.0} for o in ("ll", "pll", "mlm")}} for r in rows],
            "figure": {"data": "hmm_low", "sizes": [30, 1000], "nll": {m: [5.0, 5.0] for m in ("pll", "kl", "kl_pl")}}}


def _exact_stats(rows, pll_neg=4.5, mlm_neg=4.5, n=400, nll=None):
    """Per-sequence statistics of every row: NLL 5.0 (LL), 5.02 (PLL), 6.0 (MLM) unless ``nll`` overrides
    ``(row, objective)``; a replicate's rows share its test sequences (the same item effect)."""
    rate = ("value", "count")
    nll = nll or {}
    item = 0.5 * RNG.standard_normal((1, n))                                 # the test sequences, shared by the rows
    seq = lambda v, sd=0.5: np.stack([v + sd * RNG.standard_normal((1, n)), np.ones((1, n))], -1)   # noqa: E731
    row_nll = lambda r, o, d: np.stack([nll.get((r, o), d) + item + 0.05 * RNG.standard_normal((1, n)),  # noqa: E731
                                         np.ones((1, n))], -1)
    out = {f"mlm_exact/{r}": Stats(rate, {"ll:nll": row_nll(r, "ll", 5.0), "pll:nll": row_nll(r, "pll", 5.02),
                                          "mlm:nll": row_nll(r, "mlm", 6.0), "pll:neg_pll": seq(pll_neg),
                                          "mlm:neg_mlm": seq(mlm_neg)}) for r in rows}
    fig = {f"{m}@{s}:nll": seq(v) for s in (30, 1000) for m, v in (("pll", 6.0), ("kl", 5.3), ("kl_pl", 5.4))}
    out["mlm_exact/figure"] = Stats(rate, fig | {"dpll:nll": seq(6.5)})
    return out


def test_exact_claims_and_the_equivalence_with_its_margin():
    rows = ("p-1k", "p-3k")
    ex = _exact_metrics(rows)
    v = _by_id(report_verdicts(ex, None, _exact_stats(rows)))
    assert v["mlm_worse"].verdict == kit.REPRODUCED and len(v["mlm_worse"].parts) == 4
    assert v["kl_beats_pl"].verdict == kit.REPRODUCED and v["beats_dpll"].verdict == kit.REPRODUCED
    # equal gaps at both sizes: no trend either way
    assert v["pll_near_ll"].verdict == kit.INCONCLUSIVE and len(v["pll_near_ll"].parts) == 1
    assert v["pll_near_ll"].scope == "Table 6.1, smallest → largest training size per generator"
    assert v["pll_equals_mlm"].verdict == kit.REPRODUCED                   # equal: inside ±0.5
    assert _by_id(report_verdicts(ex, None, _exact_stats(rows, mlm_neg=5.5)))["pll_equals_mlm"].verdict == \
        kit.NOT_REPRODUCED                                                 # 1 nat apart: outside
    assert _by_id(report_verdicts(ex, None, _exact_stats(rows, mlm_neg=4.95)))["pll_equals_mlm"].verdict == \
        kit.INCONCLUSIVE                                                   # 0.45 apart: straddles the margin
    v = _by_id(report_verdicts(ex, None, {}))
    assert v["mlm_worse"].verdict == kit.NOT_TESTABLE and "mlm_exact" in v["mlm_worse"].reason


def test_sentence_stats_from_trace_rows():
    refs = {"a": "the cat sat on the mat", "b": "a dog ran"}
    rows = []
    for sweep in range(5):
        for c in range(2):
            for s, text in (("a", "the cat sat on the mat"), ("b", "a cat ran")):
                rows.append({"sweep": sweep, "chain": c, "sentence": s, "energy": float(sweep), "e_norm": 10.0 + sweep,
                             "accepted": 0.5, "novel": 0.25 * c, "text": text})
    st = sentence_stats(rows, refs, ["b", "a"], burn_in=1)               # sampling sweeps 2, 3, 4
    assert st["bleu"].shape == (2, 2, 10) and st["e_norm"].shape == (2, 2, 2)
    assert st["e_norm"][0, 0].tolist() == [13.0, 1.0]
    assert st["e_norm@early"][0, 0, 0] == 12.0 and st["e_norm@late"][0, 0, 0] == 14.0
    assert st["novel"][1, 1, 0] == 0.25 and st["accept"][0, 1, 0] == 0.5
    assert bleu_score()(st["bleu"][0, 1]) == pytest.approx(100.0)          # "a" is its reference
    assert st["bleu"][0, 0, 0] == 3 * 3                                      # 3 words x 3 sweeps
    assert sentence_stats(rows, refs, ["b", "a"], burn_in=1, final=True)["bleu"][0, 0, 0] == 3
    with pytest.raises(ValueError, match="not in sentence_ids"):
        sentence_stats(rows, refs, ["a"], burn_in=1)


def test_save_exact_stats_pairs_a_replicates_objectives(tmp_path):
    from flows.stages.mlm_exact import save_exact_stats
    n = 6
    recs, arrs = [], []
    for rep in (0, 1):
        for obj in ("ll", "mlm"):
            recs.append({"run": {"kind": "cell", "source": "palindrome", "train_size": 1000, "objective": obj,
                                 "seed": rep}})
            arrs.append({"cell": np.full((n, 4), float(rep))})
        recs.append({"run": {"kind": "projection", "source": "hmm_low", "seed": rep}})
        arrs.append({"pretrain": np.ones((n, 4)), "kl@30": np.zeros((n, 3))})
    (tmp_path / "stale.npz").write_bytes(b"")
    paths = save_exact_stats(tmp_path, recs, arrs, "hmm_low")
    assert sorted(p.name for p in paths) == ["figure.npz", "p-1k.npz"] and not (tmp_path / "stale.npz").exists()
    st = load_stats(tmp_path / "p-1k.npz")
    assert set(st.systems) == {f"{o}:{m}" for o in ("ll", "mlm") for m in ("nll", "neg_pll", "neg_mlm")} | {"true:nll"}
    assert st["ll:nll"].shape == (2, n, 2) and st["ll:nll"][1, 0].tolist() == [1.0, 1.0]
    assert set(load_stats(tmp_path / "figure.npz").systems) == {"dpll:nll", "true:nll", "kl@30:nll"}


def test_write_report_prints_the_kits_findings(tmp_path):
    m = _design()
    vs = report_verdicts(None, m, _stats(m, e_norm={"main/deg": 30.0}))
    md = write_report(None, m, tmp_path, verdicts=vs)["README.md"].read_text()
    assert kit.summary(vs) in md and "## Findings" in md


def test_as_the_data_grows_claims_are_trends_across_training_sizes():
    """PLL − LL (and MLM − PLL, MLM − LL) at the smaller size minus at the larger, paired by test sequence:
    a shrinking gap reproduces the trend, a widening one refutes it, whatever the gap's size at the largest
    size (the old 0.1-nat equivalence there is gone)."""
    rows = ("p-1k", "p-3k")
    ex = _exact_metrics(rows)
    shrink = {("p-1k", "pll"): 5.4, ("p-3k", "pll"): 5.2, ("p-1k", "mlm"): 6.5, ("p-3k", "mlm"): 6.0}
    v = kit.finalise(report_verdicts(ex, None, _exact_stats(rows, nll=shrink)))
    v = _by_id(v)
    assert v["pll_near_ll"].verdict == kit.REPRODUCED               # gap 0.4 → 0.2: a trend, though 0.2 > 0.1 nats
    (label, iv), = v["pll_near_ll"].parts
    assert label == "p-1k − p-3k: PLL − LL" and iv.estimate == pytest.approx(0.2, abs=0.02) and iv.units == "seeds"
    assert v["mlm_worse"].verdict == kit.REPRODUCED and v["mlm_closer"].verdict == kit.REPRODUCED
    assert [lab for lab, _ in v["mlm_closer"].parts] == ["p-1k − p-3k: MLM − PLL", "p-1k − p-3k: MLM − LL"]
    widen = {("p-1k", "pll"): 5.1, ("p-3k", "pll"): 5.4, ("p-1k", "mlm"): 6.0, ("p-3k", "mlm"): 6.6}
    v = _by_id(kit.finalise(report_verdicts(ex, None, _exact_stats(rows, nll=widen))))
    assert v["pll_near_ll"].verdict == kit.NOT_REPRODUCED and v["mlm_closer"].verdict == kit.NOT_REPRODUCED
    # one training size per generator: no trend to judge
    one = _exact_metrics(("p-1k",))
    v = _by_id(report_verdicts(one, None, _exact_stats(("p-1k",))))
    assert v["pll_near_ll"].verdict == kit.NOT_TESTABLE and v["pll_near_ll"].why == kit.NOT_RUN


def test_premises_gate_through_the_kit():
    """``mlm_closer`` presumes ``mlm_worse``, ``raw_bleu_anneal`` presumes ``raw_accepts_more``: judged on their
    own, not testable (premise) once finalised where the premise is not reproduced — and counted so."""
    rows = ("p-1k", "p-3k")
    ex = _exact_metrics(rows)
    closer = {("p-1k", "mlm"): 5.3, ("p-3k", "mlm"): 5.0, ("p-1k", "pll"): 5.02, ("p-3k", "pll"): 5.02}
    raw = report_verdicts(ex, None, _exact_stats(rows, nll=closer))        # MLM beats PLL and LL at 3k: not worse
    assert _by_id(raw)["mlm_closer"].verdict == kit.REPRODUCED            # the trend alone holds
    fin = _by_id(kit.finalise(raw))
    assert fin["mlm_worse"].verdict != kit.REPRODUCED
    assert fin["mlm_closer"].verdict == kit.NOT_TESTABLE and fin["mlm_closer"].why == kit.PREMISE
    assert kit.counts(raw, adjusted=False)["not_testable"] == kit.counts(kit.finalise(raw), adjusted=False)["not_testable"]
    m = _design()
    b = {f"anneal/raw/{a}": 0.6 for a in (0.02, 0.06)} | {f"anneal/norm/{a}": 0.2 for a in (0.02, 0.06)}
    acc = {"anneal/raw/0.02": 0.9, "anneal/raw/0.06": 0.8, "anneal/norm/0.02": 0.7, "anneal/norm/0.06": 0.6}
    v = _by_id(kit.finalise(report_verdicts(None, m, _stats(m, accept=acc, bleu=b))))
    assert v["raw_accepts_more"].verdict == kit.REPRODUCED and v["raw_bleu_anneal"].verdict == kit.REPRODUCED
    v = _by_id(kit.finalise(report_verdicts(None, m, _stats(m, bleu=b))))   # equal acceptance: the premise fails
    assert v["raw_accepts_more"].verdict == kit.INCONCLUSIVE
    assert v["raw_bleu_anneal"].verdict == kit.NOT_TESTABLE and v["raw_bleu_anneal"].why == kit.PREMISE
    assert "raw-energy MH sampler admits larger acceptance" in v["raw_bleu_anneal"].reason


def test_degenerate_gibbs_at_low_temperature_has_worse_energy():
    m = _design()                                                           # T in {2, 1, 0.5}: T < 1 is 0.5
    v = _by_id(report_verdicts(None, m, _stats(m, e_norm={"temperature/deg/0.5": 30.0})))["deg_low_T_energy"]
    assert v.verdict == kit.REPRODUCED and [lab for lab, _ in v.parts] == ["T 0.5: deg − norm"]
    v = _by_id(report_verdicts(None, m, _stats(m, e_norm={"temperature/deg/0.5": 10.0})))["deg_low_T_energy"]
    assert v.verdict == kit.NOT_REPRODUCED                                # ours: deg's E_norm lower at low T
    m1 = _design((2.0, 1.0))
    v = _by_id(report_verdicts(None, m1, _stats(m1)))["deg_low_T_energy"]
    assert v.verdict == kit.NOT_TESTABLE and v.why == kit.NOT_RUN and "below T = 1" in v.reason


def test_bleu_energy_ranks_give_spearman_within_each_sentence():
    e = [np.array([[[x, 1.0]]]) for x in (3.0, 1.0, 2.0, 4.0)]              # 4 samplers: [1 chain, 1 sentence, 2]
    bl = [_bleu(f)[:1, :1] for f in (0.2, 0.9, 0.5, 0.1)]
    r = bleu_energy_ranks(list(zip(e, bl)))
    assert r.shape == (1, 1, 6) and r[0, 0, 0] == 0 and r[0, 0, 5] == 4
    x, y = [3.0, 1.0, 2.0, 4.0], [float(bleu_score()(b[0, 0])) for b in bl]
    assert float(pearson_score(r.sum((0, 1)))) == pytest.approx(spearman(x, y))
    with pytest.raises(ValueError, match="needs >= 2"):
        bleu_energy_ranks(list(zip(e, bl))[:1])


def test_high_bleu_low_energy_is_a_within_sentence_rank_correlation():
    m = _design()
    low_e = {f"{g}/{s}": x for g in ("main", "random_start") for s, x in (("raw", 10.0), ("norm", 20.0), ("deg", 30.0))}
    good = {f"{g}/{s}": x for g in ("main", "random_start") for s, x in (("raw", 0.9), ("norm", 0.5), ("deg", 0.1))}
    bad = {f"{g}/{s}": x for g in ("main", "random_start") for s, x in (("raw", 0.1), ("norm", 0.5), ("deg", 0.9))}
    v = _by_id(report_verdicts(None, m, _stats(m, e_norm=low_e, bleu=good)))["bleu_low_energy"]
    assert v.verdict == kit.REPRODUCED and v.parts[0][1].high < 0 and v.parts[0][1].units == "chains"
    assert "6 samplers" in v.parts[0][0]
    v = _by_id(report_verdicts(None, m, _stats(m, e_norm=low_e, bleu=bad)))["bleu_low_energy"]
    assert v.verdict == kit.NOT_REPRODUCED and v.parts[0][1].low > 0


def test_the_findings_count_the_full_family_once():
    """The readme prints the kit's adjusted counts of the whole list; identical systems read not testable."""
    m = _design()
    st = _stats(m, e_norm={"main/deg": 30.0})
    st["mcmc/novel"].systems["block/raw"] = st["mcmc/novel"]["main/raw"]    # block = single-site, bit for bit
    vs = report_verdicts(None, m, st)
    assert _by_id(vs)["block_novel"].why == kit.IDENTICAL
    md = readme(None, m, verdicts=vs)
    assert kit.summary(vs) in md and "adjusted" in kit.summary(vs)
    assert [v.claim.id for v in kit.finalise(vs)] == list(CLAIMS)
    assert set(EXACT_CLAIMS) < set(CLAIMS)
