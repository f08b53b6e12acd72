"""remat.trace: a remat profile of a model's training step, traced with
fake tensors: nothing is allocated, so a 70B model traces on a laptop.

The model is transformers' own class built from a config.json (or a copy
of the user's module), its parameters fake tensors. One training step runs
under PyTorch's FakeTensorMode with the tracer's meter
(_trace_meter.FakeMeter): the chain's layers with grad, their backwards and
without grad (_trace_chain), then an AdamW step; the meter counts storages
as remat's CPU allocator meter counts allocations, and each op call's
FLOPs (torch.utils.flop_counter) and bytes give its time on one of the
planner's device presets (_trace_roofline). The profile is the measured-profile format
(docs/formats.md) with source "traced" ("traced (torch.compile)" where
compile=True: the blocks as torch.compile partitions them, _trace_compile).
"""
import contextlib
import time

from ._blocks import find_blocks
from ._planner import EXIT_BAD_INPUT, InputError
from ._profiler import Profile
from ._trace_build import (base_loss, build_from_config, checkpointed_by_transformers,
                           decoder_start, example_batch, fake_inputs, fake_module, hf_config,
                           ones_masks, read_config, run_checkpointed_layers_whole,
                           unpacked_positions)
from ._trace_roofline import Roofline


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _static(module, params):
    """Parameters and buffers (each storage once), AdamW's two moments per
    parameter and its step counter (one 4-byte tensor per parameter)."""
    from ._trace_meter import storage_bytes, storage_key

    storages = {}
    for t in list(module.parameters()) + list(module.buffers()):
        storages[storage_key(t)] = storage_bytes(t)
    optimizer = sum(2 * p.numel() * p.element_size() + 4 for p in params)
    return {"parameter_bytes": sum(storages.values()), "gradient_bytes": 0,
            "optimizer_bytes": optimizer}


def _stepped(shapes, meter):
    """(op costs, workspace bytes) of AdamW's second step over fake
    parameters of `shapes` ((shape, stride, dtype) each): the first step
    makes the state."""
    import torch

    copies = []
    for shape, stride, dtype in shapes:
        copy = torch.empty_strided(shape, stride, dtype=dtype).requires_grad_(True)
        copy.grad = torch.empty_like(copy)
        copies.append(copy)
    opt = torch.optim.AdamW(copies, lr=1e-4, foreach=False)
    opt.step()
    before = meter.current_bytes()
    meter.reset_peak()
    costs = meter.costs = []
    opt.step()
    meter.costs = None
    return costs, meter.peak_bytes() - before


def _optimizer_step(params, meter, roofline):
    """(ms, workspace bytes) of an AdamW step on fake parameters. AdamW on
    CPU tensors updates one parameter after another; an update's
    temporaries are freed by the next update but one (its last, `denom`,
    lives while the next is computed). So the step's time is the sum of
    each parameter's alone, and its workspace the largest over each two
    parameters updated one after the other: one parameter of each shape,
    stride and dtype is stepped alone, and each distinct pair in the
    parameters' order together."""
    keys = [(tuple(p.shape), p.stride(), p.dtype) for p in params]
    counts = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    ms = workspace = 0
    for key, count in counts.items():
        costs, alone = _stepped([key], meter)
        ms += count * roofline.ms(costs)
        workspace = max(workspace, alone)
    for pair in dict.fromkeys(zip(keys, keys[1:])):
        workspace = max(workspace, _stepped(list(pair), meter)[1])
    return ms, workspace


