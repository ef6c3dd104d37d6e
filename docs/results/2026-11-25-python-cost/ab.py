# ab.py NAME [SHOWS WARMUP]: frames consumed per second, 1080p RGBA8 (default 3,000 shows after 300).
import sys, time, statistics, torch, vkcuda
shows, warmup = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (3000, 300)
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda")
for every in (False, True):
    with vkcuda.Viewer(every_frame=every) as v:
        for _ in range(warmup): v.show(x)
        torch.cuda.synchronize(); v.flush(); b = v.stats()
        t0 = time.perf_counter()
        for _ in range(shows): v.show(x)
        v.flush(); el = time.perf_counter() - t0; a = v.stats()
    print(f"{sys.argv[1]} every={every}: shows/s {shows/el:.0f} consumed/s {(a['consumed']-b['consumed'])/el:.0f} replaced {a['replaced']-b['replaced']} elapsed {el:.3f}s")
