"""ECOpt's tokens-per-joule experiment: search Gemma-3 generation batch size (and more) with ecopt.

The paper optimised Gemma 3's generation batch size and found batch 831 (below
the VRAM maximum) at 2.67 tokens/J, 38x better than batch 1, with the search's
energy recovered after 4,802 generated tokens. This script runs the same
search on whatever is here:

* model: a small Gemma-3 architecture from ``Gemma3TextConfig`` with random
  weights (no download) on CPU by default; ``--model PATH`` loads a local
  checkpoint (GPU when present).
* optimiser study (``<out>/optimiser``): batch 1 first (the baseline), then
  ``--sampler`` (qlognehvi by default) for tokens/J (max) and p95 per-token
  latency (min) or throughput (max).
* grid study (``<out>/grid``): every batch size of ``--grid`` for comparison
  (skip with ``--no-grid``).
* out-of-memory batches are infeasible trials: real CUDA OOM on a GPU; on CPU
  an emulated ceiling (``--max-memory-gb``, predicted memory; see
  ``ecopt.workloads.generation``).

Summary (``<out>/summary.md``): best batch, its tokens/J, ratio to batch 1,
search energy and payback in tokens, evaluations used by the optimiser vs the
grid, and every trial.

Example:
    python experiments/gemma_batch.py --trials 10 --out runs/gemma_batch
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C  # noqa: E402

__all__ = ["payback_tokens", "evaluations_to_reach", "main"]


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


def evaluations_to_reach(values: Sequence[float | None], target: float) -> int | None:
    """1-based number of evaluations until a value ``>= target`` appeared (``None``: never).

    ``None`` entries (failed or infeasible trials) count as evaluations.
    """
    for i, v in enumerate(values, start=1):
        if v is not None and v >= target:
            return i
    return None


def _parser() -> Any:
    p = C.base_parser(__doc__.split("\n\n")[0], "runs/gemma_batch")
    p.add_argument("--model", default=None,
                   help="local transformers checkpoint directory (loaded with "
                        "local_files_only=True; GPU when present). Default: a random-weight "
                        "Gemma-3 architecture built from Gemma3TextConfig")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    p.add_argument("--trials", type=int, default=10,
                   help="optimiser budget, the batch-1 baseline included")
    p.add_argument("--sampler", default="qlognehvi", choices=["qlognehvi", "random", "grid"],
                   help="optimiser study's sampler (grid: only the sweep is run)")
    p.add_argument("--n-init", type=int, default=4,
                   help="qlognehvi: Sobol trials (after the baseline) before the GP takes over")
    p.add_argument("--max-batch", type=int, default=4096, help="largest batch size searched")
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
                        "infeasible (default 0.25 GB on CPU with the built-in model, none on GPU "
                        "where real OOM decides)")
    p.add_argument("--hidden", type=int, default=64, help="built-in model: hidden size")
    p.add_argument("--layers", type=int, default=2, help="built-in model: decoder layers")
    p.add_argument("--vocab", type=int, default=1024, help="built-in model: vocabulary size")
    p.add_argument("--min-window-s", type=float, default=0.3,
                   help="repeat generation until each measured window lasts this long")
    return p


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
                         r.state.value, "-", "-", "-", "-", "-", r.energy_j])
            continue
        rows.append([r.number, r.proposed_by, r.params.get("batch_size"), extra or "-",
                     r.state.value, m.get("tokens_per_joule"), m.get("tokens_per_s"),
                     m.get("latency_per_token_ms"), m.get("p95_latency_ms"),
                     m.get("peak_memory_gb"), r.energy_j])
    return rows


_HEAD = ["trial", "by", "batch", "other params", "state", "tokens/J", "tokens/s",
         "ms/token", "p95 ms/token", "peak mem GB", "trial J"]


def _best(records: Sequence[Any]) -> Any | None:
    ok = [r for r in records if _val(r, "tokens_per_joule") is not None]
    return max(ok, key=lambda r: _val(r, "tokens_per_joule") or 0.0) if ok else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment; returns the exit status."""
    args = _parser().parse_args(argv)
    for what in ("trials", "max_batch", "max_new_tokens", "prompt_len", "n_init"):
        if getattr(args, what) < 1:
            raise SystemExit(f"--{what.replace('_', '-')} >= 1 must hold, got {getattr(args, what)}")
    C.setup(args)
    import ecopt
    from ecopt.workloads.generation import GemmaArch, GenerationObjective, resolve_device

    # Library imports are process start-up, not search: done here so no trial is billed for them.
    import transformers.models.gemma3.modeling_gemma3  # noqa: F401
    from transformers import AutoModelForCausalLM, LogitsProcessorList  # noqa: F401

    device = resolve_device(args.device)
    max_mem = args.max_memory_gb
    if max_mem is None and device == "cpu" and args.model is None:
        max_mem = 0.25
    arch = GemmaArch(vocab_size=args.vocab, hidden_size=args.hidden,
                     intermediate_size=4 * args.hidden, num_hidden_layers=args.layers,
                     num_attention_heads=max(1, args.hidden // 32),
                     num_key_value_heads=1)
    second = "p95_latency_ms" if args.second == "p95_latency" else "tokens_per_s"
    objective = GenerationObjective(
        arch=arch, model_path=args.model, device=device, max_new_tokens=args.max_new_tokens,
        prompt_len=args.prompt_len, max_memory_gb=max_mem, min_window_s=args.min_window_s,
        returns=("tokens_per_joule", second), seed=args.seed)
    out = Path(args.out)
    model_desc = (f"local checkpoint {args.model}" if args.model else
                  f"random-weight Gemma-3 architecture (hidden {arch.hidden_size}, "
                  f"{arch.num_hidden_layers} layers, vocab {arch.vocab_size}, "
                  f"{arch.num_attention_heads} heads / {arch.num_key_value_heads} KV head)")
    C.say(f"gemma_batch: {model_desc} on {device}; prompt {args.prompt_len} + "
          f"{args.max_new_tokens} new tokens; memory ceiling "
          f"{'%.3g GB (emulated)' % max_mem if max_mem else 'hardware'}")

    meter = ecopt.meters.get_meter(args.meter)
    studies: dict[str, Any] = {}
    whole_j: float | None = None
    show = ("tokens_per_joule", "tokens_per_s", "p95_latency_ms")
    try:
        if args.sampler != "grid":
            sampler: Any = args.sampler
            if args.sampler == "qlognehvi":
                sampler = ecopt.samplers.QLogNEHVISampler(n_init=args.n_init, num_restarts=4,
                                                          raw_samples=128)
            opt = ecopt.Study(_space(args, ecopt, device), _objectives(args, ecopt),
                              storage=C.study_dir(out / "optimiser", args.overwrite),
                              sampler=sampler, meter=meter,
                              seed=args.seed, name="gemma_batch-optimiser")
            studies["optimiser"] = opt
            base: dict[str, Any] = {"batch_size": 1}
            if args.search_new_tokens:
                base["max_new_tokens"] = args.max_new_tokens
            if args.search_dtype:
                base["dtype"] = "float32"
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
            grid_vals = ([int(x) for x in args.grid.split(",")] if args.grid else
                         [2 ** i for i in range(int(math.log2(args.max_batch)) + 1)])
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
            C.run_trials(grid, objective, len(grid_vals), "grid", show)
            grid_whole_j = meter.stop(h).energy_j
            if args.sampler == "grid":  # the sweep is the search
                whole_j = grid_whole_j
    finally:
        for s in studies.values():
            s.close()

    body, facts = _summarise(studies, args, device, max_mem, model_desc, whole_j)
    first = next(iter(studies.values()))
    C.write_summary(out, "gemma_batch: generation batch size for tokens/J",
                    C.command_line(argv, "gemma_batch.py"), C.provenance(first)[2], body, facts)
    return 0


def _summarise(studies: dict[str, Any], args: Any, device: str, max_mem: float | None,
               model_desc: str, whole_j: float | None) -> tuple[str, dict[str, Any]]:
    lines: list[str] = [f"Model: {model_desc}; device {device}; prompt {args.prompt_len} "
                        f"tokens, {args.max_new_tokens} new tokens per sequence (greedy); "
                        f"memory ceiling: "
                        + (f"{max_mem:g} GB, EMULATED from predicted memory (not a real OOM)"
                           if max_mem else "the hardware's (real OOM -> infeasible)") + ".", ""]
    facts: dict[str, Any] = {"device": device, "max_memory_gb": max_mem}
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
        best = _best(recs)
        base = next((r for r in recs if _is_baseline(r) and _val(r, "tokens_per_joule")), None)
        search_j = sum(r.energy_j for r in recs)
        f: dict[str, Any] = {"sampler": args.sampler, "evaluations": len(recs),
                             "search_energy_j": search_j, "whole_search_energy_j": whole_j,
                             "study": str(o.path),
                             "infeasible": sum(r.state.value == "infeasible" for r in recs),
                             "front_size": len(o.best_trials())}
        if best is not None:
            bm = {**best.metrics, **best.values}
            f.update(best_batch=best.params["batch_size"], best_params=dict(best.params),
                     best_tokens_per_joule=bm["tokens_per_joule"],
                     best_tokens_per_s=bm.get("tokens_per_s"),
                     best_latency_per_token_ms=bm.get("latency_per_token_ms"),
                     best_p95_latency_ms=bm.get("p95_latency_ms"),
                     best_peak_memory_gb=bm.get("peak_memory_gb"))
        if best is not None and base is not None:
            b_tpj = _val(base, "tokens_per_joule")
            assert b_tpj is not None
            ratio = bm["tokens_per_joule"] / b_tpj
            pay = payback_tokens(search_j, 1 / b_tpj, 1 / bm["tokens_per_joule"])
            pay_whole = (payback_tokens(whole_j, 1 / b_tpj, 1 / bm["tokens_per_joule"])
                         if whole_j is not None else None)
            f.update(baseline_tokens_per_joule=b_tpj, ratio_to_batch1=ratio,
                     payback_tokens=pay, payback_tokens_whole=pay_whole)
        if grid_best_tpj is not None:
            seq = [_val(r, "tokens_per_joule") for r in sorted(recs, key=lambda r: r.number)]
            for pct in (80, 90, 95, 100):
                key = "evals_to_grid_best" if pct == 100 else f"evals_to_{pct}pct_of_grid_best"
                f[key] = evaluations_to_reach(seq, pct / 100 * grid_best_tpj)
            f["best_fraction_of_grid_best"] = (f.get("best_tokens_per_joule", 0.0)
                                               / grid_best_tpj)
        facts["optimiser"] = f

        lines += ["## Result", ""]
        rows: list[list[Any]] = []
        if best is not None:
            rows += [["best batch (optimiser)", str(f["best_batch"])
                      + ("" if len(best.params) == 1 else f" ({best.params})")],
                     ["its tokens/J", f["best_tokens_per_joule"]],
                     ["its tokens/s", f["best_tokens_per_s"]],
                     ["its mean / p95 latency per token (ms)",
                      f"{C.fmt(f['best_latency_per_token_ms'])} / {C.fmt(f['best_p95_latency_ms'])}"],
                     ["its peak memory (GB; CPU: process RSS)", f["best_peak_memory_gb"]]]
        if "ratio_to_batch1" in f:
            rows += [["batch 1 tokens/J", f["baseline_tokens_per_joule"]],
                     ["ratio best / batch 1", f"{f['ratio_to_batch1']:.1f}x"],
                     ["search energy (sum of all optimiser trials, J)", search_j],
                     ["payback (tokens at the best batch to recover it)", f["payback_tokens"]]]
            if whole_j is not None:
                rows += [["whole search incl. the optimiser's own GP fitting (J)", whole_j],
                         ["payback of that (tokens)", f["payback_tokens_whole"]]]
        rows += [["optimiser evaluations (baseline included)", len(recs)],
                 ["infeasible (out of memory) trials", f["infeasible"]]]
        if "grid" in facts:
            gf = facts["grid"]
            rows += [["grid evaluations", gf["evaluations"]],
                     ["grid best batch / tokens/J", f"{gf['best_batch']} / "
                                                    f"{C.fmt(gf['best_tokens_per_joule'])}"],
                     ["optimiser best / grid best", f"{f['best_fraction_of_grid_best']:.2f}"],
                     ["optimiser evaluations to reach 80% / 90% / 95% / 100% of the grid's "
                      "best (- = not reached)",
                      " / ".join(C.fmt(f.get(k)) for k in (
                          "evals_to_80pct_of_grid_best", "evals_to_90pct_of_grid_best",
                          "evals_to_95pct_of_grid_best", "evals_to_grid_best"))],
                     ["grid energy (J)", gf["energy_j"]]]
        lines += [C.md_table(["", "value"], rows), ""]
        lines += [f"### Optimiser trials ({args.sampler}; study `{o.path}`)", "",
                  C.md_table(_HEAD, _trial_rows(recs)), ""]
    elif "grid" in studies:  # --sampler grid: the sweep is the search
        recs = studies["grid"].records
        best = _best(recs)
        base = next((r for r in recs if r.params.get("batch_size") == 1
                     and _val(r, "tokens_per_joule")), None)
        search_j = sum(r.energy_j for r in recs)
        f = {"sampler": "grid", "evaluations": len(recs), "search_energy_j": search_j,
             "whole_search_energy_j": whole_j}
        rows = []
        if best is not None:
            bm = {**best.metrics, **best.values}
            f.update(best_batch=best.params["batch_size"],
                     best_tokens_per_joule=bm["tokens_per_joule"])
            rows += [["best batch (grid)", str(best.params["batch_size"])],
                     ["its tokens/J", bm["tokens_per_joule"]],
                     ["its tokens/s", bm.get("tokens_per_s")],
                     ["its mean / p95 latency per token (ms)",
                      f"{C.fmt(bm.get('latency_per_token_ms'))} / "
                      f"{C.fmt(bm.get('p95_latency_ms'))}"],
                     ["its peak memory (GB; CPU: process RSS)", bm.get("peak_memory_gb")]]
            if base is not None:
                b_tpj = _val(base, "tokens_per_joule")
                assert b_tpj is not None
                f.update(baseline_tokens_per_joule=b_tpj,
                         ratio_to_batch1=bm["tokens_per_joule"] / b_tpj,
                         payback_tokens=payback_tokens(search_j, 1 / b_tpj,
                                                       1 / bm["tokens_per_joule"]))
                rows += [["batch 1 tokens/J", b_tpj],
                         ["ratio best / batch 1", f"{f['ratio_to_batch1']:.1f}x"],
                         ["search energy (sum of all grid trials, J)", search_j],
                         ["payback (tokens at the best batch to recover it)",
                          f["payback_tokens"]]]
        rows += [["grid evaluations", len(recs)],
                 ["infeasible (out of memory) trials",
                  sum(r.state.value == "infeasible" for r in recs)]]
        facts["search"] = f
        lines += ["## Result", "", C.md_table(["", "value"], rows), ""]
    if "grid" in studies:
        g = studies["grid"]
        lines += [f"### Grid trials (study `{g.path}`)", "", C.md_table(_HEAD, _trial_rows(g.records)),
                  ""]
    return "\n".join(lines), facts


if __name__ == "__main__":
    sys.exit(main())
