"""ECOpt's tokens-per-joule experiment: search Gemma-3 generation batch size (and more) with ecopt.

The paper optimised Gemma 3's generation batch size and found batch 831 (below
the VRAM maximum) at 2.67 tokens/J, 38x better than batch 1, with the search's
energy recovered after 4,802 generated tokens. This script runs the same
search on whatever is here:

* model: ``--preset 270m|1b|4b|12b`` builds the published Gemma-3 text-model
  shape from ``Gemma3TextConfig`` with random weights (no download); without a
  preset, a small Gemma-3 architecture (``--hidden``, ``--layers``,
  ``--vocab``); ``--model PATH`` loads a local checkpoint instead.
* device: ``--device auto`` (the GPU when there is one); ``--dtype auto`` is
  bfloat16 on a GPU, float32 on the CPU.
* optimiser study (``<out>/optimiser``): batch 1 first (the baseline), then
  ``--sampler`` (qlognehvi by default) for tokens/J (max) and p95 per-token
  latency (min) or throughput (max).
* grid study (``<out>/grid``): every batch size of ``--grid`` for comparison
  (skip with ``--no-grid``).
* memory: on a GPU the batch range reaches past the device's memory ceiling
  (``--max-batch auto``: twice the largest batch predicted to fit, as a power
  of 2) and real CUDA out-of-memory makes a trial infeasible; on the CPU an
  emulated ceiling (``--max-memory-gb``, predicted memory; see
  ``ecopt.workloads.generation``) stands in for it.
* measurement: prefill (J per prompt) and decode (tokens/J, the steady-state
  window after warm-up with the batch full) are measured apart
  (``ecopt.workloads.generation.measure_generation``); tokens/J, the objective,
  is end to end.

Warm start: ``--transfer-from DIR`` (an earlier run of this script, e.g. the 1b
preset's, or any study directory) lets the optimiser start from what that
search learned (``Study(transfer_from=...)``, read-only).

Summary (``<out>/summary.md``): best batch, its tokens/J (end to end and
decode) and J per prompt of prefill, ratio to batch 1, search energy and the
payback both ways (tokens to repay the search; tokens the search's energy
would generate at the best setting), evaluations used by the optimiser vs the
grid, and every trial.

Example:
    python experiments/gemma_batch.py --preset 1b --device cuda --trials 10 --out runs/gemma_batch
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

__all__ = ["payback_tokens", "tokens_for_energy", "evaluations_to_reach", "auto_max_batch",
           "transfer_dirs", "search_energy_j", "search_energy_to_j", "REACH_FRACTION", "QUICK",
           "main"]

#: The optimiser "reaches" the grid's best at this fraction of it (tokens/J is measured, so
#: the grid's best is itself one noisy reading): the energy-to-the-grid's-best rows use it
#: (``scripts/gpu_check.py``'s ``PASS_GRID_FRACTION`` is the same 0.95).
REACH_FRACTION = 0.95

#: What --quick sets (options given explicitly still win).
QUICK: dict[str, Any] = {"trials": 3, "n_init": 1, "grid": "1,8,4096", "hidden": 32, "vocab": 128,
                         "layers": 1, "max_new_tokens": 4, "prompt_len": 4, "min_window_s": 0.0,
                         "max_memory_gb": 0.01}


def payback_tokens(search_energy_j: float, baseline_j_per_token: float,
                   best_j_per_token: float) -> float:
    """Tokens the best configuration must generate to win back the search's energy.

    ``search_energy_j / (baseline_j_per_token - best_j_per_token)``: every token
    generated at the best setting instead of the baseline saves the difference.

    Returns:
        The payback in tokens; ``inf`` when the best is no better than the baseline.

    Raises:
        ValueError: for negative or non-finite inputs.

    Example:
        >>> payback_tokens(100.0, 0.5, 0.1)   # 100 J / 0.4 J per token
        250.0
    """
    for what, v in (("search_energy_j", search_energy_j),
                    ("baseline_j_per_token", baseline_j_per_token),
                    ("best_j_per_token", best_j_per_token)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{what} must be finite and >= 0, got {v!r}")
    saving = baseline_j_per_token - best_j_per_token
    if saving <= 0:
        return math.inf
    return search_energy_j / saving


def tokens_for_energy(energy_j: float, tokens_per_joule: float) -> float:
    """Tokens ``energy_j`` joules generate at ``tokens_per_joule``: the search's energy, spent at the best setting.

    Raises:
        ValueError: for negative or non-finite inputs.

    Example:
        >>> tokens_for_energy(100.0, 2.5)
        250.0
    """
    for what, v in (("energy_j", energy_j), ("tokens_per_joule", tokens_per_joule)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{what} must be finite and >= 0, got {v!r}")
    return energy_j * tokens_per_joule


def auto_max_batch(fit_batch: int) -> int:
    """The search's upper batch: the power of 2 at or above twice the largest batch predicted to fit.

    The prediction is an estimate, so the range extends past it and real
    out-of-memory decides where the ceiling is.
    """
    if fit_batch < 1:
        return 1
    return 1 << math.ceil(math.log2(2 * fit_batch))


def evaluations_to_reach(values: Sequence[float | None], target: float) -> int | None:
    """1-based number of evaluations until a value ``>= target`` appeared (``None``: never).

    ``None`` entries (failed or infeasible trials) count as evaluations.
    """
    for i, v in enumerate(values, start=1):
        if v is not None and v >= target:
            return i
    return None


def _field(r: Any, key: str) -> Any:
    return r.get(key) if isinstance(r, dict) else getattr(r, key, None)


def search_energy_j(records: Sequence[Any]) -> float | None:
    """Joules a search spent: every trial's (all phases) plus every metered proposal's.

    Args:
        records: Trial records (:class:`ecopt.TrialRecord` or their ``trials.jsonl`` dicts).

    Returns:
        The sum in joules, or ``None`` when no record carries any energy.

    Example:
        >>> search_energy_j([{"energy_j": 2.0, "proposal": {"search": {"energy_j": 0.5}}},
        ...                  {"energy_j": 1.0}])
        3.5
    """
    total, any_j = 0.0, False
    for r in records:
        prop = _field(r, "proposal")
        search = prop.get("search") if isinstance(prop, dict) else None
        for v in (_field(r, "energy_j"), search.get("energy_j") if isinstance(search, dict)
                  else None):
            if v is not None:
                total, any_j = total + float(v), True
    return total if any_j else None


def search_energy_to_j(records: Sequence[Any], target: float | None,
                       value: Callable[[Any], float | None]) -> float | None:
    """Joules spent (trials + proposals, in trial order) up to and including the first trial
    whose ``value`` reaches ``target``.

    Args:
        records: As in :func:`search_energy_j`, in any order (sorted by ``number`` here).
        target: The value to reach (e.g. :data:`REACH_FRACTION` x the grid's best tokens/J).
        value: A record's value (``None`` for a failed or infeasible trial).

    Returns:
        Joules, or ``None`` when no trial reaches ``target`` (or ``target`` is ``None``).
    """
    if target is None:
        return None
    done: list[Any] = []
    for r in sorted(records, key=lambda r: int(_field(r, "number") or 0)):
        done.append(r)
        v = value(r)
        if v is not None and v >= target:
            return search_energy_j(done) or 0.0
    return None


def _share(text: str) -> float | str:
    """``--proposal-share``: a number > 0, or ``none`` (full proposals always)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a number > 0 or 'none', got {text!r}")
    return v


def _parser() -> Any:
    p = C.base_parser(__doc__.split("\n\n")[0], "runs/gemma_batch")
    p.add_argument("--model", default=None,
                   help="local transformers checkpoint directory (loaded with "
                        "local_files_only=True). Default: a random-weight Gemma-3 architecture "
                        "built from Gemma3TextConfig (--preset, or --hidden/--layers/--vocab)")
    p.add_argument("--preset", default=None, choices=["270m", "1b", "4b", "12b"],
                   help="the published shape of a Gemma-3 text model, random weights")
    C.add_device_arg(p)
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="weights' dtype: auto is bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--trials", type=int, default=10,
                   help="optimiser budget, the batch-1 baseline included")
    p.add_argument("--sampler", default="qlognehvi", choices=["qlognehvi", "random", "grid"],
                   help="optimiser study's sampler (grid: only the sweep is run)")
    p.add_argument("--proposal-share", type=_share, default=None, metavar="SHARE",
                   help="qlognehvi: QLogNEHVISampler(proposal_share=SHARE), economy proposals "
                        "while a full one costs more than SHARE x a trial; 'none': full "
                        "proposals always (default: the sampler's own default)")
    p.add_argument("--n-init", type=int, default=4,
                   help="qlognehvi: Sobol trials (after the baseline) before the GP takes over")
    p.add_argument("--max-batch", default="auto",
                   help="largest batch size searched: an integer, or auto (on a GPU twice the "
                        "largest batch predicted to fit its memory, as a power of 2, so the "
                        "search reaches the real out-of-memory ceiling; 4096 on the CPU)")
    p.add_argument("--grid", default=None,
                   help="comma-separated batch sizes of the sweep (default: powers of 2 up to "
                        "--max-batch)")
    p.add_argument("--no-grid", action="store_true", help="skip the grid sweep")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens generated per sequence")
    p.add_argument("--prompt-len", type=int, default=16, help="prompt tokens per sequence")
    p.add_argument("--search-new-tokens", action="store_true",
                   help="also search max_new_tokens in [8, 4 x --max-new-tokens]")
    p.add_argument("--search-dtype", action="store_true",
                   help="also search dtype (float32, bfloat16; float16 too on GPU)")
    p.add_argument("--search-attn", action="store_true",
                   help="also search the attention implementation (eager, sdpa)")
    p.add_argument("--search-cache", action="store_true",
                   help="also search use_cache (KV cache on/off)")
    p.add_argument("--second", default="p95_latency", choices=["p95_latency", "throughput"],
                   help="second objective: p95 per-token latency (min) or tokens/s (max)")
    p.add_argument("--max-memory-gb", type=float, default=None,
                   help="emulated memory ceiling: batches whose predicted memory exceeds it are "
                        "infeasible (default on the CPU: 0.25 GB for the small built-in model, "
                        "twice the weights for a preset; none on a GPU, where real OOM decides)")
    p.add_argument("--hidden", type=int, default=64, help="built-in model: hidden size")
    p.add_argument("--layers", type=int, default=2, help="built-in model: decoder layers")
    p.add_argument("--vocab", type=int, default=1024, help="built-in model: vocabulary size")
    p.add_argument("--min-window-s", type=float, default=0.3,
                   help="repeat prefill + decode until the decode windows last this long")
    p.add_argument("--transfer-from", nargs="+", default=None, metavar="DIR",
                   help="earlier gemma_batch runs (their optimiser/ study) or study "
                        "directories whose trials warm this search: a 1b-preset run warms "
                        "the 4b one (Study(transfer_from=...); qlognehvi only)")
    C.add_quick_arg(p, "a 32-wide one-layer model, 3 optimiser trials, a 3-point grid")
    C.add_budget_arg(p)
    return p


