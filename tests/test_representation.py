"""The representation attacks: IEEE-754 features on hand-built floats, the atom table, the two classes.

Statistical checks and their tolerances.  A dp attack set S is scored on
n_test held-out outputs per input; every "caught" assertion also checks the
finite Clopper-Pearson bound of the row's counts (k_q = 0 bounds Q(S) by
about 3 / n_q at 95%), so that no catch rests on an unbounded ratio.
"Never flagged" checks allow the 5% false-violation rate of a 95% bound: at
most 2 of 10 seeds (probability < 1.2% for a correct bound).
"""

import numpy as np
import pytest
from scipy.stats import beta

from attacks import Adversary, estimate_divergence
from attacks.classes import parse_function_class
from attacks.representation import (
    FEATURE_NAMES,
    GRID_EXPONENTS,
    ZERO_GRANULARITY,
    AtomTable,
    FloatFeatures,
    float_features,
)
from audit.mechanisms import make_mechanism

N = 20_000  # outputs per input: 10 000 train, 10 000 held out
COLUMN = {name: index for index, name in enumerate(FEATURE_NAMES)}
PAIR = (np.zeros((2, 1)), np.array([[0.0], [1.0]]))  # sums 0 and 1: DP-Sniper's floating_point inputs


def clopper_pearson_log_ratio(details: dict, level: float = 0.95) -> float:
    """log(P_low / Q_up) with one-sided Clopper-Pearson bounds at (1 + level) / 2 each (Bonferroni; delta = 0)."""
    tail = (1.0 - level) / 2
    k_p, n_p, k_q, n_q = (details[key] for key in ("k_p", "n_p", "k_q", "n_q"))
    p_low = beta.ppf(tail, k_p, n_p - k_p + 1) if k_p > 0 else 0.0
    q_up = beta.ppf(1.0 - tail, k_q + 1, n_q - k_q) if k_q < n_q else 1.0
    return float(np.log(p_low / q_up)) if p_low > 0 else -np.inf


# ---------------------------------------------------------------- float features


@pytest.mark.parametrize(
    "x, expected",
    [
        (1.0, {"sign": 0, "exponent": 0, "trailing_zeros": 52, "granularity": 0, "low_bits": 0}),
        (2.0**-60, {"sign": 0, "exponent": -60, "trailing_zeros": 52, "granularity": -60, "low_bits": 0}),
        (3 * 2.0**-55, {"sign": 0, "exponent": -54, "trailing_zeros": 51, "granularity": -55, "low_bits": 0}),
        (-1.5, {"sign": 1, "exponent": 0, "trailing_zeros": 51, "granularity": -1, "low_bits": 0}),
        (1.0 + 2.0**-52, {"exponent": 0, "trailing_zeros": 0, "granularity": -52, "low_bits": 1}),
        (-0.0, {"sign": 1, "exponent": -1023, "trailing_zeros": 52, "granularity": ZERO_GRANULARITY}),
        (0.0, {"sign": 0, "exponent": -1023, "granularity": ZERO_GRANULARITY}),
        (5e-324, {"exponent": -1023, "trailing_zeros": 0, "granularity": -1074, "low_bits": 1}),
        (np.finfo(float).max, {"exponent": 1023, "trailing_zeros": 0, "granularity": 971, "low_bits": 255}),
    ],
    ids=str,
)
def test_features_of_hand_built_floats(x, expected):
    features = float_features([[x]])[0]
    assert {name: features[COLUMN[name]] for name in expected} == expected


def test_grid_distances_are_exact_for_hand_built_floats():
    distances = float_features([[-1.5], [2.0**-60], [2.0**60 + 2.0**8]])[:, COLUMN["granularity"] + 2 :]
    expected_at_1 = [0.5, 2.0**-60, 0.0]  # k = 0
    assert distances[:, GRID_EXPONENTS.index(0)].tolist() == expected_at_1
    assert distances[1, GRID_EXPONENTS.index(-32)] == 2.0**-28
    assert np.all((distances >= 0) & (distances <= 0.5))


