r"""Search-aware training objectives for step scorers (Goyal et al. 2018; Goyal thesis ch. 3-4).

Each objective is built from its ``OBJECTIVES`` entry (structure ``steps``) and is the training
loss itself: ``objective(scorer, batch) -> scalar`` (the mean of ``loss(scorer, batch) -> [B]``
over tokens when ``per_position``, over sentences otherwise); ``fit`` sets its ``epoch`` (1-based)
before each epoch, which drives the alpha and sampling schedules. Gold labels are ``batch.tags``
at ``batch.mask``.

- ``seq_ce``: teacher-forced cross-entropy, -sum_t log softmax(s_t)[y*_t] (the baseline and the
  warm start of every search-aware objective).
- ``scheduled_sampling`` (Bengio et al. 2015): at each step the decoder is fed the gold symbol
  with probability eps, else the model's hard choice (``feed: greedy`` the argmax, ``sample`` a
  draw from softmax(s_t)), with no gradient through the choice; CE at every step.
- ``soft_scheduled_sampling`` (thesis Sec. 3.3.2): the model's choice is relaxed — the alpha-soft
  argmax embedding sum_y e(y) softmax(alpha s_t)_y (``greedy``) or the Gumbel soft sample
  sum_y e(y) softmax(alpha (s_t + G))_y (``sample``) — so gradients flow through earlier decisions.
- ``self_normalised_ce`` (Goyal et al. 2019, Sec. 3.2.1; Devlin et al. 2014): teacher-forced CE
  plus lambda * (log Z_L,t)^2 at every gold step, log Z_L,t = logsumexp of the network's *raw*
  step scores: a locally normalised model whose raw scores are (nearly) normalised, the warm
  start of a globally normalised model. :func:`log_normalisers` gives log Z_L,t for Table 1.
- ``beam_dl``: the relaxed direct loss G~_DL,alpha (2018, Sec. 2.3): the soft beam's
  peaked-softmax_alpha(s_T) . D_T with a decomposable Hamming cost (a wrong ``O`` costs
  ``o_cost``, 2 in the paper's NER, when the task has an ``O`` label). For a scorer with an
  ``eos`` (translation) the cost runs over the decoding horizon (``batch.decode_mask``) against
  the reference padded with ``eos``: position-wise Hamming, so stopping early pays for every
  missing token and running on pays for every extra one.
- ``beam_hinge``: the relaxed hinge G~_hinge,alpha = max(0, s_max - s(y*)) (Sec. 2.5), s_max the
  peaked-softmax_alpha expectation of the cost-augmented soft beam's final scores.

Schedules. eps (the gold-feed probability) is 1 throughout epoch 1 and then, in epoch e, the
inverse sigmoid k / (k + exp(i / k)) of the epoch's 0-based index i = e - 1, constant within the
epoch: the thesis (Sec. 3.3, "Hyperparameter tuning") decays it "as an inverse sigmoid (Bengio et
al., 2015) of epochs with a decay strength parameter k", and its Table 3.2 compares k = 100, 10, 1
and "always" (``decay_k`` is k; ``decay_k: 0`` means "always": eps = 0 after epoch 1). So k = 100
stays close to teacher forcing for the whole run (eps = 0.99 at epoch 20) and k = 1 is model-fed
within a few epochs (eps = 0.27 at epoch 2, 0.05 at epoch 4). alpha at epoch e is
``min(alpha.init * alpha.anneal ** (e - 1), alpha.max)``: fixed when ``anneal`` is 1, annealed
exponentially per epoch otherwise (from smooth toward the hard search).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F

from components.inference.beam import (check_alpha, check_beam_size, check_labels, eos_of, reading, sequence_scores,
                                       soft_beam_search, unroll)


@dataclass(frozen=True)
class AlphaSchedule:
    init: float = 1.0
    anneal: float = 1.0          # per-epoch factor: 1 = fixed alpha, > 1 = exponential annealing
    max: float = 1000.0

    def __post_init__(self):
        check_alpha(self.init)
        if not self.anneal >= 1.0:
            raise ValueError(f"alpha.anneal must be >= 1 (1 = fixed), got {self.anneal}")
        if not self.max >= self.init:
            raise ValueError(f"alpha.max must be >= alpha.init, got max {self.max} < init {self.init}")

    @property
    def annealed(self) -> bool:
        return self.anneal > 1.0

    def at(self, epoch: int) -> float:
        return min(self.init * self.anneal ** max(epoch - 1, 0), self.max)


def gold_probability(epoch: int, decay_k: float) -> float:
    """eps in (1-based) ``epoch``: 1 in epoch 1, then k / (k + exp((epoch - 1) / k)); 0 after epoch 1
    for k = 0 ("always")."""
    if epoch <= 1:
        return 1.0
    if decay_k == 0:
        return 0.0
    z = (epoch - 1) / decay_k
    return decay_k / (decay_k + math.exp(z)) if z < 700 else 0.0


def _check_gold(scorer: Any, batch: Any) -> torch.Tensor:
    check_labels(batch.tags, batch.mask, scorer.n_labels, "gold labels")
    return batch.tags


class _StepObjective:
    """What every step objective shares. Besides the loss, an objective says what a flow needs to
    know about it, so that no flow reads its config by duck typing: :meth:`alpha_at` (the soft
    search's alpha at an epoch, ``None`` without one) and :meth:`describe` (the report's columns)."""
    per_position: bool = True
    feeds_model = False                  # trained on the model's own choices (scheduled sampling)

    def __init__(self, cfg: Any = None) -> None:
        self.cfg = cfg
        self.epoch = 1

    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:   # [B]
        raise NotImplementedError

    def alpha_schedule(self) -> AlphaSchedule | None:
        """The alpha schedule this objective trains with (``None``: no soft search)."""
        return None

    def alpha_at(self, epoch: int) -> float | None:
        """alpha at ``epoch`` (1-based), e.g. the alpha of the epoch whose model was kept, which is
        the alpha the soft beam decodes that model with; ``None`` without a schedule."""
        sched = self.alpha_schedule()
        return None if sched is None else sched.at(epoch)

    def selectable(self, epoch: int) -> bool:
        """Whether the model of ``epoch`` may be the run's kept model: for an annealed alpha, only
        once alpha has left its initial value (before, the run is the fixed-alpha one; Goyal 2018's
        "annealed beats fixed" would compare a fixed-alpha model with itself); any epoch otherwise."""
        sched = self.alpha_schedule()
        if sched is None or not sched.annealed or sched.max <= sched.init:     # alpha never moves
            return True
        return sched.at(epoch) > sched.at(1)

    def describe(self) -> dict[str, Any]:
        """The report's columns: ``alpha`` (none | fixed | annealed), ``decay_k`` (the scheduled-
        sampling decay, ``None`` without one; 0 = always feed the model) and ``feed`` (``gold``, or
        the model's choice, ``greedy`` | ``sample``)."""
        sched = self.alpha_schedule()
        return {"alpha": "none" if sched is None else ("annealed" if sched.annealed else "fixed"),
                "decay_k": float(self.cfg.decay_k) if self.feeds_model else None,
                "feed": self.cfg.feed if self.feeds_model else "gold"}

    def __call__(self, scorer: Any, batch: Any) -> torch.Tensor:
        per = self.loss(scorer, batch)
        if self.per_position:
            return per.sum() / batch.mask.sum().clamp_min(1)
        return per.mean()


def _token_ce(scores: torch.Tensor, gold: torch.Tensor, mask: torch.Tensor, smoothing: float = 0.0) -> torch.Tensor:
    """Per-sentence cross-entropy [B]; with ``smoothing`` eps the target is (1 - eps) on gold plus
    eps spread uniformly over the V symbols (Szegedy et al. 2016)."""
    logp_all = torch.log_softmax(scores, -1)
    nll = -logp_all.gather(-1, gold[..., None])[..., 0]
    if smoothing > 0.0:
        nll = (1.0 - smoothing) * nll - smoothing * logp_all.mean(-1)
    return (nll * mask).sum(1)


# -- cross-entropy and scheduled sampling ---------------------------------------------------------
@dataclass(frozen=True)
class SeqCEConfig:
    label_smoothing: float = 0.0     # eps; 0 = plain CE (small-data translators use ~0.1-0.2)

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"seq_ce: label_smoothing must be in [0, 1), got {self.label_smoothing}")


