"""torchao's low-bit AdamW (AdamW8bit, AdamW4bit, AdamWFp8) and
bitsandbytes' PagedAdamW8bit against the plan of --optimizer
torchao_adamw8bit, torchao_adamw4bit, torchao_adamw_fp8 and
paged_adamw8bit, on the CPU: optimizer_state_test.py's small Llama and
GPT-2 (matrices that are whole numbers of 128- and 256-element blocks,
ones that are not, ones under the libraries' 4,096-element threshold,
vectors), one fp32 backward and one optimizer step, then the bytes of
every tensor in the optimizer's state, a tensor subclass (torchao's
OptimState8bit, OptimState4bit, OptimStateFp8) unpacked to its inner
tensors (codes, scales, quantization maps) and each storage counted once:
exactly equal to the plan's static.optimizer_bytes.

torchao steps each parameter through torch.compile; its state is made
before that call, outside the compiled graph, so the step runs eagerly here
(torch.compiler.set_stance("force_eager")) to keep the test to seconds. On
the CPU, PagedAdamW8bit falls back to ordinary tensors: the bytes are the
same as on CUDA, where its large moments sit in managed memory instead.

Each library is a case of its own: without torchao or bitsandbytes, or
where the CPU has no float8_e4m3fn conversion, that case is skipped,
visibly (the file reports Skipped).

Run by CTest (python_optimizer_lowbit, label "python").
"""
import unittest
import warnings

import needs
import optimizer_state_test

torch = needs.optional("torch")


def inner_tensors(t):
    """`t`'s plain tensors: a traceable tensor subclass's flattened
    attributes, recursively; a plain tensor itself."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()
        for name in names:
            yield from inner_tensors(getattr(t, name))
    else:
        yield t


def state_bytes(optimizer):
    """The bytes of every storage in `optimizer`'s state, each once."""
    seen, total = set(), 0
    for state in optimizer.state.values():
        for value in state.values():
            if not torch.is_tensor(value):
                continue
            for t in inner_tensors(value):
                storage = t.untyped_storage()
                if storage.data_ptr() in seen:
                    continue
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


def make_optimizer(name, parameters):
    if name == "paged_adamw8bit":
        import bitsandbytes
        return bitsandbytes.optim.PagedAdamW8bit(parameters, lr=1e-3)
    import torchao.optim
    classes = {"torchao_adamw8bit": torchao.optim.AdamW8bit,
               "torchao_adamw4bit": torchao.optim.AdamW4bit,
               "torchao_adamw_fp8": torchao.optim.AdamWFp8}
    return classes[name](parameters, lr=1e-3)


def measured_and_planned(config, name):
    """The bytes of `name`'s state after one step of the model of `config`,
    and the plan's optimizer state for it."""
    planned = optimizer_state_test.planned_bytes(config, name)
    model, loss = optimizer_state_test.stepped_model(config)
    loss.backward()
    optimizer = make_optimizer(name, model.parameters())
    with torch.compiler.set_stance("force_eager"), warnings.catch_warnings():
        # "Paged optimizers are not supported on CPU": the fallback above.
        warnings.simplefilter("ignore")
        optimizer.step()
    return state_bytes(optimizer), planned


def check(test, name):
    for model, config in (("llama", optimizer_state_test.LLAMA),
                          ("gpt2", optimizer_state_test.GPT2)):
        with test.subTest(model=model):
            measured, planned = measured_and_planned(config, name)
            print(f"{name} {model}: state {measured:,} B, planned {planned:,} B")
            test.assertEqual(measured, planned)


def fp8_problem():
    """Why float8_e4m3fn cannot be made on this CPU, or None."""
    try:
        torch.ones(256).to(torch.float8_e4m3fn).float()
    except (RuntimeError, TypeError) as e:
        return str(e).splitlines()[0]
    return None


@needs.modules("torch", "transformers", "torchao")
class TorchaoLowBitAdamW(unittest.TestCase):
    def test_adamw8bit(self):
        check(self, "torchao_adamw8bit")

    def test_adamw4bit(self):
        check(self, "torchao_adamw4bit")

    def test_adamw_fp8(self):
        problem = fp8_problem()
        if problem:
            self.skipTest(f"torchao's AdamWFp8 does not run on this CPU: {problem}")
        check(self, "torchao_adamw_fp8")


@needs.modules("torch", "transformers", "bitsandbytes")
class BitsAndBytesPagedAdamW8bit(unittest.TestCase):
    def test_paged_adamw8bit(self):
        check(self, "paged_adamw8bit")


if __name__ == "__main__":
    unittest.main()