def test_granularity_is_the_lowest_set_bit_of_random_floats():
    """x / 2^g is an odd integer: x lies on the grid 2^g Z and not on 2^(g+1) Z."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.laplace(0, 10, 500), rng.normal(0, 1e-300, 100), np.ldexp(rng.integers(1, 99, 50), -1070)])
    granularity = float_features(x)[:, COLUMN["granularity"]].astype(int)
    scaled = np.ldexp(x, -granularity)
    assert np.all(scaled == np.rint(scaled)) and np.all(np.rint(scaled) % 2 != 0)


def test_features_of_several_coordinates_are_concatenated():
    features = float_features([[1.0, -0.0]])
    assert features.shape == (1, 2 * len(FEATURE_NAMES))
    assert features[0, len(FEATURE_NAMES) + COLUMN["sign"]] == 1
    names = FloatFeatures().fit([[1.0, 2.0]]).get_feature_names_out()
    assert names[len(FEATURE_NAMES)] == "x1_sign"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_outputs_are_rejected_with_the_count(bad):
    with pytest.raises(ValueError, match="1 NaN or inf"):
        float_features([[1.0], [bad]])


# ---------------------------------------------------------------- atom table


def test_atom_table_scores_smoothed_frequency_ratios():
    X = np.array([[0.5], [0.5], [0.5], [2.5], [1.5], [2.5]])
    y = np.array([0, 0, 0, 0, 1, 1])
    table = AtomTable(min_count=1).fit(X, y)
    scores = table.transform([[0.5], [2.5], [1.5], [7.0]])[:, 0]
    n = 5.0  # n_P + 1 = n_Q + 1 + 2
    expected = np.log([3.5 / n, 1.5 / n, 0.5 / n, 0.5 / n]) - np.log([0.5 / 3, 1.5 / 3, 1.5 / 3, 0.5 / 3])
    np.testing.assert_allclose(scores, expected)


def test_atom_table_scores_training_rows_leave_one_out():
    """A value seen once scores as an unseen one on its own row: 0 when n_P = n_Q."""
    X = np.array([[0.5], [0.5], [1.0], [2.0]])
    y = np.array([0, 0, 1, 1])
    scores = AtomTable(min_count=1).fit_transform(X, y)[:, 0]
    np.testing.assert_allclose(scores, [np.log(1.5 / 0.5), np.log(1.5 / 0.5), 0.0, 0.0])


def test_rare_values_score_as_unseen():
    X = np.r_[np.full(6, 0.5), np.full(3, 1.5), [2.5]][:, None]
    y = np.r_[np.zeros(6), np.ones(4)]
    table = AtomTable(min_count=4).fit(X, y)
    scores = table.transform([[0.5], [1.5], [2.5], [9.0]])[:, 0]
    unseen = np.log(5 / 7)  # zero counts: log((1/2) / (n_P + 1)) - log((1/2) / (n_Q + 1))
    assert scores[0] > 0 and np.allclose(scores[1:], unseen)
    assert np.allclose(AtomTable(min_count=4).fit_transform(X, y)[6:, 0], unseen)  # 1.5 seen 3 - 1 < 4 times
    with pytest.raises(ValueError, match="min_count must be a positive integer"):
        AtomTable(min_count=0).fit(X, y)


def test_atom_table_keys_are_bitwise_rows():
    X = np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, 1.0], [0.0, 2.0]])
    table = AtomTable(min_count=1).fit(X, [0, 1, 0, 1])
    # (0, 1) twice, (0, 2) once, (-0, 1) once: -0.0 is a value of its own
    assert sorted(table.counts_.sum(axis=1).tolist()) == [1, 1, 2]
    assert table.transform([[0.0, 1.0]])[0, 0] > 0 > table.transform([[-0.0, 1.0]])[0, 0]


# ---------------------------------------------------------------- the classes


@pytest.mark.parametrize("name", ["atoms", "floatbits", "ATOMS"])
def test_classes_parse_and_are_contained_in_all_only(name):
    cls = parse_function_class(name)
    assert cls.name == name.lower() and cls.divergences == ("kl", "renyi", "ipm", "dp") and cls.events
    assert cls.is_contained_in(parse_function_class("all")) and cls.is_contained_in(cls)
    for other in ("linear", "poly3", "tree3", "mlp", "kernel", "threshold"):
        assert not cls.is_contained_in(parse_function_class(other))
        assert not parse_function_class(other).is_contained_in(cls)


@pytest.mark.parametrize("divergence,alpha", [("kl", None), ("renyi", 2.0), ("renyi", 10.0)])
def test_atoms_bound_kl_and_renyi_of_a_point_mass_by_its_counts(divergence, alpha):
    """A point mass of probability 0.05 on one dataset only: KL and Renyi are infinite; the atoms set's counts
    bound them by a finite positive number below the ceiling at the held-out size, and a continuous law gets 0."""
    mechanism = make_mechanism("leaky_laplace", {"epsilon": 1.0, "p": 0.05})
    rng = np.random.default_rng(0)
    x_p, x_q = (mechanism.sample(d, N, rng) for d in PAIR)
    result = estimate_divergence(x_p, x_q, "atoms", divergence, alpha=alpha, random_state=0)
    assert result.event and result.details["k_q"] == 0 and result.details["k_p"] >= 30, result.details
    assert 0.1 < result.lower_bound(0.95) < result.ceiling(0.95) < np.log(N)
    continuous = estimate_divergence(rng.laplace(0, 1, N), 0.5 + rng.laplace(0, 1, N), "atoms", divergence,
                                     alpha=alpha, random_state=0)
    assert continuous.lower_bound(0.95) == 0.0


def test_atoms_catch_a_leak_at_p_0_005():
    """P(S) = 0.005 and Q(S) = 0: about 50 held-out hits of P, none of Q; CP bound > 2 in every seed."""
    mechanism = make_mechanism("leaky_laplace", {"epsilon": 1.0, "p": 0.005})
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x_p, x_q = (mechanism.sample(d, N, rng) for d in PAIR)
        result = estimate_divergence(x_p, x_q, "atoms", "dp", random_state=seed)
        assert result.details["k_q"] == 0 and result.details["k_p"] >= 30, result.details
        assert result.lower_bound(0.95) > 1.0 and clopper_pearson_log_ratio(result.details) > 2.0


@pytest.mark.parametrize("divergence", ["dp", "ipm"])
def test_atoms_never_flag_continuous_laws(divergence):
    """No value repeats: the held-out attack set is empty, the dp estimate -inf and the ipm one ~ 0."""
    laws = [lambda r: r.laplace(0, 1, N), lambda r: r.normal(0, 1, N), lambda r: r.uniform(0, 1, N)]
    for seed in range(6):
        rng = np.random.default_rng(seed)
        draw = laws[seed % 3]
        result = estimate_divergence(draw(rng), 0.5 + draw(rng), "atoms", divergence, random_state=seed)
        if divergence == "dp":
            assert result.details["k_p"] == 0 and result.lower_bound(0.95) == -np.inf
        else:
            assert abs(result.estimate) < 4 / np.sqrt(result.n_test)


def test_atoms_stay_within_a_discrete_laws_true_epsilon():
    """Discrete Laplace P(k) ~ exp(-|k|) at 0 and 1: every atom's ratio is at most e^1; <= 2 of 10 seeds above."""
    from scipy.stats import dlaplace

    above = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        x_p, x_q = dlaplace.rvs(1.0, size=N, random_state=rng), 1 + dlaplace.rvs(1.0, size=N, random_state=rng)
        above += estimate_divergence(x_p, x_q, "atoms", "dp", random_state=seed).lower_bound(0.95) > 1.0
    assert above <= 2


