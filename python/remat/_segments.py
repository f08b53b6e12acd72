"""A plan's decisions for the transformer blocks, as segments to execute.

plan.json `layers` lists every layer of the chain (embedding, block0..,
final_norm, head, loss; a multi-pass job prefixes each pass's layers with
"p1.", "p2." ...), each with its `decision`:
  keep        runs as the model wrote it;
  checkpoint  starts a recompute segment: only its input is kept, and the
              following `recompute` blocks belong to the same segment;
  offload     a checkpoint whose kept input lives in host memory;
  selective   one block under a selective option (`selective_option`).
The plan's `schedule` says what each segment's recompute keeps: a
recompute with "save": "all" keeps the layer's internals, "selective" (and
an "option", an index into the profile layer's `selective` list) keeps them
under that option, "none" runs the layer without grad to regenerate a
checkpoint inside the recompute (a multi-level schedule: segments inside
segments). schedule_tree reads it into nested Segments; plan_segments uses
them where the schedule's top level is the layers' decisions (a plan whose
layers were edited by hand, or one without a schedule, runs as its layers
say, each segment's recompute keeping everything).
"""
import collections
import re

from ._planner import EXIT_BAD_INPUT, InputError

Segment = collections.namedtuple("Segment", "kind start stop option children")
Segment.__doc__ = """Blocks [start, stop) run as one unit: kind is "keep",
"checkpoint", "offload" or "selective" (option: the selective option's
parts, e.g. ("attention_core", "mlp_activation")). A checkpoint's or
offload's children are the Segments its recompute runs, covering
[start, stop) in order: "keep" and "selective" blocks, and "checkpoint"
segments nested inside it."""

SELECTIVE_PARTS = ("attention_core", "mlp_activation", "norm_output", "dropout_mask")
_BLOCK = re.compile(r"^(?:(p\d+)\.)?block(\d+)$")


def _error(message):
    return InputError("remat.apply: " + message, EXIT_BAD_INPUT)


def block_decisions(plan, outside_blocks="refuse"):
    """([(decision, selective option or None)] per block, [plan layer index
    per block]), from plan.json. Every pass of a multi-pass plan runs the
    same modules, so their decisions must agree. A decision other than
    `keep` on a layer outside the blocks is refused, or with
    outside_blocks="keep" run as keep: a segment it started then starts at
    its first block (which keeps its input, one hidden state more)."""
    if outside_blocks not in ("refuse", "keep"):
        raise _error(f"outside_blocks is '{outside_blocks}'; accepted: 'refuse', 'keep'")
    passes = collections.OrderedDict()
    outside_segment = False  # the last layer outside the blocks starts or extends a segment
    for layer in plan["layers"]:
        name, decision = layer["name"], layer["decision"]
        match = _BLOCK.match(name)
        if not match:
            if decision != "keep" and outside_blocks == "refuse":
                raise _error(
                    f"the plan's layer {name} is '{decision}'; remat.apply carries out "
                    "decisions on the transformer blocks only (plan with strategy uniform, "
                    "segment, selective or manual, or pass outside_blocks='keep')")
            outside_segment = decision in ("checkpoint", "offload", "recompute")
            continue
        if decision == "recompute" and outside_segment:
            decision = "checkpoint"
        outside_segment = False
        entries = passes.setdefault(match.group(1), [])
        if int(match.group(2)) != len(entries):
            raise _error(f"the plan's layer {name} is out of order (block{len(entries)} expected)")
        entries.append((decision, layer.get("selective_option"), layer["index"]))
    if not passes:
        raise _error("the plan has no blocks (layers named block0, block1, ...)")
    first_name, first = next(iter(passes.items()))
    for name, entries in passes.items():
        if [e[:2] for e in entries] != [e[:2] for e in first]:
            raise _error(f"the plan's passes {first_name} and {name} decide differently for "
                         "the same blocks; remat.apply gives each block module one decision")
    return [e[:2] for e in first], [e[2] for e in first]


def _option_parts(option, block):
    parts = tuple((option or "").split("+"))
    for part in parts:
        if part not in SELECTIVE_PARTS:
            raise _error(f"block{block}'s selective option '{option}' is not one of "
                         f"{', '.join(SELECTIVE_PARTS)} (joined by '+')")
    return parts


def segments(decisions):
    """The blocks grouped into Segments, in order."""
    out = []
    for i, (decision, option) in enumerate(decisions):
        if decision == "recompute":
            if not out or out[-1].kind not in ("checkpoint", "offload") or out[-1].stop != i:
                raise _error(f"block{i} is 'recompute' without a checkpoint before it")
            out[-1] = out[-1]._replace(stop=i + 1)
        elif decision in ("keep", "checkpoint", "offload"):
            out.append(Segment(decision, i, i + 1, None, ()))
        elif decision == "selective":
            out.append(Segment(decision, i, i + 1, _option_parts(option, i), ()))
        else:
            raise _error(f"block{i}'s decision '{decision}' is not keep, checkpoint, "
                         "recompute, selective or offload")
    return [seg._replace(children=(Segment("keep", seg.start, seg.stop, None, ()),))
            if seg.kind in ("checkpoint", "offload") else seg for seg in out]


