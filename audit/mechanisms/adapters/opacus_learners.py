"""Opacus DP-SGD as a mechanism: one output = one training run of a one- or two-layer network.

The dataset is an array of records, one per row: k features then a label in
{0, 1} (as for :mod:`audit.mechanisms.learners`).  Each output trains a
binary classifier (one linear layer, or a hidden layer of ``hidden`` tanh
units then a linear one; one logit, the summed logistic loss) with Opacus's
own DP-SGD: ``PrivacyEngine.make_private`` on the model and an SGD
optimiser, fed by Opacus's Poisson data loader (``DPDataLoader``: each
record joins each batch independently with probability ``sampling_rate``),
for ``steps`` optimiser steps.  Opacus clips every per-sample gradient to L2
norm ``max_grad_norm`` (C) and adds N(0, (z C)^2 I) to their sum, z =
``noise_multiplier``; the loss is summed (``loss_reduction = "sum"``), so
the update never uses the dataset's size and add/remove neighbours differ
by one clipped gradient of norm at most C per step.  T steps of that are
what dp_accounting's accountants compose (Abadi et al., "Deep learning with
differential privacy", CCS 2016; :mod:`audit.config.accounting`), stated by
:meth:`OpacusDPSGD.training_parameters`; at q = 1 the run is
(sqrt(T) / z)-GDP (Dong, Roth and Su 2022, Cor. 3.3).

Released: the final parameters, flattened (``release = "parameters"``), or
the summed logistic loss of the final model on the canary record of the
first default pair (``release = "canary_loss"``: black-box membership
inference on one number).  Every run starts from the same initial
parameters (drawn from ``init_seed``), the white-box threat model of
audits of DP-SGD (Nasr et al., "Adversary instantiation", IEEE S&P 2021),
under which DP-SGD's guarantee still holds; ``init_seed = None`` draws them
from each run's seed instead.  Each run seeds torch's generator from the
audit's ``rng`` (inside ``torch.random.fork_rng``, leaving the caller's
state alone) with Opacus's ``secure_mode`` off: same seed, same runs.
Opacus and CPU torch are the optional extra ``capaudit[opacus]``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from audit.mechanisms.adapters.library import LibraryAdapter, LibraryClaim
from audit.config.validation import check_positive, is_number, positive_int

RELEASES = ("parameters", "canary_loss")
"""What a run releases."""
ACCOUNTANTS = ("prv", "rdp", "gdp")
"""Opacus's accountants (``PrivacyEngine(accountant=...)``; "prv", its default, the privacy random variable one)."""
CAVEATS = dict(zip(ACCOUNTANTS, ("", "", "; Opacus warns that this accountant (a central-limit approximation) can "
                                         "underestimate epsilon")))
"""What a claim read from each accountant adds to its reason: Opacus's own warning, which the call silences."""
QUIET = ("Secure RNG turned off", "Full backward hook is firing", "GDP accounting is experimental")
"""Opacus's and torch's warnings on every run: secure_mode off (on purpose: seeded runs), inputs without grad, the
GDP accountant's caveat (carried in a claim read from it, :data:`CAVEATS`)."""


