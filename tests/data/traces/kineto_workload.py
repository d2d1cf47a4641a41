
import sys, torch
from torch.profiler import profile, ProfilerActivity, record_function
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=1000, n_positions=128)
model = GPT2LMHeadModel(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 1000, (4, 64), device="cuda")
ranges = {}
def pre(mod, args, name):
    ranges[name] = record_function(name); ranges[name].__enter__()
def post(mod, args, out, name):
    ranges.pop(name).__exit__(None, None, None)
for i, block in enumerate(model.transformer.h):
    block.register_forward_pre_hook(lambda m, a, n=f"block{i}": pre(m, a, n))
    block.register_forward_hook(lambda m, a, o, n=f"block{i}": post(m, a, o, n))
tiny = torch.zeros(1, device="cuda")
def step():
    with record_function("forward"):
        out = model(ids, labels=ids)
    with record_function("loss"):
        loss = out.loss * 1.0
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        opt.step(); opt.zero_grad(set_to_none=True)
    with record_function("tiny"):
        tiny.add_(1)
for _ in range(2):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        step()
        prof.step()
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
print("kineto ok")
