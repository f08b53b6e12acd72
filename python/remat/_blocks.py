"""Finding a transformer's blocks in a PyTorch module: the one ModuleList
whose entries are all one class named ...Layer or ...Block (GPT-2's
transformer.h, Llama's model.layers, BERT's encoder.layer, DistilBERT's
transformer.layer), wherever wrappers put it (a PEFT PeftModel, a
sentence-transformers SentenceTransformer, a user's own module)."""
from ._planner import EXIT_BAD_INPUT, InputError

# Submodules of a block that the selective options scope (see _selective).
MLP_NAMES = ("mlp", "intermediate", "ffn", "feed_forward")


def _is_block_list(module):
    import torch

    if not isinstance(module, torch.nn.ModuleList) or len(module) == 0:
        return False
    kinds = {type(m) for m in module}
    if len(kinds) != 1:
        return False
    name = next(iter(kinds)).__name__
    return name.endswith("Layer") or name.endswith("Block")


def _refuse_compiled_blocks(model):
    """Raises InputError where the blocks were compiled one by one before
    apply (a ModuleList of torch.compile's OptimizedModule wrappers, as
    torchtitan registers them): the compiled wrappers would not run the
    forwards apply sets."""
    import torch

    for path, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and all(
                type(m).__name__ == "OptimizedModule" for m in module):
            inner = type(module[0]._orig_mod).__name__
            raise InputError(
                f"remat.apply: {path or 'the model'} holds blocks compiled before apply "
                f"(torch.compile'd {inner}); call remat.apply(model, plan) first, then compile "
                "each block (as torchtitan applies activation checkpointing before "
                "torch.compile)", EXIT_BAD_INPUT)


def find_blocks(model):
    """(path, ModuleList) of the model's transformer blocks, in the order the
    model runs them. Raises InputError when there is none, or more than one
    (an encoder-decoder, two towers): the plan's blocks must be one list."""
    found = [(path, m) for path, m in model.named_modules() if _is_block_list(m)]
    if not found:
        _refuse_compiled_blocks(model)
        raise InputError(
            f"remat.apply: no transformer blocks in {type(model).__name__} (looked for one "
            "nn.ModuleList of ...Layer or ...Block modules, as in GPT-2, Llama, BERT)",
            EXIT_BAD_INPUT)
    if len(found) > 1:
        paths = ", ".join(p or "<the model>" for p, _ in found)
        raise InputError(
            f"remat.apply: {type(model).__name__} has more than one list of blocks ({paths}); "
            "remat plans one chain of blocks", EXIT_BAD_INPUT)
    return found[0]


# Names of the module that turns token ids into the first block's input.
EMBEDDING_NAMES = ("embeddings", "embed_tokens", "wte", "word_embeddings", "embed_in",
                   "tok_embeddings")


def _holds(parent, path):
    return not parent or path.startswith(parent + ".")


def find_embedding(model, blocks_path):
    """The embedding module of the blocks at blocks_path (find_blocks): the
    outermost module named as in EMBEDDING_NAMES whose parent also holds the
    blocks (Llama's model.embed_tokens, BERT's embeddings, GPT-2's wte).
    Raises InputError when there is none, or more than one."""
    found = [(path, m) for path, m in model.named_modules()
             if path.rpartition(".")[2] in EMBEDDING_NAMES
             and _holds(path.rpartition(".")[0], blocks_path)]
    found = [(path, m) for path, m in found
             if not any(path.startswith(other + ".") for other, _ in found)]
    if len(found) != 1:
        names = ", ".join(p for p, _ in found) or "none"
        raise InputError(
            f"remat.apply: the plan checkpoints the embedding, and {type(model).__name__} has "
            f"not one embedding module beside its blocks {blocks_path} (found: {names}; looked "
            f"for {', '.join(EMBEDDING_NAMES)})", EXIT_BAD_INPUT)
    return found[0][1]