class SeqCE(_StepObjective):
    def __init__(self, cfg: SeqCEConfig = SeqCEConfig()):
        super().__init__(cfg)

    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:
        gold = _check_gold(scorer, batch)
        scores = unroll(scorer, batch, lambda t, _: scorer.embed_ids(gold[:, t]), steps=gold.shape[1])
        return _token_ce(scores, gold, batch.mask, self.cfg.label_smoothing)


@dataclass(frozen=True)
class SelfNormalisedCEConfig:
    lam: float = 1.0                 # lambda, the weight of (log Z_L,t)^2

    def __post_init__(self):
        if not self.lam >= 0 or self.lam != self.lam or self.lam == math.inf:
            raise ValueError(f"self-normalisation: lam must be a finite number >= 0, got {self.lam}")


def log_normalisers(scorer: Any, batch: Any) -> torch.Tensor:
    """log Z_L,t(x, y*_<t) = logsumexp_v of the network's raw score at every gold-fed step [B, T]
    (0 at masked steps); the mean and variance over real steps are the paper's Table 1."""
    gold = _check_gold(scorer, batch)
    with reading(scorer, "global"):
        raw = unroll(scorer, batch, lambda t, _: scorer.embed_ids(gold[:, t]), steps=gold.shape[1])
    return raw.logsumexp(-1) * batch.mask


