/* scratch.c - path-sized scratch buffers off the host's stack. Code that runs on the host's threads may find a
 * 16 KiB stack (musl-sized threads, coroutines, Go's cgo callbacks): the shim's frames stay small (budget in
 * docs/internals.md, checked by tests/stack_budget.py) and every buffer of PATH_MAX size comes from here. A slot
 * of a fixed pool is taken with one compare-and-swap and given back when the scope that took it ends
 * (SH_SCRATCH's cleanup): no allocation, no lock. Untouched slots cost no memory (zero pages of the .bss).
 *
 * The pool never makes a taker wait (issue 22, item 1). An open waiting on a fetch holds three buffers for as
 * long as the fetch takes and needs more while it polls, so any fixed number of slots is used up by enough
 * waiting threads (256 by 86), and a taker that waited for a slot then waited on the waiters: all of them
 * spun forever. So when every slot is busy, the buffer is mapped (mmap) instead, and unmapped when given back:
 * sh_scratch_get depends on no other thread giving anything back, which is what makes it deadlock-free. Only a
 * kernel that refuses even that memory makes it retry (yielding), a wait for memory, not for another waiter.
 * mmap and munmap are plain system calls: still safe in signal handlers and vfork children, which give back
 * what they take before returning.
 *
 * A slot records its owner (pthread_self, the same in a forked child for the thread that forked), so that after
 * fork() the slots of the threads that did not come along are free again in the child (issue 22, item 2): they
 * would otherwise stay busy for the child's whole life. Buffers those threads had mapped stay mapped in the
 * child, unused: 32 KiB for each buffer of a thread that was inside the shim at the fork, the cost of keeping
 * no list of them.
 *
 * The pool itself grows with use (issue 41 item 4: 256 slots were 8 MiB of every host's address space): the
 * first SH_GROUP slots are in the .bss, the others in groups of SH_GROUP mapped the first time every earlier
 * slot is busy at once, published by compare-and-swap (the loser unmaps its own) and kept. */
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#define SH_GROUP 32
#define SH_NGROUP 8
#define SH_SLOTS (SH_GROUP * SH_NGROUP)
static struct sh_scratch slots0[SH_GROUP];
static struct sh_scratch *group[SH_NGROUP] = {slots0};   /* atomic: published once, never unmapped */
/* 0: free; else the owner's pthread_self() */
static unsigned long owner[SH_SLOTS];
_Static_assert(sizeof(pthread_t) == sizeof(unsigned long), "pthread_t stored as unsigned long");

/* Group g of the pool, mapped now if it is not yet (NULL: no memory for it). */
static struct sh_scratch *group_get(int g)
{
    struct sh_scratch *p = __atomic_load_n(&group[g], __ATOMIC_ACQUIRE), *z = NULL;
    if (p)
        return p;
    p = mmap(NULL, SH_GROUP * sizeof *p, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (__atomic_compare_exchange_n(&group[g], &z, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return p;
    munmap(p, SH_GROUP * sizeof *p);
    return z;
}

struct sh_scratch *sh_scratch_get(void)
{
    unsigned long me = (unsigned long)pthread_self();
    /* the first group, in the .bss, without a look at the others: the common case of every call (a stat in a
     * mount takes three), as cheap as the fixed pool before issue 41 */
    for (int i = 0; i < SH_GROUP; i++) {
        unsigned long z = 0;
        if (!__atomic_load_n(&owner[i], __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&owner[i], &z, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return &slots0[i];
    }
    int e = errno;
    for (;;) {
        struct sh_scratch *g = NULL;
        for (int i = 0; i < SH_SLOTS; i++) {
            unsigned long z = 0;
            if (!(i % SH_GROUP) && !(g = group_get(i / SH_GROUP)))
                break;   /* no memory for the next group: one buffer of its own below */
            if (!__atomic_load_n(&owner[i], __ATOMIC_RELAXED) &&
                __atomic_compare_exchange_n(&owner[i], &z, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return &g[i % SH_GROUP];
        }
        void *p = mmap(NULL, sizeof(struct sh_scratch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            errno = e;
            return p;
        }
        errno = e;   /* the host's errno survives the refusal */
        sched_yield();
    }
}

void sh_scratch_put(struct sh_scratch **s)
{
    if (!*s)
        return;
    if (*s >= slots0 && *s < slots0 + SH_GROUP) {
        __atomic_store_n(&owner[*s - slots0], 0, __ATOMIC_RELEASE);
        *s = NULL;
        return;
    }
    for (int g = 1; g < SH_NGROUP; g++) {
        struct sh_scratch *p = __atomic_load_n(&group[g], __ATOMIC_ACQUIRE);
        if (p && *s >= p && *s < p + SH_GROUP) {
            __atomic_store_n(&owner[g * SH_GROUP + (*s - p)], 0, __ATOMIC_RELEASE);
            *s = NULL;
            return;
        }
    }
    munmap(*s, sizeof **s);
    *s = NULL;
}

/* In a forked child (init.c's pthread_atfork handler), where only the thread that forked runs: every slot of
 * another thread is free. The forking thread's own stay taken: it may have forked from a signal handler that
 * interrupted the shim, whose frames give them back when they return. */
void sh_scratch_after_fork(void)
{
    unsigned long me = (unsigned long)pthread_self();
    for (int i = 0; i < SH_SLOTS; i++)
        if (__atomic_load_n(&owner[i], __ATOMIC_RELAXED) != me)
            __atomic_store_n(&owner[i], 0, __ATOMIC_RELEASE);
}

/* A thread that a pthread_cancel unwinds from the shim's wait (helper.c's cancel_point): the unwind skips the
 * scopes' cleanups (the shim is built without -fexceptions: C code's cleanup attributes do not run during
 * glibc's forced unwind), so the slots its frames took are given back here; all of them, since the whole stack
 * of the thread goes. A buffer it had mapped because the pool was full stays mapped (32 KiB each, only then). */
void sh_scratch_drop_mine(void)
{
    unsigned long me = (unsigned long)pthread_self();
    for (int i = 0; i < SH_SLOTS; i++)
        if (__atomic_load_n(&owner[i], __ATOMIC_RELAXED) == me)
            __atomic_store_n(&owner[i], 0, __ATOMIC_RELEASE);
}
