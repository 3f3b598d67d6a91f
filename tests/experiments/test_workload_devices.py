"""Every workload runs on the device it is given: plumbing on CPU, a device spy, CUDA OOM, precision."""

from __future__ import annotations

import sys

import pytest
import torch

import ecopt
from ecopt.errors import DeviceUnavailableError
from ecopt.workloads import classifier, cnn, device, generation, images, ncf, tabular, vision
from ecopt.workloads.classifier import ClassifierObjective
from ecopt.workloads.cnn import CNNObjective
from ecopt.workloads.device import Precision, resolve_device, to_device, trial_on_device
from ecopt.workloads.generation import GemmaArch, GenerationObjective
from ecopt.workloads.images import ImageFolderObjective
from ecopt.workloads.ncf import NCFObjective
from ecopt.workloads.tabular import TabularObjective
from ecopt.workloads.vision import VisionObjective

TINY_LM = GemmaArch(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                    num_attention_heads=1, num_key_value_heads=1)


def _workloads(dev: str, script) -> dict[str, tuple]:
    """name -> (objective, params) of every workload, tiny."""
    mv = script("metric_validity")
    return {
        "classifier": (ClassifierObjective(epochs=1, inference_passes=1, device=dev),
                       {"width": 8, "depth": 1}),
        "cnn": (CNNObjective(epochs=1, inference_passes=1, device=dev),
                {"channels": 2, "depth": 1}),
        "tabular": (TabularObjective(n_rows=120, device=dev), {"epochs": 1, "hidden": 4}),
        "ncf": (NCFObjective(n_users=20, n_movies=30, n_ratings=400, device=dev),
                {"epochs": 1, "emb_dim": 4}),
        "images": (ImageFolderObjective(n_classes=2, images_per_class=4, size=16, device=dev),
                   {"epochs": 1, "channels": 2, "depth": 1, "image_size": 16}),
        "vision": (VisionObjective(n_images=8, n_classes=2, width=32, height=32, device=dev),
                   {"epochs": 1, "image_size": 16, "batch_size": 4}),
        # One pass per window: a repeated decode copies the KV cache (deepcopy), which the
        # spy tensor subclass of the device test cannot go through.
        "generation": (GenerationObjective(arch=TINY_LM, device=dev, max_new_tokens=3,
                                           prompt_len=2, min_window_s=0.0,
                                           max_window_repeats=1,
                                           returns=("tokens_per_joule",)),
                       {"batch_size": 2}),
        "metric_validity": (mv.InferenceEnergyObjective(3, 8, 2, 0.0, device=dev),
                            {"channels": 2, "depth": 1, "stride": 1}),
    }


def _run(objective, params):
    trial = ecopt.Trial(0, params, ecopt.meters.get_meter("estimate"))
    out = objective(trial)
    return trial, out


@pytest.mark.parametrize("name", ["classifier", "cnn", "tabular", "ncf", "images", "vision",
                                  "generation", "metric_validity"])
def test_every_workload_runs_on_cpu_and_records_its_memory(name, script):
    objective, params = _workloads("cpu", script)[name]
    trial, out = _run(objective, params)
    assert out and all(v == v for v in out.values())  # finite numbers, no NaN
    assert trial.user_attrs["device"] == "cpu"
    assert trial.metrics["peak_host_rss_gb"] > 0.01  # this process: interpreter + torch
    assert "peak_device_memory_gb" not in trial.metrics  # CPU: no device memory to report


class _Spy(torch.Tensor):
    """A tensor that went through to_device; torch keeps the subclass on what is computed from it."""


def _spied(obj):
    if isinstance(obj, torch.Tensor):
        return obj.as_subclass(_Spy)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_spied(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _spied(v) for k, v in obj.items()}
    return obj


@pytest.mark.parametrize("name", ["classifier", "cnn", "tabular", "ncf", "images", "vision",
                                  "generation", "metric_validity"])
def test_every_workload_moves_parameters_and_batches_to_the_requested_device(name, script,
                                                                             monkeypatch):
    """Requested device ``cpu:0`` (the CPU under a name no code hard-codes): every placement must
    get exactly it, every module must run with placed parameters and placed inputs."""
    requested = "cpu:0"
    seen: dict[str, list] = {"to_device": [], "place_model": []}
    real_to, real_place, real_resolve = device.to_device, device.place_model, device.resolve_device

    def spy_to_device(obj, dev, pin=True):
        seen["to_device"].append(dev)
        return _spied(real_to(obj, dev, pin))

    def spy_place_model(model, dev):
        seen["place_model"].append(dev)
        model = real_place(model, dev)
        for p in model.parameters():
            p._placed = True
        return model

    def spy_resolve(dev):
        return dev if dev == requested else real_resolve(dev)

    mods = [device, classifier, cnn, tabular, ncf, images, vision, generation,
            sys.modules[script("metric_validity").__name__]]
    for mod in mods:
        for attr, fn in (("to_device", spy_to_device), ("place_model", spy_place_model),
                         ("resolve_device", spy_resolve)):
            if hasattr(mod, attr):
                monkeypatch.setattr(mod, attr, fn)
    bad: list[str] = []
    calls = {"n": 0}

    def check(module, args):
        own = list(module.parameters(recurse=False))
        if any(p.is_meta for p in own) or any(getattr(a, "is_meta", False) for a in args):
            return  # shape-only runs (FLOP counting) compute nothing anywhere
        if any(not getattr(p, "_placed", False) for p in own):
            bad.append(f"{type(module).__name__}: parameters not placed")
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if tensors:
            calls["n"] += 1
            if not any(isinstance(a, _Spy) for a in tensors):
                bad.append(f"{type(module).__name__}: no input came through to_device")

    handle = torch.nn.modules.module.register_module_forward_pre_hook(check)
    try:
        objective, params = _workloads(requested, script)[name]
        # metric_validity's objective imports the helpers inside its call.
        if name == "metric_validity":
            monkeypatch.setattr(device, "to_device", spy_to_device)
        trial, _ = _run(objective, params)
    finally:
        handle.remove()
    assert calls["n"] > 0 and not bad, bad[:5]
    assert seen["place_model"] and set(seen["place_model"]) == {requested}
    assert seen["to_device"] and set(seen["to_device"]) == {requested}
    assert trial.user_attrs["device"] == requested


