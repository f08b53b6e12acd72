"""One rank of `python -m remat train` (started by torch.distributed.run;
`python -m remat._train_rank SPEC.json OUT_DIR`).

It loads remat's CPU meter first (where remat_measure finds one),
joins the process group (Gloo on CPU, NCCL on CUDA, the collective timeout
of the run), builds the model from config.json, remat.apply's the plan,
shards it with the engine, trains the steps on its slice of each step's
global batch and writes OUT_DIR/rank<r>.json: its predicted and measured
peak (the last step: bytes in use before it plus its peak, as
tests/python/remat_e2e_cells.py meters a step), the gradient
synchronizations counted per step and the losses. A failure writes
OUT_DIR/rank<r>.error ({"message", "exit_code", "time"}) and exits non-zero.

REMAT_TRAIN_FAIL="<rank>:<step>:<micro>[:exit|:hang]" makes that rank
raise (with ":exit" os._exit(3), with ":hang" sleep an hour) before that
micro-batch: the failure paths' test.
"""
import json
import os
import sys
import time


def _meter():
    """remat's CPU meter (remat_measure.load(): $REMAT_METER_LIB, else the
    package's own), or None, saying why on stderr, where there is none."""
    import remat_measure

    try:
        return remat_measure.load()
    except remat_measure.MeterError as e:
        print(f"remat train: no meter: {e}", file=sys.stderr)
        return None


def _fail_here(rank, step, micro):
    spec = os.environ.get("REMAT_TRAIN_FAIL")
    if not spec:
        return
    parts = spec.split(":")
    if [int(x) for x in parts[:3]] == [rank, step, micro]:
        if parts[3:] == ["exit"]:
            os._exit(3)
        if parts[3:] == ["hang"]:
            time.sleep(3600)
        raise RuntimeError(f"REMAT_TRAIN_FAIL: rank {rank} fails at step {step}, micro-batch "
                           f"{micro}")


def run(spec, out_dir, rank, meter):
    import datetime

    import torch
    import torch.distributed as dist

    import remat

    from . import _train_engines, _train_job

    job = _train_job.Job(**{k: v for k, v in spec.items() if k != "gradients"})
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if cuda else "gloo"
    timeout = datetime.timedelta(seconds=job.timeout_s)
    if job.engine == "deepspeed":
        import deepspeed

        deepspeed.init_distributed(dist_backend=backend, timeout=timeout)
    else:
        dist.init_process_group(backend, timeout=timeout)
    model = _train_job.build_model(job).to(device)
    job.check_parameters(sum(p.numel() for p in model.parameters()))
    remat.apply(model, job.plan)
    engine = _train_engines.ENGINES[job.engine](model, job, device)
    data_rank = rank // job.tensor
    vocab = model.config.vocab_size
    losses = []

    def train_step(step):
        batch = _train_job.global_batch(step, job.global_batch, job.seq_len, vocab)
        total = 0.0
        for micro in range(job.grad_accumulation):
            _fail_here(rank, step, micro)
            rows = _train_job.rank_rows(data_rank, micro, job.micro_batch, job.grad_accumulation)
            last = micro == job.grad_accumulation - 1
            total += engine.micro(batch[rows].to(device), last) / job.grad_accumulation
        return total

    measured = None
    for step in range(job.steps):
        metered = step == job.steps - 1
        if metered and cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
        if metered and meter is not None:
            import remat_measure

            m = remat_measure.measure(train_step, step, timeline=False)
            loss = m.value
            measured = {"peak_bytes": m.baseline_bytes + m.peak_bytes,
                        "baseline_bytes": m.baseline_bytes, "step_peak_bytes": m.peak_bytes,
                        "meter": "remat_cpu_meter"}
        else:
            loss = train_step(step)
        if metered and cuda:
            peak = torch.cuda.max_memory_allocated(device)
            measured = {"peak_bytes": peak, "baseline_bytes": baseline,
                        "step_peak_bytes": peak - baseline, "meter": "torch.cuda"}
        if metered and measured is not None and hasattr(engine, "host_bytes"):
            host = engine.host_bytes()  # the state offloaded, gradients made
            if host is not None:
                measured["host_bytes"] = host
                # On the CPU the host and the "device" are one memory: the
                # device side is what the meter saw less the offloaded state.
                if not cuda:
                    measured["device_peak_bytes"] = measured["peak_bytes"] - host
        if step == 0 and spec.get("gradients"):
            gradients = engine.full_gradients()  # a collective: every rank
            if rank == 0:
                torch.save({n: g.cpu() for n, g in gradients.items()}, spec["gradients"])
            del gradients  # not held through the metered step
        engine.step()
        engine.syncs.end_step()
        losses.append(loss)
    predicted, source = job.predicted(rank)
    result = {"rank": rank, "world": job.nproc, "engine": job.engine,
              "backend": backend, "device": device.type,
              "predicted": {"peak_bytes": predicted, "source": source,
                            "host_bytes": job.predicted_host(rank)},
              "measured": measured, "gradient_syncs": engine.syncs.steps, "losses": losses}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    spec_path, out_dir = sys.argv[1], sys.argv[2]
    rank = int(os.environ.get("RANK", 0))
    # The launcher's stdout carries the report (and --json): the rank's
    # own output (libraries' logs and prints) goes to stderr.
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        meter = _meter()  # before torch allocates anything
        with open(spec_path) as f:
            spec = json.load(f)
        run(spec, out_dir, rank, meter)
    except BaseException as e:  # noqa: B902 (every failure is reported, then re-raised)
        from ._planner import Error

        code = e.exit_code if isinstance(e, Error) else 1
        message = e.message if isinstance(e, Error) else f"{type(e).__name__}: {e}"
        # Written whole, then renamed into place: the launcher stops the
        # other ranks once one fails, and a rank stopped while writing
        # would leave a partial report for it to read.
        path = os.path.join(out_dir, f"rank{rank}.error")
        with open(path + ".part", "w") as f:
            json.dump({"message": message.splitlines()[0] if message else type(e).__name__,
                       "exit_code": code, "time": time.time()}, f)
        os.replace(path + ".part", path)
        if isinstance(e, Error):
            sys.exit(code)
        raise
    # Reported and the process group destroyed: leave without the
    # libraries' teardown, in which DeepSpeed's ZeRO-3 on CPU now and then
    # aborts a rank ("terminate called without an active exception") after
    # its work is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
