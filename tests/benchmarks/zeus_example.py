"""A small Zeus trace in the real CSV format (written to a temporary directory by the tests)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"

# epochs to target 0.6 per (batch size, run); NaN: the run never reached it.
EPOCHS = {32: [10, 12, float("nan")], 64: [8, 9, 10], 128: [20, 22, 24]}
TIME_PER_EPOCH = {32: 30.0, 64: 20.0, 128: 9.0}  # at the top power limit
LIMITS = (100, 150, 200)


def write(d: Path, gpu: str = "a40", optimizers: tuple[str, ...] = ("adadelta",),
                 slow: float = 1.0) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    lines = [TRAIN_HEADER]
    for opt in optimizers:
        for bs, eps in EPOCHS.items():
            for run, e in enumerate(eps, start=1):
                for tgt in (0.5, 0.6):  # a second target the loader must ignore
                    ep = "nan" if np.isnan(e) else str(int(e - (tgt == 0.5)))
                    lines.append(f"cifar100,shufflenetv2,{bs},{opt.capitalize()},1e-1,{run},{tgt},"
                                 f"{ep}\n")
    lines.append("imagenet,resnet50,64,adadelta,1e-1,1,0.6,3\n")  # another workload
    (d / "summary_train.csv").write_text("".join(lines))
    p = [POWER_HEADER]
    for opt in optimizers:
        for bs, tpe in TIME_PER_EPOCH.items():
            for pl in LIMITS:
                t = tpe * (1 + (200 - pl) / 200) * slow * (1.1 if opt == "adam" else 1.0)
                p.append(f"cifar100,shufflenetv2,{bs},{opt},{pl},{t},{0.8 * pl}\n")
    (d / f"summary_power_{gpu}.csv").write_text("".join(p))
    return d



#: The example's constants and writer.
ZEUS_EXAMPLE = SimpleNamespace(EPOCHS=EPOCHS, TIME_PER_EPOCH=TIME_PER_EPOCH, LIMITS=LIMITS,
                               write=write)
