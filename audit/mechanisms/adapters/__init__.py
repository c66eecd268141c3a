"""Adapters that audit real mechanisms of OpenDP, diffprivlib and PyDP, and their registration.

Every adapter but the learners and ``opendp.measurement`` releases the sum of the dataset's records
through the library's own mechanism (the library draws the noise; nothing is re-implemented here);
diffprivlib's learners (:mod:`.diffprivlib_learners`) release fitted parameters, Opacus's
DP-SGD (:mod:`.opacus_learners`) a trained network's parameters or its loss on a canary, and
``opendp.measurement`` (:mod:`.opendp_measurement`) what its chain of OpenDP constructors computes.
Each record is clamped to ``[0, sensitivity]`` (and rounded to an integer for
integer mechanisms) before summing, so the declared ``sensitivity`` is the
sum's exact sensitivity under both replace-one and add/remove neighbours:
that is what the libraries require of their input and what their privacy
claims assume.

The shared base class and noise families are in :mod:`.library`, each library's
adapters in its own module; this package registers them.  The libraries are
optional.  Importing this package imports none of them:
a missing or broken library (diffprivlib 0.6.6 raises on import with
scikit-learn 1.9) shows up in ``capaudit mechanisms`` as "unavailable" with
the pip extra to install, and :func:`audit.mechanisms.make_mechanism` on it
raises a ``ValueError`` saying so.

Libraries that draw one output per call are called in a tight loop over
chunks of :data:`CHUNK_SIZE` outputs, each chunk seeded from the audit's
``rng`` in a fixed order, so that ``n_jobs`` chunks can run at once (joblib)
without changing the outputs of a seedable library.
"""

from __future__ import annotations

import dataclasses

from audit.mechanisms.adapters import diffprivlib, diffprivlib_learners, opacus_learners, opendp, opendp_measurement, pydp
from audit.mechanisms.adapters.library import diffprivlib_hint
from audit.mechanisms.registry import info_from_class, register


def _register_adapters() -> None:
    for module in (opendp, opendp_measurement, diffprivlib, diffprivlib_learners, opacus_learners, pydp):
        for cls in module.ADAPTERS:
            hint = diffprivlib_hint() if cls.library == "diffprivlib" else cls.install_hint()
            info = dataclasses.replace(info_from_class(cls, "adapter"), requires=(cls.module,), install_hint=hint)
            register(cls.name, cls, info)


_register_adapters()
