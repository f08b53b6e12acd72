"""The training step of a sentence-transformers job, traced: the config's
encoder (transformers' base model, as sentence-transformers'
models.Transformer loads it) in a SentenceTransformer with
sentence-transformers' own Pooling, trained with its own
MultipleNegativesRankingLoss (MNRL) on `texts_per_example` texts an
example, as sentence-transformers runs it: the anchors in one forward of
the model and, with merge_columns (sentence-transformers 6's
embed_columns, the default), the other columns concatenated into a
second forward of (texts - 1) x micro_batch texts; without it one
forward per column. Each forward is a pass; the loss scores every pass's
sentence embeddings.

The chain (PassChain) is the passes in the order the step runs them,
named as the planner's hand-written sentence-transformers job names its
layers and as remat.apply reads a multi-pass plan: p1.embedding,
p1.block0.., p2.embedding, p2.block0.., ..., pP.head (the last pass's
pooling and the loss). A later pass's
embedding layer takes the earlier pass's last block output: it pools it
(the sentence embeddings it keeps for the loss, its holder) and embeds
its own texts; the head pools the last pass and computes the loss. The
backward meets them in that order reversed, as autograd runs the step
(the later pass's nodes were made later). Each pass's blocks are traced
apart (their inputs hold other text counts); a parameter's gradient is
created by the last pass's backward and summed into by the earlier
passes'.
"""
import torch

from ._planner import EXIT_BAD_INPUT, InputError

# The job settings of a config's `remat` block that make the step a
# sentence-transformers one, and the values the traced step runs.
POOLINGS = ("mean", "cls")


def _refuse(message):
    return InputError("remat.trace: " + message, EXIT_BAD_INPUT)


def sentence_job(data, given=None):
    """The sentence-transformers job a config's `remat` block sets
    (head, pooling, loss, texts_per_example, merge_columns), each
    replaced by its value in `given` (the tracer's flags) where that is
    not None: {"pooling", "texts", "merge_columns"}, or None for the
    model's own step (no pooling head: the class its config names, a
    classification class included). Refuses, in one line, a setting the
    tracer does not run (the pooling head with another loss, the MNRL loss
    or several texts without the pooling head)."""
    block = data.get("remat") if isinstance(data.get("remat"), dict) else {}
    job = {k: block.get(k) for k in ("head", "pooling", "loss", "texts_per_example",
                                     "merge_columns")}
    for key, value in (given or {}).items():
        if value is not None:
            job[key] = value
    head, loss = job["head"] or "default", job["loss"] or "default"
    texts = job["texts_per_example"]
    if head != "pooling":
        moved = [f"remat.{k} {job[k]}" for k in ("pooling", "texts_per_example", "merge_columns")
                 if job[k] is not None and not (k == "texts_per_example" and int(job[k]) == 1)]
        if loss == "mnrl":
            moved.insert(0, "remat.loss mnrl")
        if moved:
            raise _refuse(f"{moved[0]} is traced with remat.head pooling (a sentence-transformers "
                          "job); the model's own step takes none")
        return None
    if loss != "mnrl":
        raise _refuse(f"remat.head pooling traces with remat.loss mnrl (sentence-transformers' "
                      f"MultipleNegativesRankingLoss), got loss {loss}")
    pooling = job["pooling"] or "mean"
    if pooling not in POOLINGS:
        raise _refuse(f"remat.pooling {pooling} is not one of {', '.join(POOLINGS)}")
    try:
        texts = 2 if texts is None else int(texts)
    except (TypeError, ValueError):
        texts = 0
    if texts < 2:
        raise _refuse(f"remat.texts_per_example {job['texts_per_example']}: mnrl scores an "
                      "anchor against at least one other text (2 or more)")
    merge = job["merge_columns"]
    if isinstance(merge, str):
        if merge not in ("true", "false"):
            raise _refuse(f"remat.merge_columns {merge} is not true or false")
        merge = merge == "true"
    return {"pooling": pooling, "texts": texts,
            "merge_columns": True if merge is None else bool(merge)}


class Encoder(torch.nn.Module):
    """The transformers model as a SentenceTransformer module: what
    models.Transformer runs without a tokenizer (its token embeddings
    written into the features)."""

    def __init__(self, auto):
        super().__init__()
        self.auto_model = auto

    def forward(self, features):
        out = self.auto_model(input_ids=features["input_ids"],
                              attention_mask=features["attention_mask"], return_dict=True)
        features["token_embeddings"] = out.last_hidden_state
        return features


