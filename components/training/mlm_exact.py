r"""Exact training and evaluation of the raw MLM energy on enumerable sequence spaces
(thesis ch. 6, Sec. 6.2.1-6.2.3, Table 6.1 and Figure 6.1).

A single-site masked LM (``components.models.mlm.MaskedLM`` with ``single_site``; logits at t
never read y_t) defines, in one pass over y [R, N], the energy of a fully connected MRF

    E_raw(y) = - sum_t logit_t(y_{\t})[y_t]              (``components.energies.mlm.sequence_energy``)
    p(y) = exp(-E_raw(y)) / Z,   log Z = logsumexp over every sequence y' of a length in ``support``

``support`` is the set of lengths the data distribution covers: ``(5,)`` for the synthetic
generators, ``(1, ..., max_len)`` for phonemes; Z sums ``sum_n V^n`` sequences, enumerated in
chunks (:func:`log_partition`, differentiable; capped at ``MAX_SEQUENCES``).

Conditionals at position t of a sequence y (w ranges over the vocabulary):

    true   p(y_t = w | y_{\t}) = softmax_w(-E_raw(y with y_t = w))    |V| energies a position;
                                 all N |V| alternatives of a batch are scored in ONE batched pass
    free   p_mlm(y_t = w | y_{\t}) = softmax_w(logit_t(y_{\t}))       one pass for all t

Objectives, per sequence y of length n (a batch loss is the mean over its sequences):

    ll     E_raw(y) + log Z                                      exact negative log-likelihood
    pll    - sum_t log p(y_t | y_{\t})                           true pseudo-likelihood
    mlm    - sum_t log p_mlm(y_t | y_{\t})                       degenerate PLL (MLM training)
    kl     sum_t KL(p_teacher(. | y_{\t}) || p(. | y_{\t}))      projection of a frozen MLM's free
                                                                 conditionals onto E_raw's true ones
    kl_pl  kl + pll

Metrics on held-out data (mean per sequence, nats): ``nll`` (= ll), ``neg_pll`` (= pll),
``neg_mlm`` (= mlm). Cost per sequence of length n: ll O(sum_m V^m) network rows for the shared
log Z, pll/kl O(n V) rows, mlm one row.

:func:`train_exact` trains one objective with Adam and early stopping on the objective's dev value
(``components.training.loop.fit``). :func:`run_cell` is one cell of Table 6.1 (data, training,
test metrics); :func:`run_projection` is the Figure 6.1 protocol (pretrain an MLM, then ``pll``
from scratch against ``kl`` / ``kl_pl`` started from the pretrained weights with a frozen copy
as teacher). Both are pure: they return dicts and report epochs only through ``on_epoch``.

Seeds: a cell or projection takes ``seed`` (a replicate's seed, which a flow derives from
``base.seed``) and ``generator_seed`` (the HMM's parameters: one distribution for every replicate),
and derives every stream with :func:`components.seeds.seed_for`: the data ``(seed, "data", "train" |
"dev" | "test")`` (the phoneme pool's order ``(seed, "train_order")``), the initial weights
``(seed, "model")`` and the batch order of epoch e ``(seed, "batches", "epoch", e)``. None names the
objective or the train size: the objectives of a replicate train from the same weights on the same
data, and a replicate's test set is the same for every train size (common random numbers).

Goyal, "Exposure bias, label bias and energy models" (thesis), ch. 6.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from components.config import check_range
from components.data.synthetic import (GENERATOR_KINDS, MAX_SEQUENCES, SequenceGenerator, SequenceSet, all_sequences,
                                       check_enumerable, load_phonemes, make_generator, sequence_block, true_nll)
from components.energies.mlm import sequence_energy
from components.models.mlm import BiLSTMMLM, BiLSTMMLMConfig
from components.seeds import seed_for
from components.training.loop import FitState, TrainConfig, fit

__all__ = ["EXACT_OBJECTIVES", "TEACHER_OBJECTIVES", "METRICS", "CELL_SOURCES", "enumerate_sequences",
           "raw_energy", "log_partition", "log_true_conditionals", "log_free_conditionals", "neg_pll", "neg_mlm",
           "kl_to_teacher", "objective_loss", "dataset_objective", "evaluate_exact", "per_sequence_exact",
           "ExactTrainConfig",
           "train_exact", "CellConfig", "CellData", "cell_data", "run_cell", "ProjectionConfig", "run_projection"]

Callback = Callable[[int, dict[str, Any]], None]

#: Objectives that need a frozen teacher MLM.
TEACHER_OBJECTIVES = ("kl", "kl_pl")
#: Held-out metrics (mean per sequence, nats).
METRICS = ("nll", "neg_pll", "neg_mlm")
#: Data sources of a cell: the synthetic generators and the CMU phonemes.
CELL_SOURCES = GENERATOR_KINDS + ("phonemes",)


# --------------------------------------------------------------------------------------------
# Energies, partition function, conditionals
# --------------------------------------------------------------------------------------------

def _check_model(model: Any, who: str) -> None:
    if not getattr(model, "single_site", False):
        raise ValueError(f"{who}: needs a single-site MaskedLM (logits at t independent of y_t), "
                         f"got {type(model).__name__} with single_site = {getattr(model, 'single_site', None)}")


def _device(model: Any) -> torch.device:
    p = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return p.device if p is not None else torch.device("cpu")


def _logits(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    """logits [R, N, V] of an unconditional MLM (every row belongs to instance 0)."""
    rows = torch.zeros(tokens.shape[0], dtype=torch.long, device=tokens.device)
    return model.conditionals(tokens, mask, model.encode(None), rows)


def enumerate_sequences(V: int, T: int, max_sequences: int = MAX_SEQUENCES) -> Tensor:
    """All V^T sequences in lexicographic order, long [V^T, T]; ``ValueError`` above ``max_sequences``."""
    return all_sequences(V, T, max_sequences)


def raw_energy(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    """E_raw [R] of tokens long [R, N] with valid positions mask bool [R, N] (left-aligned)."""
    _check_model(model, "raw_energy")
    return sequence_energy(_logits(model, tokens, mask), tokens, mask, "raw")


def _check_support(lengths: Sequence[int], who: str) -> tuple[int, ...]:
    out = tuple(lengths)
    if not out or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in out) or len(set(out)) != len(out):
        raise ValueError(f"{who}: lengths must be distinct integers >= 1, got {list(out)}")
    return out


def log_partition(model: Any, V: int, lengths: Sequence[int], chunk: int = 65536,
                  max_sequences: int = MAX_SEQUENCES) -> Tensor:
    """log Z = log sum over all sequences y of every length in ``lengths`` of exp(-E_raw(y)): a
    0-dim tensor, differentiable. Sequences are scored ``chunk`` at a time; with gradients on and
    more than one chunk each chunk is checkpointed (recomputed in backward) so memory stays at
    one chunk's activations. ``ValueError`` when ``sum_n V^n > max_sequences``."""
    _check_model(model, "log_partition")
    if V != model.vocab_size:
        raise ValueError(f"log_partition: V = {V} but the model has vocab_size {model.vocab_size}")
    if chunk < 1:
        raise ValueError(f"log_partition: chunk must be >= 1, got {chunk}")
    lengths = _check_support(lengths, "log_partition")
    check_enumerable(V, lengths, max_sequences, "log_partition")
    device = _device(model)
    blocks = [(n, s, min(V ** n, s + chunk)) for n in lengths for s in range(0, V ** n, chunk)]
    checkpoint = torch.is_grad_enabled() and len(blocks) > 1

    def block_lse(ys: Tensor) -> Tensor:
        return torch.logsumexp(-raw_energy(model, ys, torch.ones_like(ys, dtype=torch.bool)), 0)

    parts = []
    for n, start, stop in blocks:
        ys = sequence_block(V, n, start, stop, device)
        parts.append(torch.utils.checkpoint.checkpoint(block_lse, ys, use_reentrant=False) if checkpoint
                     else block_lse(ys))
    return torch.logsumexp(torch.stack(parts), 0)


