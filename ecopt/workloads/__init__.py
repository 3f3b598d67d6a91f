"""Ready objectives on real models: import the submodule you need (torch is imported there).

* ``ecopt.workloads.classifier``: torch MLP on scikit-learn digits (train + inference samples/J).
* ``ecopt.workloads.tabular``: MLP regression/classification on the Insurance table, with
  dataframe backend and loader knobs searchable (``TabularObjective``).
* ``ecopt.workloads.ncf``: NeuMF on MovieLens-format ratings, hit rate @ 10 (``NCFObjective``).
* ``ecopt.workloads.images``: small CNN on an image folder, decoding in the loader
  (``ImageFolderObjective``).
* ``ecopt.workloads.generation``: tokens/J of text generation with a transformers causal LM
  (random-weight Gemma-3 architecture or a local checkpoint; ``GenerationObjective``).
* ``ecopt.workloads.cnn``: CNN architecture search on digits or CIFAR-10 python batches,
  FLOPs by ``FlopCounterMode`` (``CNNObjective``).
"""