def transfer_dirs(given: Sequence[str] | None) -> list[Path]:
    """The study directories of ``--transfer-from``: a run's ``optimiser/`` or a study itself.

    Raises:
        SystemExit: for a path that is neither.
    """
    out: list[Path] = []
    for d in given or ():
        p = Path(d)
        if (p / "optimiser" / "study.json").is_file():
            out.append(p / "optimiser")
        elif (p / "study.json").is_file():
            out.append(p)
        else:
            raise SystemExit(f"--transfer-from {d!r} is neither a gemma_batch run (no "
                             "optimiser/study.json in it) nor a study directory")
    return out


def _space(args: Any, ecopt: Any, device: str) -> Any:
    dims: dict[str, Any] = {"batch_size": ecopt.Int(1, args.max_batch, log=True)}
    if args.search_new_tokens:
        dims["max_new_tokens"] = ecopt.Int(8, 4 * args.max_new_tokens, log=True)
    if args.search_dtype:
        dims["dtype"] = ecopt.Categorical(
            ["float32", "bfloat16", "float16"] if device.startswith("cuda")
            else ["float32", "bfloat16"])
    if args.search_attn:
        dims["attn_implementation"] = ecopt.Categorical(["eager", "sdpa"])
    if args.search_cache:
        dims["use_cache"] = ecopt.Categorical([True, False])
    return ecopt.SearchSpace(dims)


