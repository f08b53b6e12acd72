# The plan: save it with -o plan.json on the same command line.
import remat
remat.apply(model, "plan.json")

# Or, without remat: the same blocks checkpointed by PyTorch's wrapper.
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing)
blocks = model.model.layers  # the model's transformer blocks, in order (GPT-2: model.transformer.h)
checkpointed = {id(blocks[i]) for i in (0, 4, 8)}
apply_activation_checkpointing(model, check_fn=lambda m: id(m) in checkpointed)