# Names of the norm a pre-LN model applies to the last block's output.
FINAL_NORM_NAMES = ("norm", "final_layernorm", "final_layer_norm", "ln_f", "norm_f",
                    "final_norm")


def find_final_norm(model, blocks_path):
    """The final norm of the blocks at blocks_path (find_blocks): the module
    named as in FINAL_NORM_NAMES whose parent also holds the blocks, outside
    them (Llama's model.norm, GPT-2's transformer.ln_f). Raises InputError
    when there is none, or more than one."""
    found = [(path, m) for path, m in model.named_modules()
             if path.rpartition(".")[2] in FINAL_NORM_NAMES
             and _holds(path.rpartition(".")[0], blocks_path)
             and not path.startswith(blocks_path + ".")]
    found = [(path, m) for path, m in found
             if not any(path.startswith(other + ".") for other, _ in found)]
    if len(found) != 1:
        names = ", ".join(p for p, _ in found) or "none"
        raise InputError(
            f"remat.apply: the plan checkpoints the final norm, and {type(model).__name__} has "
            f"not one final norm beside its blocks {blocks_path} (found: {names}; looked for "
            f"{', '.join(FINAL_NORM_NAMES)})", EXIT_BAD_INPUT)
    return found[0][1]


def find_head(model):
    """The module that turns the final hidden states into logits: the one
    module transformers' get_output_embeddings() returns (Llama's lm_head,
    GPT-2's lm_head; a PEFT wrapper reaches the same). Raises InputError
    when there is none, or more than one."""
    import torch

    found = {}
    for m in model.modules():
        get = getattr(m, "get_output_embeddings", None)
        head = get() if callable(get) else None
        if isinstance(head, torch.nn.Module):
            found[id(head)] = head
    if len(found) != 1:
        raise InputError(
            f"remat.apply: the plan recomputes the head with the final norm, and "
            f"{type(model).__name__} has {len(found) or 'no'} output embeddings modules "
            "(transformers' get_output_embeddings) where one is needed; plan without a "
            "checkpoint on the final norm", EXIT_BAD_INPUT)
    return next(iter(found.values()))


def mlp_of(block):
    """The block's MLP submodule (None when it has none by a known name)."""
    for name in MLP_NAMES:
        sub = getattr(block, name, None)
        if sub is not None:
            return sub
    return None


def norms_of(block):
    """The block's normalisation modules (LayerNorm, RMSNorm, ...)."""
    return [m for m in block.modules() if "Norm" in type(m).__name__]


# Names of a vision-language model's two parts (transformers' LLaVA-style
# models: model.vision_tower, model.language_model; Qwen2-VL's and
# Qwen2.5-VL's vision part: model.visual).
VISION_NAMES = ("vision_tower", "visual")
LANGUAGE_NAMES = ("language_model",)


def vision_language_parts(model):
    """(vision tower, language model) of a vision-language model whose
    image features the language model's embedding splices into its
    sequence (transformers' LLaVA-style ...ForConditionalGeneration: one
    submodule named vision_tower, one named language_model), else None."""
    def one(names):
        found = [m for path, m in model.named_modules() if path.rpartition(".")[2] in names]
        return found[0] if len(found) == 1 else None

    vision, language = one(VISION_NAMES), one(LANGUAGE_NAMES)
    if vision is None or language is None or vision is language or \
            not callable(getattr(model, "get_image_features", None)):
        return None
    return vision, language


# Names of two towers meeting in a contrastive loss (transformers' CLIPModel,
# SiglipModel: vision_model, text_model).
TOWER_NAMES = ("vision_model", "text_model")


