/* scratch.c - path-sized scratch buffers off the host's stack. Code that runs on the host's threads may find a
 * 16 KiB stack (musl-sized threads, coroutines, Go's cgo callbacks): the shim's frames stay small (budget in
 * docs/internals.md, checked by tests/stack_budget.py) and every buffer of PATH_MAX size comes from here. A slot
 * is taken with one compare-and-swap and given back when the scope that took it ends (SH_SCRATCH's cleanup):
 * no allocation, no lock, no wait (but when all slots are busy, which needs that many threads inside the shim
 * at once: then the taker yields and tries again). Safe in signal handlers and vfork children (they give
 * back what they take before returning). Untouched slots cost no memory (zero pages of the .bss). */
#include "shim.h"

#include <sched.h>

#define SH_SLOTS 256
static struct sh_scratch slots[SH_SLOTS];
static unsigned char busy[SH_SLOTS];

struct sh_scratch *sh_scratch_get(void)
{
    for (;;) {
        for (int i = 0; i < SH_SLOTS; i++) {
            unsigned char z = 0;
            if (!__atomic_load_n(&busy[i], __ATOMIC_RELAXED) &&
                __atomic_compare_exchange_n(&busy[i], &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return &slots[i];
        }
        sched_yield();
    }
}

void sh_scratch_put(struct sh_scratch **s)
{
    if (*s) {
        __atomic_store_n(&busy[*s - slots], 0, __ATOMIC_RELEASE);
        *s = NULL;
    }
}
