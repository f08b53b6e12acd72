"""`python -m remat train`: a plan run on N local ranks by PyTorch's (or
DeepSpeed's) own distributed engine, launched through torch.distributed's
elastic launcher (what `torchrun --standalone --nproc-per-node N` runs),
each rank metered; prints predicted against measured per rank.

Exit codes: 0 done; 2 bad input (one line: what, where, what is
accepted), checked before any rank starts where it can be, else the
failing rank's; 1 a rank failed (one line naming the rank).
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import uuid

from ._planner import EXIT_BAD_INPUT, EXIT_INTERNAL, Error
from ._train_job import ENGINES, Job

USAGE = ("python -m remat train --engine ddp|fsdp2|deepspeed|tp --nproc N --plan plan.json "
         "config.json [--json] [--steps S] [--grad-accumulation K] [--global-batch G] "
         "[--zero 1|2|3] [--timeout SECONDS] [--gradients OUT.pt]")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Error(f"remat train: {message} (usage: {USAGE})", EXIT_BAD_INPUT)


def _parser():
    p = _Parser(prog="python -m remat train", usage=USAGE, add_help=True,
                description="Run a remat plan on N local ranks with a distributed engine.")
    p.add_argument("config", help="the model's Hugging Face config.json")
    p.add_argument("--engine", required=True, choices=ENGINES)
    p.add_argument("--nproc", required=True, type=int, help="ranks on this machine")
    p.add_argument("--plan", required=True, help="plan.json (planner --json)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps (the last is metered)")
    p.add_argument("--grad-accumulation", type=int, help="micro-batches per step (default: the plan's)")
    p.add_argument("--global-batch", type=int, help="rows per optimizer step over all ranks (checked)")
    p.add_argument("--zero", type=int, help="DeepSpeed's ZeRO stage (default: the plan's)")
    p.add_argument("--timeout", type=float, default=60.0, help="collective timeout, seconds")
    p.add_argument("--gradients", help="write rank 0's synchronized gradients of step 0 here (torch.save)")
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    return p


def _launch(job, spec_path, out_dir):
    """Runs the ranks; returns None, or (rank, exit code, message) of the
    first that failed."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=job.nproc,
                          run_id=str(uuid.uuid4()), rdzv_backend="c10d",
                          rdzv_endpoint="localhost:0", max_restarts=0, monitor_interval=0.1,
                          rdzv_configs={"timeout": int(job.timeout_s)})
    try:
        elastic_launch(config, sys.executable)("-m", "remat._train_rank", spec_path, out_dir)
    except ChildFailedError as e:
        return _first_failure(e, out_dir)
    return None


def _first_failure(error, out_dir):
    """(rank, exit code, message) of the run's failure: a rank that died
    without a word (os._exit, a signal other than the launcher's SIGTERM)
    is the cause the others' collective errors point at; else the rank
    whose error came first, naming the ranks the launcher then stopped
    without an error of their own (a rank that hung)."""
    reported, stopped = [], []
    for rank, failure in sorted(error.failures.items()):
        path = os.path.join(out_dir, f"rank{rank}.error")
        if os.path.exists(path):
            with open(path) as f:
                report = json.load(f)
            reported.append((report.get("time", 0.0), rank, report))
            continue
        code = failure.exitcode
        if code == -signal.SIGTERM:
            stopped.append(rank)
            continue
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with code {code}")
        return rank, EXIT_INTERNAL, f"rank {rank} {how} without reporting an error"
    if not reported:
        rank, failure = error.get_first_failure()
        return rank, EXIT_INTERNAL, f"rank {rank} failed (exit code {failure.exitcode})"
    _, rank, report = min(reported)
    code = report.get("exit_code", EXIT_INTERNAL)
    message = report.get("message", "")
    if message.startswith("remat train: "):
        message = message[len("remat train: "):]
    if code == EXIT_BAD_INPUT:  # the input, not the rank: every rank refuses it
        return rank, code, message
    if stopped:
        message += (f"; rank{'s' if len(stopped) > 1 else ''} "
                    f"{', '.join(map(str, stopped))} reported no error and "
                    f"{'were' if len(stopped) > 1 else 'was'} stopped")
    return rank, code, f"rank {rank} failed: {message}"


def _percent(measured, predicted):
    return f"{(measured - predicted) / predicted:+.2%}" if predicted else "-"


