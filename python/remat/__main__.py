"""python -m remat <command>: the package's commands.

  train   a plan run on N local ranks by a distributed engine, metered per
          rank (python -m remat train --help; docs/distributed-runs.md)
  trace   a config.json's training step traced with fake tensors into a
          remat profile (python -m remat trace --help; docs/trace.md)
"""
import sys


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "train":
        from ._train_cli import main as train

        return train(argv[1:])
    if argv[0] == "trace":
        from ._trace_cli import main as trace

        return trace(argv[1:])
    print(f"python -m remat: unknown command {argv[0]} (commands: train, trace)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
