"""Times the first compiled sm90 kernel against cuBLAS fp16 and the sm80 auto path on 8192x28672 (the DESIGN.md
section 7 protocol: graphs, median of 7; one 117 MB weight is already larger than L2). Until the sm90 path is
in the dispatcher and the profiler, this is how BENCHMARKS.md's sm90 rows are measured:
    python tools/sm90_probe.py
"""
import torch, mixgemm
from mixgemm import sm90, formats
from mixgemm.bench import timing
K, N, G = 8192, 28672, 128
dev = "cuda"
cfg = sm90.compiled_sm90_configs()[0]
wb = K * N // 2
copies = timing.copies_for(wb)
q = torch.randint(0, 16, (K, N), dtype=torch.int32, device=dev)
s = (torch.rand(K // G, N, device=dev) * 0.01 + 0.002).half()
qw = formats.pack_awq(q); del q
p90 = sm90.prepack_sm90(qw, s, None, G)
p80 = mixgemm.prepack(qw, s, None, G)
w16 = torch.randn(K, N, device=dev).half()
print("sm90 config", cfg)
for M in (128, 1024, 4096):
    x = torch.randn(M, K, device=dev).half()
    t90 = timing.time_fn([lambda: sm90.gemm_sm90(x, p90, config=cfg)] * copies).median_us
    t80 = timing.time_fn([lambda: mixgemm.gemm(x, p80)] * copies).median_us
    tcb = timing.time_fn([lambda: x @ w16] * 2).median_us
    fl = 2 * M * N * K
    print(f"M={M:5d} sm90 {t90:8.1f} us ({fl/t90/1e6:5.0f} TFLOP/s)  sm80 auto {t80:8.1f}  cuBLAS {tcb:8.1f} ({fl/tcb/1e6:5.0f})", flush=True)