def _layers(chain, traces, owner, roofline, inputs, shared, handed_on=None, compiled=False):
    """The profile's layers. inputs: the batch (the prefix's input);
    handed_on: the tensor a chain of a graph hands on (its last layer's
    output), else the last layer's output is the loss. A layer after the
    first that does not save its input (a bf16 RMSNorm saves its fp32
    copy), after a layer that does not save its output, and whose output
    is not its input, does not keep it ("keeps_input": false): the step
    frees the input once the layer's forward is done. compiled: the
    partitioner decides what is saved (not the eager saves), and every
    layer keeps its input."""
    from ._trace_meter import storage_bytes

    xs = chain.layer_inputs()
    outputs = xs[1:] + [handed_on]
    layers = []
    for i, (name, kind) in enumerate(chain.names_and_kinds()):
        tr = traces[i]
        in_bytes = storage_bytes(xs[i]) if xs[i] is not None else _input_bytes(inputs)
        out_bytes = storage_bytes(outputs[i]) if outputs[i] is not None else 4
        activation = max(tr.kept, out_bytes)
        layer = {"name": name, "kind": kind,
                 "forward_ms": roofline.ms(tr.forward_costs),
                 "backward_ms": roofline.ms(tr.backward_costs),
                 "input_bytes": in_bytes, "output_bytes": out_bytes,
                 "activation_bytes": activation,
                 "forward_workspace_bytes": max(0, tr.forward_workspace),
                 "forward_nograd_workspace_bytes": max(0, tr.nograd_workspace),
                 "backward_workspace_bytes": max(tr.backward_workspace, -(activation - out_bytes)),
                 "gradient_bytes": tr.gradients + shared.get(i, 0),
                 "saved_bytes": tr.saved,
                 "forward_flops": roofline.flops(tr.forward_costs),
                 "backward_flops": roofline.flops(tr.backward_costs),
                 "traced_as": chain.names_and_kinds()[owner[i]][0]}
        if i > 0 and not compiled and not (tr.saves_input or tr.output_is_input or
                                           traces[i - 1].saves_output):
            layer["keeps_input"] = False
        if tr.recompute_backward_workspace is not None:
            layer["recompute_backward_workspace_bytes"] = max(tr.recompute_backward_workspace,
                                                              -(activation - out_bytes))
        if tr.selective:
            layer["selective"] = [
                {"name": option, "activation_bytes": max(kept, out_bytes),
                 "extra_recompute_ms": max(0.0, roofline.ms(again) - roofline.ms(plain)),
                 "recompute_workspace_bytes": workspace}
                for option, kept, workspace, again, plain in tr.selective]
        layers.append(layer)
    return layers


def _input_bytes(inputs):
    import torch
    from torch.utils._pytree import tree_flatten

    from ._trace_meter import storage_bytes, storage_key

    storages = {storage_key(t): storage_bytes(t) for t in tree_flatten(inputs)[0]
                if isinstance(t, torch.Tensor)}
    return sum(storages.values())


def _trace_graph(module, kind, inputs, fake_mode, roofline, name, about, provenance, started,
                 micro_batch, seq_len):
    """An encoder-decoder's, a vision-language model's or two towers' graph
    profile (_trace_graph): each chain's profile carries the trace's
    provenance."""
    from ._trace_graph import (GraphProfile, trace_encoder_decoder, trace_two_towers,
                               trace_vision_language)
    from ._trace_meter import FakeMeter

    meter = FakeMeter()
    trace_chains = {"vision_language": trace_vision_language,
                    "two_towers": trace_two_towers}.get(kind, trace_encoder_decoder)
    with fake_mode, meter, unpacked_positions(), ones_masks():
        chains, edges, traced = trace_chains(
            module, inputs, meter, roofline,
            lambda params: _optimizer_step(params, meter, roofline))
    about["traced_layers"] = traced
    about["seconds"] = round(time.perf_counter() - started, 3)
    for c in chains:
        c["profile"].update({"source": "traced", "device": roofline.name,
                             "micro_batch": micro_batch, "seq_len": seq_len,
                             "provenance": provenance, "trace": about})
    data = {"model": f"{name} (traced)", "chains": chains, "edges": edges}
    return GraphProfile(data, about)