def log_true_conditionals(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    r"""log p(y_t = w | y_{\t}) under E_raw: [B, N, V] (0 at padding positions).

    The M = mask.sum() valid positions each get V alternatives (y with y_t = w), scored together
    as M V rows of one ``conditionals`` call: O(M V N) tokens through the network."""
    _check_model(model, "log_true_conditionals")
    B, N = tokens.shape
    V = model.vocab_size
    b, t = mask.nonzero(as_tuple=True)                                     # [M]
    M = b.shape[0]
    alt = tokens[b][:, None, :].repeat(1, V, 1)                           # [M, V, N]
    alt[torch.arange(M, device=tokens.device), :, t] = torch.arange(V, device=tokens.device)
    alt_mask = mask[b][:, None, :].expand(M, V, N)
    energy = raw_energy(model, alt.reshape(M * V, N), alt_mask.reshape(M * V, N)).view(M, V)
    logc = torch.log_softmax(-energy, -1)
    return torch.zeros(B, N, V, dtype=logc.dtype, device=logc.device).index_put((b, t), logc)


def log_free_conditionals(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    r"""log p_mlm(y_t = w | y_{\t}) = log_softmax(logit_t): [B, N, V] (one pass; padding rows are junk)."""
    _check_model(model, "log_free_conditionals")
    return torch.log_softmax(_logits(model, tokens, mask), -1)


def _picked(logc: Tensor, tokens: Tensor, mask: Tensor) -> Tensor:
    """- sum over valid t of logc[b, t, y_t]: [B]."""
    got = logc.gather(2, tokens.masked_fill(~mask, 0)[..., None])[..., 0]
    return -torch.where(mask, got, torch.zeros_like(got)).sum(1)


def neg_pll(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    """- sum_t log p(y_t | y_{\\t}) under E_raw's true conditionals: [B]."""
    return _picked(log_true_conditionals(model, tokens, mask), tokens, mask)


def neg_mlm(model: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    """- sum_t log p_mlm(y_t | y_{\\t}) (free conditionals; the MLM objective): [B]."""
    _check_model(model, "neg_mlm")
    return sequence_energy(_logits(model, tokens, mask), tokens, mask, "norm")


def _kl_from(teacher: Any, logc: Tensor, tokens: Tensor, mask: Tensor) -> Tensor:
    _check_model(teacher, "teacher")
    if teacher.vocab_size != logc.shape[-1]:
        raise ValueError(f"teacher: vocab_size {teacher.vocab_size} but the model has {logc.shape[-1]}")
    with torch.no_grad():
        log_t = log_free_conditionals(teacher, tokens, mask)              # the teacher is frozen
    p_t = log_t.exp()
    # 0 log 0 = 0 where the teacher gives a token no mass (a disallowed id)
    terms = torch.where(p_t > 0, p_t * (log_t - logc), torch.zeros_like(logc))
    return torch.where(mask, terms.sum(-1), torch.zeros_like(terms[..., 0])).sum(1)


def kl_to_teacher(model: Any, teacher: Any, tokens: Tensor, mask: Tensor) -> Tensor:
    """sum_t KL(p_teacher_mlm(. | y_{\\t}) || p(. | y_{\\t})): [B], the teacher's free conditionals
    against the model's true conditionals; no gradient reaches the teacher."""
    return _kl_from(teacher, log_true_conditionals(model, tokens, mask), tokens, mask)


# --------------------------------------------------------------------------------------------
# Objectives and metrics
# --------------------------------------------------------------------------------------------

def _ll(model, tokens, mask, support, teacher, chunk, max_sequences):
    return raw_energy(model, tokens, mask) + log_partition(model, model.vocab_size, support, chunk, max_sequences)


def _pll(model, tokens, mask, support, teacher, chunk, max_sequences):
    return neg_pll(model, tokens, mask)


def _mlm(model, tokens, mask, support, teacher, chunk, max_sequences):
    return neg_mlm(model, tokens, mask)


def _kl(model, tokens, mask, support, teacher, chunk, max_sequences):
    return kl_to_teacher(model, teacher, tokens, mask)


def _kl_pl(model, tokens, mask, support, teacher, chunk, max_sequences):
    logc = log_true_conditionals(model, tokens, mask)                    # one pass serves both terms
    return _kl_from(teacher, logc, tokens, mask) + _picked(logc, tokens, mask)


#: name -> per-sequence loss ``f(model, tokens, mask, support, teacher, chunk, max_sequences) -> [B]``.
EXACT_OBJECTIVES: dict[str, Callable[..., Tensor]] = {"ll": _ll, "pll": _pll, "mlm": _mlm, "kl": _kl,
                                                       "kl_pl": _kl_pl}


def _check_objective(name: str, teacher: Any) -> None:
    if name not in EXACT_OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(EXACT_OBJECTIVES)}, got {name!r}")
    if (name in TEACHER_OBJECTIVES) != (teacher is not None):
        raise ValueError(f"objective {name!r} " + ("needs a teacher MLM" if teacher is None else "takes no teacher"))


def objective_loss(name: str, model: Any, tokens: Tensor, mask: Tensor, support: Sequence[int], *,
                   teacher: Any = None, chunk: int = 65536, max_sequences: int = MAX_SEQUENCES) -> Tensor:
    """Per-sequence loss [B] of objective ``name`` (module doc) for tokens long [B, N], mask bool [B, N];
    ``support``: the lengths log Z sums over (used by ``ll``)."""
    _check_objective(name, teacher)
    return EXACT_OBJECTIVES[name](model, tokens, mask, tuple(support), teacher, chunk, max_sequences)


def _batches(data: SequenceSet, V: int, rows: int, per_position: bool):
    """Slices of data whose scoring pass has about ``rows`` rows (N V a sequence when per position)."""
    per = data.tokens.shape[1] * V if per_position else 1
    step = max(1, rows // per)
    for s in range(0, len(data), step):
        yield data.tokens[s:s + step], data.mask[s:s + step]


def _mean(model: Any, data: SequenceSet, fn: Callable[[Tensor, Tensor], Tensor], rows: int,
          per_position: bool) -> float:
    device = _device(model)
    total = 0.0
    for tok, m in _batches(data, model.vocab_size, rows, per_position):
        total += float(fn(tok.to(device), m.to(device)).double().sum())
    return total / len(data)


def _check_data(data: SequenceSet, model: Any, who: str) -> None:
    if not isinstance(data, SequenceSet):
        raise ValueError(f"{who}: expected a SequenceSet, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError(f"{who}: the data set is empty")
    if int(data.tokens[data.mask].max()) >= model.vocab_size or int(data.tokens[data.mask].min()) < 0:
        raise ValueError(f"{who}: tokens hold ids outside 0..{model.vocab_size - 1}")


@torch.no_grad()
def dataset_objective(name: str, model: Any, data: SequenceSet, *, teacher: Any = None, rows: int = 65536,
                      max_sequences: int = MAX_SEQUENCES) -> float:
    """Mean per-sequence value of objective ``name`` over ``data`` (no gradients; log Z once)."""
    _check_objective(name, teacher)
    _check_data(data, model, f"dataset_objective({name!r})")
    if name == "ll":
        log_z = float(log_partition(model, model.vocab_size, data.support, rows, max_sequences))
        return _mean(model, data, lambda t, m: raw_energy(model, t, m), rows, False) + log_z
    fn = EXACT_OBJECTIVES[name]
    return _mean(model, data, lambda t, m: fn(model, t, m, data.support, teacher, rows, max_sequences), rows,
                 name != "mlm")


@torch.no_grad()
def evaluate_exact(model: Any, data: SequenceSet, metrics: Sequence[str] = METRICS, *, rows: int = 65536,
                   max_sequences: int = MAX_SEQUENCES) -> dict[str, float]:
    """Held-out metrics (mean per sequence, nats): ``nll`` exact (log Z over ``data.support``),
    ``neg_pll`` (true conditionals), ``neg_mlm`` (free conditionals)."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"evaluate_exact: unknown metrics {unknown}; known: {METRICS}")
    was_training = getattr(model, "training", False)
    model.eval()
    names = {"nll": "ll", "neg_pll": "pll", "neg_mlm": "mlm"}
    out = {m: dataset_objective(names[m], model, data, rows=rows, max_sequences=max_sequences) for m in metrics}
    model.train(was_training)
    return out


@torch.no_grad()
def per_sequence_exact(model: Any, data: SequenceSet, generator: SequenceGenerator | None = None, *,
                       rows: int = 65536, max_sequences: int = MAX_SEQUENCES) -> Tensor:
    """The held-out metrics of :func:`evaluate_exact` per sequence: double [n, 3] (``nll``,
    ``neg_pll``, ``neg_mlm`` in the order of :data:`METRICS`), with a fourth column, the true
    distribution's ``-log p(y)``, when ``generator`` is given. Their column means are
    :func:`evaluate_exact`'s numbers (the paired bootstrap's per-sequence inputs)."""
    _check_data(data, model, "per_sequence_exact")
    was_training = getattr(model, "training", False)
    model.eval()
    device = _device(model)
    log_z = float(log_partition(model, model.vocab_size, data.support, rows, max_sequences))
    cols = {"nll": [], "neg_pll": [], "neg_mlm": []}
    fns = {"nll": (lambda t, m: raw_energy(model, t, m) + log_z, False),
           "neg_pll": (lambda t, m: neg_pll(model, t, m), True), "neg_mlm": (lambda t, m: neg_mlm(model, t, m), False)}
    for name, (fn, per_position) in fns.items():
        for tok, m in _batches(data, model.vocab_size, rows, per_position):
            cols[name].append(fn(tok.to(device), m.to(device)).double().cpu())
    out = [torch.cat(cols[k]) for k in METRICS]
    if generator is not None:
        out.append(-generator.log_prob(data.tokens).double().cpu())
    model.train(was_training)
    return torch.stack(out, dim=1)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ExactTrainConfig:
    lr: float = 2e-2
    epochs: int = 30
    batch_size: int = 64           # sequences an update
    # ll: an update's cost is the batch-independent enumeration of log Z, so ll takes bigger
    # batches (fewer updates an epoch); None: batch_size
    ll_batch_size: int | None = 128
    patience: int = 3              # epochs without a dev gain above min_delta before stopping
    min_delta: float = 1e-3        # nats a sequence
    grad_clip: float = 5.0         # 0: off
    rows: int = 65536              # network rows a scoring pass (log Z chunk, evaluation batches)
    max_sequences: int = MAX_SEQUENCES   # cap on the sequences log Z may enumerate

    def __post_init__(self):
        check_range(self, positive=("lr", "epochs", "batch_size", "ll_batch_size", "patience", "rows",
                                    "max_sequences"),
                    nonnegative=("min_delta", "grad_clip"))


def train_exact(model: Any, objective: str, train: SequenceSet, dev: SequenceSet,
                cfg: ExactTrainConfig = ExactTrainConfig(), teacher: Any = None,
                on_epoch: Callback | None = None, *, seed: int = 0) -> tuple[Any, list[dict[str, Any]]]:
    """Train ``model`` in place on ``objective`` with Adam (batches of ``cfg.batch_size`` sequences,
    ``cfg.ll_batch_size`` for ``ll``); stop after ``patience`` epochs without a gain in the
    objective's dev value and restore the best epoch's weights.

    Returns ``(model, history)``: one record an epoch (``epoch``, ``train_loss``, ``lr``, ``dev_loss``
    (the objective's dev value), ``dev_score`` (= -dev_loss), ``best_epoch`` (so far)).
    ``on_epoch(epoch, record)`` is called after each, its record with the epoch's ``train_seconds``.
    Deterministic given ``seed`` (epoch e's batch order: ``seed_for(seed, "epoch", e)``) and the
    model's initial weights (on CPU)."""
    _check_objective(objective, teacher)
    _check_model(model, "train_exact")
    _check_data(train, model, "train_exact: train")
    _check_data(dev, model, "train_exact: dev")
    if train.support != dev.support:
        raise ValueError(f"train_exact: train support {train.support} differs from dev support {dev.support}")
    if teacher is not None and hasattr(teacher, "eval"):
        teacher.eval()                                                  # a frozen teacher: no dropout
    device = _device(model)
    fn = EXACT_OBJECTIVES[objective]
    n = len(train)
    bs = cfg.ll_batch_size if objective == "ll" and cfg.ll_batch_size is not None else cfg.batch_size

    def batches(epoch: int):
        g = torch.Generator().manual_seed(seed_for(seed, "epoch", epoch))   # resumable: depends on epoch only
        order = torch.randperm(n, generator=g)
        for s in range(0, n, bs):
            idx = order[s:s + bs]
            yield train.tokens[idx].to(device), train.mask[idx].to(device)

    def loss_fn(m: Any, batch: tuple[Tensor, Tensor]) -> Tensor:
        tok, msk = batch
        return fn(m, tok, msk, train.support, teacher, cfg.rows, cfg.max_sequences).mean()

    def evaluate(m: Any) -> dict[str, float]:
        loss = dataset_objective(objective, m, dev, teacher=teacher, rows=cfg.rows, max_sequences=cfg.max_sequences)
        return {"score": -loss, "loss": loss}

    def hook(state: FitState, record: dict[str, Any]) -> None:
        # the history's record and the one reported (fit's copy, with the epoch's train_seconds) alike
        state.history[-1]["best_epoch"] = record["best_epoch"] = state.best_epoch
        if on_epoch is not None:
            on_epoch(int(record["epoch"]), record)

    tc = TrainConfig(lr=cfg.lr, epochs=cfg.epochs, patience=cfg.patience, batch_size=bs,
                     grad_clip=cfg.grad_clip, min_delta=cfg.min_delta)
    state = fit(model, loss_fn, batches, math.ceil(n / bs), evaluate, tc, on_epoch=hook)
    return model, state.history


# --------------------------------------------------------------------------------------------
# Table 6.1 cells and the Figure 6.1 protocol
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellConfig:
    model: BiLSTMMLMConfig = BiLSTMMLMConfig(embedding_dim=16, hidden=32)
    train: ExactTrainConfig = ExactTrainConfig()
    vocab: int = 5                  # synthetic: V and T (the thesis: 5 and 5)
    length: int = 5
    dev_size: int = 1000            # synthetic dev (early stopping) and test sets
    test_size: int = 5000
    phoneme_dir: str = "data/prepared/cmudict"
    phoneme_max_len: int = 4        # 39 + ... + 39^4 = 2.37M sequences in log Z (length 6: 3.6e9)

    def __post_init__(self):
        check_range(self, positive=("vocab", "length", "dev_size", "test_size", "phoneme_max_len"))


@dataclass(frozen=True)
class CellData:
    """A cell's data: ``train`` (the pool, ``n_train`` sequences), ``dev``, ``test``; ``vocab_size``;
    ``generator`` (synthetic) or None (phonemes)."""
    train: SequenceSet
    dev: SequenceSet
    test: SequenceSet
    vocab_size: int
    generator: SequenceGenerator | None = field(default=None, compare=False)


def cell_data(source: str, n_train: int, seed: int, cfg: CellConfig = CellConfig(), *,
              generator_seed: int = 0) -> CellData:
    """Data of one cell. Synthetic (``source`` a generator kind, its parameters drawn with
    ``generator_seed``): test, dev and train sampled from three streams derived from ``seed`` (so a
    seed's test set is the same for every train size). ``"phonemes"``: ``n_train`` sequences of the
    train file (shuffled by a stream of ``seed``), the dev and test files, lengths
    1..``cfg.phoneme_max_len``."""
    if source not in CELL_SOURCES:
        raise ValueError(f"cell_data: source must be one of {CELL_SOURCES}, got {source!r}")
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
        raise ValueError(f"cell_data: n_train must be an integer >= 1, got {n_train!r}")
    if source == "phonemes":
        tr = load_phonemes(cfg.phoneme_dir, "train", cfg.phoneme_max_len)
        dev = load_phonemes(cfg.phoneme_dir, "dev", cfg.phoneme_max_len, tr.vocab)
        test = load_phonemes(cfg.phoneme_dir, "test", cfg.phoneme_max_len, tr.vocab)
        if n_train > len(tr.data):
            raise ValueError(f"cell_data: n_train = {n_train} but {cfg.phoneme_dir}/train.parquet has "
                             f"{len(tr.data)} sequences of length <= {cfg.phoneme_max_len}")
        order = torch.randperm(len(tr.data), generator=torch.Generator().manual_seed(seed_for(seed, "train_order")))
        return CellData(tr.data.subset(order[:n_train]), dev.data, test.data, len(tr.vocab))
    gen = make_generator(source, cfg.vocab, cfg.length, generator_seed)

    def draw(n: int, stream: str) -> SequenceSet:
        return SequenceSet.full(gen.sample(n, torch.Generator().manual_seed(seed_for(seed, "data", stream))))

    return CellData(draw(n_train, "train"), draw(cfg.dev_size, "dev"), draw(cfg.test_size, "test"), cfg.vocab, gen)


def _train_and_test(data: CellData, train: SequenceSet, objective: str, seed: int, cfg: CellConfig,
                    init: Any = None, teacher: Any = None,
                    on_epoch: Callback | None = None) -> tuple[Any, dict[str, Any]]:
    model = BiLSTMMLM(data.vocab_size, cfg.model, seed=seed_for(seed, "model"))
    if init is not None:
        model.load_state_dict(init.state_dict())
    tcfg = cfg.train
    t0 = time.perf_counter()
    model, history = train_exact(model, objective, train, data.dev, tcfg, teacher=teacher, on_epoch=on_epoch,
                                 seed=seed_for(seed, "batches"))
    seconds = time.perf_counter() - t0
    out: dict[str, Any] = evaluate_exact(model, data.test, rows=tcfg.rows, max_sequences=tcfg.max_sequences)
    if data.generator is not None:
        out["true_nll"] = true_nll(data.generator, data.test.tokens)
    # per test sequence (the paired bootstrap's inputs; a replicate's test set is shared by its cells)
    out["per_sequence"] = per_sequence_exact(model, data.test, data.generator, rows=tcfg.rows,
                                             max_sequences=tcfg.max_sequences).numpy()
    out.update(epochs=len(history), best_epoch=int(history[-1]["best_epoch"]),
               best_dev_loss=min(float(r["dev_loss"]) for r in history), train_seconds=seconds,
               train_size=len(train))
    return model, out


def run_cell(source: str, train_size: int, objective: str, seed: int, cfg: CellConfig = CellConfig(), *,
             generator_seed: int = 0, on_epoch: Callback | None = None) -> dict[str, Any]:
    """One cell of Table 6.1: build the data (:func:`cell_data`), train a fresh ``BiLSTMMLM``
    (initialised from a stream of ``seed``; module doc) on ``objective`` (not ``kl``/``kl_pl``: see
    :func:`run_projection`), evaluate on test. Returns ``{nll, neg_pll, neg_mlm, [true_nll], epochs, best_epoch,
    best_dev_loss, train_seconds, train_size, per_sequence}``; ``train_seconds`` includes the dev evaluations;
    ``per_sequence``: :func:`per_sequence_exact` of the test set (numpy [n, 3 or 4])."""
    if objective in TEACHER_OBJECTIVES:
        raise ValueError(f"run_cell: objective {objective!r} needs a pretrained teacher; use run_projection")
    _check_objective(objective, None)
    data = cell_data(source, train_size, seed, cfg, generator_seed=generator_seed)
    return _train_and_test(data, data.train, objective, seed, cfg, on_epoch=on_epoch)[1]


@dataclass(frozen=True)
class ProjectionConfig:
    cell: CellConfig = CellConfig()
    pretrain_size: int = 100_000                       # the thesis: 100k synthetic, 65k phonemes
    train_sizes: tuple[int, ...] = (100, 300, 1000, 3000)
    objectives: tuple[str, ...] = ("pll", "kl", "kl_pl")

    def __post_init__(self):
        check_range(self, positive=("pretrain_size", "train_sizes"), nonempty=("train_sizes", "objectives"))
        bad = [o for o in self.objectives if o not in ("pll",) + TEACHER_OBJECTIVES]
        if bad:
            raise ValueError(f"ProjectionConfig.objectives: {bad} not among ('pll', 'kl', 'kl_pl')")


def run_projection(source: str, seed: int, cfg: ProjectionConfig = ProjectionConfig(), *,
                   generator_seed: int = 0, on_epoch: Callback | None = None) -> dict[str, Any]:
    """Figure 6.1: pretrain an MLM (objective ``mlm``) on ``pretrain_size`` sequences; then, on the
    nested prefixes of ``train_sizes`` of a disjoint pool, train ``pll`` from scratch and ``kl`` /
    ``kl_pl`` from the pretrained weights with a frozen copy as teacher. All share dev and test.

    Returns ``{"pretrain": metrics of the pretrained MLM (its ``nll`` is DPLL), "true_nll"
    (synthetic), "runs": [{objective, train_size, nll, neg_pll, neg_mlm, epochs, ...}]}``.
    ``on_epoch(epoch, record)`` records carry ``objective`` and ``train_size``."""
    c = cfg.cell
    data = cell_data(source, cfg.pretrain_size + max(cfg.train_sizes), seed, c, generator_seed=generator_seed)

    def tagged(objective: str, size: int) -> Callback | None:
        if on_epoch is None:
            return None
        return lambda e, r: on_epoch(e, {**r, "objective": objective, "train_size": size})

    pretrain = data.train.subset(slice(0, cfg.pretrain_size))
    pool = data.train.subset(slice(cfg.pretrain_size, None))
    mlm, pre = _train_and_test(data, pretrain, "mlm", seed, c, on_epoch=tagged("mlm", cfg.pretrain_size))
    teacher = copy.deepcopy(mlm)
    for p in teacher.parameters():
        p.requires_grad_(False)
    out: dict[str, Any] = {"pretrain": pre, "runs": []}
    if data.generator is not None:
        out["true_nll"] = pre["true_nll"]
    for size in cfg.train_sizes:
        small = pool.subset(slice(0, size))
        for objective in cfg.objectives:
            warm = objective in TEACHER_OBJECTIVES
            _, res = _train_and_test(data, small, objective, seed, c, init=mlm if warm else None,
                                     teacher=teacher if warm else None, on_epoch=tagged(objective, size))
            out["runs"].append({"objective": objective, **res})
    return out
