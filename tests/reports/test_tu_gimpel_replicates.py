"""The Tu & Gimpel findings with replicates: the approx statistics store a system evaluated on several
replicates as ``[seeds, n, d]``. Two replicated systems are compared replicate by replicate (seeds and
sentences crossed factors of the interval, which says how many seeds); a replicated system against a
single run (GD, the tuned rows) is its replicate 0, which the verdict's evidence says."""
import numpy as np
import pytest

from components.metrics.significance import Stats
from components.reports import kit
from components.reports.curves import close
from components.reports.tu_gimpel import TaskData, findings, paired_runs, replicates_table, report
from tests.reports.test_tu_gimpel_findings import ARCH, E1, EP, LEVELS, _data

# the systems the POS equivalences compare, nudged apart from their equals (else: identical, not testable)
NUDGE = (f"{EP}.cnn.infnet", f"{EP}.gd_oracle", f"{EP}.gd_oracle.20")

# the systems that are trained models (every replicate has its own): Viterbi of each energy, the networks
TRAINED = [s for s in LEVELS["pos"] if s.endswith((".viterbi", ".local", ".infnet"))]


def _replicated(*levels: dict, task: str = "pos", n: int = 300):
    """Statistics of ``len(levels)`` replicates: replicate k's trained systems at ``LEVELS`` updated by
    ``levels[k]`` (the same sentences and uniforms: the levels alone differ), stacked ``[seeds, n, d]``;
    GD and the tuned rows are replicate 0's ``[n, d]``; the metrics are replicate 0's with the others'
    scores under ``replicates``."""
    runs = [_data(task, n=n, levels=lv, nudge=NUDGE) for lv in levels]
    (m, d0) = runs[0]
    st = {k: (np.stack([r.stats[k] for _, r in runs]) if k in TRAINED else v) for k, v in d0.stats.systems.items()}
    vals = {k: (np.stack([r.values[k] for _, r in runs]) if k.split(":", 1)[-1] in TRAINED or k.endswith(".gold") else v)
            for k, v in d0.values.systems.items()}
    def entry(s: str, k: int) -> dict:
        e = vals.get(f"energy:{s}")
        return {"score": float(100 * st[s][k, :, 0].sum() / st[s][k, :, 1].sum()),
                "energy_pred": float(e[k, :, 0].mean()) if e is not None else -100.0, "decode_seconds": 1.0}
    m = {**m, **{s: entry(s, 0) for s in TRAINED},
         "replicates": {str(k): {s: entry(s, k) for s in TRAINED} for k in range(1, len(levels))}}
    return m, TaskData(m, Stats(d0.stats.columns, st), Stats(d0.values.columns, vals))


def _verdicts(m, d, task="pos"):
    return {v.claim.id: v for v in findings({task: m}, {task: d}, ARCH) if v.scope.startswith(task)}


def test_replicated_pairs_resample_seeds_and_single_runs_use_replicate_0():
    m, d = _replicated({}, {}, {})
    assert d.stats[f"{E1}.cnn.infnet"].shape == (3, 300, 2) and d.stats[f"{EP}.gd_oracle"].shape == (300, 2)
    got = _verdicts(m, d)
    assert all(v.verdict == kit.REPRODUCED for v in got.values()), {k: v.verdict for k, v in got.items()}
    # infnet vs local (both trained models): every part holds the 3 replicates
    t1 = got["T1.infnet>local"]
    assert [iv.seeds for _, iv in t1.parts] == [3, 3, 3] and "3 seeds" in t1.evidence()
    assert got["T1.seq2seq>blstm"].interval.seeds == 3 and "3 seeds" in got["T1.seq2seq>blstm"].evidence()
    assert got["T1.seq2seq>blstm"].reason == ""
    # energies of two replicated systems too (discretised vs relaxed infnet+)
    assert all(iv.seeds == 3 for _, iv in got["T6.pos.discretise_raises"].parts)
    # GD (replicate 0 only) against Viterbi (3 replicates): replicate 0 of Viterbi, said in the evidence
    gd = got["T4.pos.gd≈viterbi"]
    assert gd.interval.seeds == 1 and gd.interval.n == 300
    assert gd.reason == f"{EP}.viterbi: replicate 0 of 3 ({EP}.gd_oracle ran on replicate 0 only)"
    assert "replicate 0 of 3" in gd.evidence() and "replicate 0 of 3" in gd.record()["reason"]
    # a conjunction mixing both kinds: the replicated part with seeds, the GD part on replicate 0
    parts = dict(got["T1.pos.cnn_infnet>local,viterbi"].parts)
    assert parts["vs cnn local"].seeds == 3 and parts["vs Viterbi"].seeds == 3
    mixed = dict(got["T6.warm_lowest"].parts)
    assert {iv.seeds for iv in mixed.values()} == {1} and "replicate 0 of 3" in got["T6.warm_lowest"].reason
    # Sec. 6.2 runs on replicate 0: the rank statistics of its search errors, and the evidence says so
    assert "replicate 0" in got["S6.2.rho>0"].reason


