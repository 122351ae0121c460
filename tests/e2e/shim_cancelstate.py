"""shim_cancelstate.py STATE PATH... - a thread's cancellation state is the caller's after each call the shim
answers (issue 42 class 3): set STATE (disable or enable), then stat, open, read and close each PATH (the first
touch of a mount, a cold open that waits on a fetch, a warm one), and read the state back after each. Prints "STATE PATH: CALL state N" for each call that changed it, and "done" at the end."""
import ctypes, os, sys
c = ctypes.CDLL(None, use_errno=True)
ENABLE, DISABLE = 0, 1

def state():
    old = ctypes.c_int(-1)
    c.pthread_setcancelstate(ENABLE, ctypes.byref(old))
    c.pthread_setcancelstate(old.value, None)
    return old.value

bad = 0
for want, paths in (({"disable": DISABLE, "enable": ENABLE}[sys.argv[1]], sys.argv[2:]),):
    c.pthread_setcancelstate(want, None)
    for p in paths:
        for name, call in (("stat", lambda: os.stat(p)), ("open+read+close", lambda: os.close(os.open(p, os.O_RDONLY)) if os.path.isdir(p) else open(p, "rb").read())):
            call()
            if state() != want:
                print(f"{want} {p}: {name} state {state()}")
                bad += 1
                c.pthread_setcancelstate(want, None)
print("done" if not bad else f"{bad} calls changed the state")
sys.exit(1 if bad else 0)
