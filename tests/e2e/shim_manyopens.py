# shim_manyopens.py ROOT N - N threads open N distinct files f000.. at once (a barrier) and check their bytes ("I\n");
# then each that failed is opened again. Prints the outcomes counted (t_shim_manyhelpers.sh).
import os, sys, threading, collections
root, n = sys.argv[1], int(sys.argv[2])
bar = threading.Barrier(n); res = [None] * n
def go(i):
    bar.wait()
    try:
        with open(os.path.join(root, "f%03d" % i), "rb") as f: res[i] = "ok" if f.read() == b"%d\n" % i else "bad"
    except OSError as e: res[i] = e.strerror
ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
print(collections.Counter(res))
again = []
for i in range(n):
    if res[i] != "ok":
        try: again.append(len(open(os.path.join(root, "f%03d" % i), "rb").read()))
        except OSError as e: again.append(e.strerror)
print("again", collections.Counter(again))
