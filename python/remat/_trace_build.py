"""What the tracer runs: a model built from a Hugging Face config.json by
transformers' own class, or a copy of the user's module, with fake tensors
(shapes, dtypes and a device, no data) in place of its parameters and
buffers, and the example batch of one training step.

From a config the model is the class its "architectures" names, as the
planner reads a config.json: a causal-LM or masked-LM class (labels: the
input ids), or a base model, also with no "architectures", whose loss is
the mean of the last hidden state (a stand-in head that keeps every
block's backward). A config's "dtype" (or
"torch_dtype") of null is a config without a dtype.
"""
import contextlib
import copy
import json

from ._planner import EXIT_BAD_INPUT, InputError


def read_config(path):
    """The config.json at `path` (or the folder holding it) as a dict."""
    import os

    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(f"remat.trace: cannot read {path}: {e.strerror}", EXIT_BAD_INPUT)
    except json.JSONDecodeError as e:
        raise InputError(f"remat.trace: {path}: not JSON ({e.msg} at line {e.lineno})",
                         EXIT_BAD_INPUT)
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise InputError(f"remat.trace: {path}: expected a config.json with a \"model_type\" "
                         "string", EXIT_BAD_INPUT)
    return data


def hf_config(data, source="config.json"):
    """transformers' config object for a config dict (null dtypes dropped)."""
    import transformers

    data = {k: v for k, v in data.items()
            if not (k in ("dtype", "torch_dtype") and v is None)}
    model_type = data.pop("model_type")
    try:
        return transformers.AutoConfig.for_model(model_type, **data)
    except ValueError:
        raise InputError(f"remat.trace: {source}: model_type \"{model_type}\": transformers "
                         f"{transformers.__version__} does not know it", EXIT_BAD_INPUT) from None


_KINDS = (("ForCausalLM", "causal_lm"), ("LMHeadModel", "causal_lm"),
          ("ForConditionalGeneration", "causal_lm"), ("ForMaskedLM", "masked_lm"),
          ("ForSequenceClassification", "sequence_classification"),
          ("ForImageClassification", "image_classification"), ("Model", "base"))