def test_floatbits_separate_the_textbook_laplace_from_the_snapped_one():
    """Textbook numpy Laplace at epsilon 0.1: ~2.9% of outputs on input 0 have granularity < -53, none on 1."""
    textbook = make_mechanism("textbook_laplace", {"epsilon": 0.1})
    snapped = make_mechanism("snapping_laplace", {"epsilon": 0.1})
    above = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        caught = estimate_divergence(*(textbook.sample(d, N, rng) for d in PAIR), "floatbits", "dp", random_state=seed)
        assert caught.details["k_q"] == 0 and caught.lower_bound(0.95) > 2.0, caught.details
        assert clopper_pearson_log_ratio(caught.details) > 2.0
        safe = estimate_divergence(*(snapped.sample(d, N, rng) for d in PAIR), "floatbits", "dp", random_state=seed)
        above += safe.lower_bound(0.95) > 0.1
    assert above <= 1


def test_snapping_laplace_outputs_lie_on_its_grid():
    mechanism = make_mechanism("snapping_laplace", {"epsilon": 0.1, "bound": 100.0})
    out = mechanism.sample(PAIR[1], 5000, np.random.default_rng(0))[:, 0]
    assert mechanism.grid == 16.0 and np.all(np.abs(out) <= 100.0)
    interior = np.abs(out) < 100.0
    assert np.all(out[interior] % 16.0 == 0) and not np.any(np.signbit(out) & (out == 0))
    with pytest.raises(ValueError, match="bound / sensitivity must lie in"):
        make_mechanism("snapping_laplace", {"epsilon": 0.1, "bound": 5.0})
