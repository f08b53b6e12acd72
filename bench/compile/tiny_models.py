"""The tiny models bench/compile's scripts compile, as
tests/python/remat_compile_test.py builds them: a Hugging Face Llama with
GQA and a GPT-2 (4 blocks, hidden 64, vocabulary 256, sdpa, fp32, dropout
0), their remat plans and one training step's closure."""
import json
import os

MICRO_BATCH, SEQ_LEN = 2, 32
MODELS = {
    "llama": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
                  intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
                  rms_norm_eps=1e-6, tie_word_embeddings=False),
    "gpt2": dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=64, n_layer=4,
                 n_head=4, vocab_size=256, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                 attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
}
BLOCKS = {"llama": "model.layers", "gpt2": "transformer.h"}


def plan_options(micro_batch=MICRO_BATCH, seq_len=SEQ_LEN):
    """remat.plan's options for the models as they run here (CPU, fp32, sdpa)."""
    return dict(micro_batch=micro_batch, seq_len=seq_len, precision="fp32", device="cpu",
                attention="sdpa")


def write_config(name, directory):
    """The model's config.json in `directory`; returns its path."""
    path = os.path.join(directory, f"{name}.json")
    with open(path, "w") as f:
        json.dump(MODELS[name], f)
    return path


def lowest_plan(path, strategy, **options):
    """`strategy`'s plan of the lowest peak it reaches on the model at `path`."""
    import remat

    lowest = remat.plan(path, budget="1B", strategy=strategy, **options).predicted_peak_bytes
    return remat.plan(path, budget=f"{lowest}B", strategy=strategy, **options)


def build(name):
    """The model, seeded, in training mode, without a KV cache."""
    import torch
    import transformers

    cfg = MODELS[name]
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = "sdpa"
    config.use_cache = False
    torch.manual_seed(0)
    return getattr(transformers, cfg["architectures"][0])(config).train()


def training_step(name, model, run, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN):
    """One step's closure: the gradients of `model` set to None, then `run`
    (the model or its compiled form) forward with the labels and backward
    on a fixed random batch."""
    import torch

    ids = torch.randint(0, MODELS[name]["vocab_size"], (micro_batch, seq_len))

    def step():
        for p in model.parameters():
            p.grad = None
        run(input_ids=ids, labels=ids).loss.backward()

    return step
