"""The settings of the translation chain's stages (``translator`` -> ``distil`` -> ``cmlm`` -> ``mcmc``,
and ``normalisation``, which fine-tunes the translator), in one place because each stage reads the
one before it: the distil and normalisation stages load the translator's task (its vocabularies:
``load_section(TranslatorStageConfig, "translator", params).data``), the mcmc stage the cmlm stage's.
Each class's defaults are the default scale; ``params.yaml`` states what differs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.config import ResourcesConfig, check_range, field_error
from components.data.translation import TranslationConfig
from components.inference.mask_predict import MaskPredictConfig
from components.models.mlm import CMLMConfig
from components.models.translator import TranslatorConfig
from components.training.cmlm import CMLMTrainConfig
from components.training.translator import TranslatorTrainConfig
from flows.sweeps import SweepConfig

DISTILLED = "data/distilled/greek_english"      # where the distilled corpus goes (distil.out_dir), what cmlm.corpus reads


@dataclass(frozen=True)
class TranslatorStageConfig:
    """The default scale: a small-data translator that reaches usable BLEU in 10 epochs on 2 cores.
    Each choice follows Sennrich & Zhang (2019), sized to the budget: a 1,500-subword BPE vocabulary
    a side (they found a few thousand best for ~100k words; fewer pieces also mean fewer output
    rows to learn), a 128/192-unit model, tied target embeddings, label smoothing 0.1, batches of
    32. Regularisation is light (dropout 0.2, no word or output dropout) because 10 epochs are too
    few to overfit: with the study's dropout 0.3 / word 0.1 / output 0.3 the same model had dev
    BLEU 2.5 after 4 epochs against 4.0 (2026-11-27, 200 dev verses, greedy). ``scales/study.yaml``
    trains a 256-unit model with that full regularisation for up to 40 epochs."""
    data: TranslationConfig = TranslationConfig(src_vocab_size=1500, tgt_vocab_size=1500, max_source_len=80,
                                                max_target_len=100)
    model: TranslatorConfig = TranslatorConfig(embedding_dim=128, hidden=192, attention_dim=192, dropout=0.2,
                                               tie_embeddings=True)
    train: TranslatorTrainConfig = TranslatorTrainConfig()
    beam_size: int = 5
    length_penalties: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)   # the beam's, tried on dev (Wu et al. 2016)
    min_bleu: float = 5.0                 # dev BLEU (beam) a translator must reach to be used at all
    eval_batch_size: int = 64
    models_dir: str = "models/translator"
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=1, metric="best_dev_bleu", mode="max",
                                     resources=ResourcesConfig(cpu=2, gpu="auto"), max_failures=0)

    def __post_init__(self):
        check_range(self, positive=("beam_size", "eval_batch_size"), nonempty=("length_penalties",),
                    within={"min_bleu": "[0, 100]", "length_penalties": "[0, inf)"})


@dataclass(frozen=True)
class DistilConfig:
    """Mask-Predict distils with the teacher's beam: ``decoder: beam`` uses the beam size and length
    penalty the translator stage chose on dev (``<model_dir>/decoding.json``); ``greedy`` takes the
    teacher's greedy translations."""
    model_dir: str = "models/translator"
    decoder: Literal["beam", "greedy"] = "beam"
    out_dir: str = DISTILLED
    batch_size: int = 64

    def __post_init__(self):
        check_range(self, positive=("batch_size",))


@dataclass(frozen=True)
class CMLMStageConfig:
    # the default scale: the verse pairs of <= 60 subwords a side (5,750 of the 6,349 distilled pairs;
    # <= 40 kept 3,581). The mcmc stage reads this class too; the bench stage reads params' cmlm.data /
    # cmlm.model over the plain classes' defaults
    data: TranslationConfig = TranslationConfig(src_vocab_size=1000, tgt_vocab_size=1000, max_source_len=60,
                                                max_target_len=60)
    corpus: str = DISTILLED             # a parallel corpus folder: the distil stage's output by default
    # 128 units (CMLMConfig's default; a 64-unit model on the distilled corpus stayed 0.34 nats over the
    # unigram loss after 12 epochs) for up to 30 epochs. Probes of 2026-11-27 (one core, mask-predict
    # dev BLEU on all of Mark): pairs <= 40 subwords, 24 epochs: 2.09 (the stage); 40 epochs: 2.78
    # (kept epoch 25, the token loss flat after it), 40 epochs at batch 16: 1.48; pairs <= 60 subwords,
    # 30 epochs: 3.17 (kept epoch 28) at ~2x the cost of an epoch
    model: CMLMConfig = CMLMConfig(max_target_len=64)
    train: CMLMTrainConfig = CMLMTrainConfig(lr=0.003, epochs=30, patience=5, curve_bleu_pairs=100)
    min_gain: float = 0.4                  # nats: dev token loss must be this far below the unigram loss
    # dev BLEU (mask-predict, `decode`) a model must reach to be sampled: an untrained or unigram-level
    # model scores 0.1-0.4; default-scale models 2.1-3.2 (2026-11-27)
    min_bleu: float = 1.0
    decode: MaskPredictConfig = MaskPredictConfig()
    # the stage's BLEU decodes with ``decode`` at the dev-best of these length scales (MaskPredictConfig):
    # the teacher's beam translations are short (ratio 0.77 to the references on dev at its dev-best length
    # penalty), so the model's length head is too; on the default model of 2026-11-27 the scales 1.0 .. 1.4
    # gave dev BLEU 2.80 / 3.01 / 3.14 / 2.92 / 2.77 (test 2.43 / 2.46 / 2.61 / 2.68 / 2.53). Greedy
    # distillation (distil.decoder, targets 22.5 against the beam's 15.2 tokens) gave dev 2.32 / test 2.36
    length_scales: tuple[float, ...] = (1.0, 1.1, 1.2, 1.3, 1.4)
    decode_batch_size: int = 64
    max_decode_pairs: int = 0              # dev / test pairs decoded by mask-predict for the stage's BLEU (0: all)
    models_dir: str = "models/cmlm"
    # max_failures 0: no retry of a model that did not learn
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=1, metric="best_dev_loss", mode="min",
                                     resources=ResourcesConfig(cpu=2, gpu="auto"), max_failures=0)

    def __post_init__(self):
        check_range(self, positive=("decode_batch_size",), nonnegative=("min_gain", "max_decode_pairs"),
                    nonempty=("length_scales",), within={"min_bleu": "[0, 100]", "length_scales": "(0, inf)"})
        if self.decode.length_scale != 1.0:
            raise field_error(self, "decode", f"length_scale {self.decode.length_scale:g}: the stage picks it on dev "
                              "from length_scales; set cmlm.length_scales (e.g. [1.2]) instead")
        if self.data.max_source_len > self.model.max_source_len:
            raise field_error(self, "data", f"max_source_len {self.data.max_source_len} exceeds the model's "
                              f"max_source_len {self.model.max_source_len}")
        if self.data.max_target_len - 1 > self.model.max_target_len:
            raise field_error(self, "data", f"max_target_len {self.data.max_target_len} (with eos) exceeds the "
                              f"model's max_target_len {self.model.max_target_len} + 1")
