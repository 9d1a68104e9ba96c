import sys, torch, warp_gemm as wg
wg.init("cuda")
B, M, N, K = [int(x) for x in sys.argv[1:5]]
a = torch.randn(B, M, K, device="cuda").half(); b = torch.randn(B, K, N, device="cuda").half()
out = torch.empty(B, M, N, device="cuda", dtype=torch.half)
with wg.options(family="pipelined", pipe_config=sys.argv[5]):
    for _ in range(3):
        wg.matmul(a, b, out=out)
torch.cuda.synchronize()
