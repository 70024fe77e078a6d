"""The chapter's findings on the report kit: verdicts from per-item statistics where the answer is known
(a clear win, a clear loss, a straddle), shape claims and their not-testable reasons, the stage-side
per-sentence statistics (``sentence_stats``) and per-sequence statistics (``save_exact_stats``)."""
import numpy as np
import pytest

from components.inference.mcmc.traces import sentence_stats
from components.metrics.significance import BLEU_COLUMNS, Stats, bleu_score, load_stats
from components.reports import kit
from components.reports.goyal_mlm import CLAIMS, MIN_BLEU, report_verdicts, write_report

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
    assert len(CLAIMS) == 28 and all(isinstance(c, kit.Claim) for c in CLAIMS.values())
    assert CLAIMS["pll_equals_mlm"].kind == "equivalence" and CLAIMS["pll_equals_mlm"].margin == 0.5
    # the paper column by the same rule: the thesis's own numbers pass its claims, but for p-10k's PLL-LL gap
    assert kit.judge_paper(CLAIMS["pll_equals_mlm"])[0] == kit.REPRODUCED
    assert kit.judge_paper(CLAIMS["novel_peak_T"])[0] == kit.REPRODUCED
    assert kit.judge_paper(CLAIMS["pll_near_ll"])[0] == kit.NOT_REPRODUCED
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
    assert _by_id(report_verdicts(None, m, st))["mh_robust_T"].verdict == kit.REPRODUCED   # the same BLEU: inside ±3
    m["model"]["dev_bleu_mask_predict"] = MIN_BLEU - 1
    v = _by_id(report_verdicts(None, m, st))
    for cid in ("mh_bleu", "mh_robust_T", "mh_robust_p", "anneal_step_bleu", "raw_bleu_anneal", "mh_beats_mask_predict",
                "mh_beats_deg_full", "beats_warm_start"):
        assert v[cid].verdict == kit.NOT_TESTABLE and "did not learn" in v[cid].reason
    assert v["mh_energy"].verdict != kit.NOT_TESTABLE


def _exact_metrics(rows):
    return {"table": [{"row": r, "data": "palindrome", "train_size": 1000 if r.endswith("1k") else 3000,
                       "by_objective": {o: {"nll": 5.0} for o in ("ll", "pll", "mlm")}} for r in rows],
            "figure": {"data": "hmm_low", "sizes": [30, 1000], "nll": {m: [5.0, 5.0] for m in ("pll", "kl", "kl_pl")}}}


def _exact_stats(rows, pll_neg=4.5, mlm_neg=4.5, n=400):
    rate = ("value", "count")
    seq = lambda v, sd=0.5: np.stack([v + sd * RNG.standard_normal((1, n)), np.ones((1, n))], -1)   # noqa: E731
    out = {f"mlm_exact/{r}": Stats(rate, {"ll:nll": seq(5.0), "pll:nll": seq(5.02), "mlm:nll": seq(6.0),
                                          "pll:neg_pll": seq(pll_neg), "mlm:neg_mlm": seq(mlm_neg)}) for r in rows}
    fig = {f"{m}@{s}:nll": seq(v) for s in (30, 1000) for m, v in (("pll", 6.0), ("kl", 5.3), ("kl_pl", 5.4))}
    out["mlm_exact/figure"] = Stats(rate, fig | {"dpll:nll": seq(6.5)})
    return out


def test_exact_claims_and_the_equivalence_with_its_margin():
    rows = ("p-1k", "p-3k")
    ex = _exact_metrics(rows)
    v = _by_id(report_verdicts(ex, None, _exact_stats(rows)))
    assert v["mlm_worse"].verdict == kit.REPRODUCED and len(v["mlm_worse"].parts) == 4
    assert v["kl_beats_pl"].verdict == kit.REPRODUCED and v["beats_dpll"].verdict == kit.REPRODUCED
    assert v["pll_near_ll"].verdict == kit.REPRODUCED and v["pll_near_ll"].scope == "largest size (3000)"
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