def build_step(config, fake_mode, dtype, job):
    """(SentenceTransformer, its MNRL loss): the config's base model
    (transformers' AutoModel class for its model_type) built on the meta
    device, its tensors then made fake in place (_trace_build), in
    training mode."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    from ._trace_build import fake_in_place

    try:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import \
            MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError as e:
        raise _refuse(f"a sentence-transformers job traces with sentence-transformers ({e})")
    name = auto.MODEL_MAPPING_NAMES.get(config.model_type)
    name = name[0] if isinstance(name, (tuple, list)) else name
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        raise _refuse(f"transformers has no base model class for model_type "
                      f"\"{config.model_type}\" (a sentence-transformers job trains it)")
    if hasattr(config, "use_cache"):
        config.use_cache = False
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            encoder = cls._from_config(config, dtype=dtype)
            model = SentenceTransformer(
                modules=[Encoder(encoder), Pooling(config.hidden_size, job["pooling"])],
                device="meta")
    finally:
        torch.set_default_dtype(previous)
    fake_in_place(model, fake_mode)
    model.train()
    return model, MultipleNegativesRankingLoss(model)


def pass_features(job, micro_batch, seq_len, vocab):
    """[(features, columns)] per pass: the token ids and attention mask of
    its texts (all ones: no padding, made by torch.ones, which the
    tracer's ones_masks reads as no mask, as a real all-ones mask is) and
    how many columns it encodes. Run under the fake mode."""
    columns = [1] + ([job["texts"] - 1] if job["merge_columns"] else [1] * (job["texts"] - 1))
    passes = []
    for c in columns:
        shape = (c * micro_batch, seq_len)
        passes.append(({"input_ids": torch.randint(0, vocab, shape),
                        "attention_mask": torch.ones(shape, dtype=torch.long)}, c))
    return passes


class PassChain:
    """The step's passes as one chain (the module's docstring), with the
    interface of _profiler._Chain that _trace_chain and _layer_measure
    read: blocks, calls and outputs (one per block call, pass after pass),
    xs, has_prefix, layer_inputs, names_and_kinds, run(i, x), on_rest,
    block_of(i) and layer_of(j) (a layer's block call and back);
    signatures (block_signatures' per block call), resumes (the layers
    whose forward starts inside an earlier pass's rerun: the meter's peak
    restarts there, as for the head) and trained (the parameters the step
    gives a gradient: mean pooling leaves BERT's pooler without one, and
    AdamW keeps no state for it)."""

    def __init__(self, model, loss, passes, blocks):
        from ._profiler import _first_tensor_arg, _hidden
        from ._trace_chain import SHARE_BLOCKS, _call_signature, _structures

        self.model, self.loss, self.passes = model, loss, passes
        self.inputs = [f for f, _ in passes]
        self.per_pass = len(blocks)
        self.blocks = list(blocks) * len(passes)
        self.calls = [None] * len(self.blocks)
        self.outputs = [None] * len(self.blocks)
        self.on_rest, self.hand_on, self.has_prefix = None, None, True
        made = []

        def before(_, args, kwargs):
            self.calls[len(made)] = (args, kwargs)

        def after(_, args, output):
            self.outputs[len(made)] = output
            made.append(output)

        handles = []
        for b in blocks:
            handles.append(b.register_forward_pre_hook(before, with_kwargs=True))
            handles.append(b.register_forward_hook(after))
        try:
            with torch.no_grad():
                self.embeddings = [self._encode(p) for p in range(len(passes))]
        finally:
            for h in handles:
                h.remove()
        if len(made) != len(self.blocks):
            raise _refuse(f"the encoder ran {len(made)} block calls in {len(passes)} passes of "
                          f"{len(blocks)} blocks; a sentence-transformers pass runs each block "
                          "once")
        self.xs = [_first_tensor_arg(*c).detach() for c in self.calls]
        self.last_output = _hidden(self.outputs[-1]).detach()
        structures = _structures(blocks)
        self.signatures = [
            (j // self.per_pass, structures[j % self.per_pass], _call_signature(*c))
            if SHARE_BLOCKS else j for j, c in enumerate(self.calls)]
        # The layout: (kind, pass, block call index or None) per layer.
        self.layout = []
        for p in range(len(passes)):
            self.layout.append(("embedding", p, None))
            self.layout += [("block", p, p * self.per_pass + k) for k in range(self.per_pass)]
        self.layout.append(("head", len(passes) - 1, None))
        self.resumes = {i for i, (kind, p, _) in enumerate(self.layout)
                        if kind == "embedding" and p > 0}
        self.trained = self._trained()

    def compiled_accumulation(self, traces):
        """Under torch.compile (the model compiled whole): a compiled
        backward returns every parameter gradient it makes as its outputs,
        handed to autograd when it ends; in a pass whose gradients add into
        the later passes' (all but the last) those are a second copy of the
        gradients, each live from the op that makes it to the pass's
        backward's end. So each of that pass's blocks' backward workspace
        gains the gradients of its own parameters and of the blocks whose
        backward ran before it in the pass (the bytes the last pass's same
        blocks create), and its embedding layer's, whose backward ends the
        pass's, those of all its blocks. traces: per layer
        (_trace_chain.trace_layers), replaced by changed copies. Returns
        the blocks' gradient bytes of one pass."""
        import copy

        last = len(self.passes) - 1
        made = [traces[self.layer_of(last * self.per_pass + k)].gradients
                for k in range(self.per_pass)]
        for p in range(last):
            for k in range(self.per_pass):
                i = self.layer_of(p * self.per_pass + k)
                held = sum(made[k:])  # its own and the later blocks', made before it
                traces[i] = copy.copy(traces[i])
                traces[i].backward_workspace += held
                if traces[i].recompute_backward_workspace is not None:
                    traces[i].recompute_backward_workspace += held
            i = self.layout.index(("embedding", p, None))
            traces[i] = copy.copy(traces[i])
            traces[i].backward_workspace += sum(made)
        return sum(made)

    def _trained(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.enable_grad():
            self._loss([self._encode(p) for p in range(len(self.passes))]).backward()
        trained = [p for p in params if p.grad is not None]
        for p in params:
            p.grad = None
        return trained

    def _encode(self, p):
        """Pass p's sentence embeddings (the model on a copy of its
        features: sentence-transformers writes into the dict)."""
        return self.model(dict(self.passes[p][0]))["sentence_embedding"]

    def _loss(self, embeddings):
        """MNRL over the columns (embed_columns' split of a merged pass)."""
        columns = []
        for e, (_, c) in zip(embeddings, self.passes):
            columns += [e] if c == 1 else list(e.reshape(c, -1, *e.shape[1:]).unbind(0))
        return self.loss.compute_loss_from_embeddings(columns, None)

    def layer_inputs(self):
        from ._profiler import _hidden

        xs = []
        for kind, p, j in self.layout:
            if kind == "block":
                xs.append(self.xs[j])
            elif kind == "embedding":
                xs.append(None if p == 0 else _hidden(self.outputs[p * self.per_pass - 1]).detach())
            else:
                xs.append(self.last_output)
        return xs

    def names_and_kinds(self):
        names = []
        for kind, p, j in self.layout:
            if kind == "block":
                names.append((f"p{p + 1}.block{j - p * self.per_pass}", "block"))
            elif kind == "embedding":
                names.append((f"p{p + 1}.embedding", "embedding"))
            else:
                names.append((f"p{p + 1}.head", "head"))
        return names

    def block_of(self, i):
        """The block call index of layer i, or None where it is no block."""
        kind, _, j = self.layout[i]
        return j if kind == "block" else None

    def layer_of(self, j):
        """The layer index of block call j."""
        return 1 + j + j // self.per_pass

    def run(self, i, x):
        """Layer i's forward (with grad where grad is on); (output, holder)."""
        from ._profiler import _hidden, _with_first

        kind, p, j = self.layout[i]
        if kind == "block":
            args, kwargs = _with_first(*self.calls[j], x)
            out = self.blocks[j](*args, **kwargs)
            return _hidden(out), out
        if kind == "embedding":
            pooled = self._rest(p - 1, x) if p > 0 else None
            hidden, call = self._prefix(p)
            return hidden, (pooled, call)
        pooled = self._rest(p, x)
        return self._loss(self.embeddings[:-1] + [pooled]), pooled

    def _prefix(self, p):
        """Pass p's model forward up to its first block: that block's input
        and call."""
        from ._profiler import _Stop, _first_tensor_arg

        def stop(_, args, kwargs):
            raise _Stop(args, kwargs)

        handle = self.blocks[0].register_forward_pre_hook(stop, with_kwargs=True)
        try:
            self._encode(p)
        except _Stop as s:
            return _first_tensor_arg(s.args_, s.kwargs_), (s.args_, s.kwargs_)
        finally:
            handle.remove()
        raise _refuse("the encoder's forward returned before its first block")

    def _rest(self, p, x):
        """Pass p's sentence embeddings from its last block's output x: the
        pass's forward again without grad, each block returning its
        recorded output, the last one x, from where grad is as it was."""
        from ._profiler import _replayed

        outputs = self.outputs[p * self.per_pass:(p + 1) * self.per_pass]
        with _replayed(self.blocks[:self.per_pass], outputs, x, lambda: self.on_rest):
            return self._encode(p)
