"""remat.plan and remat.pareto: the planner library called in process.

Every call is the command line's (remat._core.run runs remat::cli::Run):
keyword arguments become its options, so validation, planning and messages
are the same code as `planner`'s, and a bad input raises InputError with
the one line the command prints for exit code 2.
"""
import copy
import json
import os
import tempfile

from . import _core

# The command's exit codes (planner --help).
EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_NO_FIT, EXIT_OOM, EXIT_OUTPUT = 0, 1, 2, 3, 4, 5


class Error(Exception):
    """A planner failure: `message` is the command's one line, `exit_code`
    the command's exit code for it."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class InputError(Error, ValueError):
    """Bad input (a file, field, option or value): the command's exit code 2."""


class NoFitError(Error):
    """No plan fits the budget (exit code 3); `plan` is the best there is and
    the message says what would fit. Raised by pareto() only: plan() returns
    such a plan with ``fits`` False."""

    def __init__(self, message, exit_code, plan=None):
        super().__init__(message, exit_code)
        self.plan = plan


def _message(stderr):
    """The command's last line on stderr without the program's prefix."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    line = lines[-1] if lines else "planner failed without a message"
    for prefix in ("planner: error: ", "planner: internal error: ", "planner: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    return line


def _flag_value(value):
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _options(kwargs):
    """Keyword arguments as the command's options: micro_batch=8 ->
    --micro-batch 8; True -> the flag alone; None and False -> left out."""
    args = []
    for key, value in kwargs.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        else:
            args += [flag, _flag_value(value)]
    return args


class _Input:
    """A model given as a path, or as a dict/JSON object written to a
    temporary file for the call (model.json, config.json or a profile)."""

    def __init__(self, model):
        self._dir = None
        if isinstance(model, (str, os.PathLike)):
            self.path = os.fspath(model)
        elif isinstance(model, dict) or hasattr(model, "json"):
            data = model if isinstance(model, dict) else model.json
            self._dir = tempfile.TemporaryDirectory(prefix="remat-")
            self.path = os.path.join(self._dir.name, "model.json")
            with open(self.path, "w") as f:
                json.dump(data, f)
        else:
            raise TypeError("remat: the model is a path to model.json, config.json or a "
                            "profile, or a dict of one; got " + type(model).__name__)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        if self._dir is not None:
            self._dir.cleanup()


def run_planner(args):
    """Runs `planner <args...>` in process; returns (exit_code, stdout, stderr)."""
    code, out, err = _core.run([str(a) for a in args])
    return code, out.decode("utf-8"), err


def _raise_for(code, err):
    if code == EXIT_BAD_INPUT:
        raise InputError(_message(err), code)
    if code != EXIT_OK and code != EXIT_NO_FIT:
        raise Error(_message(err), code)


def write_json(path, data):
    """Writes `data` as indented JSON to `path`, replaced whole: a temporary
    file in the same directory renamed into place."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".remat-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2))
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Export(str):
    """What a training engine takes for a plan (``planner --export ENGINE``):
    the text the command prints, with `engine` and `note`, its line on
    stderr (the plan the export carries and its prediction; when the engine
    cannot express the plan, what it exports instead)."""

    def __new__(cls, text, engine, note):
        self = super().__new__(cls, text)
        self.engine = engine
        self.note = note
        return self


