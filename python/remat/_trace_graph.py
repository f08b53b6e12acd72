"""An encoder-decoder traced as a graph profile (docs/graphs.md): two
chains, the encoder's and the decoder's, and one edge, the encoder's output
read by every decoder block's cross-attention.

Each chain is traced as remat.trace traces one (_trace_chain: its layers
alone, each distinct block once), under the same fake tensors and meter:

  - the encoder: transformers' encoder module (model.get_encoder(); each
    chain's blocks as _blocks.find_chains finds them, which remat.apply
    maps a graph plan's chains onto) on the batch's source (token ids, a speech model's log-mel frames), its last
    layer (the final norm) ending at the output it hands on, which gets a
    gradient as a block's output does (_layer_measure);
  - the decoder: the whole model given that output (encoder_outputs: the
    encoder does not run) and the labels, to the loss. The encoder's
    output is a tensor of the graph, not of the decoder's layers: a
    reader's figures leave it and the gradient its backward makes for it
    out (the graph simulator holds both).

The decoder is traced first, as a step's backward meets it: a parameter
both chains use (T5's and BART's shared token embedding, tied to the LM
head) gets its gradient from the decoder's layer that creates it in a step,
once. Each parameter's bytes and AdamW state belong to the first chain
holding it (the encoder's embedding); the optimizer step, one over all
parameters, is the decoder's (its time and workspace; the encoder's 0).

A vision-language model (trace_vision_language) is traced the same way:
the vision chain (its vision tower and projector, run as the model's
get_image_features, to the image features it hands on) and the language
chain (the whole model given those features, to the loss), one edge into
the language chain's embedding, which splices them into its sequence.

Two towers meeting in the contrastive loss (CLIP, SigLIP: trace_two_towers)
are two chains as the step runs them: the vision tower (its embedding,
blocks and pooling head, to the pooled image features it hands on) and the
text chain (the whole model, its vision tower answering with those
features, to the loss); the edge is the pooled features, read by the text
chain's last layer, where the loss meets them. The step's backward runs
the text tower's first (made last in the forward), then the vision
tower's, from the features' gradient.
"""
import contextlib

from ._planner import EXIT_BAD_INPUT, InputError


class GraphProfile:
    """A traced graph profile: `json` is the graph profile JSON the planner
    plans (docs/graphs.md); `chains` each chain's profile."""

    def __init__(self, data, about):
        self.json = data
        self.trace = about  # tracer, model class, traced layers, seconds

    @property
    def chains(self):
        return {c["name"]: c["profile"] for c in self.json["chains"]}

    @property
    def layers(self):
        """Every chain's layers, in the graph's order."""
        return [l for c in self.json["chains"] for l in c["profile"]["layers"]]

    def save(self, path):
        from ._planner import write_json

        write_json(path, self.json)

    def __repr__(self):
        return "<remat graph profile {}>".format(
            ", ".join(f"{n}: {len(p['layers'])} layers" for n, p in self.chains.items()))


def _first_tensor(output):
    import torch

    return output if isinstance(output, torch.Tensor) else output[0]


def _chain_pair(source, target, params, optimizer_ms, optimizer_workspace):
    """The graph's two chains, each (name, module, layers): the source's
    state is its module's parameters and buffers, the target's the rest of
    its module's (the whole model's); the optimizer step is the target's,
    which the graph runs last."""
    owned = {}
    chains = []
    for (name, module, layers), last in ((source, False), (target, True)):
        static, count = _state(module, params, owned)
        chains.append({"name": name, "profile": {
            "model": name, "static_bytes": sum(static.values()), "static": static,
            "parameters": count, "optimizer_ms": optimizer_ms if last else 0.0,
            "optimizer_workspace_bytes": optimizer_workspace if last else 0,
            "layers": layers}})
    return chains


