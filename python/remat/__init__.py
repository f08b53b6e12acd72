"""remat: where to checkpoint a transformer to fit a memory budget, and what
it costs, from Python.

    import remat
    plan = remat.plan("config.json", budget="24GB", micro_batch=8, seq_len=2048,
                      precision="amp_bf16")
    print(plan.fits, plan.strategy, plan.predicted_peak_bytes, plan.step_ms)
    for layer in plan.layers:
        print(layer["name"], layer["decision"])

The planning runs in remat's C++ library (the extension remat._core, the
same code as the `planner` command; no PyTorch needed). remat.apply(model,
plan) carries a plan out on a PyTorch model (docs/python.md). Options are the
command's, with underscores: ``micro_batch=8`` is ``--micro-batch 8``.
"""
from ._planner import (Error, Export, GraphPlan, InputError, NoFitError, Plan, ParetoCurve, pareto,
                       plan, run_planner)
from ._profiler import Profile, profile
from ._trace import trace
from .apply import apply, unapply

__version__ = "0.1.0"


def measure(*args, **kwargs):
    """remat's CPU allocator meter around a callable: remat_measure.measure
    (exact tensor bytes and time of a PyTorch program; needs torch and the
    meter library of a remat build with the runtime)."""
    from remat_measure import measure as _measure

    return _measure(*args, **kwargs)


__all__ = ["Error", "Export", "GraphPlan", "InputError", "NoFitError", "Plan", "ParetoCurve",
           "Profile", "apply", "measure", "pareto", "plan", "profile", "run_planner", "trace",
           "unapply", "__version__"]