def _objectives(args: Any, ecopt: Any) -> list[Any]:
    second = (ecopt.Objective("p95_latency_ms", "min") if args.second == "p95_latency"
              else ecopt.Objective("tokens_per_s", "max"))
    return [ecopt.Objective("tokens_per_joule", "max"), second]


def _is_baseline(r: Any) -> bool:
    return r.proposed_by == "user" and r.params.get("batch_size") == 1


def _run_baseline(study: Any, objective: Any, params: dict[str, Any]) -> None:
    """Evaluate the batch-1 baseline as a user trial (skipped on resume when present)."""
    if any(_is_baseline(r) for r in study.records):
        return
    trial = study.ask(params=params)
    try:
        study.tell(trial, objective(trial))
    except Exception as exc:  # noqa: BLE001 - the study records why
        study.tell(trial, exc)
    r = study.records[-1]
    C.say(f"baseline trial {r.number} batch_size=1 -> {r.state.value} "
          + "  ".join(f"{k}={C.fmt(v)}" for k, v in {**r.values, **r.metrics}.items()
                      if k in ("tokens_per_joule", "tokens_per_s", "p95_latency_ms")))


def _val(r: Any, name: str) -> float | None:
    if r.state.value != "complete":
        return None
    v = {**r.metrics, **r.values}.get(name)
    return None if v is None else float(v)


