"""The config's walk: follow ``config`` from ``audit.commands.api.run_audit`` through the calls that pass it (or a part) on.

Static, on the source of ROOT's audit/ and attacks/: in a function, every call
whose arguments mention a tracked name (``config``, ``config.attacks``,
``config.attacks.n_samples``, ...) is followed into the called function (a
function of the same module, or one imported by name or through its module),
where the parameters bound to those arguments become the tracked names.  A local
name is tracked when it is bound to the config: to a tracked name or a part of
one (``run = config.run``, ``for claim in config.claims``), or to a call on a
tracked name that returns the config or one of its parts (:data:`PARTS`, read
off the callee's return annotation: ``audit_config = load_config(config)``).
What is computed from the config (the rows, a generator seeded from it, the
mechanism it builds) is not the config and is not followed: the walk measures
where the config is passed on, not every value that depends on it (followed so,
it would walk through the attacks and the inputs as well).  Each function
entered is a *stay* (each function once, depth first, in the order of the
calls).  A *climb* is a call made from a room (module) after the walk went down
into another room from it: the walk climbs back up to the caller's room to go
on.

A method or property of the config's parts used on a tracked name
(``config.mechanism.build()``, ``config.attacks.held_out``) is a stay in it.
A reading of issue 33's measure ("following config from run_audit ... climbs
back into rooms above it"), static: by name, and by return annotation for a call
that returns the config.  Run by hand::

    python benchmarks/config_walk.py [ROOT]    # ROOT: a checkout (default this one); prints stays and climbs

Without ROOT it also writes benchmarks/results/config_walk.md (the figure, the commit and each climb), which
docs/benchmarks.md quotes.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]).resolve()


def module_of(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


FUNCS, IMPORTS = {}, {}
for package in ("audit", "attacks"):
    for path in (ROOT / package).rglob("*.py"):
        module = module_of(path)
        tree = ast.parse(path.read_text())
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        IMPORTS[module] = names
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                FUNCS[f"{module}.{node.name}"] = (module, node)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        FUNCS[f"{module}.{node.name}.{item.name}"] = (module, item)
                FUNCS[f"{module}.{node.name}"] = (module, next((i for i in node.body if isinstance(i, ast.FunctionDef)
                                                              and i.name == "__init__"), None))


PARTS = ("AuditConfig", "MechanismSpec", "Claim", "AttackSpec", "RunSpec", "CheckSpec")
"""The config and its parts: a method or property of theirs used on a tracked name is a call into it."""
MEMBERS = {}
for qualified in FUNCS:
    *where, cls, member = qualified.split(".")
    if cls in PARTS and member not in ("__init__", "__post_init__"):
        MEMBERS.setdefault(member, qualified)


def root(expr):
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def mentions(expr, tracked):
    return any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(expr))


def resolve(module, func):
    if isinstance(func, ast.Name):
        name = func.id
        if f"{module}.{name}" in FUNCS:
            return f"{module}.{name}"
        target = IMPORTS[module].get(name)
        return target if target in FUNCS else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base = IMPORTS[module].get(func.value.id, func.value.id)
        target = f"{base}.{func.attr}"
        if target in FUNCS:
            return target
        target = f"{module}.{func.value.id}.{func.attr}"  # Class.method in the same module
        return target if target in FUNCS else None
    return None


def bound(node, call, tracked):
    """The callee's parameter names bound to arguments that mention a tracked name."""
    if node is None:
        return set()
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    names = set()
    for i, arg in enumerate(call.args):
        if mentions(arg, tracked) and i < len(params):
            names.add(params[i])
    for keyword in call.keywords:
        if keyword.arg and mentions(keyword.value, tracked):
            names.add(keyword.arg)
    return names


def targets(target):
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def returns_config(module, call):
    """Whether ``call`` calls a function of ROOT annotated to return the config or one of its parts (:data:`PARTS`)."""
    target = resolve(module, call.func)
    node = FUNCS[target][1] if target else None
    return node is not None and node.returns is not None and any(
        isinstance(n, ast.Name) and n.id in PARTS or isinstance(n, ast.Constant) and n.value in PARTS
        for n in ast.walk(node.returns))


def carried(module, expr, tracked):
    """Whether ``expr`` is the config: a tracked name or a part of one (``config.attacks``), or a call returning
    the config or a part of it (``load_config(config)``) on a tracked name."""
    if isinstance(expr, ast.Call):
        return returns_config(module, expr) and mentions(expr, tracked)
    return root(expr) in tracked


def grown(module, node, tracked):
    """``tracked`` plus every local name bound to the config (:func:`carried`), to a fixpoint."""
    tracked = set(tracked)
    while True:
        before = len(tracked)
        for n in ast.walk(node):
            if isinstance(n, ast.Assign) and carried(module, n.value, tracked):
                for t in n.targets:
                    tracked |= targets(t)
            elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None and carried(module, n.value,
                                                                                                  tracked):
                tracked |= targets(n.target)
            elif isinstance(n, (ast.For, ast.comprehension)) and carried(module, n.iter, tracked):
                tracked |= targets(n.target)
        if len(tracked) == before:
            return tracked


stays, climbs, entries = [], [], {}


def walk(name, tracked, path):
    module, node = FUNCS[name]
    if name in stays:
        return
    if path and stays and path[-1][0] != FUNCS[stays[-1]][0]:
        climbs.append(f"back in {path[-1][0]} (from {FUNCS[stays[-1]][0]}) to call {name}")
    stays.append(name)
    entries[module] = entries.get(module, 0) + 1
    if node is None:
        return
    tracked = grown(module, node, tracked)
    for use in (n for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in MEMBERS):
        if root(use.value) in tracked and MEMBERS[use.attr] not in {f for _, f in path + [(module, name)]}:
            walk(MEMBERS[use.attr], {"self"}, path + [(module, name)])
    calls = (n for n in ast.walk(node) if isinstance(n, ast.Call))  # ast.walk is breadth first: put them in source order
    for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        if not any(mentions(a, tracked) for a in call.args + [k.value for k in call.keywords]):
            continue
        target = resolve(module, call.func)
        if target is None or target in {f for _, f in path + [(module, name)]}:
            continue
        params = bound(FUNCS[target][1], call, tracked)
        if params:
            walk(target, params, path + [(module, name)])


if __name__ == "__main__":
    walk("audit.commands.api.run_audit", {"config"}, [])
    print(f"stays {len(stays)}, climbs {len(climbs)}, stays in audit/config/load.py {entries.get('audit.config.load', 0)}")
    for line in climbs:
        print("  climb:", line)
    if len(sys.argv) == 1:
        from results_file import commit, write  # beside this script

        write(Path(__file__).parent / "results" / "config_walk.md",
              f"Code: {commit()}.\n\n| stays | climbs | stays in audit/config/load.py |\n|---|---|---|\n"
              f"| {len(stays)} | {len(climbs)} | {entries.get('audit.config.load', 0)} |\n\nThe climbs:\n\n"
              + "".join(f"- {line}\n" for line in climbs))
