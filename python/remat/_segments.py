"""A plan's decisions for the transformer blocks, as segments to execute.

plan.json `layers` lists every layer of the chain (embedding, block0..,
final_norm, head, loss; a multi-pass job prefixes each pass's layers with
"p1.", "p2." ...), each with its `decision`:
  keep        runs as the model wrote it;
  checkpoint  starts a recompute segment: only its input is kept, and the
              following `recompute` blocks belong to the same segment;
  offload     a checkpoint whose kept input lives in host memory;
  selective   one block under a selective option (`selective_option`).
A schedule that recomputes a layer without grad ("recompute ... save none")
is multi-level: segments inside segments, which this reading refuses.
"""
import collections
import re

from ._planner import EXIT_BAD_INPUT, InputError

Segment = collections.namedtuple("Segment", "kind start stop option")
Segment.__doc__ = """Blocks [start, stop) run as one unit: kind is "keep",
"checkpoint", "offload" or "selective" (option: the selective option's
parts, e.g. ("attention_core", "mlp_activation"))."""

SELECTIVE_PARTS = ("attention_core", "mlp_activation", "norm_output", "dropout_mask")
_BLOCK = re.compile(r"^(?:(p\d+)\.)?block(\d+)$")


def _error(message):
    return InputError("remat.apply: " + message, EXIT_BAD_INPUT)


def _check_single_level(schedule):
    for op in schedule:
        if op.get("op") == "recompute" and op.get("save") == "none":
            raise _error(
                f"the plan's schedule recomputes layer {op.get('layer')} without grad (a "
                "multi-level schedule: checkpoints regenerated inside a recompute), which "
                "remat.apply does not carry out; plan with strategy optimal-single, segment, "
                "uniform, selective or manual")


def block_decisions(plan, outside_blocks="refuse"):
    """([(decision, selective option or None)] per block, [plan layer index
    per block]), from plan.json. Every pass of a multi-pass plan runs the
    same modules, so their decisions must agree. A decision other than
    `keep` on a layer outside the blocks is refused, or with
    outside_blocks="keep" run as keep: a segment it started then starts at
    its first block (which keeps its input, one hidden state more)."""
    if outside_blocks not in ("refuse", "keep"):
        raise _error(f"outside_blocks is '{outside_blocks}'; accepted: 'refuse', 'keep'")
    _check_single_level(plan.get("schedule", []))
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
            out.append(Segment(decision, i, i + 1, None))
        elif decision == "selective":
            out.append(Segment(decision, i, i + 1, _option_parts(option, i)))
        else:
            raise _error(f"block{i}'s decision '{decision}' is not keep, checkpoint, "
                         "recompute, selective or offload")
    return out
