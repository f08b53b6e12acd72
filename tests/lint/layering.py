#!/usr/bin/env python3
"""Layers only call down: every include in planner/, visualize/ and runtime/
names a header of the including file's own layer or of one below it.

    tests/lint/layering.py SOURCE_DIR

The layers, lowest first, and the files of each are LAYERS below: the one
place that says which layer a header or a source directory belongs to. A
file's layer is that of the first pattern matching its path (a pattern
ending in "/" is a directory; "{a,b}" is either name). Every scanned file
must have a layer, and every quoted include must resolve to a scanned file.
Prints each violation as "file:line: <layer> includes <header> (<layer>)"
and exits 1, else exits 0.
"""
import os
import re
import sys

# Lowest first: io/units <- model/profile <- schedule/simulator (and the
# runtime, the schedule's other executor) <- plan <- strategies/solver <-
# planning <- report <- cli.
LAYERS = [
    ("io", [
        "planner/include/remat/{status,checked_math,units,io,fd_stream,progress}.h",
        "planner/src/io/", "planner/src/{io,units}.cc", "planner/src/io_internal.h",
        "planner/src/json_fields.{h,cc}",
    ]),
    ("model", [
        "planner/include/remat/{model_config,precision,input,analytic,profile,provenance,device_memory}.h",
        "planner/include/remat/caching_allocator.h", "planner/src/allocator/",
        "planner/include/remat/{parallel,pipeline,rank_memory}.h", "planner/src/parallel/",
        "planner/src/analytic/",
        "planner/src/{model_config,hf_config,precision,input,profile,provenance,device_memory}.cc",
        "planner/src/lora_config.{h,cc}", "planner/src/hf_families.{h,cc}",
        "planner/src/profile_json.h",
    ]),
    ("schedule", [
        "planner/include/remat/{schedule,decisions,simulator,accumulation,runtime_api}.h",
        "planner/src/{schedule,simulator,chain_graph}.cc", "planner/src/schedule_json.h",
        "planner/src/plan/decisions.cc", "planner/src/planning/accumulation.cc",
        "runtime/",
    ]),
    ("plan", ["planner/include/remat/{plan,plan_file}.h", "planner/src/plan/"]),
    ("strategies", [
        "planner/include/remat/strategies.h", "planner/src/strategies/", "planner/src/solver/",
    ]),
    ("planning", [
        "planner/include/remat/{job,planning,pareto,training,engine_plan}.h", "planner/src/planning/",
        "planner/src/pareto.cc",
    ]),
    ("report", [
        "planner/include/remat/{report,batch_report,pareto_report,train_report,planner,export,alloc_trace}.h",
        "planner/src/report/", "visualize/",
    ]),
    ("cli", ["planner/cli/"]),
]

SCANNED = ["planner", "visualize", "runtime"]
# Where a quoted include is looked for, after the including file's directory:
# the public headers, then the private sources of the file's own module.
INCLUDE_DIRS = ["planner/include", "visualize/include", "runtime/include"]
PRIVATE_DIRS = {"planner/src": "planner/src", "planner/cli": "planner/cli",
                "visualize": "visualize/src", "runtime": "runtime/src"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXTENSIONS = (".h", ".cc", ".cpp", ".hpp")


def expand(pattern):
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += expand(pattern[:m.start()] + alt + pattern[m.end():])
    return out


PATTERNS = [(p, i) for i, (_, pats) in enumerate(LAYERS) for pat in pats for p in expand(pat)]


def layer_of(path):
    """Index into LAYERS of a path relative to the source root, or None."""
    for pattern, layer in PATTERNS:
        if pattern.endswith("/") and path.startswith(pattern):
            return layer
        if path == pattern:
            return layer
    return None


def scanned_files(root):
    for top in SCANNED:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS):
                    yield os.path.relpath(os.path.join(base, name), root).replace(os.sep, "/")


def resolve(root, including, name):
    candidates = [os.path.join(os.path.dirname(including), name)]
    candidates += [os.path.join(d, name) for d in INCLUDE_DIRS]
    for prefix, private in PRIVATE_DIRS.items():
        if including.startswith(prefix + "/"):
            candidates.append(os.path.join(private, name))
    for c in candidates:
        c = os.path.normpath(c).replace(os.sep, "/")
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def check(root):
    """The violations in the tree at `root`, as lines to print."""
    problems = []
    for path in scanned_files(root):
        own = layer_of(path)
        if own is None:
            problems.append(f"{path}: in no layer; add it to LAYERS in tests/lint/layering.py")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = resolve(root, path, m.group(1))
                if header is None:
                    problems.append(f"{path}:{number}: includes \"{m.group(1)}\", found nowhere")
                    continue
                theirs = layer_of(header)
                if theirs is None:
                    problems.append(f"{path}:{number}: includes {header}, which is in no layer")
                elif theirs > own:
                    problems.append(f"{path}:{number}: {LAYERS[own][0]} includes {header} "
                                    f"({LAYERS[theirs][0]}, a layer above)")
    return problems


def main(argv):
    if len(argv) != 2:
        print("usage: layering.py SOURCE_DIR", file=sys.stderr)
        return 2
    problems = check(argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layers "
              f"({' <- '.join(name for name, _ in LAYERS)})")
        return 1
    print("every include calls down: " + " <- ".join(name for name, _ in LAYERS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