class SelfNormalisedCE(_StepObjective):
    def __init__(self, cfg: SelfNormalisedCEConfig):
        super().__init__(cfg)

    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:
        gold = _check_gold(scorer, batch)
        with reading(scorer, "global"):
            raw = unroll(scorer, batch, lambda t, _: scorer.embed_ids(gold[:, t]), steps=gold.shape[1])
        log_z = raw.logsumexp(-1)
        nll = log_z - raw.gather(-1, gold[..., None])[..., 0]
        return ((nll + self.cfg.lam * log_z ** 2) * batch.mask).sum(1)


@dataclass(frozen=True)
class ScheduledSamplingConfig:
    feed: Literal["greedy", "sample"] = "greedy"
    decay_k: float = 10.0            # inverse-sigmoid decay strength (epochs, as the thesis); 0 = always feed the model

    def __post_init__(self):
        if self.feed not in ("greedy", "sample"):
            raise ValueError(f"scheduled sampling: feed must be greedy or sample, got {self.feed!r}")
        if self.decay_k < 0:
            raise ValueError(f"scheduled sampling: decay_k must be >= 0 (0 = always), got {self.decay_k}")


@dataclass(frozen=True)
class SoftScheduledSamplingConfig(ScheduledSamplingConfig):
    alpha: AlphaSchedule = field(default_factory=AlphaSchedule)


class ScheduledSampling(_StepObjective):
    """Bengio et al. (2015) (``soft=False``) or its relaxation (``soft=True``; see the module doc)."""

    feeds_model = True

    def __init__(self, cfg: ScheduledSamplingConfig, soft: bool, seed: int = 0):
        super().__init__(cfg)
        self.soft = soft
        self.gen = torch.Generator().manual_seed(seed)

    @property
    def eps(self) -> float:
        return gold_probability(self.epoch, self.cfg.decay_k)

    def alpha_schedule(self) -> AlphaSchedule | None:
        return self.cfg.alpha if self.soft else None

    @property
    def alpha(self) -> float:
        return self.cfg.alpha.at(self.epoch) if self.soft else math.inf

    def _rand(self, shape, like: torch.Tensor) -> torch.Tensor:
        return torch.rand(shape, generator=self.gen).to(device=like.device, dtype=like.dtype)

    def _model_embedding(self, scorer: Any, scores: torch.Tensor) -> torch.Tensor:
        if self.soft:
            z = scores
            if self.cfg.feed == "sample":
                z = z - torch.log(-torch.log(self._rand(scores.shape, scores).clamp(1e-10, 1 - 1e-10)))
            return scorer.embed(torch.softmax(self.alpha * z, -1))
        with torch.no_grad():
            if self.cfg.feed == "greedy":
                ids = scores.argmax(-1)
            else:
                g = -torch.log(-torch.log(self._rand(scores.shape, scores).clamp(1e-10, 1 - 1e-10)))
                ids = (torch.log_softmax(scores, -1) + g).argmax(-1)
        return scorer.embed_ids(ids)

    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:
        gold = _check_gold(scorer, batch)
        eps = self.eps if torch.is_grad_enabled() else 1.0

        def feed(t: int, scores: torch.Tensor) -> torch.Tensor:
            g = scorer.embed_ids(gold[:, t])
            if eps >= 1.0:
                return g
            use_gold = self._rand((gold.shape[0], 1), g) < eps
            return torch.where(use_gold, g, self._model_embedding(scorer, scores))

        return _token_ce(unroll(scorer, batch, feed, steps=gold.shape[1]), gold, batch.mask)


# -- relaxed beam-search objectives ---------------------------------------------------------------
@dataclass(frozen=True)
class BeamObjectiveConfig:
    k: int = 3
    alpha: AlphaSchedule = field(default_factory=AlphaSchedule)
    o_cost: float = 2.0              # the cost of a wrong "O" (NER); other errors cost 1

    def __post_init__(self):
        check_beam_size(self.k)
        if self.o_cost <= 0:
            raise ValueError(f"o_cost must be > 0, got {self.o_cost}")


