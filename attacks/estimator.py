"""scikit-learn's estimator protocol, without importing scikit-learn until one of its own functions asks.

The adversaries and their feature maps follow scikit-learn's conventions
(parameters set in ``__init__`` and read back by ``get_params``, ``fit``
returning ``self``, fitted attributes ending in ``_``, inputs checked as
``sklearn.utils.validation.validate_data`` checks them), so ``clone``,
``cross_val_score``, ``GridSearchCV`` and ``check_estimator`` work on them.
They do not subclass ``sklearn.base.BaseEstimator``: importing it imports
``sklearn.utils.fixes``, which imports ``scipy.stats`` (docs/speed.md says
what that costs), and an audit whose classes need no scikit-learn learner
(``linear``, ``polyK``, ``threshold``, ``atoms``) should not pay for it.

So :class:`Estimator` writes the protocol (``get_params``, ``set_params``,
``__repr__``) and lets scikit-learn build the tags (``__sklearn_tags__``,
asked only by scikit-learn's own functions, which have loaded it).
:func:`checked_input` checks the common case itself (a finite 2-D float64
``ndarray``, returned as it is, as ``validate_data`` returns it) and hands
every other input to ``validate_data``, so odd inputs get scikit-learn's
own conversions, errors and warnings; :func:`check_fitted` and
:func:`check_random_state` do the same.  The classes whose feature maps fit
scikit-learn learners (``kernel``, ``mlp``, ``treeK``, ``floatbits``) import
them when they are built (:mod:`attacks.features`).
"""

from __future__ import annotations

import inspect
import numbers
from typing import Any

import numpy as np


class Estimator:
    """Base class of the adversaries and feature steps: scikit-learn's parameter protocol (module docstring)."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The parameters: the arguments of ``__init__``, sorted (scikit-learn's convention: no ``*args``)."""
        if cls.__init__ is object.__init__:
            return []
        parameters = [p for p in inspect.signature(cls.__init__).parameters.values()
                      if p.name != "self" and p.kind != p.VAR_KEYWORD]
        if any(p.kind == p.VAR_POSITIONAL for p in parameters):
            raise RuntimeError(f"{cls.__name__} must name its parameters in __init__'s signature (no *args).")
        return sorted(p.name for p in parameters)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters by name; with ``deep``, those of parameters that are estimators too (``name__param``)."""
        params = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                params.update((f"{name}__{key}", item) for key, item in value.get_params().items())
            params[name] = value
        return params

    def set_params(self, **params) -> Estimator:
        """Set parameters by name (``name__param`` sets a parameter of the estimator ``name``); returns self."""
        if not params:
            return self
        valid = self.get_params(deep=True)
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, nesting, sub_key = key.partition("__")
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for estimator {self}. "
                                 f"Valid parameters are: {self._get_param_names()!r}.")
            if nesting:
                nested.setdefault(name, {})[sub_key] = value
            else:
                setattr(self, name, value)
                valid[name] = value
        for name, sub_params in nested.items():
            valid[name].set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        """``Name(param=value, ...)`` with the parameters that differ from their defaults, as scikit-learn prints."""
        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{name}={value!r}" for name, value in self.get_params(deep=False).items()
                   if repr(value) != repr(defaults.get(name, inspect.Parameter.empty))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):
        from sklearn.base import BaseEstimator  # asked by scikit-learn's functions only, which have loaded it

        return BaseEstimator.__sklearn_tags__(self)


class Transformer(Estimator):
    """A feature step: ``fit(X, y)`` returning self, ``transform(X)``, and ``fit_transform`` as the two in turn."""

    def fit_transform(self, X, y=None, **fit_params):
        return self.fit(X, y, **fit_params).transform(X)

    def __sklearn_tags__(self):
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        tags.transformer_tags = TransformerTags()
        return tags


def checked_input(estimator: Estimator, X, y=None, *, reset: bool = True, ensure_min_samples: int = 1,
                  y_numeric: bool = False, **validate_options):
    """X (and y, when given) checked as ``sklearn.utils.validation.validate_data`` checks them, setting
    ``n_features_in_`` when ``reset``.

    A finite 2-D float64 ``ndarray`` with enough rows (and a finite numeric
    1-D ``ndarray`` y of as many) is what ``validate_data`` returns unchanged
    for the options used here (``dtype`` "numeric" or float64); it is
    returned as it is.  Every other input, and any estimator fitted on named
    features, goes to ``validate_data`` with the same options (scikit-learn
    imported then), which converts it or raises scikit-learn's own error.
    """
    common = (type(X) is np.ndarray and X.ndim == 2 and X.dtype == np.float64 and X.shape[0] >= ensure_min_samples
              and X.shape[1] >= 1 and not hasattr(estimator, "feature_names_in_")
              and (reset or X.shape[1] == getattr(estimator, "n_features_in_", None))
              and (y is None or _plain_target(y, X.shape[0])) and bool(np.isfinite(X).all()))
    if not common:
        from sklearn.utils.validation import validate_data

        if y is None:
            return validate_data(estimator, X, reset=reset, ensure_min_samples=ensure_min_samples, **validate_options)
        return validate_data(estimator, X, y, reset=reset, ensure_min_samples=ensure_min_samples, y_numeric=y_numeric,
                             **validate_options)
    if reset:
        estimator.n_features_in_ = X.shape[1]
    return X if y is None else (X, y)


def _plain_target(y, n_samples: int) -> bool:
    """Whether y is a finite numeric 1-D ``ndarray`` of ``n_samples`` entries (returned as it is by ``validate_data``)."""
    return (type(y) is np.ndarray and y.ndim == 1 and y.shape[0] == n_samples and y.dtype.kind in "biuf"
            and (y.dtype.kind != "f" or bool(np.isfinite(y).all())))


def check_fitted(estimator: Estimator, attribute: str) -> None:
    """Return if ``estimator`` has the fitted ``attribute``; otherwise scikit-learn's ``check_is_fitted``, which
    raises its ``NotFittedError`` unless another fitted attribute is set."""
    if attribute not in vars(estimator):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator)


def check_random_state(seed) -> np.random.RandomState:
    """The ``RandomState`` a ``random_state`` parameter names, by scikit-learn's convention: None the global one,
    an integer a new one seeded with it, a ``RandomState`` itself; anything else is refused by scikit-learn's
    ``check_random_state``."""
    if seed is None:
        return np.random.mtrand._rand
    if isinstance(seed, numbers.Integral):
        return np.random.RandomState(seed)
    if isinstance(seed, np.random.RandomState):
        return seed
    from sklearn.utils import check_random_state as refuse

    return refuse(seed)
