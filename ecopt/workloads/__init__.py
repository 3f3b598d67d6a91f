"""Ready objectives on real models: import the submodule you need (torch is imported there).

Every workload takes ``device`` (``auto``: the GPU when torch can use one; ``cpu``;
``cuda``; ``cuda:N``) and runs model, batches and loss there through
``ecopt.workloads.device`` (placement, pinned non-blocking copies, precision
autocast, per-trial memory peaks, CUDA out-of-memory -> infeasible).

* ``ecopt.workloads.classifier``: torch MLP on scikit-learn digits (train + inference samples/J).
* ``ecopt.workloads.tabular``: MLP regression/classification on the Insurance table, with
  dataframe backend and loader knobs searchable (``TabularObjective``).
* ``ecopt.workloads.ncf``: NeuMF on MovieLens-format ratings, hit rate @ 10 (``NCFObjective``).
* ``ecopt.workloads.images``: small CNN on an image folder, decoding in the loader
  (``ImageFolderObjective``).
* ``ecopt.workloads.vision``: a torchvision model (resnet18 from its config) on COCO-sized JPEGs
  decoded by a dataframe backend's pipeline (``VisionObjective``).
* ``ecopt.workloads.generation``: tokens/J of text generation with a transformers causal LM
  (random-weight Gemma-3 architecture, the published Gemma-3 shapes in ``GEMMA3_PRESETS``, or
  a local checkpoint; ``GenerationObjective``; prefill and decode measured apart by
  ``measure_generation``).
* ``ecopt.workloads.cnn``: CNN architecture search on digits or CIFAR-10 python batches,
  FLOPs by ``FlopCounterMode`` (``CNNObjective``).
"""
