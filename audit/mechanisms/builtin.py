"""Built-in mechanisms with known privacy, sampled vectorised over n.

Two kinds of input (the "dataset" handed to ``sample``):

* **records** (``laplace``, ``gaussian``, ``nonprivate``): an array of shape
  (m, k), one record per row (a 1-D array is m records of one coordinate).
  The query is the SUM over records, f(D) = sum_rows D in R^k, and the
  sensitivity bounds how much one record moves each coordinate of f.
* **query answers / counts** (``matrix``, ``report_noisy_max``,
  ``sparse_vector``, ``randomized_response``): a 1-D vector, as in StatDP
  (Ding et al. 2018, "Detecting violations of differential privacy") and
  DP-Sniper (Bichsel et al. 2021).  Every answer has sensitivity 1; the
  neighbouring inputs of ``default_pairs`` are StatDP's test patterns.

True privacy is stated in each class docstring and as ``true_epsilon``.
"""

from __future__ import annotations

from audit.mechanisms.additive_noise import (
    GaussianMechanism,
    LaplaceMechanism,
    NonPrivateMechanism,
    SnappingLaplace,
)
from audit.mechanisms.query_answers import MatrixMechanism, RandomizedResponse, ReportNoisyMax, SparseVector

MECHANISMS = (
    LaplaceMechanism,
    GaussianMechanism,
    MatrixMechanism,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
    NonPrivateMechanism,
    SnappingLaplace,
)