def two_tower_parts(model):
    """(vision tower, text tower) of a model whose two towers' outputs meet
    only in its loss (transformers' CLIPModel, SiglipModel: one submodule
    named vision_model and one named text_model, each the outermost so
    named, and get_image_features and get_text_features), else None."""
    def one(name):
        found = [(path, m) for path, m in model.named_modules()
                 if path.rpartition(".")[2] == name]
        found = [m for path, m in found if not any(path.startswith(other + ".")
                                                    for other, _ in found)]
        return found[0] if len(found) == 1 else None

    if not all(callable(getattr(model, f"get_{n}_features", None)) for n in ("image", "text")):
        return None
    vision, text = (one(n) for n in TOWER_NAMES)
    if vision is None or text is None or any(a is b for a in vision.modules()
                                             for b in text.modules()):
        return None
    return vision, text


def feature_blocks(model, count, who):
    """How many of a vision tower's `count` blocks its image features are
    taken after: all, or up to the config's vision_feature_layer (an index
    into the tower's hidden states, the embedding's output first: LLaVA-1.5
    takes -2, the last block's input). The blocks after it run in the step
    without feeding the features. A list of layers (features of several
    blocks joined) is refused."""
    layer = getattr(getattr(model, "config", None), "vision_feature_layer", -1)
    if isinstance(layer, bool) or not isinstance(layer, int) or \
            not 1 <= (layer if layer >= 0 else count + 1 + layer) <= count:
        raise InputError(
            f"{who}: {type(model).__name__}'s config: field 'vision_feature_layer': {layer!r} "
            f"(accepted: one vision block's output, 1 to {count} or -{count} to -1; features "
            "joined from several layers are read from more than one block)", EXIT_BAD_INPUT)
    return layer if layer >= 0 else count + 1 + layer


def find_chains(model, who="remat.apply"):
    """[(name, module, path, blocks)] of a graph's two chains, in the order
    its step runs them, each with its blocks as find_blocks finds them in
    that module (path relative to it): a vision-language model's "vision"
    (its vision tower; the blocks its image features are taken after,
    feature_blocks) and "language" (its language model), else an
    encoder-decoder's "encoder", the module transformers' get_encoder()
    returns, and "decoder", get_decoder()'s; two towers' "vision" and
    "text" (two_tower_parts: the vision tower runs first in CLIP's and
    SigLIP's forward). Raises InputError where the model has none of them."""
    import torch

    parts = vision_language_parts(model)
    if parts is not None:
        (vision, vision_module, path, blocks), language = _chains_of(
            zip(("vision", "language"), parts), who)
        used = feature_blocks(model, len(blocks), who)
        return [(vision, vision_module, path, list(blocks)[:used]), language]
    towers = two_tower_parts(model)
    if towers is not None:
        return _chains_of(zip(("vision", "text"), towers), who)
    found = []
    for name in ("encoder", "decoder"):
        get = getattr(model, f"get_{name}", None)
        found.append(get() if callable(get) else None)
    encoder, decoder = found
    # transformers' get_encoder() / get_decoder() give the model itself (or
    # a wrapper holding the other) where it has no such part.
    if not all(isinstance(m, torch.nn.Module) for m in found) or any(
            a is b for a in encoder.modules() for b in (decoder, model)) or any(
            a is b for a in decoder.modules() for b in (encoder, model)):
        raise InputError(
            f"{who}: {type(model).__name__} is not an encoder-decoder (its get_encoder() and "
            "get_decoder() give no two separate modules); a graph of chains is accepted for "
            "transformers' encoder-decoders (T5, BART, Whisper: ...ForConditionalGeneration), "
            "vision-language models (a vision_tower and a language_model: LLaVA) and two "
            "towers (a vision_model and a text_model: CLIP, SigLIP)",
            EXIT_BAD_INPUT)
    return _chains_of(zip(("encoder", "decoder"), found), who)


def _chains_of(named, who):
    out = []
    for name, module in named:
        try:
            path, blocks = find_blocks(module)
        except InputError as e:
            raise InputError(e.message.replace("remat.apply:", f"{who}: the {name}:", 1),
                             e.exit_code) from None
        out.append((name, module, path, blocks))
    return out
