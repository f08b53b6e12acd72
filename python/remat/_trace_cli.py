"""python -m remat trace CONFIG -o PROFILE: a config.json (or a model
folder holding one) traced with fake tensors into a remat profile
(remat.trace; docs/trace.md); --compile traces the blocks as torch.compile
partitions them (docs/compile.md); --gradient-checkpointing traces the
model as transformers' gradient checkpointing runs it; --head pooling
--loss mnrl (or the config's remat block) trace sentence-transformers'
MNRL step over the model (docs/trace.md). Exit 0 with the
profile written, 2 with one line on bad input."""
import argparse
import sys

from ._planner import EXIT_BAD_INPUT, EXIT_INTERNAL, InputError


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m remat trace",
        description="Trace a config.json's training step with fake tensors into a remat profile.")
    parser.add_argument("config", help="config.json, or a folder holding one")
    parser.add_argument("-o", "--output", required=True, help="the profile JSON to write")
    parser.add_argument("--micro-batch", type=int, default=1, help="sequences a step, default 1")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens a sequence (default: max_position_embeddings, else 512)")
    parser.add_argument("--precision", default="fp32", help="fp32 (default), bf16 or fp16")
    parser.add_argument("--device", default="a100",
                        help="the planner's device preset for the roofline times (a100 by "
                             "default; docs/devices.md)")
    parser.add_argument("--compile", action="store_true",
                        help="the blocks as torch.compile (inductor) partitions them: what each "
                             "keeps for its backward is its compiled forward's saved outputs")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="the model as transformers' own gradient checkpointing runs it "
                             "(the flags its modules read set), for a plan of that "
                             "checkpointing")
    job = parser.add_argument_group(
        "a sentence-transformers job (each in place of the config's remat block's)")
    job.add_argument("--head",
                     help="pooling: the step is sentence-transformers' (with --loss mnrl)")
    job.add_argument("--pooling", help="mean (default) or cls")
    job.add_argument("--loss", help="mnrl: MultipleNegativesRankingLoss")
    job.add_argument("--texts-per-example", type=int, help="mnrl: texts an example (2: pairs)")
    job.add_argument("--merge-columns", choices=("true", "false"),
                     help="mnrl: the columns after the anchors in one forward (default true)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_BAD_INPUT if e.code else 0
    for flag, value in (("--micro-batch", args.micro_batch), ("--seq-len", args.seq_len)):
        if value is not None and value < 1:
            print(f"python -m remat trace: {flag} must be at least 1, got {value}",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        from ._trace import trace

        profile = trace(args.config, micro_batch=args.micro_batch, seq_len=args.seq_len,
                        precision=args.precision, device=args.device, compile=args.compile,
                        gradient_checkpointing=args.gradient_checkpointing,
                        job={"head": args.head, "pooling": args.pooling, "loss": args.loss,
                             "texts_per_example": args.texts_per_example,
                             "merge_columns": args.merge_columns})
    except InputError as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except ImportError as e:
        print(f"python -m remat trace: needs torch and transformers ({e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # the model's own code failed under fake tensors: one line
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"python -m remat trace: {args.config}: the traced step failed: "
              f"{type(e).__name__}: {first}", file=sys.stderr)
        return EXIT_INTERNAL
    profile.save(args.output)
    chains = getattr(profile, "chains", None)  # an encoder-decoder's graph profile
    about = profile.trace if chains else profile.json["trace"]
    parameters = (sum(c["parameters"] for c in chains.values()) if chains
                  else profile.json["parameters"])
    graph = f" in {len(chains)} chains ({', '.join(chains)})" if chains else ""
    for note in about.get("assumed", ()):  # a value the config lacks, taken as its model does
        print(f"python -m remat trace: {args.config}: {note}", file=sys.stderr)
    compiled = ", blocks as compiled" if about.get("compile") else ""
    print(f"{args.output}: {len(profile.layers)} layers{graph} of {profile.json['model']} "
          f"({about['traced_layers']} traced{compiled}), {parameters:,} parameters",
          file=sys.stderr)
    return 0
