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
"""


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
    owned = {}
    enc_static, enc_count = _state(encoder, params, owned)
    dec_static, dec_count = _state(module, params, owned)
    chains = [
        {"name": "encoder", "profile": {
            "model": "encoder", "static_bytes": sum(enc_static.values()), "static": enc_static,
            "parameters": enc_count, "optimizer_ms": 0.0, "optimizer_workspace_bytes": 0,
            "layers": enc_layers}},
        {"name": "decoder", "profile": {
            "model": "decoder", "static_bytes": sum(dec_static.values()), "static": dec_static,
            "parameters": dec_count, "optimizer_ms": optimizer_ms,
            "optimizer_workspace_bytes": optimizer_workspace, "layers": dec_layers}},
    ]
    edges = [{"from": "encoder", "to": "decoder", "readers": readers}]
    return chains, edges, len(set(enc[2])) + len(set(dec[2]))