def _trial_rows(records: Sequence[Any]) -> list[list[Any]]:
    rows = []
    for r in sorted(records, key=lambda r: (r.params.get("batch_size", 0), r.number)):
        m = {**r.metrics, **r.values}
        extra = ", ".join(f"{k}={v}" for k, v in r.params.items() if k != "batch_size")
        if r.state.value != "complete":
            rows.append([r.number, r.proposed_by, r.params.get("batch_size"), extra or "-",
                         r.state.value, *["-"] * 7, r.energy_j])
            continue
        rows.append([r.number, r.proposed_by, r.params.get("batch_size"), extra or "-",
                     r.state.value, m.get("tokens_per_joule"), m.get("decode_tokens_per_joule"),
                     m.get("prefill_j_per_prompt"), m.get("tokens_per_s"),
                     m.get("latency_per_token_ms"), m.get("p95_latency_ms"),
                     m.get("peak_memory_gb"), r.energy_j])
    return rows


_HEAD = ["trial", "by", "batch", "other params", "state", "tokens/J", "decode tokens/J",
         "prefill J/prompt", "tokens/s", "ms/token", "p95 ms/token", "peak mem GB", "trial J"]


def _best(records: Sequence[Any]) -> Any | None:
    ok = [r for r in records if _val(r, "tokens_per_joule") is not None]
    return max(ok, key=lambda r: _val(r, "tokens_per_joule") or 0.0) if ok else None