def hamming_costs(gold: torch.Tensor, mask: torch.Tensor, n_labels: int, *, o_id: int = -1,
                  o_cost: float = 2.0) -> torch.Tensor:
    """d_t(v) [B, T, V]: 0 for the gold label, 1 otherwise, ``o_cost`` for a wrong ``o_id``; 0 at
    masked steps."""
    d = 1.0 - F.one_hot(gold, n_labels).to(torch.get_default_dtype())
    if 0 <= o_id < n_labels:
        d[..., o_id] = d[..., o_id] * o_cost
    return d * mask[..., None]


def eos_hamming_costs(gold: torch.Tensor, mask: torch.Tensor, horizon: torch.Tensor, n_labels: int,
                      eos: int) -> torch.Tensor:
    """d_t(v) [B, T_dec, V] over a decoding horizon (bool [B, T_dec]) against the reference
    (``gold`` [B, T] read with ``mask``, ending in ``eos``) padded with ``eos``: 0 for the
    reference's symbol at t, 1 otherwise; 0 outside the horizon."""
    B, T_dec = horizon.shape
    ref = torch.full((B, T_dec), eos, dtype=torch.long, device=gold.device)
    n = min(T_dec, gold.shape[1])
    ref[:, :n] = torch.where(mask[:, :n], gold[:, :n], torch.full_like(gold[:, :n], eos))
    return hamming_costs(ref, horizon, n_labels)


class BeamDirectLoss(_StepObjective):
    per_position = False

    def __init__(self, cfg: BeamObjectiveConfig, o_id: int = -1):
        super().__init__(cfg)
        self.o_id = o_id

    def alpha_schedule(self) -> AlphaSchedule:
        return self.cfg.alpha

    @property
    def alpha(self) -> float:
        return self.cfg.alpha.at(self.epoch)

    def costs(self, scorer: Any, batch: Any) -> torch.Tensor:
        gold = _check_gold(scorer, batch)
        eos = eos_of(scorer)
        if eos is not None:
            if getattr(batch, "decode_mask", None) is None:
                raise ValueError("beam objective: a scorer with an eos needs batch.decode_mask (its decoding horizon)")
            return eos_hamming_costs(gold, batch.mask, batch.decode_mask, scorer.n_labels, eos)
        return hamming_costs(gold, batch.mask, scorer.n_labels, o_id=self.o_id, o_cost=self.cfg.o_cost)

    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:
        return soft_beam_search(scorer, batch, self.cfg.k, self.alpha, cost=self.costs(scorer, batch)).loss


class BeamHinge(BeamDirectLoss):
    def loss(self, scorer: Any, batch: Any) -> torch.Tensor:
        res = soft_beam_search(scorer, batch, self.cfg.k, self.alpha, cost=self.costs(scorer, batch), augment=True)
        return torch.relu(res.max_score - sequence_scores(scorer, batch, batch.tags))


def make_seq_ce(cfg: SeqCEConfig, **_: Any) -> SeqCE:
    return SeqCE(cfg)


def make_self_normalised_ce(cfg: SelfNormalisedCEConfig, **_: Any) -> SelfNormalisedCE:
    return SelfNormalisedCE(cfg)


def make_scheduled_sampling(cfg: ScheduledSamplingConfig, *, seed: int = 0, **_: Any):
    return ScheduledSampling(cfg, soft=False, seed=seed)


def make_soft_scheduled_sampling(cfg: SoftScheduledSamplingConfig, *, seed: int = 0, **_: Any):
    return ScheduledSampling(cfg, soft=True, seed=seed)


def _beam_cfg(cfg: BeamObjectiveConfig, k: int | None) -> BeamObjectiveConfig:
    """The config with the task's beam size ``k`` (the relaxed beam searches as wide as the task's
    decoding beam) when one is given."""
    return cfg if k is None else dataclasses.replace(cfg, k=int(k))


def make_beam_dl(cfg: BeamObjectiveConfig, *, o_id: int = -1, k: int | None = None, **_: Any) -> BeamDirectLoss:
    return BeamDirectLoss(_beam_cfg(cfg, k), o_id)


def make_beam_hinge(cfg: BeamObjectiveConfig, *, o_id: int = -1, k: int | None = None, **_: Any) -> BeamHinge:
    return BeamHinge(_beam_cfg(cfg, k), o_id)
