"""What the tests of traced and applied plans share: remat's CPU meter,
loaded before torch allocates anything (import this module before torch),
torch and transformers where installed (None otherwise: the tests skip,
tests/python/needs.py), and the metered peak of a training step.

    from traced_steps import adamw_step_peak, metered_peak, remat_measure, torch, transformers
"""
import gc

import needs

torch = transformers = remat_measure = None
if not needs.missing("torch") and not needs.meter_problem():
    import remat_measure

    remat_measure.load()  # before torch allocates the models' tensors
if not needs.missing("torch"):
    import torch

    transformers = needs.optional("transformers")


def metered_peak(step, start):
    """The peak of step() over `start` (bytes in use before the model was
    made): a first step makes AdamW's moments, the second is metered."""
    step()
    gc.collect()
    m = remat_measure.measure(step, timeline=False)
    return m.baseline_bytes + m.peak_bytes - start


def adamw_step_peak(model, batch, start):
    """The metered peak over `start` of one AdamW step of `model` on `batch`
    (its loss model(**batch).loss), the second: the first makes the
    moments."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad()
    gc.collect()
    return metered_peak(step, start)
