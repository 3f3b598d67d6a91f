"""Ready objectives on real models: import the submodule you need (torch is imported there).

* ``ecopt.workloads.classifier``: torch MLP on scikit-learn digits (train + inference samples/J).
* ``ecopt.workloads.tabular``: MLP regression/classification on the Insurance table, with
  dataframe backend and loader knobs searchable (``TabularObjective``).
* ``ecopt.workloads.ncf``: NeuMF on MovieLens-format ratings, hit rate @ 10 (``NCFObjective``).
* ``ecopt.workloads.images``: small CNN on an image folder, decoding in the loader
  (``ImageFolderObjective``).
"""
