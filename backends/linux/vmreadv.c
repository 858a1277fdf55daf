/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The VM_READV method's probe half (the seed's strategy, kept for the
 * benchmark): the handler publishes its registers and waits
 * (vm_handshake() in handler.c); the probe copies the stack with
 * process_vm_readv and lets it go.
 */
#include <sys/uio.h>

#include "backends/linux/linux.h"

/*
 * VM_READV: copy the stack of every slot whose handler published its
 * registers, then let the handler go. Returns how many were served.
 */
uint32_t sprobe_lx_vm_service(struct sprobe_capturer *c, const uint32_t *sent, uint32_t nsent)
{
	uint32_t served = 0;

	for (uint32_t k = 0; k < nsent; k++) {
		struct slot *sl = &c->slots[sent[k]];
		struct sprobe_thread_sample *t = sl->sample;
		uint32_t expect = VM_REGS;

		/* Acquire; pairs with the release store of VM_REGS in
		 * vm_handshake(): sp, stack_addr, stack_len are set. */
		if (atomic_load_explicit(&sl->vm, memory_order_acquire) != VM_REGS)
			continue;
		struct iovec local = { sl->buf, t->stack_len };
		struct iovec remote = { (void *)(uintptr_t)t->stack_addr, t->stack_len };
		ssize_t n = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);

		/* A short or failed copy leaves what was read; the drop is
		 * decided after the handler is done (stack_len 0 = error). */
		t->stack_len = n > 0 ? (size_t)n : 0;
		if (atomic_compare_exchange_strong(&sl->vm, &expect, VM_COPIED))
			futex_wake(&sl->vm, 1);
		served++;
	}
	return served;
}