def _compiled_blocks(chain, traces, owner, fake_mode, about):
    """compile=True: each distinct block's activation and saved bytes as
    torch.compile's partition keeps them (_trace_compile), in place of
    eager autograd's, and its backward workspace, kept and checkpointed
    (recompute_backward_workspace_bytes), from the buffers inductor plans
    for each backward graph; the forward workspaces stay eager's."""
    import torch

    from ._profiler import _hidden, _with_first
    from ._trace_compile import COMPILED_OPTIONS, partition_block

    first = 1 if chain.has_prefix else 0
    xs = chain.layer_inputs()
    blocks = []
    with fake_mode:
        for i in sorted(set(owner)):
            k = chain.block_of(i) if hasattr(chain, "block_of") else i - first
            if k is None or not 0 <= k < len(chain.blocks):
                continue
            x = xs[i].detach().requires_grad_(True)
            args, kwargs = _with_first(*chain.calls[k], x)
            part = partition_block(chain.blocks[k], args, kwargs, _hidden)
            checkpointed = partition_block(chain.blocks[k], args, kwargs, _hidden,
                                           checkpointed=True)
            tr = traces[i]
            tr.kept, tr.saved = part.kept_bytes, part.saved_bytes
            block = {"layer": chain.names_and_kinds()[i][0], "saved_bytes": part.saved_bytes,
                     "saved_shapes": sorted(list(s) for _, s, _ in part.saved)}
            # The backwards' buffers as inductor plans them, over what the
            # planner holds beside (a[i] as kept, the gradients it makes).
            if part.backward_transient_bytes is not None:
                tr.backward_workspace = part.backward_transient_bytes
                block["backward_peak_bytes"] = part.backward_peak_bytes
            if checkpointed.backward_transient_bytes is not None:
                tr.recompute_backward_workspace = (checkpointed.backward_transient_bytes
                                                   - part.saved_bytes)
                block["checkpointed_backward_peak_bytes"] = checkpointed.backward_peak_bytes
            # Each selective option as remat.apply's compiled policy tags the
            # block: what it keeps, and its backward's buffers over the kept
            # block's workspace (the simulator adds the option's to the
            # layer's; a smaller one counts as none).
            tr.selective = []
            for option in COMPILED_OPTIONS:
                sel = partition_block(chain.blocks[k], args, kwargs, _hidden,
                                      selective=(option,))
                if sel.backward_transient_bytes is None or sel.saved_bytes >= part.saved_bytes:
                    continue  # the option keeps no less than the plain block
                workspace = max(0, sel.backward_transient_bytes - tr.backward_workspace)
                tr.selective.append((option, sel.kept_bytes, workspace, sel.recompute_costs,
                                     part.recompute_costs))
                block.setdefault("selective", []).append(
                    {"name": option, "saved_bytes": sel.saved_bytes,
                     "saved_shapes": sorted(list(s) for _, s, _ in sel.saved),
                     "backward_peak_bytes": sel.backward_peak_bytes})
            blocks.append(block)
    about["compile"] = {
        "partitioner": "inductor partition_fn (min_cut_rematerialization_partition)",
        "activation_memory_budget": torch._functorch.config.activation_memory_budget,
        "blocks": blocks,
        "modelled": "blocks' saved tensors and their backwards' buffers (inductor's plan), "
                    "kept, checkpointed and under the selective options "
                    f"{', '.join(COMPILED_OPTIONS)}; forward workspaces and the layers outside the "
                    "blocks as eager's"}


