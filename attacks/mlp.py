"""The mlp class's witness: a one-hidden-layer ReLU network trained on the variational objective.

A network of width m on inputs x in R^d is

    u(x) = v . relu(U x + c) + b,

one hidden layer of ReLU units and an affine output node (docs/theory.md
section 3), written with unit directions |u_j| = 1: relu(t z) = t relu(z)
for t > 0 moves any unit's norm into v, so the class is the same
(:func:`unit_network`).  :func:`train_network` fits (U, c, v) to maximise the
objective that scores the witness (:func:`attacks.adversary.witness_objective`):

* ``kl``: the Donsker-Varadhan objective E_P u - log E_Q exp(u) (CBDP
  appendix Lemma 1); b cancels and is set so that the mean of exp(u) on Q's
  training sample is 1;
* ``renyi``: -log E_Q |u|^beta subject to E_P u = 1, beta = alpha / (alpha - 1),
  the scale-optimised Renyi form (docs/theory.md section 4); the constraint
  fixes b = 1 - v . mean_P relu(U x + c).

Both are minimised as ``loss = -objective + ridge |v|^2 / 2`` by full-batch
L-BFGS with the analytic gradient (:func:`network_loss`).  With unit
directions the witness's scale is |v|, so the penalty grows with its square
while the objective of separable samples grows at most linearly: the
penalised optimum is finite (a ridge on both layers would grow only linearly,
as |U_j| |v_j|, and let the weights diverge).  Training runs in two phases:
the output weights v of each starting network (e.g. a classifier's hidden
layer, :func:`spread_network`) for its fixed hidden layer (a convex problem:
the best witness among linear maps of those units), then all weights of the
better start.  Each phase stops early on a validation sample: the parameters
kept are those with the best objective there (the starting ones included),
and L-BFGS stops after :data:`PATIENCE` iterations without a better one or
:data:`MAX_ITERATIONS` in all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from attacks.divergences import conjugate_exponent, donsker_varadhan, renyi_scale_optimized
from attacks.vocabulary import KL, WEIGHTED, Divergence, Renyi, divergence_kind, parse_divergence

OBJECTIVES = WEIGHTED
# The law (0: P, 1: Q) whose training sample fixes the output bias b (:func:`output_bias`), by divergence name.
NORMALISED_ON = {KL.name: 1, Renyi.name: 0}
# L-BFGS stops after this many iterations without a better validation objective.
PATIENCE = 20
# At most this many L-BFGS iterations per phase.
MAX_ITERATIONS = 200


@dataclass(frozen=True)
class Network:
    """Weights of u(x) = relu(x @ hidden_weights + hidden_bias) @ output_weights + output_bias.

    Parameters
    ----------
    hidden_weights : ndarray of shape (d, m)
    hidden_bias : ndarray of shape (m,)
    output_weights : ndarray of shape (m,)
    output_bias : float
    """

    hidden_weights: np.ndarray
    hidden_bias: np.ndarray
    output_weights: np.ndarray
    output_bias: float

    def hidden(self, X: np.ndarray) -> np.ndarray:
        """The m hidden ReLU units on X, shape (n, m)."""
        return np.maximum(X @ self.hidden_weights + self.hidden_bias, 0.0)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """u(X), shape (n,)."""
        return self.hidden(X) @ self.output_weights + self.output_bias


def output_loss(v: np.ndarray, h_p: np.ndarray, h_q: np.ndarray, divergence: str,
                beta: float | None) -> tuple[float, np.ndarray]:
    """-objective of the witness u = h . v + b on hidden units h, and its derivatives r = d(-objective)/du.

    Parameters
    ----------
    v : ndarray of shape (m,)
        Output weights.
    h_p, h_q : ndarrays of shape (n_p, m), (n_q, m)
        Hidden units on the samples of P and Q.
    divergence : {"kl", "renyi"}
    beta : float or None
        alpha / (alpha - 1) for ``renyi``.

    Returns
    -------
    loss : float
    r : ndarray of shape (n_p + n_q,)
        Per-sample derivatives, P's rows first. ``kl`` (b cancels):
        r_P = -1 / n_P, r_Q = softmax(u_Q), the gradient of log mean exp.
        ``renyi`` (b = 1 - v . mean h_P, so that mean_P u = 1):
        u_Q = v . (h_Q - mean h_P) + 1, r_Q = beta |u_Q|^beta / (u_Q sum |u_Q|^beta)
        and, through the mean over P in b, r_P = -sum(r_Q) / n_P.
    """
    n_p = h_p.shape[0]
    if divergence_kind(divergence) is KL:
        u_q = h_q @ v
        loss = float(logsumexp(u_q) - np.log(u_q.size) - np.mean(h_p @ v))
        return loss, np.concatenate([np.full(n_p, -1.0 / n_p), softmax(u_q)])
    u_q = h_q @ v - np.mean(h_p @ v) + 1.0
    log_power = beta * np.log(np.abs(u_q) + np.finfo(float).tiny)
    loss = float(logsumexp(log_power) - np.log(u_q.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        r_q = np.where(u_q != 0.0, beta * softmax(log_power) / u_q, 0.0)
    return loss, np.concatenate([np.full(n_p, -np.sum(r_q) / n_p), r_q])


def network_loss(theta: np.ndarray, X_p: np.ndarray, X_q: np.ndarray, width: int, divergence: str,
                 beta: float | None, ridge: float) -> tuple[float, np.ndarray]:
    """-objective + ridge |v|^2 / 2 of the network with parameters theta, and its gradient.

    Parameters
    ----------
    theta : ndarray of shape (d m + 2 m,)
        W (row-major, d x m), c, v (:func:`pack`); the units are
        relu(x . w_j / |w_j| + c_j) (:func:`unit_columns`).
    X_p, X_q : ndarrays of shape (n_p, d), (n_q, d)
        Training samples of P and Q.
    width : int
        m.
    divergence : {"kl", "renyi"}
    beta : float or None
        alpha / (alpha - 1) for ``renyi``.
    ridge : float

    Returns
    -------
    loss : float
    gradient : ndarray like theta
        :func:`output_loss`'s per-sample derivatives r backpropagated:
        d/dv = h' r, d/dz = r v' * (z > 0) with z = X U + c, U the unit
        columns, d/dc and d/dU its sums over the samples (times x), and
        d/dW the projection of d/dU orthogonal to each column, over |w_j|.
    """
    W, c, v = unpack(theta, X_p.shape[1], width)
    U, norms = unit_columns(W)
    X = np.vstack([X_p, X_q])
    h = X @ U
    h += c
    np.maximum(h, 0.0, out=h)
    n_p = X_p.shape[0]
    loss, r = output_loss(v, h[:n_p], h[n_p:], divergence, beta)
    # d/dz_ij = r_i v_j [z_ij > 0]: sums over i of it (times 1 and x_i) are one product with the mask
    sums = (h > 0).T.astype(float) @ np.column_stack([r, r[:, None] * X])
    grad_c, grad_U = v * sums[:, 0], (v[:, None] * sums[:, 1:]).T
    grad_W = (grad_U - U * np.sum(U * grad_U, axis=0)) / norms
    return loss + 0.5 * ridge * v @ v, pack(grad_W, grad_c, h.T @ r + ridge * v)


def unit_columns(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W with unit columns, the column norms); a zero column keeps norm 1."""
    norms = np.linalg.norm(W, axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    return W / norms, norms


def unit_network(W: np.ndarray, c: np.ndarray, v: np.ndarray, b: float) -> Network:
    """The network relu(x W + c) v + b written with unit columns: relu(t z) = t relu(z) for t > 0."""
    U, norms = unit_columns(W)
    return Network(U, c / norms, v * norms, b)


def pack(W: np.ndarray, c: np.ndarray, v: np.ndarray) -> np.ndarray:
    """theta = (W row-major, c, v) as one vector."""
    return np.concatenate([np.ravel(W), np.ravel(c), np.ravel(v)])


def unpack(theta: np.ndarray, n_features: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(W, c, v) of :func:`pack`'s vector."""
    size = n_features * width
    return theta[:size].reshape(n_features, width), theta[size:size + width], theta[size + width:]


def spread_network(X: np.ndarray, width: int, random_state: np.random.RandomState) -> Network:
    """A network whose units relu(w_j . x - t_j) have knots spread over the data, output weights 0.

    w_j are random unit directions and t_j the (j + 1/2) / m quantile of the
    projections X w_j, so the units' kinks cover the sample's range (in one
    dimension: knots at the m quantiles, each unit facing a random side).
    The output u = 0 is the constant witness (objective 0).
    """
    directions = random_state.normal(size=(X.shape[1], width))
    directions /= np.linalg.norm(directions, axis=0)
    levels = (np.arange(width) + 0.5) / width
    knots = np.array([np.quantile(X @ directions[:, j], levels[j]) for j in range(width)])
    return Network(directions, -knots, np.zeros(width), 0.0)


def output_bias(v: np.ndarray, hidden: np.ndarray, divergence: str) -> float:
    """b of the objective's normalisation from the hidden units on one training sample (:data:`NORMALISED_ON`).

    ``kl``: mean_Q exp(u) = 1 on Q's sample; ``renyi``: mean_P u = 1 on P's.
    """
    if divergence_kind(divergence) is KL:
        u = hidden @ v
        return float(np.log(u.size) - logsumexp(u))
    return float(1.0 - np.mean(hidden @ v))


def train_network(starts: list[Network], train: tuple[np.ndarray, np.ndarray],
                  validation: tuple[np.ndarray, np.ndarray], divergence: str | Divergence, alpha: float | None,
                  ridge: float) -> Network:
    """Maximise the ``kl`` or ``renyi`` objective over the network's weights (module docstring).

    Parameters
    ----------
    starts : list of Network
        Starting networks of one width (e.g. a classifier's and :func:`spread_network`):
        each gets its output weights fitted, and the one with the best
        validation objective is trained further.
    train, validation : pairs (X_p, X_q) of ndarrays of shape (n, d)
        Samples of P and Q to fit on and to stop on.
    divergence : {"kl", "renyi"}
    alpha : float or None
        The Renyi order, for ``renyi``.
    ridge : float
        The penalty ridge |v|^2 / 2.

    Returns
    -------
    Network
        The weights with the best validation objective met, b normalised on
        the training samples (:func:`output_bias`).
    """
    divergence = parse_divergence(divergence, alpha)
    if not divergence.weighted:
        raise ValueError(f"divergence must be one of {OBJECTIVES} to train a network on. Found {divergence.name!r}.")
    beta = conjugate_exponent(divergence.alpha) if isinstance(divergence, Renyi) else None
    fitted = [_fit_output_weights(start, train, validation, divergence, beta, ridge) for start in starts]
    start, _ = max(fitted, key=lambda pair: pair[1])
    n_features, width = start.hidden_weights.shape

    def network(theta):
        W, c, v = unpack(theta, n_features, width)
        return Network(unit_columns(W)[0], c, v, 0.0)

    def loss(theta):
        return network_loss(theta, *train, width, divergence, beta, ridge)

    def score(theta):
        return _validation_objective(network(theta), train, validation, divergence)

    theta = _early_stopped_lbfgs(pack(start.hidden_weights, start.hidden_bias, start.output_weights), loss, score)
    return _normalised(network(theta), train, divergence)


def _fit_output_weights(start: Network, train, validation, divergence: KL | Renyi, beta: float | None,
                        ridge: float) -> tuple[Network, float]:
    """The start with its output weights fitted for its fixed hidden layer (convex), and its validation objective."""
    hidden_train = start.hidden(train[0]), start.hidden(train[1])
    hidden_validation = start.hidden(validation[0]), start.hidden(validation[1])
    stacked = np.vstack(hidden_train)

    def loss(v):
        value, r = output_loss(v, *hidden_train, divergence, beta)
        return value + 0.5 * ridge * v @ v, stacked.T @ r + ridge * v

    def score(v):
        b = output_bias(v, hidden_train[NORMALISED_ON[divergence.name]], divergence)
        return _objective(hidden_validation[0] @ v + b, hidden_validation[1] @ v + b, divergence)

    v = _early_stopped_lbfgs(start.output_weights, loss, score)
    return Network(start.hidden_weights, start.hidden_bias, v, 0.0), score(v)


def _normalised(network: Network, train, divergence: KL | Renyi) -> Network:
    """The network with b normalised on the training samples (:func:`output_bias`)."""
    b = output_bias(network.output_weights, network.hidden(train[NORMALISED_ON[divergence.name]]), divergence)
    return Network(network.hidden_weights, network.hidden_bias, network.output_weights, b)


def _validation_objective(network: Network, train, validation, divergence: KL | Renyi) -> float:
    """The objective on the validation samples of the network normalised on the training ones."""
    network = _normalised(network, train, divergence)
    return _objective(network(validation[0]), network(validation[1]), divergence)


def _objective(u_p: np.ndarray, u_q: np.ndarray, divergence: KL | Renyi) -> float:
    """Donsker-Varadhan or scale-optimised Renyi objective of witness values; -inf for a non-finite one.

    An infinite validation objective (a witness 0 on every validation sample of Q) is never kept as the best.
    """
    value = (donsker_varadhan(u_p, u_q) if isinstance(divergence, KL)
             else renyi_scale_optimized(u_p, u_q, divergence.alpha))
    return value if np.isfinite(value) else -np.inf


def _early_stopped_lbfgs(x0: np.ndarray, loss, score) -> np.ndarray:
    """L-BFGS on ``loss`` (value, gradient) from x0; the iterate (x0 included) with the largest ``score``.

    Stops after :data:`PATIENCE` iterations without a larger score, or :data:`MAX_ITERATIONS`.
    """
    best = {"x": x0, "value": score(x0), "stale": 0}

    def callback(intermediate_result):
        value = score(intermediate_result.x)
        if value > best["value"]:
            best.update(x=intermediate_result.x.copy(), value=value, stale=0)
        else:
            best["stale"] += 1
            if best["stale"] >= PATIENCE:
                raise StopIteration

    with np.errstate(over="ignore", invalid="ignore"):
        minimize(loss, x0, jac=True, method="L-BFGS-B", callback=callback, options={"maxiter": MAX_ITERATIONS})
    return best["x"]
