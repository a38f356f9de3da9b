import mlaprefill, torch                        # registers torch.ops.mlaprefill
q, k = torch.randn(12, 16, 192, dtype=torch.bfloat16), torch.randn(12, 16, 192, dtype=torch.bfloat16)
v = torch.randn(12, 16, 128, dtype=torch.bfloat16)
cu_seqlens_q = cu_seqlens_k = torch.tensor([0, 5, 12], dtype=torch.int32)
out, lse = torch.ops.mlaprefill.prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, 192 ** -0.5)
print(tuple(out.shape), tuple(lse.shape))