def _state(module, params, owned):
    """(static dict, parameter count) of the parameters and buffers of
    `module` not in `owned` (storage keys, updated)."""
    from ._trace_meter import storage_bytes, storage_key

    storages, count, optimizer = {}, 0, 0
    trainable = {id(p) for p in params}
    for is_param, tensors in ((True, module.parameters()), (False, module.buffers())):
        for t in tensors:
            key = storage_key(t)
            if key in owned or key in storages:
                continue
            storages[key] = storage_bytes(t)
            if is_param:
                count += t.numel()
                if id(t) in trainable:
                    optimizer += 2 * t.numel() * t.element_size() + 4
    owned.update(storages)
    return {"parameter_bytes": sum(storages.values()), "gradient_bytes": 0,
            "optimizer_bytes": optimizer}, count


def trace_encoder_decoder(module, inputs, meter, roofline, optimizer_step):
    """(chains, edges, traced layers) of an encoder-decoder
    (transformers' ...ForConditionalGeneration) on `inputs` (the encoder's
    input under the model's main input name, and labels), under the fake
    mode and `meter` already on. optimizer_step(params) -> (ms, workspace)."""
    import torch

    from ._blocks import find_chains
    from ._trace import _layers
    from ._trace_chain import trace_layers

    (_, encoder, _, encoder_blocks), (_, _, _, decoder_blocks) = find_chains(
        module, "remat.trace")
    main = module.main_input_name
    source = {main: inputs[main]}
    with torch.no_grad():
        handed = _first_tensor(encoder(**source))
    handed = handed.detach().requires_grad_(True)
    target = {"encoder_outputs": (handed,), "labels": inputs["labels"]}

    def hand_on(output):
        return _first_tensor(output)

    dec = trace_layers(module, target, list(decoder_blocks), None, meter, outside=(handed,),
                       keep_grads=True)
    enc = trace_layers(encoder, source, list(encoder_blocks), None, meter, hand_on=hand_on)
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    optimizer_ms, optimizer_workspace = optimizer_step(params)

    chain, traces, owner, shared = dec
    first = 1 if chain.has_prefix else 0
    from torch.utils._pytree import tree_flatten

    readers = [first + k for k, call in enumerate(chain.calls)
               if any(t is handed for t in tree_flatten(call)[0])]
    dec_layers = _layers(chain, traces, owner, roofline, {"labels": inputs["labels"]}, shared)
    chain, traces, owner, shared = enc
    enc_layers = _layers(chain, traces, owner, roofline, source, shared, handed_on=handed)
    chains = _chain_pair(("encoder", encoder, enc_layers), ("decoder", module, dec_layers),
                         params, optimizer_ms, optimizer_workspace)
    edges = [{"from": "encoder", "to": "decoder", "readers": readers}]
    return chains, edges, len(set(enc[2])) + len(set(dec[2]))


def _stepped_parameters(module, traced):
    """The trainable parameters the traced step gives a gradient: those
    whose gradient a trace made, and those of each block that shares
    another block's trace (it did not run) where that block's got one."""
    got = {id(p) for p in module.parameters() if p.grad is not None}
    for chain, _, owner, _ in traced:
        first = 1 if chain.has_prefix else 0
        for k, block in enumerate(chain.blocks):
            traced_as = chain.blocks[owner[first + k] - first]
            if any(id(p) in got for p in traced_as.parameters()):
                got.update(id(p) for p in block.parameters())
    return [p for p in module.parameters() if p.requires_grad and id(p) in got]


def _required_besides(function, given):
    """The parameters `function` requires besides `given`."""
    import inspect

    return [n for n, q in inspect.signature(function).parameters.items()
            if n != given and q.default is q.empty
            and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]


def _image_features_base(features):
    """The tensor a vision-language model's image features are (its
    projector's output): the features themselves, or, of a list of
    per-image views of one storage (LLaVA's pooler_output), a view of that
    storage holding them all (images, tokens, width)."""
    import torch

    if isinstance(features, torch.Tensor):
        return features
    bases = {id(f._base) for f in features}
    shapes = {tuple(f.shape) for f in features}
    if len(bases) != 1 or None in (f._base for f in features) or len(shapes) != 1:
        raise InputError("remat.trace: the image features are not one tensor (one image per "
                         "sequence, one projector output); remat traces one", EXIT_BAD_INPUT)
    return features[0]._base.view((len(features),) + tuple(features[0].shape))