def _model_setup(args: Any, device: str, dtype: str) -> tuple[Any, str, int]:
    """``(architecture, description, parameters)`` of the model the run uses (nothing built)."""
    from ecopt.workloads.generation import GemmaArch, arch_from_config, gemma3_preset

    if args.model:
        from transformers import AutoConfig

        arch = arch_from_config(AutoConfig.from_pretrained(args.model, local_files_only=True))
        return arch, f"local checkpoint {args.model}", arch.n_params
    if args.preset:
        arch = gemma3_preset(args.preset)
        desc = (f"random-weight Gemma-3 {args.preset.upper()} text architecture (published "
                f"shape: hidden {arch.hidden_size}, {arch.num_hidden_layers} layers, "
                f"{arch.num_attention_heads} heads / {arch.num_key_value_heads} KV heads of "
                f"{arch.resolved_head_dim}, MLP {arch.intermediate_size}, vocab "
                f"{arch.vocab_size:,}; {arch.n_params:,} parameters)")
        return arch, desc, arch.n_params
    arch = GemmaArch(vocab_size=args.vocab, hidden_size=args.hidden,
                     intermediate_size=4 * args.hidden, num_hidden_layers=args.layers,
                     num_attention_heads=max(1, args.hidden // 32), num_key_value_heads=1)
    desc = (f"random-weight small Gemma-3 architecture (hidden {arch.hidden_size}, "
            f"{arch.num_hidden_layers} layers, vocab {arch.vocab_size}, "
            f"{arch.num_attention_heads} heads / {arch.num_key_value_heads} KV head; "
            f"{arch.n_params:,} parameters)")
    return arch, desc, arch.n_params


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    C.apply_quick(args, parser, QUICK)
    for what in ("trials", "max_new_tokens", "prompt_len", "n_init"):
        if getattr(args, what) < 1:
            raise SystemExit(f"--{what.replace('_', '-')} >= 1 must hold, got {getattr(args, what)}")
    if args.model and args.preset:
        raise SystemExit("--model and --preset exclude each other (a checkpoint has its own shape)")
    sources = transfer_dirs(args.transfer_from)
    if sources and args.sampler != "qlognehvi":
        raise SystemExit(f"--transfer-from needs --sampler qlognehvi (a model to inform), got "
                         f"{args.sampler!r}")
    device = C.resolve_device_arg(args)  # a missing GPU stops the run here, before anything runs
    C.setup(args)
    # Library imports are process start-up, not search: done here so no trial is billed for them.
    import transformers.models.gemma3.modeling_gemma3  # noqa: F401
    from transformers import AutoModelForCausalLM  # noqa: F401

    import ecopt
    from ecopt.workloads.device import device_memory_gb, is_cuda
    from ecopt.workloads.generation import GenerationObjective, max_batch_for_memory

    cuda = is_cuda(device)
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if cuda else "float32")
    arch, model_desc, n_params = _model_setup(args, device, dtype)
    max_mem = args.max_memory_gb
    if max_mem is None and not cuda and args.model is None:
        from ecopt.workloads.generation import DTYPE_BYTES

        max_mem = 0.25 if args.preset is None else 2 * n_params * DTYPE_BYTES[dtype] / 1e9
    try:
        grid_given = [int(x) for x in args.grid.split(",")] if args.grid else None
    except ValueError:
        raise SystemExit(f"--grid must be comma-separated integers, got {args.grid!r}") from None
    fit: int | None = None
    if args.max_batch == "auto":
        if cuda:
            total = device_memory_gb(device)
            assert total is not None
            fit = max_batch_for_memory(arch, total, args.prompt_len, args.max_new_tokens, dtype,
                                       n_params)
            args.max_batch = auto_max_batch(fit)
        else:
            args.max_batch = 4096
        if grid_given:  # batches asked for explicitly stay in range; real OOM decides
            args.max_batch = max(args.max_batch, max(grid_given))
    try:
        args.max_batch = int(args.max_batch)
    except ValueError:
        raise SystemExit(f"--max-batch must be an integer or auto, got {args.max_batch!r}") from None
    if args.max_batch < 1:
        raise SystemExit(f"--max-batch >= 1 must hold, got {args.max_batch}")
    second = "p95_latency_ms" if args.second == "p95_latency" else "tokens_per_s"
    objective = GenerationObjective(
        arch=arch, model_path=args.model, device=device, dtype=dtype,
        max_new_tokens=args.max_new_tokens, prompt_len=args.prompt_len, max_memory_gb=max_mem,
        min_window_s=args.min_window_s, returns=("tokens_per_joule", second), seed=args.seed)
    out = Path(args.out)
    ceiling = (f"{max_mem:.3g} GB (emulated)" if max_mem else
               f"the device's ({device_memory_gb(device) or 0:.0f} GB; real OOM)")
    C.say(f"gemma_batch: {model_desc} on {device} ({dtype}); prompt {args.prompt_len} + "
          f"{args.max_new_tokens} new tokens; batch 1..{args.max_batch}; memory ceiling {ceiling}")

    meter = ecopt.meters.get_meter(args.meter)
    studies: dict[str, Any] = {}
    whole_j: float | None = None
    show = ("tokens_per_joule", "decode_tokens_per_joule", "tokens_per_s", "p95_latency_ms")
    try:
        if args.sampler != "grid":
            sampler: Any = args.sampler
            if args.sampler == "qlognehvi":
                share: dict[str, Any] = ({} if args.proposal_share is None
                         else {"proposal_share": None if args.proposal_share == "none"
                               else args.proposal_share})
                sampler = ecopt.samplers.QLogNEHVISampler(n_init=args.n_init, num_restarts=4,
                                                          raw_samples=128, **share)
            opt = ecopt.Study(_space(args, ecopt, device), _objectives(args, ecopt),
                              storage=C.study_dir(out / "optimiser", args.overwrite),
                              sampler=sampler, meter=meter,
                              seed=args.seed, name="gemma_batch-optimiser",
                              transfer_from=[str(d) for d in sources] or None)
            studies["optimiser"] = opt
            base: dict[str, Any] = {"batch_size": 1}
            if args.search_new_tokens:
                base["max_new_tokens"] = args.max_new_tokens
            if args.search_dtype:
                base["dtype"] = dtype
            if args.search_attn:
                base["attn_implementation"] = "sdpa"
            if args.search_cache:
                base["use_cache"] = True
            # The whole search (trials + the optimiser's own model fitting) in one window.
            h = meter.start()
            _run_baseline(opt, objective, base)
            left = args.trials - len(opt.records)
            if left > 0:
                C.run_trials(opt, objective, left, args.sampler, show)
            whole_j = meter.stop(h).energy_j
        if args.sampler == "grid" or not args.no_grid:
            grid_vals = grid_given or [2 ** i for i in range(int(math.log2(args.max_batch)) + 1)]
            if min(grid_vals) < 1 or max(grid_vals) > args.max_batch:
                raise SystemExit(f"--grid values must lie in [1, --max-batch={args.max_batch}], "
                                 f"got {grid_vals}")
            gspace = ecopt.SearchSpace({"batch_size": ecopt.Int(1, args.max_batch, log=True)})
            grid = ecopt.Study(gspace, _objectives(args, ecopt),
                               storage=C.study_dir(out / "grid", args.overwrite),
                               sampler=ecopt.samplers.GridSampler({"batch_size": grid_vals}),
                               meter=meter, seed=args.seed, name="gemma_batch-grid")
            studies["grid"] = grid
            h = meter.start()
            C.run_trials(grid, objective, len(grid_vals) - len(grid.records), "grid", show)
            grid_whole_j = meter.stop(h).energy_j
            if args.sampler == "grid":  # the sweep is the search
                whole_j = grid_whole_j
    finally:
        for s in studies.values():
            s.close()

    setup_facts = {"device": device, "dtype": dtype, "model": model_desc, "preset": args.preset,
                   "n_params": n_params, "max_batch": args.max_batch,
                   "batch_predicted_to_fit": fit, "device_memory_gb": device_memory_gb(device)}
    body, facts = _summarise(studies, args, device, max_mem, model_desc, whole_j)
    first = next(iter(studies.values()))
    C.write_summary(out, "gemma_batch: generation batch size for tokens/J",
                    C.command_line(argv, "gemma_batch.py"), C.provenance(first), body,
                    {**setup_facts, **facts})
    return 0


def _search_facts(recs: Sequence[Any], base: Any | None, search_j: float,
                  whole_j: float | None, what: str) -> tuple[dict[str, Any], list[list[Any]]]:
    """Best configuration, its figures against batch 1 and the payback both ways."""
    f: dict[str, Any] = {"evaluations": len(recs), "search_energy_j": search_j,
                         "whole_search_energy_j": whole_j,
                         "infeasible": sum(r.state.value == "infeasible" for r in recs),
                         "short_windows": sum(bool(r.metrics.get("decode_window_short"))
                                              for r in recs)}
    rows: list[list[Any]] = []
    best = _best(recs)
    if best is None:
        return f, rows
    bm = {**best.metrics, **best.values}
    f.update(best_batch=best.params["batch_size"], best_params=dict(best.params),
             best_tokens_per_joule=bm["tokens_per_joule"],
             best_decode_tokens_per_joule=bm.get("decode_tokens_per_joule"),
             best_prefill_j_per_prompt=bm.get("prefill_j_per_prompt"),
             best_decode_window_s=bm.get("decode_window_s"),
             best_tokens_per_s=bm.get("tokens_per_s"),
             best_latency_per_token_ms=bm.get("latency_per_token_ms"),
             best_p95_latency_ms=bm.get("p95_latency_ms"),
             best_peak_memory_gb=bm.get("peak_memory_gb"))
    rows += [[f"best batch ({what})", str(f["best_batch"])
              + ("" if len(best.params) == 1 else f" ({best.params})")],
             ["its tokens/J (end to end: prefill + decode)", f["best_tokens_per_joule"]],
             ["its decode tokens/J (steady-state window)", f["best_decode_tokens_per_joule"]],
             ["its prefill J per prompt", f["best_prefill_j_per_prompt"]],
             ["its decode window (s)", f["best_decode_window_s"]],
             ["its tokens/s", f["best_tokens_per_s"]],
             ["its mean / p95 latency per token (ms)",
              f"{C.fmt(f['best_latency_per_token_ms'])} / {C.fmt(f['best_p95_latency_ms'])}"],
             ["its peak memory (GB; GPU: max allocated, CPU: process RSS)",
              f["best_peak_memory_gb"]]]
    rows.append(["search energy (sum of the trials, J)", search_j])
    f["tokens_for_search_energy"] = tokens_for_energy(search_j, bm["tokens_per_joule"])
    if base is not None:
        b_tpj = _val(base, "tokens_per_joule")
        assert b_tpj is not None
        f.update(baseline_tokens_per_joule=b_tpj,
                 baseline_decode_tokens_per_joule=base.metrics.get("decode_tokens_per_joule"),
                 baseline_prefill_j_per_prompt=base.metrics.get("prefill_j_per_prompt"),
                 ratio_to_batch1=bm["tokens_per_joule"] / b_tpj,
                 payback_tokens=payback_tokens(search_j, 1 / b_tpj, 1 / bm["tokens_per_joule"]))
        rows += [["batch 1 tokens/J (end to end / decode)",
                  f"{C.fmt(b_tpj)} / {C.fmt(f['baseline_decode_tokens_per_joule'])}"],
                 ["ratio best / batch 1 (end to end)", f"{f['ratio_to_batch1']:.1f}x"],
                 ["payback: tokens generated at the best setting instead of batch 1 until the "
                  "per-token saving repays the search's energy", f["payback_tokens"]]]
    rows.append(["payback the other way: tokens the search's energy would generate at the best "
                 "setting", f["tokens_for_search_energy"]])
    if whole_j is not None:
        f["tokens_for_whole_search_energy"] = tokens_for_energy(whole_j, bm["tokens_per_joule"])
        rows.append(["whole search incl. the optimiser's own model fitting (J)", whole_j])
        if base is not None:
            b_tpj = f["baseline_tokens_per_joule"]
            f["payback_tokens_whole"] = payback_tokens(whole_j, 1 / b_tpj,
                                                       1 / bm["tokens_per_joule"])
            rows.append(["payback of that (tokens vs batch 1)", f["payback_tokens_whole"]])
        rows.append(["tokens that energy would generate at the best setting",
                     f["tokens_for_whole_search_energy"]])
    feasible = [r.params["batch_size"] for r in recs if r.state.value == "complete"]
    oom = [r.params["batch_size"] for r in recs if r.state.value == "infeasible"]
    f["largest_feasible_batch"] = max(feasible) if feasible else None
    f["smallest_infeasible_batch"] = min(oom) if oom else None
    return f, rows


def _summarise(studies: dict[str, Any], args: Any, device: str, max_mem: float | None,
               model_desc: str, whole_j: float | None) -> tuple[str, dict[str, Any]]:
    lines: list[str] = [f"Model: {model_desc}; device {device}; prompt {args.prompt_len} "
                        f"tokens, {args.max_new_tokens} new tokens per sequence (greedy, static "
                        f"batch); batch 1..{args.max_batch}; memory ceiling: "
                        + (f"{max_mem:g} GB, EMULATED from predicted memory (not a real OOM)"
                           if max_mem else "the hardware's (real OOM -> infeasible)") + ".", "",
                        "Prefill (J per prompt) and decode (tokens/J over the steady-state "
                        "window: after warm-up, the batch full) are measured in separate meter "
                        "windows; tokens/J is end to end (all generated tokens over prefill + "
                        "decode joules).", ""]
    facts: dict[str, Any] = {"max_memory_gb": max_mem}
    grid_best_tpj: float | None = None
    if "grid" in studies:
        g = studies["grid"]
        gb = _best(g.records)
        grid_best_tpj = _val(gb, "tokens_per_joule") if gb else None
        facts["grid"] = {"evaluations": len(g.records),
                         "best_batch": gb.params["batch_size"] if gb else None,
                         "best_tokens_per_joule": grid_best_tpj,
                         "infeasible": sum(r.state.value == "infeasible" for r in g.records),
                         "energy_j": sum(r.energy_j for r in g.records),
                         "study": str(g.path)}
    if "optimiser" in studies:
        o = studies["optimiser"]
        recs = o.records
        base = next((r for r in recs if _is_baseline(r) and _val(r, "tokens_per_joule")), None)
        f, rows = _search_facts(recs, base, sum(r.energy_j for r in recs), whole_j, "optimiser")
        f.update(sampler=args.sampler, study=str(o.path), front_size=len(o.best_trials()))
        src = o.spec.get("transfer") or []
        if src:
            f["transfer_from"] = [{"path": t.get("path"), "study_id": t.get("study_id"),
                                   "trials_used": t.get("mapped")} for t in src]
            f["proposed_by"] = {k: sum(r.proposed_by == k for r in recs)
                                for k in sorted({r.proposed_by for r in recs})}
            lines += ["Warm start: the optimiser learned from "
                      + ", ".join(f"{t.get('path')} ({t.get('mapped')} trials)" for t in src)
                      + " (read-only; none of their trials is counted here). Proposed by: "
                      + ", ".join(f"{k} {v}" for k, v in f["proposed_by"].items()) + ".", ""]
        # The optimiser's own cost (its metered proposals) against its trials'.
        trials_j = sum(r.energy_j for r in recs)
        f["proposals_energy_j"] = (search_energy_j(recs) or 0.0) - trials_j
        f["proposals_share_of_trials"] = f["proposals_energy_j"] / trials_j if trials_j else None
        if grid_best_tpj is not None:
            seq = [_val(r, "tokens_per_joule") for r in sorted(recs, key=lambda r: r.number)]
            for pct in (80, 90, 95, 100):
                key = "evals_to_grid_best" if pct == 100 else f"evals_to_{pct}pct_of_grid_best"
                f[key] = evaluations_to_reach(seq, pct / 100 * grid_best_tpj)
            f["best_fraction_of_grid_best"] = (f.get("best_tokens_per_joule", 0.0)
                                               / grid_best_tpj)
            f["within_5pct_of_grid_best"] = f["best_fraction_of_grid_best"] >= REACH_FRACTION
            # What the optimiser had spent (trials + its metered proposals) when it first
            # reached the grid's best, against what the grid spent.
            f["energy_to_grid_best_j"] = search_energy_to_j(
                recs, REACH_FRACTION * grid_best_tpj, lambda r: _val(r, "tokens_per_joule"))
        facts["optimiser"] = f
        rows += [["optimiser evaluations (baseline included)", len(recs)],
                 ["its metered proposals (J) / their share of its trials' energy",
                  f"{C.fmt(f['proposals_energy_j'])} / {C.fmt(f['proposals_share_of_trials'])}"],
                 ["infeasible (out of memory) trials", f["infeasible"]],
                 ["trials with a decode window shorter than 10 meter update periods",
                  f["short_windows"]]]
        if "grid" in facts:
            gf = facts["grid"]
            rows += [["grid evaluations", gf["evaluations"]],
                     ["grid best batch / tokens/J", f"{gf['best_batch']} / "
                                                    f"{C.fmt(gf['best_tokens_per_joule'])}"],
                     ["optimiser best / grid best", C.fmt(f.get("best_fraction_of_grid_best"))],
                     ["optimiser evaluations to reach 80% / 90% / 95% / 100% of the grid's "
                      "best (- = not reached)",
                      " / ".join(C.fmt(f.get(k)) for k in (
                          "evals_to_80pct_of_grid_best", "evals_to_90pct_of_grid_best",
                          "evals_to_95pct_of_grid_best", "evals_to_grid_best"))],
                     ["grid energy (J)", gf["energy_j"]],
                     [f"optimiser energy until it first reached {REACH_FRACTION:g} x the grid's "
                      "best (trials + its metered proposals, J; - = not reached)",
                      C.fmt(f.get("energy_to_grid_best_j"))],
                     ["that / the grid's energy", C.fmt(
                         f["energy_to_grid_best_j"] / gf["energy_j"]
                         if f.get("energy_to_grid_best_j") is not None and gf["energy_j"]
                         else None)]]
        lines += ["## Result", "", C.md_table(["", "value"], rows, "result"), ""]
        lines += [f"### Optimiser trials ({args.sampler}; study `{o.path}`)", "",
                  C.md_table(_HEAD, _trial_rows(recs), "optimiser_trials"), ""]
    elif "grid" in studies:  # --sampler grid: the sweep is the search
        recs = studies["grid"].records
        base = next((r for r in recs if r.params.get("batch_size") == 1
                     and _val(r, "tokens_per_joule")), None)
        f, rows = _search_facts(recs, base, sum(r.energy_j for r in recs), whole_j, "grid")
        f["sampler"] = "grid"
        rows += [["grid evaluations", len(recs)],
                 ["infeasible (out of memory) trials", f["infeasible"]]]
        facts["search"] = f
        lines += ["## Result", "", C.md_table(["", "value"], rows, "result"), ""]
    if "grid" in studies:
        g = studies["grid"]
        lines += [f"### Grid trials (study `{g.path}`)", "", C.md_table(_HEAD, _trial_rows(g.records), "grid_trials"),
                  ""]
    return "\n".join(lines), facts


if __name__ == "__main__":
    sys.exit(main())
