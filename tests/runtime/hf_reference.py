"""The runtime's forward against Hugging Face transformers' own modules.

usage: hf_reference.py DUMP.pt
DUMP.pt (torch::pickle_save from tests/runtime/hf_reference_test.cc) holds a
list: [shape, batch, loss, *parameters]; shape = [kind (0 llama, 1 bert mlm,
2 bert + sentence-transformers mean pooling + MultipleNegativesRankingLoss,
3 BertForSequenceClassification),
layers, hidden, heads, kv_heads, head_dim, ffn, vocab, seq_len, max_position,
type_vocab, qkv_bias, tie_embeddings, texts_per_example, num_labels]. Builds the HF model
of that shape (eager attention, no dropout), loads the runtime's parameters
in their order, computes the loss on the batch and prints it; exit 0 if it
equals the runtime's loss within 1e-5 (relative), else 1.
"""
import sys

import torch
import torch.jit._pickle
import torch.nn.functional as F


def llama(shape, params):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    (_, layers, hidden, heads, kv_heads, head_dim, ffn, vocab, seq, _, _, qkv_bias,
     tie) = shape[:13]
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                  num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, head_dim=head_dim, max_position_embeddings=seq,
                  rms_norm_eps=1e-6, tie_word_embeddings=bool(tie), attention_dropout=0.0,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    # qwen2: biases on q, k, v only (LlamaConfig.attention_bias adds o_proj's).
    if qkv_bias:
        model = Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=False))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    names = ["model.embed_tokens.weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        names.append(p + "input_layernorm.weight")
        for proj in ("q", "k", "v"):
            names.append(p + f"self_attn.{proj}_proj.weight")
            if qkv_bias:
                names.append(p + f"self_attn.{proj}_proj.bias")
        names += [p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                  p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
    names.append("model.norm.weight")
    if not tie:
        names.append("lm_head.weight")
    return model, names


def bert_mlm(shape, params):
    from transformers import BertForMaskedLM
    model = BertForMaskedLM(bert_config(shape))
    names = bert_names(shape[1], "bert.")
    t = "cls.predictions."
    names += [t + "transform.dense.weight", t + "transform.dense.bias",
              t + "transform.LayerNorm.weight", t + "transform.LayerNorm.bias", t + "bias"]
    return model, names


def bert_classification(shape, params):
    from transformers import BertForSequenceClassification
    config = bert_config(shape)
    config.num_labels = shape[14]
    model = BertForSequenceClassification(config)
    names = bert_names(shape[1], "bert.")
    names += ["bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight",
              "classifier.bias"]
    return model, names


def bert_names(layers, prefix):
    e = prefix + "embeddings."
    names = [e + "word_embeddings.weight", e + "position_embeddings.weight",
             e + "token_type_embeddings.weight", e + "LayerNorm.weight", e + "LayerNorm.bias"]
    for i in range(layers):
        p = f"{prefix}encoder.layer.{i}."
        for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                     "output.dense", "output.LayerNorm"):
            names += [p + part + ".weight", p + part + ".bias"]
    return names


def bert_config(shape):
    from transformers import BertConfig
    (_, layers, hidden, heads, _, _, ffn, vocab, _, max_position, type_vocab) = shape[:11]
    return BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=ffn, max_position_embeddings=max_position, type_vocab_size=type_vocab,
        layer_norm_eps=1e-12, hidden_act="gelu", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)


class SentenceEmbeddingMnrl(torch.nn.Module):
    """BertModel -> sentence-transformers' mean Pooling -> its MNRL loss."""

    def __init__(self, shape):
        super().__init__()
        from sentence_transformers.sentence_transformer.losses.multiple_negatives_ranking import (
            MultipleNegativesRankingLoss)
        from sentence_transformers.sentence_transformer.modules.pooling import Pooling
        from transformers import BertModel
        self.bert = BertModel(bert_config(shape), add_pooling_layer=False)
        self.pooling = Pooling(shape[2], pooling_mode="mean")
        self.mnrl = MultipleNegativesRankingLoss(torch.nn.Identity())
        self.texts = shape[13]

    def forward(self, input_ids):
        tokens = self.bert(input_ids=input_ids).last_hidden_state
        mask = torch.ones(input_ids.shape, dtype=torch.long)
        e = self.pooling({"token_embeddings": tokens, "attention_mask": mask})["sentence_embedding"]
        b = e.shape[0] // self.texts
        return self.mnrl.compute_loss_from_embeddings(list(e.split(b)), None)


def main():
    with torch.serialization.safe_globals([torch.jit._pickle.build_tensorlist]):
        dump = torch.load(sys.argv[1])
    shape = [int(v) for v in dump[0].tolist()]
    batch, loss, params = dump[1], float(dump[2]), dump[3:]
    if shape[0] == 2:
        model = SentenceEmbeddingMnrl(shape)
        names = bert_names(shape[1], "bert.")
    else:
        model, names = (llama, bert_mlm, None, bert_classification)[shape[0]](shape, params)
    (model.bert if shape[0] == 2 else model).config._attn_implementation = "eager"
    state = dict(model.named_parameters())
    if len(names) != len(params):
        print(f"{len(params)} parameters dumped, the HF model has {len(names)}")
        return 1
    with torch.no_grad():
        for name, value in zip(names, params):
            if state[name].shape != value.shape:
                print(f"{name}: HF {tuple(state[name].shape)}, runtime {tuple(value.shape)}")
                return 1
            state[name].copy_(value)
    model.eval()
    with torch.no_grad():
        if shape[0] == 2:
            reference = model(batch[0]).item()
        else:
            logits = model(input_ids=batch[0]).logits
            # classification: one label per text, in column 0 of the targets
            targets = batch[1][:, 0] if shape[0] == 3 else batch[1].reshape(-1)
            classes = logits.shape[-1]
            reference = F.cross_entropy(logits.reshape(-1, classes).float(), targets,
                                        ignore_index=-100).item()
    print(f"runtime loss {loss:.8f}, transformers loss {reference:.8f}")
    return 0 if abs(reference - loss) <= 1e-5 * abs(reference) else 1


if __name__ == "__main__":
    sys.exit(main())