def test_the_verdict_rests_on_every_replicate_not_on_replicate_0():
    """Replicate 0's CNN inference network beats its local baseline clearly, the other two replicates'
    lose to theirs: on replicate 0 alone the claim is reproduced, on the three it is not."""
    worse = {f"{E1}.cnn.infnet": .70}                                    # local .80
    m, d = _replicated({}, worse, worse)
    first = TaskData(m, Stats(d.stats.columns, {k: (v[0] if v.ndim == 3 else v) for k, v in d.stats.systems.items()}),
                     Stats(d.values.columns, {k: (v[0] if v.ndim == 3 else v) for k, v in d.values.systems.items()}))
    assert _verdicts(m, first)["T1.infnet>local"].verdict == kit.REPRODUCED
    v = _verdicts(m, d)["T1.infnet>local"]
    assert v.verdict != kit.REPRODUCED
    cnn = dict(v.parts)["cnn"]
    assert cnn.seeds == 3 and cnn.estimate == pytest.approx(-10 / 3, abs=1.5)     # (+10 - 10 - 10) / 3 points
    assert dict(v.parts)["blstm"].seeds == 3 and dict(v.parts)["blstm"].low > 0    # the other parts unchanged


def test_paired_runs():
    a3, b3, a2 = np.ones((3, 5, 2)), np.zeros((3, 5, 2)), np.full((5, 2), 2.0)
    x, y, note = paired_runs(a3, b3, "x", "y")
    assert x.shape == y.shape == (3, 5, 2) and note == ""
    x, y, note = paired_runs(a2, b3, "gd", "vit")
    assert x.shape == y.shape == (5, 2) and (y == 0).all() and note == "vit: replicate 0 of 3 (gd ran on replicate 0 only)"
    with pytest.raises(ValueError, match="x has 3 replicates and y 2"):
        paired_runs(a3, np.zeros((2, 5, 2)), "x", "y")


def test_report_says_the_tables_show_replicate_0_and_tabulates_every_replicate():
    m, d = _replicated({}, {f"{E1}.cnn.infnet": .70}, {})
    md, fig = report({"pos": m}, ARCH, ("gd_adam",), stats={"pos": d})
    close(fig)
    # the yardsticks, Tables 1, 4 and 6, and the further methods
    assert md.count("replicate 0 of 3, the model each sweep chose") == 5
    table = replicates_table({"pos": m})
    row = next(line for line in table.splitlines() if line.startswith(f"| pos | {E1}.cnn.infnet |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert [float(c) for c in cells[2:5]] == pytest.approx([m[f"{E1}.cnn.infnet"]["score"],
                                                            m["replicates"]["1"][f"{E1}.cnn.infnet"]["score"],
                                                            m["replicates"]["2"][f"{E1}.cnn.infnet"]["score"]], abs=0.05)
    assert "## Replicates" in md and table in md
    # without replicates nothing of it appears
    m0, d0 = _data("pos")
    md0, fig = report({"pos": m0}, ARCH, stats={"pos": d0})
    close(fig)
    assert "replicate" not in md0.lower()
