r"""Inference networks: training, decoding, instance tailoring and warm starts (Tu & Gimpel 2019, Sec. 4).

An inference network ``A`` (``components.models.infnets``) maps x to logits ``z = A(x)`` [B, N, L];
its relaxed output is ``softmax(z)`` (rows on the simplex) and its labelling the per-position
argmax. With the energy ``E`` trained first and then FROZEN, ``A`` is trained on

    loss = mean_b [ E(x_b, softmax(A(x_b))) + lam * sum_{t < n_b} CE(y_bt, softmax(A(x_b))_t) ]

(Sec. 4; the paper sums over training pairs and over positions; we average over the batch so the
learning rate does not depend on the batch size; ``lam`` in {0.2, 0.5, 1, 2, 5}). ``local_only``
drops the energy term: the local baseline. ``anneal_lambda`` uses ``lam * exp(-0.01 * epoch)``
(Sec. 7, 2-layer BLSTM infnet+). For the seq2seq network the token loss is the CE of each
output conditioned on the previously predicted labels, which is what its forward computes.

Instance tailoring (Sec. 4.2.1). For each test sentence a private copy ``Psi_b`` of the trained
parameters takes ``n_steps`` gradient steps on ``E(x_b, softmax(A_{Psi_b}(x_b)))`` alone (the
paper's "N epochs" on one instance), energy frozen, network in eval mode (no dropout). All copies
run at once: the trainable parameters are stacked to ``[B, ...]`` and the network's forward is
``torch.func.vmap(functional_call(net, Psi_b, x_b))``; the energies of all instances are summed
and one ``autograd.grad`` gives every copy its own gradient (instance b's energy depends on
``Psi_b`` only, so the copies are independent). The optimiser is plain SGD with momentum
(default, as the paper uses for every optimisation) or Adam, applied to the stacked tensors:
both are element-wise, so each copy has its own momentum / moments. An optional gradient clip
is per copy. Frozen parameters (e.g. fixed GloVe embeddings) and buffers are shared, not copied;
fine-tuned word embeddings are copied only for the rows the batch uses (ids remapped), so
memory is ``B * (|Psi| - |V| D + |batch vocab| D)``.

torch.func coverage (torch 2.13): ``vmap`` has no batching rule for ``aten::lstm`` /
``aten::lstm_cell`` and packed sequences call ``.item()``, so LSTMs are vmapped through the
networks' ``unrolled=True`` path (an explicit masked loop over the same parameters,
``infnets.lstm_unrolled``); CNN, BLSTM and seq2seq networks (and their "+" variants with char CNN)
all tailor through vmap. ``method="loop"`` tailors one deep copy per instance with the ordinary
forward (the reference, and the fallback for networks without a vmap-able forward).

Warm start (Sec. 4.2.2): :func:`warm_start_logits` returns the logits (pre-softmax scores), the
initial point of gradient-descent inference in the unconstrained space.

Cost: a forward / backward of the network per training batch plus ``O(B N L^2)`` for the chain
energy; tailoring ``n_steps`` forward / backward passes of all copies at once.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from components.config import check_range
from components.energies.base import require
from components.energies.chain import ChainEnergy, ChainPotentials
from components.inference.base import InferenceResult, check

__all__ = ["InfNetTrainConfig", "TailorConfig", "lambda_at", "infnet_logits", "token_ce", "infnet_loss",
           "InfNetObjective", "InferenceNetwork", "TailoredInferenceNetwork", "tailor",
           "warm_start_logits"]

_WORD_EMBEDDING = "embed.embedding.weight"


@dataclass(frozen=True)
class InfNetTrainConfig:
    lam: float = 1.0                 # lambda, the weight of the token loss; paper grid {0.2, 0.5, 1, 2, 5}
    anneal_lambda: bool = False      # lambda_epoch = lam * exp(-0.01 * epoch)
    local_only: bool = False         # token CE only: the local baseline

    def __post_init__(self):
        check_range(self, nonnegative=("lam",))


@dataclass(frozen=True)
class TailorConfig:
    n_steps: int = 10                # per-instance steps (the paper's N epochs on one instance)
    lr: float = 0.01
    optimizer: Literal["sgd", "adam"] = "sgd"
    momentum: float = 0.9            # sgd only
    grad_clip: float = 0.0           # per-copy global norm; 0 = off
    method: Literal["vmap", "loop"] = "vmap"

    def __post_init__(self):
        check_range(self, nonnegative=("n_steps", "grad_clip"), positive=("lr",), within={"momentum": "[0, 1)"})
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"TailorConfig.optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if self.method not in ("vmap", "loop"):
            raise ValueError(f"TailorConfig.method must be 'vmap' or 'loop', got {self.method!r}")


def lambda_at(cfg: InfNetTrainConfig, epoch: int) -> float:
    """The token-loss weight in ``epoch`` (1-based): ``lam`` or ``lam * exp(-0.01 * epoch)``."""
    return cfg.lam * math.exp(-0.01 * epoch) if cfg.anneal_lambda else cfg.lam


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

def infnet_logits(net: nn.Module, batch: Any) -> torch.Tensor:
    """The network's logits [B, N, L] for a TaggingBatch."""
    return net(batch.words, batch.mask, batch.chars)


