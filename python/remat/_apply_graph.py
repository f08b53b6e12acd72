"""remat.apply of a graph plan (remat.GraphPlan, docs/graphs.md): an
encoder-decoder's plan carried out on the real model, chain by chain.

The plan's chains are the model's chains as the tracer found them
(_blocks.find_chains: "encoder", the blocks of transformers'
get_encoder(); "decoder", get_decoder()'s; a vision-language model's
"vision" and "language"; two towers' "vision" and "text"). Each chain's
decisions, named by the chain's layer_names (embedding, block0.., head), are carried out on
its blocks as remat.apply carries out a chain plan's (apply._pass_forwards:
checkpoint + recompute segments under torch.utils.checkpoint.checkpoint,
use_reentrant=False, selective blocks, each recompute as the chain's
schedule says). A decoder block's cross-attention reads the encoder's
output as an argument of the block: a checkpointed block keeps it by
reference (the encoder's output is held once, as the graph's edge says).

Refused, with what was expected: a plan whose chains are not the model's
(count, names, blocks per chain), a decision other than keep on a layer
outside the blocks (the embedding, the encoder's final norm, the decoder's
head and loss; outside_blocks="keep" runs those as keep), and the model's
own checkpointing left on. The shape is checked at each chain's first
forward with grad against the plan's input_bytes of its first block.
"""
from ._planner import EXIT_BAD_INPUT, InputError
from ._segments import _BLOCK, plan_segments


def _error(message):
    return InputError("remat.apply: " + message, EXIT_BAD_INPUT)


def _chain_plan(chain, outside_blocks):
    """A chain plan.json (layers, schedule, profile input_bytes) of one
    chain of the graph plan; decisions outside the blocks refused, or with
    outside_blocks="keep" made keep (a recompute after one then starts its
    segment)."""
    name, decisions = chain.get("name"), chain.get("decisions") or []
    names, inputs = chain.get("layer_names"), chain.get("input_bytes")
    if not isinstance(names, list) or len(names) != len(decisions) or (
            not isinstance(inputs, list) or len(inputs) != len(decisions)):
        raise _error(f"the graph plan's chain '{name}' has no layer_names and input_bytes for "
                     f"its {len(decisions)} decisions; accepted: planner --format json of a "
                     "graph profile (remat.plan of remat.trace's graph)")
    layers, started = [], False
    for i, (layer, decision) in enumerate(zip(names, decisions)):
        if not _BLOCK.match(layer):
            if decision != "keep":
                if outside_blocks != "keep":
                    raise _error(
                        f"the graph plan's chain '{name}' has '{decision}' on its layer "
                        f"{layer}; remat.apply carries out a graph plan's decisions on the "
                        "blocks (plan with strategy none, uniform, segment, selective or "
                        "manual, or pass outside_blocks='keep')")
                started = decision in ("checkpoint", "offload", "recompute")
                decision = "keep"
        elif decision == "recompute" and started:
            decision, started = "checkpoint", False
        else:
            started = False
        layers.append({"name": layer, "index": i, "decision": decision})
    return {"layers": layers, "schedule": chain.get("schedule") or [],
            "profile": {"layers": [{"input_bytes": b} for b in inputs]}}


def _matched(model, plan):
    """[(chain plan name, model chain)] in the plan's order, or InputError
    naming what the plan has and what the model has."""
    from ._blocks import find_chains

    chains = find_chains(model)
    have = ", ".join(f"{n}: {m.__class__.__name__}.{p} ({len(b)} blocks)"
                     for n, m, p, b in chains)
    planned = [c.get("name") for c in plan["chains"]]
    if sorted(planned) != sorted(n for n, _, _, _ in chains):
        raise _error(f"the graph plan has {len(planned)} chains ({', '.join(map(str, planned))}), "
                     f"{type(model).__name__} has {len(chains)} ({have}): a plan made for "
                     "another model")
    by_name = {c[0]: c for c in chains}
    return [(c, by_name[c["name"]]) for c in plan["chains"]]


def apply_graph(model, plan, outside_blocks="refuse"):
    """Carries out the graph plan `plan` (its JSON) on `model`'s chains;
    returns the model (remat.apply's contract: unapply restores it)."""
    from .apply import _STATE, _Applied, _dispatch, _pass_forwards, unapply

    if outside_blocks not in ("refuse", "keep"):
        raise _error(f"outside_blocks is '{outside_blocks}'; accepted: 'refuse', 'keep'")
    work = []
    for chain, (name, module, path, blocks) in _matched(model, plan):
        chain_plan = _chain_plan(chain, outside_blocks)
        passes = plan_segments(chain_plan)
        where = f"{type(module).__name__}.{path}"
        if len(passes) != 1:
            raise _error(f"the graph plan's chain '{name}' has {len(passes)} passes; a "
                         "chain of a graph plan has one")
        if len(passes[0].decisions) != len(blocks):
            raise _error(f"the graph plan's chain '{name}' has {len(passes[0].decisions)} "
                         f"blocks, the model's {name} ({where}) has {len(blocks)}: a plan "
                         "made for another model")
        if any(getattr(b, "gradient_checkpointing", False) for b in blocks):
            raise _error("the model's own activation checkpointing is on; call "
                         "model.gradient_checkpointing_disable() first: the plan replaces it")
        work.append((name, blocks, passes[0], chain_plan))
    unapply(model)
    modules = [b for _, blocks, _, _ in work for b in blocks]
    state = _Applied(modules, 1)
    try:
        for name, blocks, p, chain_plan in work:
            forwards = _pass_forwards(p, name, blocks, None, (None, None), state, chain_plan)
            for block in blocks:
                chosen = forwards.get(id(block))
                if chosen is not None:
                    block.forward = _dispatch(state, block.forward, [chosen])
    except Exception:
        state.restore()
        raise
    model.__dict__[_STATE] = state
    return model
