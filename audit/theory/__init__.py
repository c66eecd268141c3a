"""capaudit's theory, in one place (docs/theory.md).

* :mod:`audit.theory.bounds`: closed forms of sections 5-6, one pure function each;
* :mod:`audit.theory.gibbs`: closed forms of on-average KL privacy for posterior sampling (section 8);
* :mod:`audit.theory.exact`: exact restricted divergences of two 1-D laws (its quadrature rule in
  :mod:`audit.theory.exact_rule`, its solvers in :mod:`audit.theory.exact_kl`, :mod:`audit.theory.exact_renyi`
  and :mod:`audit.theory.exact_ipm`), read from the built-in mechanisms' Laplace and Gaussian laws
  (:mod:`audit.theory.laws`, no ``scipy.stats``) or from ``scipy.stats`` laws;
* :mod:`audit.theory.table`: the (law, class, divergence) -> bound table the audits and ``capaudit theory`` read;
* :mod:`audit.theory.composition`: the right-hand sides of the composition theorems (``[[checks]]``);
* :mod:`audit.theory.tradeoff`: trade-off functions, privacy profiles, GDP and zCDP (section 9);
* :mod:`audit.theory.check`: published bounds against the audit's exact values and lower confidence bounds.
"""
