"""A tiny DeepSeek-V2 model (config made here, random weights, nothing from a
hub) served by vLLM on the CPU with greedy decoding: the end-to-end harness
the vLLM comparison will build on. Not run by ci/test yet; run it with the
environment ci/vllm-env makes:

    "$(ci/vllm-env)/bin/python" tests/vllm/tiny_deepseek.py

It prints the MLA prefill backend vLLM chose and each prompt's tokens and
log-probabilities."""

import os
import sys
import tempfile

# vLLM's CPU MLA decode kernel takes only a latent of kv_lora_rank 512 plus a
# rope part of 64 (head size 576); the rest is as small as vLLM allows.
CONFIG = dict(
    vocab_size=512,
    hidden_size=256,
    intermediate_size=512,
    moe_intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_nope_head_dim=32,
    qk_rope_head_dim=64,
    v_head_dim=32,
    first_k_dense_replace=2,  # dense layers only: no MoE kernels
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_shared_experts=1,
    max_position_embeddings=1024,
)


def make_model(path, seed=0):
    """Saves the tiny model with random bfloat16 weights under `path`."""
    import torch
    from transformers import AutoModelForCausalLM, DeepseekV2Config

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(DeepseekV2Config(**CONFIG)).to(torch.bfloat16)
    model.save_pretrained(path)


def generate(path, prompts, max_tokens=8):
    """Greedy tokens and their log-probabilities for each prompt (token ids)."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=path, skip_tokenizer_init=True, dtype="bfloat16", max_model_len=1024,
              enforce_eager=True, seed=0)
    params = SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=0, ignore_eos=True,
                            detokenize=False)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    return [(list(o.outputs[0].token_ids), [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids,
                                                                          o.outputs[0].logprobs)])
            for o in outputs]


def main():
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the default is far more
    prompts = [list(range(1, 12)), list(range(7, 300)), [5] * 3]
    with tempfile.TemporaryDirectory() as path:
        make_model(path)
        for tokens, logprobs in generate(path, prompts):
            print("tokens", tokens, "logprobs", [round(x, 4) for x in logprobs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