class OpacusDPSGD(LibraryAdapter):
    """Opacus DP-SGD on a one- or two-layer binary classifier; releases the final parameters or the canary's loss.

    Parameters
    ----------
    noise_multiplier : float
        z >= 0, Opacus's noise standard deviation over C (0: no noise, not DP).
    max_grad_norm : float
        C, the per-sample clipping norm.
    steps : int
        T, the number of optimiser steps (Poisson batches).
    sampling_rate : float
        q in (0, 1], each record's probability of joining a batch (1: full batch).
    learning_rate : float
        The SGD step size (on the summed loss).
    hidden : int
        0: logistic regression (one linear layer); h > 0: a tanh hidden layer of h units first.
    release : {"parameters", "canary_loss"}
        What one run releases (module docstring).
    init_seed : int or None
        Seed of the initial parameters shared by every run; None: each run's own.
    accountant : {"prv", "rdp", "gdp"}
        Opacus's accountant (``PrivacyEngine(accountant=...)``): ``[[claims]] from = "library"`` is its epsilon
        at the claim's ``delta`` (:meth:`OpacusDPSGD.library_claim`).
    n_jobs : int
        Not used (kept for the adapters' common interface); runs train one by one.
    """

    name = "opacus.dp_sgd"
    description = ("Opacus DP-SGD of a one- or two-layer classifier (clip C, noise z C, T Poisson steps at rate q), "
                   "releases the parameters or the canary's loss")
    privacy_claim = "(epsilon, delta)-DP from dp_accounting's accountant of T subsampled Gaussian steps at z"
    library = "opacus"
    extra = "opacus"
    module = "opacus"
    seedable = True
    canary_norm = 100.0
    """The canary's feature norm: its gradient is clipped to C while the model has not fitted it."""

    def __init__(self, noise_multiplier: float = 1.0, max_grad_norm: float = 1.0, steps: int = 5,
                 sampling_rate: float = 1.0, learning_rate: float = 0.1, hidden: int = 0,
                 release: str = "parameters", init_seed: int | None = 0, accountant: str = "prv",
                 n_jobs: int = 1) -> None:
        super().__init__(noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, steps=steps,
                         sampling_rate=sampling_rate, learning_rate=learning_rate, hidden=hidden, release=release,
                         init_seed=init_seed, accountant=accountant, n_jobs=n_jobs)
        if not is_number(noise_multiplier) or not 0.0 <= float(noise_multiplier) < math.inf:
            raise ValueError(f"noise_multiplier must be a finite number >= 0. Found {noise_multiplier!r}.")
        if not is_number(sampling_rate) or not 0.0 < float(sampling_rate) <= 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1]. Found {sampling_rate!r}.")
        if isinstance(hidden, bool) or not isinstance(hidden, (int, np.integer)) or hidden < 0:
            raise ValueError(f"hidden must be a whole number >= 0 (0: one linear layer). Found {hidden!r}.")
        if accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {', '.join(map(repr, ACCOUNTANTS))}. Found {accountant!r}.")
        if release not in RELEASES:
            raise ValueError(f"release must be one of {', '.join(map(repr, RELEASES))}. Found {release!r}.")
        if init_seed is not None and (isinstance(init_seed, bool) or not isinstance(init_seed, (int, np.integer))
                                      or init_seed < 0):
            raise ValueError(f"init_seed must be a whole number >= 0, or omitted for each run's own. "
                             f"Found {init_seed!r}.")
        self.noise_multiplier = float(noise_multiplier)
        self.max_grad_norm = check_positive(max_grad_norm, "max_grad_norm")
        self.steps = positive_int("steps", steps)
        self.sampling_rate = float(sampling_rate)
        self.learning_rate = check_positive(learning_rate, "learning_rate")
        self.true_epsilon = math.inf if self.noise_multiplier == 0.0 else None
        self._check_params()

    @property
    def one_run_release(self) -> str | None:
        """One linear layer's parameters (weights, then the bias) are a linear model (:mod:`audit.engine.one_run`);
        a hidden layer's or a canary loss are not."""
        linear = self.params["hidden"] == 0 and self.params["release"] == "parameters"
        return "coefficients_intercept" if linear else None

    def training_parameters(self) -> dict[str, float]:
        """What an accountant reads of this run (:mod:`audit.config.accounting`): T steps at rate q of noise multiplier z
        (Opacus's noise is z C over add/remove sensitivity C)."""
        return {"noise_multiplier": self.noise_multiplier, "sampling_rate": self.sampling_rate, "steps": self.steps}

    def library_claim(self, d_in: int, epsilons: Sequence[float] | None = None,
                      delta: float | None = None) -> LibraryClaim:
        """Opacus's own claim: its accountant's epsilon at ``delta`` after this run's T steps (``[[claims]] from =
        "library"``), as ``PrivacyEngine.get_epsilon(delta)`` reports it, over add/remove neighbours (d_in = 1)."""
        from opacus.accountants import create_accountant

        if d_in != 1:
            raise ValueError(f"Opacus's accountant is stated for neighbours one record apart; the pairs are at d_in "
                             f"= {d_in}: give neighbours (distance = 1).")
        if delta is None or not 0.0 < float(delta) < 1.0:
            raise ValueError(f"a claim from Opacus's accountant is epsilon at a delta in (0, 1): add delta = 1e-5 to "
                             f"the claim. Found {delta!r}.")
        if self.noise_multiplier == 0.0:
            raise ValueError("noise_multiplier = 0: Opacus's accountant states no finite epsilon; give divergence "
                             "and epsilon.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the GDP caveat goes into the claim's reason instead; PRV's log(0) at q = 1
            accountant = create_accountant(self.params["accountant"])
            accountant.history = [(self.noise_multiplier, self.sampling_rate, self.steps)]  # Opacus's record of steps
            epsilon = float(accountant.get_epsilon(float(delta)))
        caveat = CAVEATS[self.params["accountant"]]
        return LibraryClaim({"divergence": "dp", "epsilon": epsilon, "delta": float(delta)},
                            f"opacus {self.library_version}'s {self.params['accountant'].upper()} accountant (noise "
                            f"multiplier {self.noise_multiplier:g}, sampling rate {self.sampling_rate:g}, {self.steps} "
                            f"steps) at delta {float(delta):g}: epsilon = {epsilon:.6g}{caveat}")

    @property
    def true_privacy(self) -> str:
        if self.noise_multiplier == 0.0:
            return "no noise (noise_multiplier 0): not DP for any epsilon"
        mu = math.sqrt(self.steps) / self.noise_multiplier
        bound = f"at most (Poisson sampling at q = {self.sampling_rate:g} amplifies it) " * (self.sampling_rate < 1)
        return f"{bound}{mu:.4g}-GDP over add/remove neighbours (T = {self.steps}, z = {self.noise_multiplier:g})"

    def _check_params(self) -> None:
        """Opacus checks its own parameters: one run on the first default pair's dataset.  It also loads what
        torch loads on a first run, once here rather than in every forked child that draws a chunk."""
        self._import()
        try:
            self._run(*_records(self.default_pairs()[0][0]), seed=0)
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"{self.name}: Opacus rejected {self.params}: {error}") from None

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        features, labels = _records(dataset)
        if self.params["release"] == "canary_loss" and features.shape[1] != len(self._canary()) - 1:
            raise ValueError(f"release = 'canary_loss' scores the default pairs' canary, which has "
                             f"{len(self._canary()) - 1} features; use release = 'parameters' for records with "
                             f"{features.shape[1]}.")
        seeds = rng.integers(2**32, size=n)
        return np.vstack([self._run(features, labels, int(seed)) for seed in seeds])

    def _run(self, features: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
        """One training run seeded by ``seed`` (initial parameters from ``init_seed`` when it is set)."""
        import torch
        from opacus import PrivacyEngine
        from opacus.data_loader import DPDataLoader

        threads, loader_log = torch.get_num_threads(), logging.getLogger("opacus.data_loader")
        torch.set_num_threads(1)  # a tiny network: threads only add overhead
        level = loader_log.level
        loader_log.setLevel(logging.ERROR)  # a first Poisson batch that is empty is logged, every run
        try:
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                for message in QUIET:
                    warnings.filterwarnings("ignore", message=message)
                init_seed = self.params["init_seed"]
                torch.manual_seed(seed if init_seed is None else int(init_seed))
                network = self._network(features.shape[1])
                torch.manual_seed(seed)
                data = torch.utils.data.TensorDataset(torch.tensor(features, dtype=torch.float32),
                                                      torch.tensor(labels, dtype=torch.float32))
                loader = DPDataLoader(data, sample_rate=self.sampling_rate)
                optimizer = torch.optim.SGD(network.parameters(), lr=self.learning_rate)
                model, optimizer, loader = PrivacyEngine(accountant=self.params["accountant"], secure_mode=False).make_private(
                    module=network, optimizer=optimizer, data_loader=loader, noise_multiplier=self.noise_multiplier,
                    max_grad_norm=self.max_grad_norm, loss_reduction="sum", poisson_sampling=False)
                loss = torch.nn.BCEWithLogitsLoss(reduction="sum")
                batches = iter(())
                for _ in range(self.steps):
                    batch = next(batches, None)
                    if batch is None:  # a new pass over the Poisson batches
                        batches = iter(loader)
                        batch = next(batches)
                    optimizer.zero_grad()
                    loss(model(batch[0])[:, 0], batch[1]).backward()
                    optimizer.step()
                if self.params["release"] == "canary_loss":  # the trained parameters are network's own
                    canary = torch.as_tensor(self._canary()[None, :-1], dtype=torch.float32)
                    with torch.no_grad():
                        value = loss(network(canary)[:, 0], torch.ones(1))
                    return np.array([float(value)])
                return np.concatenate([p.detach().numpy().ravel() for p in network.parameters()]).astype(float)
        finally:
            torch.set_num_threads(threads)
            loader_log.setLevel(level)

    def _network(self, k: int) -> Any:
        """k inputs -> one logit: a linear layer, or a tanh hidden layer of ``hidden`` units then a linear one."""
        import torch

        hidden = int(self.params["hidden"])
        if hidden == 0:
            return torch.nn.Sequential(torch.nn.Linear(k, 1))
        return torch.nn.Sequential(torch.nn.Linear(k, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def _canary(self) -> np.ndarray:
        """The canary record: feature norm ``canary_norm`` on the third feature (unused by the data), label 1."""
        return np.array([0.0, 0.0, self.canary_norm, 1.0])

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """20 records (two informative features, a third always 0, labels 0/1), and the same with one record added
        (add/remove neighbours, Opacus's accounting): p0, the canary (``_canary``); p1, a mislabelled point of
        feature norm ``canary_norm`` along the data's direction (1, 1, 0) / sqrt(2), label 0 where the data say 1
        (the model never fits it, so its gradient stays clipped at C at every step)."""
        generator = np.random.default_rng(20261128)
        features = np.hstack([generator.normal(size=(20, 2)), np.zeros((20, 1))])
        labels = (features[:, 0] + features[:, 1] + generator.normal(size=20) > 0).astype(float)
        base = np.column_stack([features, labels])
        side = self.canary_norm / math.sqrt(2.0)
        mislabelled = np.array([side, side, 0.0, 0.0])
        return [(base, np.vstack([base, record[None, :]])) for record in (self._canary(), mislabelled)]


def _records(dataset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features (m, k), labels (m,)) of records (features..., label), labels checked in {0, 1}."""
    records = np.asarray(dataset, dtype=float)
    if records.ndim != 2 or records.shape[1] < 2:
        raise ValueError("opacus.dp_sgd takes records (features..., label): shape (m, k + 1), k >= 1. "
                         f"Found shape {records.shape}.")
    labels = records[:, -1]
    bad = (labels != 0.0) & (labels != 1.0)
    if np.any(bad):
        raise ValueError(f"opacus.dp_sgd labels (the last column) must be 0 or 1. Found {labels[bad][0]!r}.")
    return records[:, :-1], labels


ADAPTERS = (OpacusDPSGD,)
"""The Opacus learner, registered by :mod:`audit.mechanisms.adapters`."""
