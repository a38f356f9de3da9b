mla-prefill backends --config configs/examples/plugin.yaml   # CUSTOM: available, valid
