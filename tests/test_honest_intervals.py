"""kl and renyi intervals that hold at small n, high epsilon and with heavy-tailed witnesses (issue 11).

A correct mechanism with a true claim must read "violation" in at most
1 - confidence of audits.  A row is a violation only when its lower bound
exceeds the claim and it carries no caveat, so each check here counts the
*misses*: lower_bound(0.975) above the true value with no caveat.  The true
value is the class's exact restricted divergence (``audit.theory.exact``) for the
polynomial classes and the unrestricted one (``audit.theory.bounds``) for the others;
both are at least the estimand, the population objective of the fitted
witness.  For linear witnesses of Laplace and Gaussian laws the estimand
itself is known in closed form, and coverage is checked against it.

Tolerances: a miss count is accepted unless a one-sided binomial test rejects
a miss rate of 2.5% at level 0.001 (the count is then far above what 2.5%
allows at that number of seeds).
"""

import numpy as np
import pytest
from scipy import integrate, stats

from attacks import estimate_divergence
from attacks.divergences import conjugate_exponent, tail_index
from audit.theory import bounds
from audit.theory.exact import restricted_divergence

LEVEL = 0.975
NOMINAL_MISS = 1 - LEVEL
REJECT = 1e-3


def _samples(law, epsilon, n, seed):
    rng = np.random.default_rng(seed)
    draw = rng.laplace if law == "laplace" else rng.normal
    return draw(0.0, 1.0 / epsilon, n), draw(1.0, 1.0 / epsilon, n)


def _truth(law, epsilon, function_class, divergence, alpha):
    """The restricted divergence of the class (polynomials), else the unrestricted one: >= every estimand."""
    if function_class in ("linear", "poly2", "poly3"):
        laws = (stats.laplace(0, 1 / epsilon), stats.laplace(1, 1 / epsilon)) if law == "laplace" else (
            stats.norm(0, 1 / epsilon), stats.norm(1, 1 / epsilon))
        return restricted_divergence(*laws, function_class=function_class, divergence=divergence, alpha=alpha)
    if law == "laplace":
        return bounds.laplace_kl(epsilon) if divergence == "kl" else bounds.laplace_renyi(epsilon, alpha)
    return bounds.gaussian_kl(1 / epsilon) if divergence == "kl" else bounds.gaussian_renyi(1 / epsilon, alpha)


def _misses(law, epsilon, function_class, divergence, alpha, n, seeds):
    """(misses, caveats) over the seeds: lower bounds above the truth without a caveat, and caveats."""
    truth = _truth(law, epsilon, function_class, divergence, alpha)
    misses = caveats = 0
    for seed in seeds:
        result = estimate_divergence(*_samples(law, epsilon, n, seed), function_class, divergence, alpha=alpha,
                                     random_state=seed)
        assert np.isfinite(result.estimate)
        caveats += result.caveat is not None
        misses += result.caveat is None and result.lower_bound(LEVEL) > truth
    return misses, caveats


def _plausible(misses, trials):
    """False only if the miss count rejects a miss rate of 2.5% (one-sided binomial test at level 0.001)."""
    return stats.binomtest(misses, trials, NOMINAL_MISS, alternative="greater").pvalue > REJECT


# The settings of issue 11 that read "violation" with true claims, at pinned seeds and over 20 seeds.
ISSUE_SETTINGS = [
    ("laplace", 8.0, "linear", "kl", None, 1000),  # kl / all <= 10: "unbounded: the outputs are separable"
    ("laplace", 8.0, "tree3", "kl", None, 1000),
    pytest.param("laplace", 8.0, "linear", "kl", None, 20_000,  # kl / linear <= 6 (exact 5.551): 15 of 20 violations
                 marks=pytest.mark.slow),
    pytest.param("laplace", 1.0, "kernel", "renyi", 4.0, 1000,  # lower bound 1.425 above the unrestricted 0.8137
                 marks=pytest.mark.slow),
    ("laplace", 1.0, "kernel", "kl", None, 1000),  # estimate -37.9
]


@pytest.mark.parametrize("law, epsilon, function_class, divergence, alpha, n", ISSUE_SETTINGS, ids=str)
def test_issue_settings_never_refute_the_truth(law, epsilon, function_class, divergence, alpha, n):
    """20 seeds: no lower bound above the true value without a caveat (a 2.5% rate allows 0.5 on average)."""
    misses, _ = _misses(law, epsilon, function_class, divergence, alpha, n, range(20))
    assert misses == 0