def _image_tower(model, language):
    """The vision chain's module: every part of the model that holds the
    vision tower but the language model (LLaVA's vision_tower and
    multi_modal_projector), run as the model's own get_image_features."""
    import torch

    owner = next(m for m in model.modules() if any(c is language for c in m.children()))

    class ImageFeatures(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name, child in owner.named_children():
                if child is not language:
                    self.add_module(name, child)

        def forward(self, pixel_values, **sizes):
            out = model.get_image_features(pixel_values=pixel_values, **sizes, return_dict=True)
            if getattr(out, "deepstack_features", None) is not None:
                raise InputError(
                    f"remat.trace: {type(model).__name__}'s vision tower hands its language "
                    "model more than the image features (deepstack_features: its blocks' "
                    "outputs, added into the first language blocks); remat traces a vision "
                    "chain that hands on the features alone", EXIT_BAD_INPUT)
            return out.pooler_output

    return ImageFeatures()


# Integer tensors a model computes from a batch's own constants (each
# image's size) up to this many elements: fake tensors holding their values.
INDEX_CONSTANT_NUMEL = 1 << 16


@contextlib.contextmanager
def _index_constants(fake_mode):
    """While on, an integer tensor made from Python numbers (torch.tensor
    of each image's size, as transformers' processor passes it; arange,
    zeros, ones or full of an integer dtype) and each integer tensor
    computed from such tensors alone, up to INDEX_CONSTANT_NUMEL elements,
    is a fake tensor holding its values (FakeTensorMode keeps them for
    torch.tensor's of one element only): the model's index arithmetic on
    them (Pixtral's patches per image, Qwen2.5-VL's windows of patches, the
    split of the packed features) reads real numbers."""
    import torch
    from torch._subclasses.fake_tensor import is_sparse_any, unset_fake_temporarily
    from torch.utils._pytree import tree_flatten

    aten = torch.ops.aten
    factories = {aten.arange.default, aten.arange.start, aten.arange.start_step,
                 aten.zeros.default, aten.ones.default, aten.full.default,
                 aten.scalar_tensor.default}
    plain, dispatch = fake_mode.may_turn_const, fake_mode.dispatch

    def integer_constant(t):
        return (not t.is_floating_point() and not t.is_complex() and
                t.numel() <= INDEX_CONSTANT_NUMEL and not is_sparse_any(t) and
                not fake_mode.is_our_fake(t) and t.device.type != "meta")

    def may_turn_const(t):
        return plain(t) or integer_constant(t)

    def made_constant(func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if func in factories and (device is None or torch.device(device).type == "cpu") and \
                not any(isinstance(a, torch.Tensor) for a in tree_flatten((args, kwargs))[0]):
            with unset_fake_temporarily():
                out = func(*args, **kwargs)
            if integer_constant(out):
                return fake_mode.fake_tensor_converter.from_real_tensor(
                    fake_mode, out, make_constant=True)
        return dispatch(func, types, args, kwargs)
    fake_mode.may_turn_const, fake_mode.dispatch = may_turn_const, made_constant
    try:
        yield
    finally:
        del fake_mode.may_turn_const, fake_mode.dispatch


def _rope_positions(rope, fake_mode, shape, types, grid):
    """The model's M-RoPE positions (its get_rope_index, as its forward
    computes them from mm_token_type_ids and image_grid_thw), computed on
    real tensors of `shape`'s token ids outside the fake mode: it builds
    them from Python lists of tensors, which fake tensors cannot hold.
    Made fake (the language model reads their shape: its rotary
    embedding is a product with them)."""
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        positions, _ = rope(torch.zeros(shape, dtype=torch.long),
                            mm_token_type_ids=torch.tensor(types),
                            image_grid_thw=torch.tensor(grid))
    return fake_mode.from_tensor(positions)


def _pooled_tokens_fit(config):
    """A config whose projector pools the vision tower's patches to
    mm_tokens_per_image image tokens (Gemma 3's: a square of patches
    average-pooled to a square of tokens) asks for no more tokens per side
    than the tower has patches per side; else refused (the pool's stride
    would be 0)."""
    tokens, vision = getattr(config, "mm_tokens_per_image", None), config.vision_config
    size, patch = getattr(vision, "image_size", None), getattr(vision, "patch_size", None)
    if not all(isinstance(v, int) for v in (tokens, size, patch)):
        return
    side, per_side = size // patch, int(tokens ** 0.5)
    if per_side > side:
        raise InputError(
            f"remat.trace: {config.model_type} config: field 'mm_tokens_per_image': {tokens} "
            f"({per_side} x {per_side}) is more than the vision tower's {side} x {side} patches "
            f"(image_size {size} / patch_size {patch}), which its projector pools to the image "
            f"tokens (accepted: up to {side * side})", EXIT_BAD_INPUT)


def _image_inputs(module, pixels, ids):
    """(the vision chain's inputs, the language chain's besides the text)
    for `pixels` (images, channels, height, width: every image of one
    size), as transformers' processor gives them, made under
    _index_constants: get_image_features given the images alone; or with
    image_sizes (Pixtral's: each image's height and width, a tensor of
    (images, 2)); or, where it takes image_grid_thw (Qwen2-VL's), the
    images as the processor packs them (each image's patches, of
    temporal_patch_size frames, one row each) and each image's grid of
    patches (1, height, width), which the language model takes too, with
    mm_token_type_ids (1 on each sequence's image tokens, after its first
    token), from which it computes its M-RoPE positions. Another argument
    is refused."""
    import inspect

    import torch

    images = pixels.shape[0]
    takes = inspect.signature(module.get_image_features).parameters
    if "image_grid_thw" in takes:
        vision = module.config.vision_config
        patch, merge = vision.patch_size, vision.spatial_merge_size
        height, width = (n // patch for n in pixels.shape[-2:])
        if height % merge or width % merge:
            raise InputError(f"remat.trace: {type(module).__name__}'s images of "
                             f"{pixels.shape[-2]} x {pixels.shape[-1]} are not of whole "
                             f"{merge} x {merge} groups of {patch} x {patch} patches (accepted: "
                             f"a multiple of {patch * merge} a side)", EXIT_BAD_INPUT)
        grid = torch.tensor([[1, height, width]] * images)
        row = pixels.shape[1] * vision.temporal_patch_size * patch * patch
        packed = torch.empty((images * height * width, row), dtype=pixels.dtype)
        tokens = height * width // (merge * merge)
        if tokens >= ids.shape[1]:
            raise InputError(f"remat.trace: an image of {tokens} tokens does not fit a sequence "
                             f"of {ids.shape[1]} (--seq-len: more than {tokens})", EXIT_BAD_INPUT)
        language = {"image_grid_thw": grid}
        if "mm_token_type_ids" in inspect.signature(module.forward).parameters:
            types = [[0] + [1] * tokens + [0] * (ids.shape[1] - 1 - tokens)] * ids.shape[0]
            language["mm_token_type_ids"] = torch.tensor(types)
            rope = getattr(getattr(module, "model", module), "get_rope_index", None)
            if callable(rope):
                language["position_ids"] = _rope_positions(rope, pixels.fake_mode, ids.shape,
                                                           types, grid.tolist())
        return {"pixel_values": packed, "image_grid_thw": grid}, language
    extra = _required_besides(module.get_image_features, "pixel_values")
    if not extra:
        return {"pixel_values": pixels}, {}
    if extra != ["image_sizes"]:
        raise InputError(f"remat.trace: {type(module).__name__}.get_image_features takes "
                         f"{', '.join(extra)} besides the images; remat traces images of one "
                         "size, given their image_sizes or image_grid_thw where asked",
                         EXIT_BAD_INPUT)
    sizes = torch.tensor([list(pixels.shape[-2:])] * images)
    return {"pixel_values": pixels, "image_sizes": sizes}, {}


@contextlib.contextmanager
def _unchecked():
    """transformers' placeholder check (image tokens against image
    features, torch_compilable_check) reads a sum that fake tensors do not
    have; it is off while the trace runs (TRANSFORMERS_DISABLE_TORCH_CHECK)."""
    import os

    saved = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
    os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"]
        else:
            os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = saved


def trace_vision_language(module, inputs, meter, roofline, optimizer_step):
    """(chains, edges, traced layers) of a vision-language model
    (transformers' LLaVA-style ...ForConditionalGeneration) on `inputs`
    (input_ids, pixel_values, labels), under the fake mode and `meter`
    already on: the vision chain (its vision tower's embedding, blocks,
    and the rest to the projected image features it hands on) and the
    language chain (the whole model given those features as
    mm_encoder_outputs: the vision tower does not run; its embedding
    splices them into the sequence, layer 0 reads them), to the loss.
    Vision blocks after the one the features are taken from
    (_blocks.feature_blocks: LLaVA-1.5's vision_feature_layer -2) run in
    the vision chain's last layer; nothing holds their activations once the
    features are handed on.
    optimizer_step(params) -> (ms, workspace)."""
    import inspect

    import torch
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    from ._blocks import find_chains
    from ._trace import _layers
    from ._trace_chain import trace_layers

    if "mm_encoder_outputs" not in inspect.signature(module.forward).parameters:
        raise InputError(f"remat.trace: {type(module).__name__}.forward takes no "
                         "mm_encoder_outputs (the image features computed apart); remat traces "
                         "a vision-language model that does", EXIT_BAD_INPUT)
    from ._blocks import VISION_NAMES, vision_language_parts

    if vision_language_parts(module) is None:
        raise InputError(f"remat.trace: {type(module).__name__} has no one module named "
                         f"{' or '.join(VISION_NAMES)} beside one named language_model with "
                         "get_image_features (LLaVA's layout, which remat traces)",
                         EXIT_BAD_INPUT)
    _pooled_tokens_fit(module.config)
    (_, vision, _, vision_blocks), (_, language, _, language_blocks) = find_chains(
        module, "remat.trace")
    tower = _image_tower(module, language)
    pixels = inputs["pixel_values"]
    with _index_constants(pixels.fake_mode), _unchecked():
        source, besides = _image_inputs(module, pixels, inputs["input_ids"])
        with torch.no_grad():
            features = tower(**source)
        as_list = not isinstance(features, torch.Tensor)
        handed = _image_features_base(features).detach().requires_grad_(True)
        given = list(handed.unbind(0)) if as_list else handed
        text = {"input_ids": inputs["input_ids"], "labels": inputs["labels"]}
        target = dict(text, **besides, mm_encoder_outputs={
            "image": BaseModelOutputWithPooling(pooler_output=given)})
        lang = trace_layers(module, target, list(language_blocks), None, meter,
                            outside=(handed,), keep_grads=True)
        vis = trace_layers(tower, source, list(vision_blocks), None, meter,
                           hand_on=_image_features_base, keep_grads=True)
    # AdamW steps (and holds moments for) the parameters the step gives a
    # gradient: not those of vision blocks after the features' layer.
    params = _stepped_parameters(module, (lang, vis))
    for p in module.parameters():
        p.grad = None
    optimizer_ms, optimizer_workspace = optimizer_step(params)

    chain, traces, owner, shared = lang
    if not chain.has_prefix:
        raise InputError("remat.trace: the language model's first block is given the batch "
                         "itself; the image features are spliced in before it", EXIT_BAD_INPUT)
    lang_layers = _layers(chain, traces, owner, roofline, dict(text, **besides), shared)
    chain, traces, owner, shared = vis
    vis_layers = _layers(chain, traces, owner, roofline, source, shared, handed_on=handed)
    chains = _chain_pair(("vision", tower, vis_layers), ("language", module, lang_layers),
                         params, optimizer_ms, optimizer_workspace)
    edges = [{"from": "vision", "to": "language", "readers": [0]}]
    return chains, edges, len(set(vis[2])) + len(set(lang[2]))


@contextlib.contextmanager
def _answering(tower, output):
    """While on, `tower` does not run: each call returns a new output()
    (CLIP's get_image_features writes its projection into the output)."""
    saved = tower.__dict__.get("forward")
    tower.forward = lambda *args, **kwargs: output()
    try:
        yield
    finally:
        if saved is None:
            del tower.forward
        else:
            tower.forward = saved


def _pooled(output):
    """A tower's pooled output (transformers' pooler_output)."""
    pooled = getattr(output, "pooler_output", None)
    if pooled is None:
        raise InputError("remat.trace: the vision tower's output has no pooler_output (the "
                         "pooled image features the contrastive loss reads); remat traces two "
                         "towers whose vision tower pools its output (CLIP, SigLIP)",
                         EXIT_BAD_INPUT)
    return pooled


def trace_two_towers(module, inputs, meter, roofline, optimizer_step):
    """(chains, edges, traced layers) of two towers meeting in the
    contrastive loss (transformers' CLIPModel, SiglipModel) on `inputs`
    (input_ids, pixel_values, return_loss), under the fake mode and `meter`
    already on: the vision chain (the vision tower, _blocks.two_tower_parts,
    on the images, to its pooled output) and the text chain (the whole
    model on the texts, its vision tower answering with that pooled output
    without running, to the loss: CLIP's projections, the text tower, the
    normalised similarities and the loss), one edge from the vision
    chain into the text chain's last layer. optimizer_step(params) -> (ms,
    workspace)."""
    import torch

    from ._blocks import find_chains
    from ._trace import _layers
    from ._trace_chain import trace_layers

    (_, vision, _, vision_blocks), (_, _, _, text_blocks) = find_chains(module, "remat.trace")
    extra = _required_besides(vision.forward, "pixel_values")
    if extra:
        raise InputError(f"remat.trace: {type(module).__name__}'s vision tower "
                         f"({type(vision).__name__}) takes {', '.join(extra)} besides the images "
                         "(each image's own size); remat traces images of the vision tower's "
                         "one size", EXIT_BAD_INPUT)
    source = {"pixel_values": inputs["pixel_values"]}
    with torch.no_grad():
        out = vision(**source)
    handed = _pooled(out).detach().requires_grad_(True)
    text = {k: v for k, v in inputs.items() if k != "pixel_values"}
    # The tower's output as it returns it (a model may read its fields by
    # position: ALIGN's), the pooled features those handed on.
    fields = dict(out.items(), pooler_output=handed)
    with _answering(vision, lambda: type(out)(**fields)):
        txt = trace_layers(module, text, list(text_blocks), None, meter, outside=(handed,),
                           keep_grads=True)
    del out, fields
    vis = trace_layers(vision, source, list(vision_blocks), None, meter, hand_on=_pooled,
                       keep_grads=True)
    params = _stepped_parameters(module, (txt, vis))
    for p in module.parameters():
        p.grad = None
    optimizer_ms, optimizer_workspace = optimizer_step(params)

    chain, traces, owner, shared = txt
    text_layers = _layers(chain, traces, owner, roofline, text, shared)
    chain, traces, owner, shared = vis
    vis_layers = _layers(chain, traces, owner, roofline, source, shared, handed_on=handed)
    chains = _chain_pair(("vision", vision, vis_layers), ("text", module, text_layers),
                         params, optimizer_ms, optimizer_workspace)
    edges = [{"from": "vision", "to": "text", "readers": [len(text_layers) - 1]}]
    return chains, edges, len(set(vis[2])) + len(set(txt[2]))