def test_cuda_asked_for_without_one_fails_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceUnavailableError, match=r"'cuda:1' was asked for.*available: \['cpu'\]"):
        resolve_device("cuda:1")
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("gpu")
    study = ecopt.Study(ecopt.SearchSpace({"width": ecopt.Int(4, 8)}),
                        [ecopt.Objective("accuracy", "max"),
                         ecopt.Objective("samples_per_joule", "max")],
                        storage=tmp_path / "s", sampler="random", meter="estimate")
    study.optimize(ClassifierObjective(device="cuda"), n_trials=1, show_progress=False)
    rec = study.records[0]
    assert rec.state.value == "failed" and rec.error.type == "DeviceUnavailableError"
    assert set(rec.phases) <= {"trial"}  # nothing ran: only the whole-call window of the objective
    study.close()


def test_cuda_out_of_memory_becomes_infeasible_with_the_peak(monkeypatch, tmp_path):
    """torch's CUDA calls are faked (no GPU here); the OOM error is torch's own class."""
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: 79.5e9)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake H100")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d=None: type("P", (), {"total_memory": 80e9})())
    study = ecopt.Study(ecopt.SearchSpace({"batch_size": ecopt.Int(1, 8)}),
                        [ecopt.Objective("tokens_per_joule", "max")], storage=tmp_path / "s",
                        sampler="random", meter="estimate")
    trial = study.ask(params={"batch_size": 8})
    try:
        with trial_on_device(trial, "cuda:0"):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    except ecopt.Infeasible as exc:
        rec = study.tell(trial, exc)
    assert rec.state.value == "infeasible"
    assert "CUDA out of memory on cuda:0 (peak 79.5 GB allocated of 80 GB)" in rec.error.message
    assert rec.metrics["peak_device_memory_gb"] == 79.5 and rec.metrics["peak_host_rss_gb"] > 0
    assert rec.user_attrs["device_name"] == "Fake H100" and calls == ["reset", "empty"]
    # Other errors pass through untouched (and still record the memory peaks).
    t2 = study.ask(params={"batch_size": 2})
    with pytest.raises(KeyError):
        with trial_on_device(t2, "cuda:0"):
            raise KeyError("x")
    assert t2.metrics["peak_device_memory_gb"] == 79.5
    study.close()


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_precision_is_searchable_in_the_cnn_and_classifier(precision):
    for objective, params in ((ClassifierObjective(epochs=1, inference_passes=1, device="cpu"),
                               {"width": 8, "depth": 1}),
                              (CNNObjective(epochs=1, inference_passes=1, device="cpu"),
                               {"channels": 2, "depth": 1})):
        trial, out = _run(objective, {**params, "precision": precision})
        assert 0 <= out["accuracy"] <= 1 and out["samples_per_joule"] > 0
    p = Precision(precision, "cpu")
    with p.autocast():
        y = torch.nn.Linear(4, 2)(torch.randn(3, 4))
    assert y.dtype == getattr(torch, precision)
    assert p.scaler.is_enabled() is (precision == "float16")
    with pytest.raises(ValueError, match="precision must be one of"):
        _run(ClassifierObjective(device="cpu"), {"precision": "int8"})


def test_to_device_keeps_cpu_tensors_and_walks_containers():
    x = torch.ones(2)
    assert to_device(x, "cpu") is x
    out = to_device({"a": (x, [x]), "n": 3}, "cpu")
    assert out["a"][0] is x and out["a"][1][0] is x and out["n"] == 3


def test_loader_puts_batches_on_the_device_and_pins_only_for_cuda():
    from ecopt.data.loader import make_loader

    loader = make_loader(lambda: (torch.arange(10.0), torch.arange(10)), batch_size=4,
                         pin_memory=True, device="cpu")
    assert loader.pin_memory is False  # pinning needs a CUDA target
    assert [len(b[0]) for b in loader] == [4, 4, 2]
    assert make_loader(lambda: (torch.ones(2),), pin_memory=True, device="cuda:0").pin_memory
