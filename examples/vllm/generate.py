"""Greedy generation with vLLM, this library doing the MLA prefill. The
installed package's vllm.general_plugins entry point registers the backend
in each of vLLM's processes; the option below selects it.

    python generate.py MODEL_DIR

Prompts are token ids, so a model without a tokenizer serves too."""

import sys

from vllm import LLM, SamplingParams


def main(model):
    llm = LLM(model=model, skip_tokenizer_init=True, max_model_len=1024,
              attention_config={"mla_prefill_backend": "CUSTOM"})
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, detokenize=False)
    prompts = [{"prompt_token_ids": list(range(1, 12))}, {"prompt_token_ids": [5, 5, 5]}]
    for output in llm.generate(prompts, params):
        print(list(output.outputs[0].token_ids))


if __name__ == "__main__":  # vLLM starts its engine in a new process
    main(sys.argv[1])