def _seq2seq_class(config):
    """An encoder-decoder's class (T5, BART: its sequence-to-sequence LM;
    Whisper: its speech one); its causal-LM class, where it has one, is
    the decoder alone."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    for names in (auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
                  auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES):
        name = names.get(config.model_type)
        if name and hasattr(transformers, name):
            return getattr(transformers, name)
    raise InputError(f"remat.trace: model_type \"{config.model_type}\" is an encoder-decoder "
                     "without a sequence-to-sequence class in transformers "
                     f"{transformers.__version__}", EXIT_BAD_INPUT)


def model_class(config):
    """(class, kind) of the model a config.json means, as the planner reads
    it (planner/src/input/hf_config.cc): the class its "architectures"
    names (...ForCausalLM, ...ForConditionalGeneration: "causal_lm",
    ...ForMaskedLM: "masked_lm", ...ForSequenceClassification:
    "sequence_classification", ...ForImageClassification:
    "image_classification", ...Model: "base"), or with no "architectures" the family's base model.
    A class name transformers does not have, or of another kind, is
    refused. An encoder-decoder (two chains of blocks, traced as a graph:
    _trace_graph) is "seq2seq": its ...ForConditionalGeneration class, with
    no "architectures" its sequence-to-sequence class. A config with a
    vision and a text part is "vision_language" (LLaVA's image-text class)
    or "two_towers" (a class with get_text_features and get_image_features:
    CLIP's, SigLIP's ...Model, the towers meeting in the contrastive loss)."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    names = getattr(config, "architectures", None)
    if getattr(config, "is_encoder_decoder", False):
        name = names[0] if names else None
        if name and isinstance(name, str) and hasattr(transformers, name) and (
                name.endswith("ForConditionalGeneration") or name.endswith("MTModel")):
            return getattr(transformers, name), "seq2seq"
        if name:
            raise InputError(f"remat.trace: field 'architectures': class {name!r}: an "
                             "encoder-decoder traces as its ...ForConditionalGeneration class of "
                             f"transformers {transformers.__version__}", EXIT_BAD_INPUT)
        return _seq2seq_class(config), "seq2seq"
    if is_vision_language(config):
        # Its image-text class (a text model's causal-LM class, as Llama 4's,
        # is a chain, below), or a text tower and a vision tower meeting in
        # the contrastive loss (CLIP's, SigLIP's ...Model: "two_towers").
        name = names[0] if names else auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(
            config.model_type, auto.MODEL_MAPPING_NAMES.get(config.model_type))
        cls = getattr(transformers, name, None) if isinstance(name, str) else None
        if cls is not None and name.endswith("ForConditionalGeneration") and \
                callable(getattr(cls, "get_image_features", None)):
            return cls, "vision_language"
        if cls is not None and callable(getattr(cls, "get_text_features", None)) and \
                callable(getattr(cls, "get_image_features", None)):
            return cls, "two_towers"
    if not names:
        name = auto.MODEL_MAPPING_NAMES.get(config.model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        if name and hasattr(transformers, name):
            return getattr(transformers, name), "base"
        raise InputError(f"remat.trace: transformers has no model class for model_type "
                         f"\"{config.model_type}\"", EXIT_BAD_INPUT)
    name = names[0]
    kind = next((k for tail, k in _KINDS if isinstance(name, str) and name.endswith(tail)), None)
    if kind is None or not hasattr(transformers, name):
        raise InputError(f"remat.trace: field 'architectures': class {name!r}: expected a "
                         f"...ForCausalLM, ...ForConditionalGeneration, ...ForMaskedLM, "
                         f"...ForSequenceClassification, ...ForImageClassification or ...Model "
                         f"class of transformers "
                         f"{transformers.__version__}", EXIT_BAD_INPUT)
    return getattr(transformers, name), kind


def is_vision_language(config):
    """Whether a config is a vision-language model's: a vision tower's
    config and a language model's in one (LLaVA's vision_config,
    text_config), its image features spliced into the text's sequence."""
    return getattr(config, "vision_config", None) is not None and \
        getattr(config, "text_config", None) is not None and \
        not getattr(config, "is_encoder_decoder", False)


def default_class(config):
    """The class a config of the family is most often trained as: its
    causal-LM class where transformers has one, else (a vision-language
    model's) its image-text-to-text class, else its masked-LM class, else
    its base model (the name a published config.json's
    "architectures" would give)."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    if getattr(config, "is_encoder_decoder", False):
        return _seq2seq_class(config)
    image_text = auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES if is_vision_language(config) \
        else {}
    for names in (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, image_text,
                  auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES, auto.MODEL_MAPPING_NAMES):
        name = names.get(config.model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        if name and hasattr(transformers, name):
            return getattr(transformers, name)
    raise InputError(f"remat.trace: transformers has no model class for model_type "
                     f"\"{config.model_type}\"", EXIT_BAD_INPUT)


def build_from_config(config, fake_mode, dtype):
    """(model, kind) in `dtype`, in training mode with no KV cache, its
    parameters and buffers fake tensors of `fake_mode` on the CPU. The model
    is built on the meta device (no initialisation runs on data) and its
    tensors are then made fake in place; a class whose construction reads
    a tensor's values (which meta tensors do not have) is built under
    `fake_mode` instead. Where the class is built from the config's text
    part (Llama 4's causal LM), model.config is that part."""
    import torch

    cls, kind = model_class(config)
    wanted = getattr(cls, "config_class", None)
    if isinstance(wanted, type) and not isinstance(config, wanted) and \
            hasattr(config, "get_text_config"):
        config = config.get_text_config()  # a causal-LM class of the text model alone
    for part in {id(c): c for c in (config, config.get_text_config())}.values():
        if hasattr(part, "use_cache"):  # a vision-language model's: its text config's
            part.use_cache = False
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)

    def build():
        return cls._from_config(config, dtype=dtype) if hasattr(cls, "_from_config") \
            else cls(config)

    try:
        try:
            with torch.device("meta"):
                model = build()
        except (RuntimeError, NotImplementedError):  # e.g. .item() of a meta tensor
            with fake_mode:
                model = build()
    finally:
        torch.set_default_dtype(previous)
    fake_in_place(model, fake_mode)
    return model.train(), kind


def _run_whole(function, *args, **kwargs):
    """A checkpoint function that runs the layer as it is: the tracer
    measures each block whole, the plan says which the step recomputes."""
    return function(*args, **kwargs)


def run_checkpointed_layers_whole(module):
    """Makes each layer that transformers' gradient checkpointing wraps
    (its `_gradient_checkpointing_func`) run whole; returns whether any
    module of `module` has the checkpointing on (its `gradient_checkpointing`
    flag), which its code may read besides (T5's cross-attention makes its
    zero position bias with grad then)."""
    on = False
    for m in module.modules():
        if hasattr(m, "_gradient_checkpointing_func"):
            m._gradient_checkpointing_func = _run_whole
        on = on or getattr(m, "gradient_checkpointing", False) is True
    return on


def checkpointed_by_transformers(model):
    """`model` (a transformers PreTrainedModel) as its own gradient
    checkpointing runs it: activation_checkpointing_enable (older
    transformers: gradient_checkpointing_enable) sets every module's flag as
    in a step with checkpointing on, and each checkpointed layer then runs
    whole (run_checkpointed_layers_whole)."""
    enable = getattr(model, "activation_checkpointing_enable", None) or \
        getattr(model, "gradient_checkpointing_enable", None)
    if enable is None or not getattr(model, "supports_gradient_checkpointing", False):
        raise InputError(f"remat.trace: gradient_checkpointing: {type(model).__name__} has no "
                         f"gradient checkpointing of transformers' (accepted: a transformers "
                         f"model whose supports_gradient_checkpointing is true)", EXIT_BAD_INPUT)
    kwargs = {"use_reentrant": False}
    if enable.__name__ == "activation_checkpointing_enable":
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        enable(gradient_checkpointing_kwargs=kwargs)
    run_checkpointed_layers_whole(model)


def fake_in_place(module, fake_mode, device="cpu"):
    """Replaces the parameters, buffers and other tensor attributes of
    `module` and its submodules that are not fake tensors by fake tensors
    of the same shapes, strides, dtypes and requires_grad on `device`;
    tied tensors stay tied."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    memo = {}

    def fake(t):
        if isinstance(t, FakeTensor):
            return t
        if id(t) not in memo:
            with fake_mode:
                f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
            if isinstance(t, torch.nn.Parameter):
                f = torch.nn.Parameter(f, requires_grad=t.requires_grad)
            memo[id(t)] = f
        return memo[id(t)]

    for mod in module.modules():
        for table in (mod._parameters, mod._buffers):
            for name, t in table.items():
                if t is not None:
                    table[name] = fake(t)
        for name, value in list(vars(mod).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
                setattr(mod, name, fake(value))


def decoder_start(model, config):
    """The decoder's start token an encoder-decoder's step needs (the labels
    shifted right start with it): None where the config has one; where it
    has none and the model shifts the labels as transformers' T5 does (its
    _shift_right, which starts from decoder_start_token_id and which T5's
    documentation sets to pad_token_id, as T5's published checkpoints do),
    pad_token_id is set on the config and a line saying so returned; None
    too where the model's shift_tokens_right takes no start token (mBART's,
    PLBart's); else InputError."""
    if getattr(config, "decoder_start_token_id", None) is not None:
        return None
    import inspect
    import sys

    shift = getattr(sys.modules.get(type(model).__module__), "shift_tokens_right", None)
    try:
        takes = shift is not None and "decoder_start_token_id" in inspect.signature(shift).parameters
    except (TypeError, ValueError):
        takes = True
    if shift is not None and not takes:
        return None  # mBART's: the labels' last token starts the decoder input, no start token
    pad = getattr(config, "pad_token_id", None)
    if callable(getattr(model, "_shift_right", None)) and pad is not None:
        config.decoder_start_token_id = pad
        return (f"decoder_start_token_id missing: pad_token_id ({pad}) taken, as transformers' "
                f"{type(model).__name__} shifts the labels right after it")
    raise InputError(f"remat.trace: {config.model_type} config: field 'decoder_start_token_id': "
                     "missing (an encoder-decoder's decoder input starts with it; accepted: a "
                     "token id)", EXIT_BAD_INPUT)


def example_batch(model, config, kind, micro_batch, seq_len, fake_mode):
    """One micro-batch for the model's main input: images of the config's
    size for a vision model (pixel_values), else token ids (and labels, for
    the LM classes; one class per example for the classification classes). An encoder-decoder's: `seq_len` tokens (a speech
    model's encoder: the log-mel frames its config takes) for the encoder
    and `seq_len` target tokens (labels) for the decoder. A vision-language
    model's: one image of its vision tower's size per sequence of `seq_len`
    tokens (labels: the tokens; fake tensors have no values, so the image's
    tokens among them are not placed). Two towers': one image of the vision
    tower's size and one text of `seq_len` tokens per pair, and return_loss
    (the contrastive loss over the batch's pairs)."""
    import torch

    if kind == "seq2seq":
        vocab = getattr(config, "vocab_size", None) or 2
        with fake_mode:
            labels = torch.randint(0, vocab, (micro_batch, seq_len))
            if model.main_input_name == "input_features":
                frames = 2 * config.max_source_positions  # two strided convolutions' input
                source = torch.empty((micro_batch, config.num_mel_bins, frames),
                                     dtype=next(model.parameters()).dtype)
            else:
                source = torch.randint(0, vocab, (micro_batch, seq_len))
        return {model.main_input_name: source, "labels": labels}

    if kind in ("vision_language", "two_towers"):
        vision = config.vision_config
        size = getattr(vision, "image_size", 224)
        size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        vocab = getattr(config.get_text_config(), "vocab_size", None) or 2
        with fake_mode:
            ids = torch.randint(0, vocab, (micro_batch, seq_len))
            pixels = torch.empty((micro_batch, getattr(vision, "num_channels", 3)) + size,
                                 dtype=next(model.parameters()).dtype)
        if kind == "two_towers":
            return {"input_ids": ids, "pixel_values": pixels, "return_loss": True}
        return {"input_ids": ids, "pixel_values": pixels, "labels": ids}
    if getattr(model, "main_input_name", "input_ids") == "pixel_values":
        size = getattr(config, "image_size", 224)
        size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        channels = getattr(config, "num_channels", 3)
        with fake_mode:
            pixels = torch.empty((micro_batch, channels) + size,
                                 dtype=next(model.parameters()).dtype)
            batch = {"pixel_values": pixels}
            if kind == "image_classification":
                batch["labels"] = class_labels(config, micro_batch)
        return batch
    vocab = getattr(config, "vocab_size", None) or 2
    with fake_mode:
        ids = torch.randint(0, vocab, (micro_batch, seq_len))
    batch = {"input_ids": ids}
    if kind in ("causal_lm", "masked_lm"):
        batch["labels"] = ids
    elif kind == "sequence_classification":
        with fake_mode:
            batch["labels"] = class_labels(config, micro_batch)
    return batch


def class_labels(config, micro_batch):
    """A classification batch's labels: one class index per example
    (int64, as a dataset's labels are; transformers then trains the
    single-label cross-entropy, or with one label the regression's mean
    squared error on float labels)."""
    import torch

    if getattr(config, "num_labels", 2) == 1:
        return torch.empty((micro_batch,))
    return torch.randint(0, config.num_labels, (micro_batch,))


@contextlib.contextmanager
def unpacked_positions():
    """With no attention mask and no KV cache (a training batch),
    transformers looks for packed sequences in the position ids; on fake
    tensors it cannot read them and builds a full mask, which a real step
    with the default positions (0, 1, ... in each row) skips (SDPA's
    is_causal). The batch example_batch makes has those positions: while
    this is on, the check answers as on real tensors, no packing."""
    from transformers import masking_utils

    saved = masking_utils.find_packed_sequence_indices
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = saved


@contextlib.contextmanager
def ones_masks():
    """A 2D attention mask the model makes itself with torch.ones (BART's
    decoder, given none) holds ones only: a real step reads it, finds no
    padding and skips building the mask (SDPA's is_causal); on fake tensors
    transformers cannot read it and builds the mask. While this is on, a
    mask that torch.ones made and nothing wrote into since (its version
    counter unchanged) reaches transformers' mask builders
    (masking_utils._preprocess_mask_arguments) as no mask, which is what an
    all-ones mask means to them."""
    import weakref

    import torch
    from transformers import masking_utils

    made = {}  # id -> (weak reference, version at creation)
    ones, preprocess = torch.ones, masking_utils._preprocess_mask_arguments

    def tracked_ones(*args, **kwargs):
        t = ones(*args, **kwargs)
        made[id(t)] = (weakref.ref(t), t._version)
        return t

    def all_ones(t):
        ref, version = made.get(id(t), (None, None))
        return ref is not None and ref() is t and t._version == version

    def without_ones(config, inputs_embeds, attention_mask, *args, **kwargs):
        if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2 and \
                all_ones(attention_mask):
            attention_mask = None
        return preprocess(config, inputs_embeds, attention_mask, *args, **kwargs)

    torch.ones, masking_utils._preprocess_mask_arguments = tracked_ones, without_ones
    try:
        yield
    finally:
        torch.ones, masking_utils._preprocess_mask_arguments = ones, preprocess


def base_loss(output, inputs):
    """The base model's stand-in loss: the mean of its last hidden state."""
    hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
    return hidden.float().mean()


def fake_module(module, fake_mode, device="cpu"):
    """A copy of `module` whose parameters and buffers are fake tensors of
    the same shapes, strides, dtypes and requires_grad, on `device` (a
    module on the meta device traces as on the CPU); tied tensors stay
    tied. The module's own tensors are not touched."""
    import torch

    memo = {}
    with fake_mode:
        for t in list(module.parameters()) + list(module.buffers()):
            if id(t) in memo:
                continue
            fake = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
            if isinstance(t, torch.nn.Parameter):
                fake = torch.nn.Parameter(fake, requires_grad=t.requires_grad)
            memo[id(t)] = fake
    return copy.deepcopy(module, memo)


def fake_inputs(inputs, fake_mode, device="cpu"):
    """The example inputs with each tensor replaced by a fake one of the
    same shape, strides and dtype on `device` (one fake per real tensor)."""
    import torch
    from torch.utils._pytree import tree_map

    made = {}

    def fake(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in made:
            with fake_mode:
                made[id(t)] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                                  device=device)
        return made[id(t)]

    return tree_map(fake, inputs)