def token_ce(logits: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy summed over each sentence's positions, averaged over the batch (scalar).
    logits [B, N, L], tags [B, N] long, mask [B, N] bool."""
    return F.cross_entropy(logits[mask], tags[mask], reduction="sum") / logits.shape[0]


def _frozen_potentials(energy: Any, batch: Any) -> ChainPotentials:
    """The chain energy's potentials for ``batch``, computed in eval mode without gradient."""
    require(energy, ChainEnergy, "an inference network")
    energy.eval()
    with torch.no_grad():
        return energy.potentials(batch).detach()


def _relaxed_energy(logits: torch.Tensor, p: ChainPotentials) -> torch.Tensor:
    """E(x, softmax(logits)) [B], in the potentials' dtype."""
    return p.energy(torch.softmax(logits.to(p.unary.dtype), -1))


def infnet_loss(net: nn.Module, energy: Any, batch: Any, lam: float, *, local_only: bool = False) -> torch.Tensor:
    """``mean_b E(x_b, softmax(A(x_b))) + lam * token_ce`` (scalar); ``local_only``: token CE only.

    The energy (a ChainEnergy) is frozen: it is put in eval mode and its potentials are detached,
    so no gradient reaches its parameters.
    """
    logits = infnet_logits(net, batch)
    ce = token_ce(logits, batch.tags, batch.mask)
    if local_only:
        return ce
    p = _frozen_potentials(energy, batch)
    e = _relaxed_energy(logits, p).mean()
    return e + lam * ce.to(e.dtype) if lam else e


class InfNetObjective:
    """``loss_fn(net, batch)`` for ``components.training.loop.fit``; ``epoch`` (set by
    :func:`components.training.infnet.train_infnet` as each epoch starts) drives lambda annealing."""

    def __init__(self, energy: Any, cfg: InfNetTrainConfig):
        self.energy, self.cfg, self.epoch = energy, cfg, 1

    @property
    def lam(self) -> float:
        return lambda_at(self.cfg, self.epoch)

    def __call__(self, net: nn.Module, batch: Any) -> torch.Tensor:
        return infnet_loss(net, self.energy, batch, self.lam, local_only=self.cfg.local_only)

    def on(self, part: Callable[[nn.Module], nn.Module]) -> "_OnPart":
        """``loss_fn(model, batch)`` applying this objective to ``part(model)`` (e.g. the network
        inside a wrapper that also holds the frozen energy); its ``epoch`` is this objective's."""
        return _OnPart(self, part)


class _OnPart:
    def __init__(self, objective: InfNetObjective, part: Callable[[nn.Module], nn.Module]):
        self.objective, self.part = objective, part

    @property
    def epoch(self) -> int:
        return self.objective.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.objective.epoch = value

    def __call__(self, model: nn.Module, batch: Any) -> torch.Tensor:
        return self.objective(self.part(model), batch)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

def _result(batch: Any, logits: torch.Tensor, p: ChainPotentials, stats: dict[str, float]) -> InferenceResult:
    labels = torch.where(batch.mask, logits.argmax(-1), 0)
    relaxed = torch.softmax(logits, -1)
    e_relaxed = _relaxed_energy(logits, p)
    return InferenceResult(labels=labels, relaxed=relaxed, energy=p.energy(labels),
                           stats={"energy_relaxed": float(e_relaxed.mean()), **stats})


class _EvalMode:
    """Put a module in eval mode for a block and restore its mode afterwards."""

    def __init__(self, module: nn.Module):
        self.module, self.was_training = module, module.training

    def __enter__(self):
        self.module.eval()

    def __exit__(self, *exc):
        self.module.train(self.was_training)


@torch.no_grad()
def warm_start_logits(net: nn.Module, batch: Any) -> torch.Tensor:
    """The inference network's logits [B, N, L] (eval mode, detached): the warm start ``z`` of
    gradient-descent inference (Sec. 4.2.2)."""
    with _EvalMode(net):
        return infnet_logits(net, batch).detach()


class InferenceNetwork:
    """``Inference`` protocol: labels = per-position argmax (0 at padding), relaxed = softmax of
    the logits, energy = E of the labels [B]; ``stats["energy_relaxed"]`` is the mean relaxed energy."""

    needs = ChainEnergy

    def __init__(self, net: nn.Module):
        self.net = net

    @torch.no_grad()
    def __call__(self, energy: Any, batch: Any) -> InferenceResult:
        check(self, energy)
        p = _frozen_potentials(energy, batch)
        with _EvalMode(self.net):
            logits = infnet_logits(self.net, batch)
        return _result(batch, logits, p, {})


class TailoredInferenceNetwork:
    """``Inference`` protocol for instance-tailored inference networks: :func:`tailor` with ``cfg``."""

    needs = ChainEnergy

    def __init__(self, net: nn.Module, cfg: TailorConfig = TailorConfig()):
        self.net, self.cfg = net, cfg

    def __call__(self, energy: Any, batch: Any) -> InferenceResult:
        check(self, energy)
        c = self.cfg
        return tailor(self.net, energy, batch, c.n_steps, c.lr, optimizer=c.optimizer, momentum=c.momentum,
                      grad_clip=c.grad_clip, method=c.method)


# ---------------------------------------------------------------------------------------------
# Instance tailoring
# ---------------------------------------------------------------------------------------------

def _optimizer(params: list[torch.Tensor], optimizer: str, lr: float, momentum: float) -> torch.optim.Optimizer:
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise ValueError(f"tailor: optimizer must be 'sgd' or 'adam', got {optimizer!r}")


def _accepts_unrolled(net: nn.Module) -> bool:
    return "unrolled" in inspect.signature(net.forward).parameters


def _select(batch: Any, p: ChainPotentials, b: int) -> tuple[Any, ChainPotentials]:
    """Row ``b`` of a batch and of its potentials, trimmed to the sentence's length."""
    n = int(batch.mask[b].sum())
    sub = dataclasses.replace(batch, words=batch.words[b:b + 1, :n], chars=batch.chars[b:b + 1, :n],
                              tags=batch.tags[b:b + 1, :n], mask=batch.mask[b:b + 1, :n],
                              lengths=batch.lengths[b:b + 1], index=batch.index[b:b + 1],
                              feats=batch.feats[b:b + 1, :n])
    W = p.transition if p.transition.dim() == 2 else p.transition[b:b + 1, :max(n - 1, 0)]
    return sub, ChainPotentials(p.unary[b:b + 1, :n], W, p.mask[b:b + 1, :n])


def _tailor_vmap(net, energy, batch, p, n_steps, opt_fn, grad_clip, on_step) -> torch.Tensor:
    B = batch.words.shape[0]
    trainable = {k: v for k, v in net.named_parameters() if v.requires_grad}
    words = batch.words
    if _WORD_EMBEDDING in trainable:
        # copy only the rows this batch uses; id 0 (padding) stays row 0
        ids = torch.cat([words.new_zeros(1), words.flatten()])
        rows, inverse = torch.unique(ids, return_inverse=True)
        words = inverse[1:].view_as(batch.words)
        trainable[_WORD_EMBEDDING] = trainable[_WORD_EMBEDDING][rows]
    stacked = {k: v.detach().unsqueeze(0).expand(B, *v.shape).clone().requires_grad_()
               for k, v in trainable.items()}
    # torch 2.13: under vmap the embedding backward ignores padding_idx for every copy but the
    # first (the padding row gets gradient), so padding rows are masked by hand
    pad_rows = {f"{name}.weight": m.padding_idx for name, m in net.named_modules()
                if isinstance(m, nn.Embedding) and m.padding_idx is not None and f"{name}.weight" in stacked}
    kwargs = {"unrolled": True} if _accepts_unrolled(net) else {}

    def one(params, w, m, c):
        return functional_call(net, params, (w[None], m[None], c[None]), kwargs)[0]

    forward = vmap(one, randomness="error")
    tensors = list(stacked.values())
    opt = opt_fn(tensors)
    for step in range(n_steps):
        logits = forward(stacked, words, batch.mask, batch.chars)
        e = _relaxed_energy(logits, p)                                          # [B]
        grads = torch.autograd.grad(e.sum(), tensors, allow_unused=True)
        grads = dict(zip(stacked, (torch.zeros_like(t) if g is None else g for t, g in zip(tensors, grads))))
        for k, row in pad_rows.items():
            grads[k][:, row] = 0.0
        grads = list(grads.values())
        if grad_clip > 0:
            norm = torch.sqrt(sum(g.pow(2).flatten(1).sum(1) for g in grads))    # [B] per copy
            scale = (grad_clip / (norm + 1e-6)).clamp(max=1.0)
            grads = [g * scale.view(-1, *[1] * (g.dim() - 1)) for g in grads]
        for t, g in zip(tensors, grads):
            t.grad = g
        opt.step()
        if on_step is not None:
            on_step(step + 1, n_steps, e.detach())
    with torch.no_grad():
        return forward(stacked, words, batch.mask, batch.chars)


def _tailor_loop(net, energy, batch, p, n_steps, opt_fn, grad_clip, on_step) -> torch.Tensor:
    B, N = batch.words.shape
    out = None
    for b in range(B):
        sub, pb = _select(batch, p, b)
        copy_b = copy.deepcopy(net)
        params = [v for v in copy_b.parameters() if v.requires_grad]
        opt = opt_fn(params)
        for step in range(n_steps):
            opt.zero_grad(set_to_none=True)
            e = _relaxed_energy(infnet_logits(copy_b, sub), pb)
            e.sum().backward()
            if grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            opt.step()
            if on_step is not None and b == B - 1:
                on_step(step + 1, n_steps, e.detach())
        with torch.no_grad():
            z = infnet_logits(copy_b, sub)[0]
        if out is None:
            out = z.new_zeros(B, N, z.shape[-1])
        out[b, :z.shape[0]] = z
    return out


def tailor(net: nn.Module, energy: Any, batch: Any, n_steps: int, lr: float, *,
           optimizer: Literal["sgd", "adam"] = "sgd", momentum: float = 0.9, grad_clip: float = 0.0,
           method: Literal["vmap", "loop"] = "vmap",
           on_step: Callable[[int, int, torch.Tensor], None] | None = None) -> InferenceResult:
    """Instance-tailored inference network (Sec. 4.2.1): a private copy of ``net``'s trainable
    parameters per sentence, ``n_steps`` steps of ``optimizer`` on that sentence's relaxed energy,
    then decode as :class:`InferenceNetwork` with the tailored copies. ``net`` is not modified.

    ``method``: ``"vmap"`` (all copies at once with torch.func) or ``"loop"`` (one deep copy per
    sentence). ``n_steps == 0`` returns exactly the untailored network's output. ``on_step(step,
    n_steps, energies [B])`` reports the relaxed energies before each update (``loop``: of the last
    sentence). Works under ``torch.no_grad()`` (gradients are enabled inside).
    """
    if n_steps < 0:
        raise ValueError(f"tailor: n_steps must be >= 0, got {n_steps}")
    if method not in ("vmap", "loop"):
        raise ValueError(f"tailor: method must be 'vmap' or 'loop', got {method!r}")
    p = _frozen_potentials(energy, batch)
    if n_steps == 0:
        res = _result(batch, warm_start_logits(net, batch), p, {})
        res.stats.update(n_steps=0.0, energy_relaxed_start=res.stats["energy_relaxed"])
        return res
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"tailor: optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    if not any(v.requires_grad for v in net.parameters()):
        raise ValueError("tailor: the network has no trainable parameters to tailor")

    def opt_fn(params):
        return _optimizer(params, optimizer, lr, momentum)

    with _EvalMode(net), torch.enable_grad():
        with torch.no_grad():
            start = float(_relaxed_energy(infnet_logits(net, batch), p).mean())
        run = _tailor_vmap if method == "vmap" else _tailor_loop
        logits = run(net, energy, batch, p, n_steps, opt_fn, grad_clip, on_step)
    with torch.no_grad():
        return _result(batch, logits.detach(), p,
                       {"n_steps": float(n_steps), "energy_relaxed_start": start})


def make_infnet(cfg: Any, net: nn.Module) -> InferenceNetwork:
    """The ``INFERENCE`` builder of ``infnet`` (no settings)."""
    return InferenceNetwork(net)


def make_tailored(cfg: TailorConfig, net: nn.Module) -> TailoredInferenceNetwork:
    """The ``INFERENCE`` builder of ``tailored_infnet``."""
    return TailoredInferenceNetwork(net, cfg)