def schedule_tree(plan):
    """The plan's schedule as nested Segments over the chain's layers (plan
    layer indices): the forward sweep's layers in order, each "keep" or
    "selective" where the forward keeps its internals, and each run of
    layers the forward runs without keeping them a "checkpoint" Segment
    whose children come from the recompute sweep that regenerates it.
    Raises InputError for a schedule of other ops or order."""
    ops = [op for op in plan.get("schedule", [])
           if op.get("op") in ("forward", "recompute", "backward")]
    profile_layers = plan.get("profile", {}).get("layers", [])
    at = [0]

    def bad(why):
        op = ops[at[0]] if at[0] < len(ops) else "its end"
        return _error(f"the plan's schedule is not one remat.apply can follow: {why} at op "
                      f"{at[0]} ({op}); plan again with the planner")

    def take(kind, layer):
        if at[0] >= len(ops) or ops[at[0]].get("op") != kind or ops[at[0]].get("layer") != layer:
            raise bad(f"{kind} of layer {layer} expected")
        at[0] += 1
        return ops[at[0] - 1]

    def option(op):
        try:
            return profile_layers[op["layer"]]["selective"][op["option"]]["name"]
        except (KeyError, IndexError, TypeError):
            raise bad("a selective option the profile does not list")

    def sweep(kind, start, stop):
        saves = {layer: take(kind, layer) for layer in range(start, stop)}
        out, j = [], stop - 1
        while j >= start:
            save = saves[j].get("save")
            if save == "none":
                op = ops[at[0]] if at[0] < len(ops) else {}
                first = op.get("layer")
                if op.get("op") != "recompute" or not isinstance(first, int) or not (
                        start <= first <= j and all(saves[i].get("save") == "none"
                                                    for i in range(first, j + 1))):
                    raise bad(f"a recompute of the layers run without grad up to layer {j} "
                              "expected")
                children = tuple(sweep("recompute", first, j + 1))
                out.append(Segment("checkpoint", first, j + 1, None, children))
                j = first - 1
            elif save in ("all", "selective"):
                part = option(saves[j]) if save == "selective" else None
                out.append(Segment("selective" if part else "keep", j, j + 1, part, ()))
                take("backward", j)
                j -= 1
            else:
                raise bad(f"layer {j}'s save '{save}' is not none, all or selective")
        return out[::-1]

    layers = 0
    while layers < len(ops) and ops[layers].get("op") == "forward":
        layers += 1
    tree = sweep("forward", 0, layers)
    if at[0] != len(ops):
        raise bad("nothing more expected")
    return tree


def _restrict(nodes, start, stop):
    """nodes cut to the layers [start, stop), renumbered from start."""
    out = []
    for node in nodes:
        lo, hi = max(node.start, start), min(node.stop, stop)
        if lo >= hi:
            continue
        children = tuple(_restrict(node.children, start, stop))
        out.append(node._replace(start=lo - start, stop=hi - start, children=children))
    return out


def plan_segments(plan, outside_blocks="refuse"):
    """(Segments of the blocks, [plan layer index per block]): the layers'
    decisions (block_decisions, segments), each checkpoint's and offload's
    recompute as the schedule says where the schedule's top level is those
    decisions. A schedule schedule_tree cannot read is refused when it is
    multi-level, else the layers decide alone; a multi-pass plan whose
    schedule recomputes inside a segment other than keeping everything is
    refused."""
    decisions, layer_indices = block_decisions(plan, outside_blocks)
    flat = segments(decisions)
    if not plan.get("schedule"):
        return flat, layer_indices
    first = layer_indices[0]
    try:
        tree = _parts(_restrict(schedule_tree(plan), first, first + len(layer_indices)))
    except InputError:
        if any(op.get("op") == "recompute" and op.get("save") == "none" for op in plan["schedule"]):
            raise  # multi-level: the layers alone cannot say it
        return flat, layer_indices
    top = [(n.kind, n.start, n.stop, n.option) for n in tree]
    if top != [("checkpoint" if n.kind == "offload" else n.kind, n.start, n.stop, n.option)
               for n in flat]:
        return flat, layer_indices  # layers edited by hand: they decide
    passes = sum(1 for l in plan["layers"] if _BLOCK.match(l["name"])) // len(layer_indices)
    if passes > 1 and any(c.kind != "keep" for n in tree for c in n.children):
        raise _error("the plan's schedule recomputes inside the segments of a multi-pass plan "
                     "(nested or selective), which remat.apply does not carry out; plan with "
                     "strategy optimal-single, segment, uniform, selective or manual")
    return [f._replace(children=t.children) if f.kind in ("checkpoint", "offload") else f
            for f, t in zip(flat, tree)], layer_indices


def _parts(nodes):
    """nodes with their selective options as parts tuples."""
    return tuple(n._replace(option=_option_parts(n.option, n.start) if n.kind == "selective"
                            else None, children=_parts(n.children)) for n in nodes)