def test_separable_samples_give_a_finite_estimate():
    """Laplace at eps = 8, n = 1000: the samples are often separated by the witness; the estimate stays finite."""
    result = estimate_divergence(*_samples("laplace", 8.0, 1000, 0), "linear", "kl", random_state=0)
    assert np.isfinite(result.estimate)
    assert result.lower_bound(LEVEL) < bounds.laplace_linear_kl(8.0)
    assert 0.0 <= result.p_value(bounds.laplace_kl(8.0)) <= 1.0


def test_kl_witness_scale_keeps_exp_h_light_tailed():
    """The fitted witness's exp(h) has Hill tail index <= 0.4 on the training Q sample (the cap, module docstring)."""
    p, q = _samples("laplace", 8.0, 4000, 1)
    result = estimate_divergence(p, q, "linear", "kl", random_state=1)
    adversary = result.adversary
    assert 0.0 < adversary.scale_ < 1.0  # the optimal slope (tail index 0.88 at eps = 8) is capped
    # the cap holds on the split it was computed on; on all of Q's sample the index stays near it
    assert tail_index(adversary.witness(q[:, None])) < 0.5


def _linear_estimand(result, law, epsilon):
    """Population objective of a linear witness h = s x + b under P = law(0, 1/eps), Q = law(1, 1/eps)."""
    h0, h1 = result.adversary.witness(np.array([[0.0], [1.0]]))
    slope, intercept, scale = h1 - h0, h0, 1.0 / epsilon
    if result.divergence == "kl":  # E_P h - log E_Q exp(h), E_P h = b
        if law == "gaussian":
            return -slope - (slope * scale) ** 2 / 2
        return -slope + np.log1p(-(slope * scale) ** 2) if abs(slope) * scale < 1 else -np.inf
    beta = conjugate_exponent(result.alpha)
    density = (stats.laplace if law == "laplace" else stats.norm)(1.0, scale).pdf
    zero = -intercept / slope if slope else 1.0
    moment, _ = integrate.quad(lambda x: abs(slope * x + intercept) ** beta * density(x), 1 - 60 * scale,
                               1 + 60 * scale, points=[z for z in (1.0, zero) if abs(z - 1) < 60 * scale], limit=400)
    return beta * np.log(abs(intercept)) - np.log(moment)


def _estimand_misses(law, epsilon, divergence, alpha, n, seeds):
    misses = 0
    for seed in seeds:
        result = estimate_divergence(*_samples(law, epsilon, n, seed), "linear", divergence, alpha=alpha,
                                     random_state=seed)
        misses += result.lower_bound(LEVEL) > _linear_estimand(result, law, epsilon)
    return misses


@pytest.mark.parametrize("law, epsilon, divergence, alpha", [("laplace", 8.0, "kl", None), ("gaussian", 20.0, "kl", None)],
                         ids=str)
def test_linear_lower_bound_covers_its_estimand_light(law, epsilon, divergence, alpha):
    """40 seeds at n = 200 (100 held out per law): the lower bound at 97.5% stays below the exact estimand."""
    assert _plausible(_estimand_misses(law, epsilon, divergence, alpha, 200, range(40)), 40)


@pytest.mark.slow
@pytest.mark.parametrize("law, epsilon, divergence, alpha, n", [
    ("laplace", 8.0, "kl", None, 200), ("laplace", 20.0, "kl", None, 1000), ("laplace", 1.0, "kl", None, 200),
    ("gaussian", 20.0, "kl", None, 200), ("laplace", 8.0, "renyi", 20.0, 200), ("laplace", 1.0, "renyi", 4.0, 200),
    ("gaussian", 1.0, "renyi", 2.0, 200)], ids=str)
def test_linear_lower_bound_covers_its_estimand(law, epsilon, divergence, alpha, n):
    """200 seeds: the miss count is plausible for a miss rate of at most 2.5%."""
    assert _plausible(_estimand_misses(law, epsilon, divergence, alpha, n, range(200)), 200)


def _quadratic_kl_estimand(result, law, epsilon):
    """E_P h - log E_Q exp(h) of a fitted quadratic witness (read off its values at -1, 0, 1), by quadrature."""
    h_minus, h_zero, h_plus = result.adversary.witness(np.array([[-1.0], [0.0], [1.0]]))
    curvature, slope = (h_plus + h_minus) / 2 - h_zero, (h_plus - h_minus) / 2
    scale = 1.0 / epsilon
    x = np.linspace(-60 * scale, 1 + 60 * scale, 200_001)
    h, step = curvature * x**2 + slope * x + h_zero, x[1] - x[0]
    p, q = ((stats.laplace if law == "laplace" else stats.norm)(loc, scale).pdf(x) for loc in (0.0, 1.0))
    return float(np.sum(p * h) * step - np.log(np.sum(q * np.exp(h - h.max())) * step) - h.max())