def _syncs_text(steps):
    last = steps[-1] if steps else None
    if not last or last["unit"] == "none":
        return "none (tensor parallel)"
    per = ",".join(str(x) for x in last["per_unit"]) or "0"
    return (f"{last['units']} x {last['unit']}, {per} each"
            f"{'' if not last['in_non_final_micro_batches'] else ', %d before the last micro-batch' % last['in_non_final_micro_batches']}")


def _text(job, ranks):
    meter = next((r["measured"]["meter"] for r in ranks if r["measured"]), "none")
    lines = [f"remat train: {job.engine}{'' if job.zero is None else ' ZeRO-%d' % job.zero} on "
             f"{job.nproc} ranks ({ranks[0]['backend']}, {ranks[0]['device']}), "
             f"micro-batch {job.micro_batch} x accumulation {job.grad_accumulation} per rank, "
             f"global batch {job.global_batch}, {job.steps} steps (the last metered: {meter})",
             f"  {'rank':>4}  {'predicted peak':>16}  {'measured peak':>16}  {'diff':>8}  "
             "gradient syncs in the last step"]
    for r in ranks:
        predicted = r["predicted"]["peak_bytes"]
        measured = r["measured"]["peak_bytes"] if r["measured"] else None
        if r["measured"] and r["measured"].get("device_peak_bytes") is not None:
            measured = r["measured"]["device_peak_bytes"]  # the host's state apart (below)
        lines.append(f"  {r['rank']:>4}  {predicted:>14,} B  "
                     f"{(f'{measured:,} B' if measured is not None else '-'):>16}  "
                     f"{_percent(measured, predicted) if measured is not None else '-':>8}  "
                     f"{_syncs_text(r['gradient_syncs'])}")
    for r in ranks:
        m = r["measured"] or {}
        if m.get("host_bytes") is None or r["predicted"].get("host_bytes") is None:
            continue
        host, device = r["predicted"]["host_bytes"], m.get("device_peak_bytes")
        lines.append(f"  {r['rank']:>4}  state offload: host predicted {host:,} B, measured "
                     f"{m['host_bytes']:,} B ({_percent(m['host_bytes'], host)}); device side "
                     f"(measured less the host's) "
                     + (f"{device:,} B ({_percent(device, r['predicted']['peak_bytes'])})"
                        if device is not None else "metered by torch.cuda"))
    sources = {r["predicted"]["source"] for r in ranks}
    if sources == {"peak"}:
        lines.append("  predicted: the plan's predicted.peak_bytes (it has no per-rank figures)")
    if meter == "none":
        lines.append("  measured: no meter (remat_measure found no libremat_cpu_meter.so; "
                     "each rank's stderr says where it looked)")
    return "\n".join(lines)


def main(argv):
    try:
        args = _parser().parse_args(argv)
        job = Job(args.engine, args.nproc, args.plan, args.config, steps=args.steps,
                  grad_accumulation=args.grad_accumulation, global_batch=args.global_batch,
                  zero=args.zero, seed=args.seed, timeout_s=args.timeout)
        if args.gradients:
            directory = os.path.dirname(os.path.abspath(args.gradients))
            if not os.path.isdir(directory):
                raise Error(f"remat train: --gradients {args.gradients}: no directory "
                            f"{directory}", EXIT_BAD_INPUT)
        with tempfile.TemporaryDirectory(prefix="remat-train-") as out_dir:
            spec = dict(job.spec(), gradients=os.path.abspath(args.gradients)
                        if args.gradients else None)
            spec_path = os.path.join(out_dir, "spec.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            failed = _launch(job, spec_path, out_dir)
            if failed:
                rank, code, message = failed
                print(f"remat train: {message}", file=sys.stderr)
                return code
            ranks = []
            for rank in range(job.nproc):
                with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
                    ranks.append(json.load(f))
    except Error as e:
        print(e.message, file=sys.stderr)
        return e.exit_code
    if args.json:
        print(json.dumps({"engine": job.engine, "zero": job.zero, "nproc": job.nproc,
                          "micro_batch": job.micro_batch,
                          "grad_accumulation": job.grad_accumulation,
                          "global_batch": job.global_batch, "steps": job.steps,
                          "ranks": ranks}, indent=1))
    else:
        print(_text(job, ranks))
    return 0