class Plan:
    """A plan as the command's JSON (``planner --json``): `json` is the
    whole object; the properties name its most used fields."""

    def __init__(self, data, message=None, request=None):
        self.json = data
        # When the plan does not fit: what would (the command's no-fit line).
        self.message = message
        # remat.plan's arguments (model, budget, options), for export().
        self._request = request

    @property
    def fits(self):
        return bool(self.json["fits"])

    @property
    def strategy(self):
        return self.json["strategy"]

    @property
    def parameter(self):
        return self.json["parameter"]

    @property
    def budget_bytes(self):
        return self.json["budget_bytes"]

    @property
    def micro_batch(self):
        return self.json["micro_batch"]

    @property
    def grad_accumulation(self):
        return self.json["grad_accumulation"]

    @property
    def predicted_peak_bytes(self):
        return self.json["predicted"]["peak_bytes"]

    @property
    def step_ms(self):
        return self.json["predicted"]["step_ms"]

    @property
    def alternatives(self):
        """When no plan fits: every combination of levers that fits at the
        job's micro-batch, fastest first, as dicts with changes, flags (the
        options to add), gpus, full_fine_tuning, listed, strategy,
        peak_bytes, device_peak_bytes and step_ms; [] otherwise
        (docs/levers.md)."""
        return self.json.get("fit_advice", {}).get("alternatives", [])

    @property
    def layers(self):
        """Per-layer decisions: dicts with index, name, kind, decision, ..."""
        return self.json["layers"]

    def to_json(self, indent=2):
        return json.dumps(self.json, indent=indent)

    def save(self, path):
        """Writes the plan JSON to `path` (replaced whole: a temporary file
        renamed into place), for `planner train --plan`."""
        write_json(path, self.json)

    def export(self, engine):
        """What `engine` ("pytorch", "hf", "deepspeed", "megatron",
        "torchtitan") takes for this plan, as an Export (a str): the command
        line of remat.plan run again with ``--export ENGINE``
        (docs/exports.md). Raises InputError for an unknown engine; needs a
        plan made by remat.plan()."""
        if self._request is None:
            raise ValueError("remat: Plan.export needs a plan made by remat.plan(model, budget, ...)")
        model, budget, options = self._request
        code, out, err = _plan_command(model, budget, options, ["--export", str(engine)])
        _raise_for(code, err)
        notes = [l for l in err.splitlines() if l.startswith(_EXPORT_NOTE)]
        return Export(out, str(engine), notes[0][len(_EXPORT_NOTE):] if notes else "")

    def __repr__(self):
        return "<remat.Plan {} ({}) peak {} B, step {:.1f} ms, {}>".format(
            self.strategy, self.parameter, self.predicted_peak_bytes, self.step_ms,
            "fits" if self.fits else "does not fit")


class GraphPlan(Plan):
    """A graph profile's plan (``planner --json`` of a graph, docs/graphs.md:
    an encoder-decoder's trace): one schedule per chain, the graph's step
    predicted as a whole. `chains` holds each chain's name, decisions and
    schedule; `independent` and `baseline` the totals of the chains planned
    one by one and of nothing checkpointed."""

    @property
    def strategy(self):
        return "graph"

    @property
    def predicted_peak_bytes(self):
        return self.json["peak_bytes"]

    @property
    def step_ms(self):
        return self.json["step_ms"]

    @property
    def chains(self):
        return self.json["chains"]

    @property
    def layers(self):
        """Every chain's decisions, chain by chain."""
        return [{"chain": c["name"], "index": i, "decision": d}
                for c in self.json["chains"] for i, d in enumerate(c["decisions"])]

    def export(self, engine):
        raise InputError("remat: a graph plan has no engine export (docs/graphs.md)",
                         EXIT_BAD_INPUT)


def plan(model, budget, **options):
    """Plans `model` (a path to model.json, config.json or a profile, or a
    dict of one) under `budget` ("24GB", "80GiB" or bytes as an int; None:
    no budget, each strategy's default, as `planner` without --budget).

    Any option of `planner --help` is a keyword: strategy="optimal",
    micro_batch=8, seq_len=2048, precision="amp_bf16", global_batch=256,
    checkpoint_layers=[0, 4, 8], device="h200", ... Returns a Plan (with
    ``fits`` False and ``message`` saying what would fit when nothing does;
    a GraphPlan for a graph profile, such as an encoder-decoder's trace);
    raises InputError for bad input, with the command's one-line message."""
    code, out, err = _plan_command(model, budget, options, ["--format", "json"])
    _raise_for(code, err)
    data = json.loads(out)
    kind = GraphPlan if "chains" in data else Plan  # a graph profile's plan
    return kind(data, _message(err) if code == EXIT_NO_FIT else None,
                (copy.deepcopy(model) if isinstance(model, dict) else model, budget,
                 dict(options)))


_EXPORT_NOTE = "planner: export: "


def _plan_command(model, budget, options, shown):
    """Runs `planner --budget BUDGET <shown> --quiet <options> MODEL`; an
    int budget is bytes, None leaves --budget out."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        budget = f"{budget}B"
    with _Input(model) as path:
        args = ([] if budget is None else ["--budget", _flag_value(budget)]) + shown + ["--quiet"]
        args += _options(options) + [path]
        return run_planner(args)


class ParetoCurve:
    """Step time against peak memory for every strategy (``planner pareto
    --json``): `json` is the whole object, `points` its points."""

    def __init__(self, data):
        self.json = data

    @property
    def points(self):
        return self.json.get("points", [])


def pareto(model, **options):
    """The Pareto curve of `model` (step time against peak memory, every
    strategy): options as for plan(), e.g. points=12."""
    with _Input(model) as path:
        args = ["pareto", "--json", "--quiet"] + _options(options) + [path]
        code, out, err = run_planner(args)
    _raise_for(code, err)
    return ParetoCurve(json.loads(out))
