"""Your pytorch-crf model through the approximate-inference benchmark.

A ``torchcrf.CRF`` with a small emission network (an embedding and a BiLSTM, random weights; yours
would be trained) becomes a ``ChainEnergy`` with ``PytorchCRFEnergy``. The script checks that it is
the same model: our Viterbi returns ``crf.decode``'s paths and our log Z is the CRF's normaliser
(from ``crf(emissions, tags)``, the log-likelihood). Then it runs the benchmark's inference methods
on it, as the ``approx`` stage does for its energies: exact Viterbi, momentum GD and Adam GD in the
relaxed space, each with its search error against Viterbi and its decoding time.

    pip install pytorch-crf    # the project's `bench` extra has it
    python examples/pytorch_crf_energy.py

Prints "viterbi == crf.decode: True", "log Z == crf normaliser: True" and one line per method.
"""
import time
from dataclasses import dataclass

import torch
from torchcrf import CRF

from components.inference.api import PytorchCRFEnergy, decode, log_partition

torch.manual_seed(0)
VOCAB, TAGS, DIM = 50, 9, 32


class Emitter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.lstm = torch.nn.LSTM(DIM, DIM, batch_first=True, bidirectional=True)
        self.out = torch.nn.Linear(2 * DIM, TAGS)

    def forward(self, words):
        return self.out(self.lstm(self.embed(words))[0])


@dataclass
class Batch:                      # whatever your data loader yields: the energy only reads it
    words: torch.Tensor           # [B, N] word ids, 0 = padding
    mask: torch.Tensor            # [B, N] bool


emitter, crf = Emitter().eval(), CRF(TAGS, batch_first=True).eval()
torch.nn.init.uniform_(crf.transitions, -1, 1)
lengths = torch.tensor([12, 9, 5, 1])
mask = torch.arange(12)[None] < lengths[:, None]
batch = Batch(torch.randint(1, VOCAB, (4, 12)) * mask, mask)
energy = PytorchCRFEnergy(crf, emissions=lambda b: emitter(b.words), mask=lambda b: b.mask)

with torch.no_grad():
    emissions = emitter(batch.words)
    paths = crf.decode(emissions, batch.mask)                       # pytorch-crf's own Viterbi
    exact = decode(energy, batch=batch)                              # ours, on the same model
    same = all(exact.labels[b, :len(p)].tolist() == p for b, p in enumerate(paths))
    print(f"viterbi == crf.decode: {same}")
    tags = exact.labels
    llh = crf(emissions, tags, batch.mask, reduction="none")         # score(tags) - log Z
    score = -energy.energy(batch, tags)
    print(f"log Z == crf normaliser: {torch.allclose(log_partition(energy.potentials(batch)), score - llh, atol=1e-4)}")

    for method, cfg in [("viterbi", None), ("gd", {"lr": 1.0, "iterations": 20}),
                        ("gd", {"lr": 1.0, "iterations": 100}), ("gd_adam", {"lr": 0.1, "iterations": 50})]:
        t0 = time.perf_counter()
        r = decode(energy, method, cfg, batch=batch, seed=0)
        ms = 1000 * (time.perf_counter() - t0)
        err = (r.energy - exact.energy).mean().item()
        agree = (r.labels == exact.labels)[batch.mask].float().mean().item()
        print(f"{method:8s} {str(cfg or ''):38s} search error {err:7.3f}  token agreement with Viterbi "
              f"{agree:.2f}  {ms:6.1f} ms")
