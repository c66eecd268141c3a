"""The mechanism registry: build a mechanism by name or wrap user code, list what exists.

Built-ins (``builtin.py``) and the known-buggy suite (``buggy.py``) are
registered from their classes; library adapters register themselves from
``audit/mechanisms/adapters/__init__.py`` with :func:`register`, naming the
modules they need in ``MechanismInfo.requires`` so that a missing library
shows up as "unavailable: install the extra capaudit[...]: ..." instead of an import
crash.  Adapter modules are imported only when one is built, and never from the
current directory or a config's folder (:func:`library_import_path`): only a
config's ``callable`` runs code from there.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from functools import partial
from typing import Any

from audit.mechanisms.base import (
    REQUIRED,
    BaseMechanism,
    CallableMechanism,
    Mechanism,
    MechanismInfo,
    library_import_path,
)

Factory = Callable[..., Mechanism] | str
_REGISTRY: dict[str, tuple[Factory, MechanismInfo]] = {}
_LOADED = False
_LOAD_ERROR: Exception | None = None


def register(name: str, factory: Factory, info: MechanismInfo) -> None:
    """Add a mechanism to the registry.

    Parameters
    ----------
    name : str
        The name used in configs (``[mechanism] name = ...``).
    factory : callable or str
        Called with the mechanism's parameters as keyword arguments; a string
        ``"package.module:attribute"`` is imported only when the mechanism is
        built, so a registrant need not import its library.
    info : MechanismInfo
        What ``capaudit mechanisms`` shows; ``info.parameters`` lists the
        accepted parameters and their defaults and ``info.requires`` the
        modules the factory needs.
    """
    if name in _REGISTRY:
        raise ValueError(f"a mechanism named {name!r} is already registered.")
    _REGISTRY[name] = (factory, info)


def info_from_class(cls: type[BaseMechanism], kind: str) -> MechanismInfo:
    """Registry record of a :class:`BaseMechanism` subclass; parameters come from its ``__init__``."""
    parameters = {
        parameter.name: REQUIRED if parameter.default is inspect.Parameter.empty else parameter.default
        for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }
    return MechanismInfo(
        name=cls.name,
        kind=kind,
        description=cls.description,
        parameters=parameters,
        true_privacy=cls.privacy_claim,
    )


def _load() -> None:
    """Register the built-ins and buggy suite, then import the adapters package (which registers itself).

    Runs once; an adapters package that fails to import is a bug in capaudit
    (missing libraries are handled inside it), so its error is raised again
    on every later call rather than leaving a silently shorter registry.
    """
    global _LOADED, _LOAD_ERROR
    if not _LOADED:
        _LOADED = True
        from audit.mechanisms import buggy, builtin, gibbs

        for module, kind in ((builtin, "builtin"), (gibbs, "builtin"), (buggy, "buggy")):
            for cls in module.MECHANISMS:
                register(cls.name, cls, info_from_class(cls, kind))
        try:
            with library_import_path():
                importlib.import_module("audit.mechanisms.adapters")
        except ModuleNotFoundError as error:
            if error.name != "audit.mechanisms.adapters":
                _LOAD_ERROR = error
        except Exception as error:
            _LOAD_ERROR = error
    if _LOAD_ERROR is not None:
        raise ImportError(f"the mechanism adapters failed to load: {_LOAD_ERROR}") from _LOAD_ERROR


def list_mechanisms() -> list[MechanismInfo]:
    """Every registered mechanism, built-ins first; see ``MechanismInfo.availability``."""
    _load()
    return [info for _, info in _REGISTRY.values()]


def make_mechanism(
    name: str | None = None, params: dict | None = None, *, callable: str | Callable[..., Any] | None = None
) -> Mechanism:
    """Build a registered mechanism by name, or wrap a user function.

    Parameters
    ----------
    name : str, optional
        A name from :func:`list_mechanisms`.
    params : dict, optional
        Keyword arguments: the mechanism's parameters, or for ``callable``
        arguments bound to the user function with :func:`functools.partial`.
    callable : str or function, optional
        A user function ``f(dataset, n, rng) -> array of shape (n, d)``, or
        ``"package.module:function"`` naming one (imported here: a config
        runs the code it names).

    Returns
    -------
    Mechanism

    Raises
    ------
    ValueError
        On an unknown name, unknown or missing parameters, a parameter value
        the mechanism rejects, an unavailable library, or a callable that
        cannot be imported; the message names what was wrong.
    """
    params = dict(params or {})
    if (name is None) == (callable is None):
        raise ValueError(
            f"give exactly one of a mechanism name or a callable 'package.module:function'. "
            f"Found name={name!r}, callable={callable!r}."
        )
    if callable is not None:
        return _wrap_callable(callable, params)
    _load()
    if name not in _REGISTRY:
        hint = _did_you_mean(str(name), list(_REGISTRY))
        raise ValueError(f"unknown mechanism {name!r};{hint} accepted names: {', '.join(sorted(_REGISTRY))}.")
    factory, info = _REGISTRY[name]
    if not info.available:
        raise ValueError(f"mechanism {name!r} is {info.availability}.")
    unknown = sorted(set(params) - set(info.parameters))
    if unknown:
        raise ValueError(
            f"mechanism {name!r} has no parameter(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(info.parameters) or 'none'}."
        )
    missing = [key for key, default in info.parameters.items() if default == REQUIRED and key not in params]
    if missing:
        raise ValueError(f"mechanism {name!r} needs parameter(s) {', '.join(missing)}.")
    if isinstance(factory, str):
        with library_import_path():
            factory = _import_attribute(factory, what=f"factory of mechanism {name!r}")
    try:
        return factory(**params)
    except (TypeError, ValueError, ArithmeticError) as error:  # e.g. sensitivity = {}: a bad parameter value
        kind = "" if isinstance(error, ValueError) else f"{type(error).__name__}: "
        raise ValueError(f"mechanism {name!r}: {kind}{error}") from None


def _import_attribute(spec: str, what: str) -> Any:
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"{what} must be written 'package.module:function'. Found {spec!r}.")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as error:  # the module's own code ran: whatever it does is its error
        missing = isinstance(error, ModuleNotFoundError) and error.name == module_name and "." not in module_name
        hint = _did_you_mean(module_name, [found.name for found in pkgutil.iter_modules()]) if missing else ""
        raise ValueError(
            f"{what} {spec!r}: cannot import module {module_name!r} ({type(error).__name__}: {error}).{hint}"
        ) from error
    value = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            names = [name for name in dir(value) if not name.startswith("_") and callable(getattr(value, name, None))]
            raise ValueError(f"{what} {spec!r}: module {module_name!r} has no attribute {attribute!r}."
                             f"{_did_you_mean(part, names)}") from None
    return value


def _did_you_mean(name: str, known: list[str]) -> str:
    """`` did you mean 'x'?`` for the known name closest to a misspelt one, or "" when none is close."""
    close = difflib.get_close_matches(name, known, n=1)
    return f" did you mean {close[0]!r}?" if close else ""


def _accepted_params(function: Callable[..., Any]) -> str:
    """The parameters a user mechanism takes after (dataset, n, rng), as a config's ``params`` would name them."""
    try:
        parameters = list(inspect.signature(function).parameters.values())[3:]
    except (TypeError, ValueError):
        return "unknown"
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return ", ".join(names) or "none"


def function_name(function: Callable[..., Any]) -> str:
    """``"module:qualified.name"`` of a function object, as a config would name it."""
    return f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', repr(function))}"


def _wrap_callable(spec: str | Callable[..., Any], params: dict) -> CallableMechanism:
    if isinstance(spec, str):
        function = _import_attribute(spec, what="mechanism callable")
    else:
        function, spec = spec, function_name(spec)
    if not callable(function):
        raise ValueError(f"mechanism callable {spec!r} is not callable. Found {type(function).__name__}.")
    if params:
        try:
            inspect.signature(function).bind_partial(**params)
        except TypeError as error:
            raise ValueError(f"mechanism callable {spec!r} does not accept params {sorted(params)}: {error}; "
                             f"accepted after (dataset, n, rng): {_accepted_params(function)}.") from None
        except ValueError:
            pass  # no signature available (a builtin): partial will tell at call time
        function = partial(function, **params)
    return CallableMechanism(spec, function, params)