def _quadratic_misses(law, epsilon, n, seeds):
    """Misses of the (poly2, KL) lower bound at 97.5 % of its witness's estimand, among witnesses bounded above
    (those the Hill cap and caveat now skip: adversary.supremum_ finite), and how many were bounded."""
    misses = bounded = 0
    for seed in seeds:
        result = estimate_divergence(*_samples(law, epsilon, n, seed), "poly2", "kl", random_state=seed)
        if np.isfinite(result.adversary.supremum_) and result.caveat is None:
            bounded += 1
            misses += result.lower_bound(LEVEL) > _quadratic_kl_estimand(result, law, epsilon)
    return misses, bounded


def test_bounded_quadratic_witness_covers_its_estimand_light():
    """Laplace eps 4, n = 1000, 8 seeds: most poly2 witnesses are bounded above, and their bounds cover."""
    misses, bounded = _quadratic_misses("laplace", 4.0, 1000, range(8))
    assert bounded >= 4 and _plausible(misses, bounded)


@pytest.mark.slow
@pytest.mark.parametrize("law, epsilon, n", [("laplace", 4.0, 200), ("laplace", 4.0, 1000), ("laplace", 2.0, 1000),
                                             ("gaussian", 1.0, 200), ("gaussian", 1.0, 1000)], ids=str)
def test_bounded_quadratic_witness_covers_its_estimand(law, epsilon, n):
    """200 seeds: a poly2 kl witness bounded above (no tail cap, no tail caveat) misses its estimand at a
    plausible rate for 2.5 %.  (Laplace at eps 8 and n 1000 fits 5 such witnesses in 200 seeds, a Gaussian at
    sigma 1/4 none: its log-likelihood ratio is linear, the fitted curvature near 0, so the path is not taken.)"""
    misses, bounded = _quadratic_misses(law, epsilon, n, range(200))
    assert bounded >= 20 and _plausible(misses, bounded)


@pytest.mark.slow
@pytest.mark.parametrize("function_class", ["linear", "poly2", "kernel", "mlp", "tree3"])
@pytest.mark.parametrize("law, epsilon, divergence, alpha, n", [
    ("laplace", 8.0, "kl", None, 1000), ("laplace", 20.0, "kl", None, 200), ("laplace", 8.0, "renyi", 10.0, 1000),
    ("gaussian", 8.0, "renyi", 2.0, 1000), ("laplace", 1.0, "renyi", 4.0, 1000)], ids=str)
def test_risky_settings_rarely_refute_the_truth(function_class, law, epsilon, divergence, alpha, n):
    """100 seeds per class at high epsilon, small n, renyi alpha = 10: misses plausible for a rate <= 2.5%."""
    misses, _ = _misses(law, epsilon, function_class, divergence, alpha, n, range(100))
    assert _plausible(misses, 100)


@pytest.mark.parametrize("divergence, alpha", [("kl", None), ("renyi", 4.0)])
@pytest.mark.parametrize("function_class", ["linear", "kernel", "tree2"])
def test_constant_outputs_have_a_caveat_and_consistent_p_values(function_class, divergence, alpha):
    """A constant mechanism (d = d' alike): zero spread, a caveat, and no division by a zero standard error."""
    result = estimate_divergence(np.zeros(300), np.zeros(300), function_class, divergence, alpha=alpha,
                                 random_state=0)
    assert result.caveat is not None and "standard error" in result.caveat
    assert result.estimate == pytest.approx(0.0, abs=1e-9)
    bound = result.lower_bound(0.95)
    assert bound <= result.estimate
    assert result.p_value(bound - 1e-6) <= 0.05 + 1e-6 and result.p_value(bound + 1e-3) > 0.05
    assert result.p_value(1.0) == 1.0


@pytest.mark.parametrize("magnitude", [1e-300, 1e300])
@pytest.mark.parametrize("function_class", ["linear", "poly2", "kernel", "mlp", "tree2"])
def test_outputs_of_any_magnitude(function_class, magnitude):
    """The classes are closed under a common scale of the outputs: the estimate is that of unscaled outputs."""
    p, q = _samples("laplace", 1.0, 400, 3)
    scaled = estimate_divergence(magnitude * p, magnitude * q, function_class, "kl", random_state=3)
    plain = estimate_divergence(p, q, function_class, "kl", random_state=3)
    assert np.isfinite(scaled.lower_bound(0.95)) and 0.0 <= scaled.p_value(0.5) <= 1.0
    if function_class != "mlp":  # the network's training is not bit-for-bit scale-free
        assert scaled.estimate == pytest.approx(plain.estimate, abs=1e-6)
