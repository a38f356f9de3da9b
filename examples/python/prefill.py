import mlaprefill, torch
sel = mlaprefill.Selector()                     # YAML config, MLA_CONFIG, MLA_PREFILL_BACKEND
backend = sel.create(sel.select(torch.bfloat16), num_heads=16, scale=192 ** -0.5)
backend.prepare(cu_seqlens_q=[0, 5, 12])        # two sequences of 5 and 7 new tokens
q = torch.randn(12, 16, 192, dtype=torch.bfloat16)
k = torch.randn(12, 16, 192, dtype=torch.bfloat16)
v = torch.randn(12, 16, 128, dtype=torch.bfloat16)
out, lse = backend.run_new_tokens(q, k, v)      # out [12, 16, 128] bf16, lse [16, 12] fp32
print(backend.name, tuple(out.shape), tuple(lse.shape))
