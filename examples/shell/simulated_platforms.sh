MLA_PLATFORM=nvidia:9.0 mla-prefill backends     # CUDA_FLASH refused in a cpu build: built without CUDA
MLA_PLATFORM=amd:gfx942 mla-prefill backends
MLA_PLATFORM=amd:gfx942 MLA_PREFILL_BACKEND=CUDA_FLASH mla-prefill bench  # explicit, invalid: exit 2, the reasons
