"""A plan's decisions for the transformer blocks, as segments to execute.

plan.json `layers` lists every layer of the chain (embedding, block0..,
final_norm, head, loss; a multi-pass job prefixes each pass's layers with
"p1.", "p2." ...), each with its `decision`:
  keep        runs as the model wrote it;
  checkpoint  starts a recompute segment: only its input is kept, and the
              following `recompute` blocks belong to the same segment (on
              the embedding: the segment starts there, position -1, and
              keeps the token ids);
  offload     a checkpoint whose kept input lives in host memory;
  selective   one block under a selective option (`selective_option`).
The final norm (after the blocks) is position N (the number of blocks): a
`checkpoint` on it is a segment of its own, a `recompute` extends the last
blocks' segment to it; the head is position N + 1, and a `recompute` on it
extends the segment the final norm is in.
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

SELECTIVE_PARTS = ("attention_core", "mlp_activation", "norm_output", "dropout_mask",
                   "experts")
_BLOCK = re.compile(r"^(?:(p\d+)\.)?block(\d+)$")


def _error(message):
    return InputError("remat.apply: " + message, EXIT_BAD_INPUT)


Pass = collections.namedtuple("Pass",
                              "name embedding decisions layers segments final_norm head")
Pass.__new__.__defaults__ = ("keep", "keep")
Pass.__doc__ = """One pass of the plan over the model's modules (a multi-pass job
runs them once per pass: "p1", "p2", ...; a single pass is named None):
embedding is its embedding layer's decision ("keep" or "checkpoint"),
decisions a (decision, selective option or None) per block, layers the
plan layer index per block, segments its Segments (plan_segments; None
from block_decisions), final_norm its final norm's decision ("keep",
"checkpoint": a segment of its own, or "recompute": the end of the last
blocks' segment), head its head's ("keep", or "recompute": the end of the
final norm's segment)."""


def _prefix(name):
    """("p1", "embedding") for "p1.embedding", (None, "head") for "head"."""
    head, _, tail = name.rpartition(".")
    return (head or None), tail


def block_decisions(plan, outside_blocks="refuse"):
    """[Pass] from plan.json, in the order of the plan's passes. A
    `checkpoint` on the embedding starts a segment at it (its kept input is
    the token ids); a `checkpoint` on the final norm right after the blocks
    is a segment of its own, a `recompute` there ends the blocks' last
    segment, and a `recompute` on the head right after it ends the final
    norm's segment. Another decision than `keep` on a layer outside the
    blocks (an offloaded embedding, the loss) is refused, or with
    outside_blocks="keep" run as keep: a segment it started then starts at
    its first block (which keeps its input, one hidden state more)."""
    if outside_blocks not in ("refuse", "keep"):
        raise _error(f"outside_blocks is '{outside_blocks}'; accepted: 'refuse', 'keep'")
    passes = collections.OrderedDict()
    outside_segment = False  # the last layer outside the blocks starts or extends a segment
    last = None  # (pass, decision) of the layer before, where it is a block or the final norm
    for layer in plan["layers"]:
        name, decision = layer["name"], layer["decision"]
        match = _BLOCK.match(name)
        if not match:
            prefix, base = _prefix(name)
            previous, last = last, None
            if base == "embedding" and decision in ("keep", "checkpoint"):
                entry = passes.setdefault(prefix, Pass(prefix, "keep", [], [], None))
                if entry.decisions:
                    raise _error(f"the plan's layer {name} comes after its pass's blocks")
                passes[prefix] = entry._replace(embedding=decision)
                outside_segment = False
                continue
            if base == "final_norm" and _final_norm_carried(passes, prefix, previous, layer):
                passes[prefix] = passes[prefix]._replace(final_norm=decision)
                last = (prefix, decision)
                outside_segment = False
                continue
            if base == "head" and _head_carried(passes, prefix, previous, decision):
                passes[prefix] = passes[prefix]._replace(head=decision)
                outside_segment = False
                continue
            if decision != "keep" and outside_blocks == "refuse":
                raise _error(
                    f"the plan's layer {name} is '{decision}'; remat.apply carries out "
                    "decisions on the transformer blocks, a checkpoint on the embedding, a "
                    "checkpoint or recompute on the final norm and a recompute of the head with "
                    "it (plan with strategy uniform, segment, selective or manual, or pass "
                    "outside_blocks='keep')")
            outside_segment = decision in ("checkpoint", "offload", "recompute")
            continue
        if decision == "recompute" and outside_segment:
            decision = "checkpoint"
        outside_segment = False
        entry = passes.setdefault(match.group(1), Pass(match.group(1), "keep", [], [], None))
        if int(match.group(2)) != len(entry.decisions):
            raise _error(f"the plan's layer {name} is out of order "
                         f"(block{len(entry.decisions)} expected)")
        entry.decisions.append((decision, layer.get("selective_option")))
        entry.layers.append(layer["index"])
        last = (match.group(1), decision)
    out = [p for p in passes.values() if p.decisions]
    if not out:
        raise _error("the plan has no blocks (layers named block0, block1, ...)")
    if any(len(p.decisions) != len(out[0].decisions) for p in out):
        raise _error("the plan's passes have different numbers of blocks")
    return out


def _final_norm_carried(passes, prefix, previous, layer):
    """Whether remat.apply carries out the final norm's decision: keep; a
    checkpoint right after its pass's blocks; a recompute right after a
    block its segment holds."""
    decision = layer["decision"]
    entry = passes.get(prefix)
    if decision == "keep":
        return True
    if entry is None or not entry.decisions or previous is None or previous[0] != prefix:
        return False
    if layer.get("index") is not None and layer["index"] != entry.layers[-1] + 1:
        return False
    if decision == "checkpoint":
        return True
    return decision == "recompute" and previous[1] in ("checkpoint", "recompute", "offload")


def _head_carried(passes, prefix, previous, decision):
    """Whether remat.apply carries out the head's decision: keep; a
    recompute right after a final norm in a segment."""
    if decision == "keep":
        return True
    entry = passes.get(prefix)
    return (decision == "recompute" and entry is not None and previous is not None
            and previous == (prefix, entry.final_norm)
            and entry.final_norm in ("checkpoint", "recompute"))


def _option_parts(option, block):
    parts = tuple((option or "").split("+"))
    for part in parts:
        if part not in SELECTIVE_PARTS:
            raise _error(f"block{block}'s selective option '{option}' is not one of "
                         f"{', '.join(SELECTIVE_PARTS)} (joined by '+')")
    return parts


def segments(decisions, embedding="keep", final_norm="keep", head="keep"):
    """The blocks grouped into Segments, in order; with embedding
    "checkpoint" the first starts at the embedding, position -1; with
    final_norm "checkpoint" the last is the final norm alone, position
    len(decisions), and with "recompute" the last blocks' segment ends
    there; with head "recompute" the final norm's segment ends at the head,
    position len(decisions) + 1."""
    n = len(decisions)
    out = [Segment("checkpoint", -1, 0, None, ())] if embedding == "checkpoint" else []
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
    if final_norm == "checkpoint":
        out.append(Segment("checkpoint", n, n + 1, None, ()))
    elif final_norm == "recompute":
        if not out or out[-1].kind not in ("checkpoint", "offload") or out[-1].stop != n:
            raise _error("the final norm is 'recompute' without a checkpoint before it")
        out[-1] = out[-1]._replace(stop=n + 1)
    if head == "recompute":
        if final_norm == "keep" or out[-1].stop != n + 1:
            raise _error("the head is 'recompute' without the final norm's segment before it")
        out[-1] = out[-1]._replace(stop=n + 2)
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


def _restrict(nodes, start, stop, base):
    """nodes cut to the layers [start, stop), renumbered from base."""
    out = []
    for node in nodes:
        lo, hi = max(node.start, start), min(node.stop, stop)
        if lo >= hi:
            continue
        children = tuple(_restrict(node.children, start, stop, base))
        out.append(node._replace(start=lo - base, stop=hi - base, children=children))
    return out


def plan_segments(plan, outside_blocks="refuse"):
    """[Pass] with their segments: the layers' decisions (block_decisions,
    segments), each checkpoint's and offload's recompute as the schedule
    says where the schedule's top level is those decisions. A schedule
    schedule_tree cannot read is refused when it is multi-level, else the
    layers decide alone."""
    passes = block_decisions(plan, outside_blocks)
    tree = None
    if plan.get("schedule"):
        try:
            tree = schedule_tree(plan)
        except InputError:
            if any(op.get("op") == "recompute" and op.get("save") == "none"
                   for op in plan["schedule"]):
                raise  # multi-level: the layers alone cannot say it
    return [p._replace(segments=_pass_segments(p, tree)) for p in passes]


def _pass_segments(p, tree):
    flat = segments(p.decisions, p.embedding, p.final_norm, p.head)
    if tree is None:
        return flat
    first = p.layers[0]
    start = first - 1 if p.embedding == "checkpoint" else first
    stop = first + len(p.layers) + (p.final_norm != "keep") + (p.head != "keep")
    nodes = _parts(_restrict(tree, start, stop, first))
    top = [(n.kind, n.start, n.stop, n.option) for n in nodes]
    if top != [("checkpoint" if n.kind == "offload" else n.kind, n.start, n.stop, n.option)
               for n in flat]:
        return flat  # layers edited by hand: they decide
    if any(n.kind == "selective" and n.start < 0 for n in _nodes(nodes)):
        raise _error("the plan's schedule recomputes the embedding selectively, which "
                     "remat.apply does not carry out")
    return [f._replace(children=t.children) if f.kind in ("checkpoint", "offload") else f
            for f, t in zip(flat, nodes)]


def _nodes(nodes):
    """Every node of a Segment tree, parents first."""
    for node in nodes:
        yield node
        yield from _nodes(node.children)


def _parts(nodes):
    """nodes with their selective options as parts tuples."""
    return tuple(n._replace(option=_option_parts(n.option, n.start) if n.kind == "selective"
                            else None, children=_parts(n.children)) for n in nodes)
