"""Issue 14, item 4: configuration is validated before Ray or any model starts.

A duplicate YAML key is an error (naming file, line and key) wherever ``params.yaml`` is read, and
every config's ``__post_init__`` range-checks its values, so ``batch_size: 0``, ``epochs: 0`` or
``device: gpu`` fail at load time with a ``ConfigError`` naming the dotted params key, not 20 s
into a Ray trial as a ``ZeroDivisionError`` or an empty history.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import pytest
import yaml

import components
import flows
from components.config import (BaseConfig, ConfigError, ResourcesConfig, from_dict, load_params, load_section,
                               resolve_scale, set_dotted)
from components.inference.registry import INFERENCE
from components.inference.mcmc.registry import SAMPLERS
from components.inference.study_config import ApproxStudyConfig
from components.training.registry import OBJECTIVES
from components.training.loop import TrainConfig
from components.training.scaling import SCALINGS
from flows.stages import bench, infnets, normalisation, search_aware, train
from flows.stages.scaling import ScalingStageConfig
from flows.translation_configs import CMLMStageConfig, DistilConfig, TranslatorStageConfig

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")


# -- duplicate keys ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, line, key", [
    ("base:\n  seed: 1\ntrain:\n  tasks: [pos]\nbase:\n  seed: 2\n", 5, "'base'"),
    ("train:\n  optim:\n    lr: 0.1\n    batch_size: 4\n    epochs: 2\n    batch_size: 8\n", 6, "'batch_size'"),
    ("approx:\n  methods:\n    gd: {lr: 1.0, lr: 2.0}\n", 3, "'lr'"),
    ("scaling:\n  runs:\n    - {a: 1}\n    - a: 1\n      a: 2\n", 5, "'a'"),
])
def test_duplicate_key_is_an_error_naming_file_line_and_key(tmp_path, text, line, key):
    p = tmp_path / "params.yaml"
    p.write_text(text)
    assert isinstance(yaml.safe_load(text), dict)           # plain YAML keeps the last value silently
    with pytest.raises(ConfigError) as e:
        load_params(p)
    msg = str(e.value)
    assert f"{p}:{line}:" in msg and "duplicate key" in msg and key in msg


def test_duplicate_key_message_names_the_section(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("train:\n  optim:\n    batch_size: 4\n    batch_size: 8\n")
    with pytest.raises(ConfigError, match=r"params\.yaml:4: duplicate key 'batch_size' in section 'train\.optim' "
                                          r"\(first at line 3\)"):
        load_params(p)


def test_without_duplicates_the_loader_is_safe_load(tmp_path):
    text = ("a: &x\n  k: 1\n  j: [1, 2]\nb:\n  <<: *x\n  k: 3\nc: {1: one, '1': other}\nd: null\n"
            "e: 2024-01-01\n")                              # merge keys may override; 1 and '1' differ
    p = tmp_path / "params.yaml"
    p.write_text(text)
    assert load_params(p) == yaml.safe_load(text)
    loaded = load_params(ROOT / "params.yaml")               # plus the scale files, as its 'scales'
    assert {k: v for k, v in loaded.items() if k != "scales"} == yaml.safe_load((ROOT / "params.yaml").read_text())
    assert loaded["scales"] == {f.stem: yaml.safe_load(f.read_text()) for f in (ROOT / "scales").glob("*.yaml")}
    with pytest.raises(ConfigError, match="not valid YAML"):
        (tmp_path / "tag.yaml").write_text("a: !!python/object:os.system x\n")
        load_params(tmp_path / "tag.yaml")


# -- range checks: the dotted key of params.yaml ---------------------------------------------------
LOADERS = {
    "base": BaseConfig, "train": train.SPEC.config, "infnets": infnets.SPEC.config, "approx": ApproxStudyConfig,
    "bench": bench.BenchConfig, "scaling": ScalingStageConfig, "search_aware": search_aware.SearchAwareConfig,
    "normalisation": normalisation.NormalisationConfig, "translator": TranslatorStageConfig, "cmlm": CMLMStageConfig,
    "distil": DistilConfig,
}

BAD = [
    # (dotted key, value, key named in the message, rule)                      # package of the config
    ("train.optim.batch_size", 0, None, "must be > 0, got 0"),                  # training (TrainConfig)
    ("train.optim.epochs", 0, None, "must be > 0, got 0"),
    ("train.optim.lr", -0.01, None, "must be > 0"),
    ("train.optim.patience", 0, None, "must be > 0"),
    ("train.optim.lr_factor", 1.0, None, "must be in (0, 1)"),
    ("train.optim.grad_clip", -1.0, None, "must be >= 0"),
    ("base.device", "gpu", None, "must be auto, cpu, cuda or cuda:N"),          # config.py
    ("base.device", "cuda:x", None, "must be auto, cpu, cuda or cuda:N"),
    ("base.device", "cuda:-1", None, "must be auto, cpu, cuda or cuda:N"),
    ("base.threads", -1, None, "must be >= 0"),
    ("approx.resources.cpu", 0, None, "must be > 0"),
    ("approx.resources.gpu", "all", None, "must be a number >= 0 or 'auto'"),
    ("approx.resources.gpu", -1, None, "must be >= 0"),
    ("translator.data.max_source_len", 0, None, "must be an int >= 1"),                # data
    ("translator.data.src_vocab_size", 3, None, "must be an int >= 4"),
    ("train.model.hidden", 0, None, "must be > 0"),                             # models
    ("train.model.dropout", 1.0, None, "must be in [0, 1)"),
    ("approx.lm.dim", 0, None, "must be > 0"),
    ("infnets.infnet.layers", 0, None, "must be > 0"),
    ("search_aware.model.label_dim", 0, None, "must be > 0"),
    ("scaling.ocr.model.kernel", 0, None, "must be > 0"),
    ("scaling.tagging.model.char_width", 0, None, "must be > 0"),
    ("scaling.snakes.model.unary.width", 0, None, "must be > 0"),
    ("translator.model.attention_dim", 0, None, "must be > 0"),
    ("translator.model.word_dropout", 1.0, None, "must be in [0, 1)"),
    ("translator.length_penalties", [-1.0], "translator.length_penalties[0]", "must be >= 0"),
    ("cmlm.min_bleu", 101.0, None, "must be in [0, 100]"),
    ("cmlm.length_scales", [], None, "must not be empty"),
    ("cmlm.length_scales", [1.0, 0.0], "cmlm.length_scales[1]", "must be > 0"),
    ("cmlm.decode.length_scale", 1.2, "cmlm.decode", "length_scale 1.2: the stage picks it on dev"),
    ("cmlm.decode.length_scale", 0.0, "cmlm.decode.length_scale", "must be > 0"),
    ("distil.decoder", "sample", None, "expected one of"),
    ("cmlm.train.decay", "cosine", None, "expected one of"),
    ("scaling.snakes.model.embedding_dim", 0, None, "must be > 0"),             # energies (GCRFConfig)
    ("scaling.snakes.model.solver.lam", 0.0, None, "must be > 0"),              # structures (GCRFSolverConfig)
    ("scaling.snakes.model.solver.max_iter", 0, None, "must be > 0"),
    ("approx.gd.momentum", 1.0, None, "must be in [0, 1)"),                     # inference
    ("approx.gd.lrs", [], None, "must not be empty"),
    ("approx.gd.restarts", 0, None, "must be > 0"),
    ("approx.gd.max_iterations", {"pos": 2}, "approx.gd.max_iterations.pos", "must be 0 (no cap) or >="),
    ("approx.speed_batch_sizes", [10, 0], "approx.speed_batch_sizes[1]", "must be > 0"),
    ("approx.max_test_sentences", {"greek_morph": -1}, "approx.max_test_sentences.greek_morph", "must be >= 0"),
    ("approx.shard_size", 0, None, "must be > 0"),
    ("approx.tuned.gd_warm_start.values", [], None, "must not be empty"),
    ("scaling.seeds", [-1], "scaling.seeds[0]", "must be >= 0"),                 # training (studies)
    ("scaling.eval_batch_size", 0, None, "must be > 0"),
    ("scaling.snakes.dev_fraction", 1.0, None, "must be in (0, 1)"),
    ("scaling.ocr.fixed_alphas", [0.0], "scaling.ocr.fixed_alphas[0]", "must be > 0"),
    ("scaling.ocr.procedure.joint.batch_size", 0, None, "must be > 0"),
    ("scaling.tagging.max_train_sentences", -1, None, "must be >= 0"),
    ("search_aware.eval_batch_size", 0, None, "must be > 0"),                   # stages
    ("search_aware.max_concurrent", 0, None, "must be > 0"),
    ("search_aware.beam_size", {"ner": 0}, "search_aware.beam_size.ner", "must be > 0"),
    ("normalisation.translation.min_bleu", 101.0, None, "must be in [0, 100]"),
    ("normalisation.tagging.lam", -1.0, None, "must be >= 0"),
    ("bench.threads", 0, None, "must be > 0"),
    ("bench.timing.min_rounds", 0, None, "must be > 0"),
    ("bench.kernels.labels", [17, 0], "bench.kernels.labels[1]", "must be > 0"),
    ("infnets.lam", -0.5, None, "must be >= 0"),
    ("infnets.max_train_sentences", {"greek_morph": -1}, "infnets.max_train_sentences.greek_morph", "must be >= 0"),
    ("approx.lm_max_words", -1, None, "must be >= 0"),
]


@pytest.mark.parametrize("key, value, named, rule", BAD, ids=[f"{k}={v!r}" for k, v, _, _ in BAD])
def test_out_of_range_value_names_the_dotted_key(key, value, named, rule):
    section = key.split(".")[0]
    params = set_dotted(PARAMS, key, value)
    with pytest.raises(ConfigError) as e:
        load_section(LOADERS[section], section, params)
    assert f"{named or key}: {rule}" in str(e.value)


def test_a_training_cap_is_one_number_or_one_per_task():
    for value, caps in ((800, {"pos": 800, "greek_morph": 800}), ({"greek_morph": 1600}, {"pos": 0, "greek_morph": 1600})):
        cfg = load_section(LOADERS["infnets"], "infnets", set_dotted(PARAMS, "infnets.max_train_sentences", value))
        assert {t: cfg.train_cap(t) for t in caps} == caps


@pytest.mark.parametrize("registry, name, data, where, named", [
    (INFERENCE, "gd", {"lr": 0.0}, "approx.methods.gd", "approx.methods.gd.lr"),
    (INFERENCE, "gd_adam", {"betas": [0.9, 1.0]}, "approx.methods.gd_adam", "approx.methods.gd_adam.betas[1]"),
    (INFERENCE, "tailored_infnet", {"momentum": -0.1}, "approx.tuned.tailored_infnet",
     "approx.tuned.tailored_infnet.momentum"),
    (SAMPLERS, "mh_uniform", {"n_labels": -1}, "mcmc.sampler", "mcmc.sampler.n_labels"),
    (SAMPLERS, "gibbs_chain", {"temperature": 0.0}, "mcmc.sampler", "mcmc.sampler.temperature"),
    (SCALINGS, "offline_reg", {"reg_lambda": -1.0}, "scaling.ocr.methods.offline_reg",
     "scaling.ocr.methods.offline_reg.reg_lambda"),
    (SCALINGS, "online", {"grid_lo": 2, "grid_hi": 1}, "scaling.ocr.methods.online",
     "scaling.ocr.methods.online.grid_lo"),
    (OBJECTIVES, "mean_field_ce", {"n_iters": 0}, "train_energy.objective", "train_energy.objective.n_iters"),
])
def test_registry_configs_name_the_dotted_key(registry, name, data, where, named):
    with pytest.raises(ConfigError) as e:
        registry.config(name, data, where=where)
    assert str(e.value).startswith(f"{named}: must be")


def test_direct_construction_names_the_class_and_field():
    with pytest.raises(ConfigError, match=r"^TrainConfig\.batch_size: must be > 0, got 0$") as e:
        TrainConfig(batch_size=0)
    assert e.value.key == "batch_size"
    with pytest.raises(ConfigError, match=r"^ResourcesConfig\.cpu: must be > 0, got 0$"):
        ResourcesConfig(cpu=0)
    with pytest.raises(ConfigError, match=r"^TrainConfig\.lr: must be > 0, got nan$"):
        TrainConfig(lr=float("nan"))
    with pytest.raises(ConfigError, match=r"^sec\.epochs: must be > 0, got 0$"):
        from_dict(TrainConfig, {"epochs": 0}, where="sec")


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_known_devices_pass(device):
    assert from_dict(BaseConfig, {"device": device}, where="base").device == device


def _config_classes() -> list[type]:
    found = {}
    for pkg in (components, flows):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.startswith("components.tracking"):
                continue                                 # no configs; imports mlflow
            mod = importlib.import_module(info.name)
            for obj in vars(mod).values():
                if (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__name__.endswith("Config")
                        and obj.__module__ == mod.__name__):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def test_every_config_default_passes_its_checks():
    classes = _config_classes()
    assert len(classes) >= 60
    for cls in classes:
        fields = [f for f in dataclasses.fields(cls) if f.init]
        if all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING for f in fields):
            cls()                                        # raises if a default breaks its own rule


@pytest.mark.parametrize("scale", ["default", "paper"])
def test_params_yaml_loads_at_both_scales(scale):
    from components.data.prepare import PrepareConfig
    from components.training.studies import design
    from flows.stages import approx, fetch, report, train_energy
    params = resolve_scale(set_dotted(PARAMS, "base.scale", scale))
    load_section(BaseConfig, "base", params)
    load_section(fetch.FetchConfig, "fetch", params)
    load_section(PrepareConfig, "prepare", params)
    load_section(report.ReportConfig, "report", params)
    for spec in (train.SPEC, train_energy.SPEC, infnets.SPEC):
        load_section(spec.config, spec.section, params)
    acfg = load_section(ApproxStudyConfig, "approx", params)
    approx._validate(acfg)
    for task in acfg.tasks:
        assert acfg.gd.for_task(task).checkpoints
    load_section(bench.BenchConfig, "bench", params)
    assert design(load_section(ScalingStageConfig, "scaling", params))
    search_aware.load_config(params)
    normalisation.load_config(params)

