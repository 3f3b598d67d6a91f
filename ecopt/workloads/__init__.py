"""Ready objectives on real models: import the submodule you need (torch is imported there).

* ``ecopt.workloads.classifier``: torch MLP on scikit-learn digits (train + inference samples/J).
"""