def trace(model, example_inputs=None, loss_fn=None, blocks=None, micro_batch=1, seq_len=None,
          precision="fp32", device="a100", name=None, compile=False,
          gradient_checkpointing=False, job=None):
    """A remat.Profile of one training step (forward, loss, backward, AdamW
    step) of `model`, traced with fake tensors.

    model: a config.json path (or a model folder holding one), a config
    dict, or an nn.Module (any device, meta included; left untouched).
    From a config the batch is `micro_batch` sequences of `seq_len` tokens
    (default: the config's max_position_embeddings, else 512) and the
    weights are in `precision` ("fp32", "bf16" or "fp16"). From a module,
    example_inputs is one micro-batch (a tensor, a tuple of positional
    inputs or a dict of keyword inputs) and loss_fn(output, inputs) the
    loss (default: the output when a scalar, else its .loss), as for
    remat.profile; blocks: the chain's blocks (default: the ModuleList
    remat.apply finds). device: the planner's preset whose roofline gives
    the times (any `planner --device` name, docs/devices.md). compile:
    the blocks as torch.compile (inductor) partitions them: what each
    distinct block keeps for its backward is the forward graph's saved
    outputs after AOTAutograd's partitioner (_trace_compile), traced on
    the fake tensors too; the profile's trace records it.
    gradient_checkpointing: the model as transformers' own gradient
    checkpointing runs it (a model from a config; a module given with it
    enabled is taken so): the flags its modules read set as
    activation_checkpointing_enable sets them, each block still traced
    whole (the plan says which blocks the step recomputes); the profile's
    trace records it. A model whose code reads the flags (T5's
    cross-attention makes its zero position bias with grad) runs other ops
    then, and a plan of the checkpointing transformers does is predicted
    from this profile.
    job: a config's sentence-transformers settings ({"head", "pooling",
    "loss", "texts_per_example", "merge_columns"}), each in place of its
    value in the config's `remat` block; with head "pooling" and loss
    "mnrl" (from either) the step traced is sentence-transformers' MNRL
    step over the model (_trace_sentence), its layers per pass
    (p1.embedding, p1.block0, .., p2.embedding, .., p2.head)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ._trace_chain import trace_layers
    from ._trace_meter import FakeMeter

    roofline = Roofline(device)
    started = time.perf_counter()
    # A module's own tensors that are neither parameters nor buffers (a
    # cached table) become fake where an op reads them.
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    provenance = {"torch_version": torch.__version__}
    about = {"tracer": "remat.trace"}
    config = None
    if isinstance(model, (str, dict)) or hasattr(model, "__fspath__"):
        if precision not in DTYPES:
            raise InputError(f"remat.trace: precision {precision!r} is not one of "
                             f"{', '.join(DTYPES)}", EXIT_BAD_INPUT)
        data = read_config(str(model)) if not isinstance(model, dict) else dict(model)
        config = hf_config(data, str(model) if not isinstance(model, dict) else "config")
        import transformers

        about["transformers_version"] = transformers.__version__
        from ._trace_sentence import sentence_job  # imports torch

        sentence = sentence_job(data, job)
        if sentence is not None:
            if gradient_checkpointing:
                raise InputError("remat.trace: --gradient-checkpointing traces transformers' "
                                 "checkpointing of the model's own step, not a "
                                 "sentence-transformers job", EXIT_BAD_INPUT)
            return _trace_sentence_job(config, sentence, fake_mode, roofline, precision,
                                       micro_batch, seq_len, name or data.get("_name_or_path")
                                       or config.model_type, compile, about, provenance, started)
        module, kind = build_from_config(config, fake_mode, getattr(torch, DTYPES[precision]))
        config = module.config
        if gradient_checkpointing:
            checkpointed_by_transformers(module)
        seq_len = (seq_len or (kind == "seq2seq" and getattr(config, "max_target_positions", None))
                   or getattr(config.get_text_config(), "max_position_embeddings", None) or 512)
        if kind == "seq2seq":
            note = decoder_start(module, config)
            if note:
                about["assumed"] = [note]
        inputs = example_batch(module, config, kind, micro_batch, seq_len, fake_mode)
        if kind == "base" and loss_fn is None:
            loss_fn = base_loss
        about["model_class"] = type(module).__name__
        name = name or data.get("_name_or_path") or config.model_type
    elif isinstance(model, torch.nn.Module):
        if job:
            raise InputError("remat.trace: job settings trace a model from its config.json; a "
                             "module traces with its example_inputs and loss_fn", EXIT_BAD_INPUT)
        if example_inputs is None:
            raise InputError("remat.trace: a module traces on example_inputs (one micro-batch)",
                             EXIT_BAD_INPUT)
        module = fake_module(model, fake_mode)
        module.train(model.training)
        if gradient_checkpointing:
            checkpointed_by_transformers(module)
        # A module with transformers' checkpointing on traces as it runs.
        gradient_checkpointing = run_checkpointed_layers_whole(module)
        inputs = fake_inputs(example_inputs, fake_mode)
        name = name or type(model).__name__
        about["model_class"] = type(model).__name__
    else:
        raise InputError(f"remat.trace: expected a config.json path, a config dict or an "
                         f"nn.Module, got {type(model).__name__}", EXIT_BAD_INPUT)
    if gradient_checkpointing:
        about["gradient_checkpointing"] = "transformers"
    if config is not None and kind in ("seq2seq", "vision_language", "two_towers"):
        if compile:
            raise InputError("remat.trace: compile traces one chain of blocks; a graph of "
                             "chains (an encoder-decoder, a vision-language model, two towers) "
                             "is traced eager only", EXIT_BAD_INPUT)
        return _trace_graph(module, kind, inputs, fake_mode, roofline, name, about, provenance,
                            started, micro_batch, seq_len)
    if blocks is None:
        try:
            _, blocks = find_blocks(module)
        except InputError as e:
            raise InputError(e.message.replace("remat.apply:", "remat.trace:", 1),
                             e.exit_code) from None
    elif isinstance(model, torch.nn.Module):
        names = {id(m): n for n, m in model.named_modules()}
        copies = dict(module.named_modules())
        blocks = [copies[names[id(b)]] for b in blocks]
    blocks = list(blocks)
    params = [p for p in module.parameters() if p.requires_grad]
    meter = FakeMeter()
    # A batch made from a config has the default positions; a module's
    # example inputs are the user's.
    positions = unpacked_positions() if config is not None else contextlib.nullcontext()
    with fake_mode, meter, positions, ones_masks():
        chain, traces, owner, shared = trace_layers(module, inputs, blocks, loss_fn, meter)
        optimizer_ms, optimizer_workspace = _optimizer_step(params, meter, roofline)
    return _profile(module, params, chain, traces, owner, shared, inputs, fake_mode, roofline,
                    (optimizer_ms, optimizer_workspace), compile, name, about, provenance,
                    started, (micro_batch, seq_len) if config is not None else None)


def _profile(module, params, chain, traces, owner, shared, inputs, fake_mode, roofline,
             optimizer, compile, name, about, provenance, started, shape, after_compile=None):
    """The Profile of a traced chain: its layers (the blocks as compiled
    where `compile`), static bytes of `params` (the parameters AdamW
    steps), optimizer = (ms, workspace bytes), shape = (micro_batch,
    seq_len) of a batch made from a config, else None; after_compile(traces):
    called with compile once the blocks are as compiled."""
    if compile:
        _compiled_blocks(chain, traces, owner, fake_mode, about)
        if after_compile is not None:
            after_compile(traces)
    static = _static(module, params)
    layers = _layers(chain, traces, owner, roofline, inputs, shared, compiled=compile)
    about["traced_layers"] = len(set(owner))
    about["seconds"] = round(time.perf_counter() - started, 3)
    data = {"model": name, "source": "traced (torch.compile)" if compile else "traced",
            "device": roofline.name,
            "parameters": sum(p.numel() for p in module.parameters()),
            "static_bytes": sum(static.values()), "static": static,
            "optimizer_ms": optimizer[0], "optimizer_workspace_bytes": optimizer[1],
            "layers": layers, "provenance": provenance, "trace": about}
    if shape is not None:
        data["micro_batch"], data["seq_len"] = shape
    return Profile(data)


def _trace_sentence_job(config, job, fake_mode, roofline, precision, micro_batch, seq_len, name,
                        compile, about, provenance, started):
    """The profile of a sentence-transformers job's step (_trace_sentence):
    the encoder in a SentenceTransformer, its passes one chain."""
    import torch

    from ._trace_chain import trace_layers
    from ._trace_meter import FakeMeter
    from ._trace_sentence import PassChain, build_step, pass_features

    model, loss = build_step(config, fake_mode, getattr(torch, DTYPES[precision]), job)
    encoder = model[0].auto_model
    about["model_class"] = f"SentenceTransformer({type(encoder).__name__})"
    about["sentence_transformers"] = dict(job, loss="mnrl")
    seq_len = seq_len or getattr(config, "max_position_embeddings", None) or 512
    try:
        _, blocks = find_blocks(encoder)
    except InputError as e:
        raise InputError(e.message.replace("remat.apply:", "remat.trace:", 1),
                         e.exit_code) from None
    meter = FakeMeter()
    made = {}

    def make_chain():
        passes = pass_features(job, micro_batch, seq_len, getattr(config, "vocab_size", 2))
        made["chain"] = PassChain(model, loss, passes, list(blocks))
        return made["chain"]

    with fake_mode, meter, ones_masks():
        chain, traces, owner, shared = trace_layers(model, None, list(blocks), None, meter,
                                                    make_chain=make_chain)
        params = chain.trained
        optimizer = _optimizer_step(params, meter, roofline)
    def accumulated(traces):
        about["accumulated_gradient_bytes"] = chain.compiled_accumulation(traces)

    return _profile(model, params, chain, traces, owner, shared, chain.inputs, fake_mode,
                    roofline, optimizer, compile, name, about, provenance, started,
                    (micro_batch, seq_len), after_compile=accumulated)
