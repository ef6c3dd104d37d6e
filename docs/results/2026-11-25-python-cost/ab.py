import sys, time, statistics, torch, vkcuda
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda")
for every in (False, True):
    with vkcuda.Viewer(every_frame=every) as v:
        for _ in range(300): v.show(x)
        torch.cuda.synchronize(); v.flush(); b = v.stats()
        t0 = time.perf_counter()
        for _ in range(3000): v.show(x)
        v.flush(); el = time.perf_counter() - t0; a = v.stats()
    print(f"{sys.argv[1]} every={every}: shows/s {3000/el:.0f} consumed/s {(a['consumed']-b['consumed'])/el:.0f} replaced {a['replaced']-b['replaced']} elapsed {el:.3f}s")
