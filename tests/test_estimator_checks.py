"""scikit-learn's estimator checks on Adversary configurations.

An Adversary's y is not a target to predict but the label of the law a sample
came from: 0 for P, 1 for Q. Fitting on any other labels is meaningless (which
law would label 2 or a continuous y be?), so fit raises ValueError. The
checks listed in ``_TARGET_NOT_P_OR_Q`` build y with labels outside {0, 1}
(regression-style or multi-class targets, e.g. labels [1, 2] or [0, 1, 2]) and
therefore fail on that ValueError before they test anything else; they are
expected to fail. Every other check applies and must pass.
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

from attacks import Adversary

CONFIGURATIONS = [
    Adversary("linear", "kl", random_state=0),
    Adversary("poly2", "renyi", alpha=4.0, random_state=0),
    Adversary("threshold", "dp", random_state=0),
    Adversary("atoms", "dp", random_state=0),
]

_TARGET_NOT_P_OR_Q = (
    "check_dict_unchanged",
    "check_dont_overwrite_parameters",
    "check_dtype_object",
    "check_estimators_dtypes",
    "check_estimators_fit_returns_self",
    "check_estimators_overwrite_params",
    "check_f_contiguous_array_estimator",
    "check_fit2d_1feature",
    "check_fit2d_predict1d",
    "check_fit_score_takes_y",
    "check_methods_sample_order_invariance",
    "check_methods_subset_invariance",
    "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input",
)


def _expected_failed_checks(estimator):
    reason = "fits on labels outside {0 (P), 1 (Q)}, which an Adversary rejects by design"
    return {check: reason for check in _TARGET_NOT_P_OR_Q}


@parametrize_with_checks(CONFIGURATIONS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)
