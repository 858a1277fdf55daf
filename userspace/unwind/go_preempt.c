/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Go's asynchronous preemption entry, runtime.asyncPreempt, for the
 * unwinder (unwind.c).
 *
 * Go preempts a goroutine that runs too long without a call by sending its
 * thread SIGURG; the runtime's handler then makes the interrupted
 * instruction look as if it had called runtime.asyncPreempt (x86_64: it
 * pushes the interrupted pc on the goroutine's stack and points the
 * context's pc at asyncPreempt, runtime/signal_amd64.go pushCall). When a
 * capture is pending at the same time, the kernel delivers it right after
 * the Go handler's sigreturn (Go's handler blocks every signal while it
 * runs): the capture finds the goroutine at asyncPreempt's FIRST
 * instruction, before its PUSHQ BP. There the return address is at [sp]
 * and the frame pointer is still the interrupted function's, so a plain
 * frame-pointer walk skips the interrupted function (it reads its caller
 * from rbp's record). Measured on build/gomix: ~6 % of the busy
 * goroutine's wall-mode samples, all named as main.main.func1 instead of
 * main.gospin (docs/PERFORMANCE.md, issue 25).
 *
 * Go code has no .eh_frame (its DWARF is .debug_frame, which the unwinder
 * does not read), so there is no CFI to say so. Instead this file finds
 * the address of runtime.asyncPreempt in a module's ELF symbol table, once
 * per module, and unwind.c applies the function-entry rule there. Only
 * modules with Go code (a .gopclntab section) have their symbol table
 * read; a stripped Go binary (no .symtab) keeps the old result.
 *
 * Not async-signal-safe (libelf, file reads): runs on the unwinder's
 * thread, outside any suspend window, like the rest of the unwinder.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "userspace/common/fds.h"
#include "userspace/unwind/unwind_internal.h"

#if defined(__x86_64__)
/* The symbol's names: Go >= 1.17 (register ABI) names the assembly
 * function with its ABI0 suffix; older linkers without it. */
static bool is_async_preempt(const char *name)
{
	return name &&
	       (strcmp(name, "runtime.asyncPreempt.abi0") == 0 ||
		strcmp(name, "runtime.asyncPreempt") == 0);
}

/* ELF virtual address of runtime.asyncPreempt in elf, or 0: no Go code
 * (no .gopclntab), no .symtab (stripped), no such function. */
static uint64_t find_async_preempt(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL, *symtab = NULL;
	GElf_Shdr sh, symsh = { 0 };
	bool go = false;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return 0;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);

		if (name && strcmp(name, ".gopclntab") == 0)
			go = true;
		if (sh.sh_type == SHT_SYMTAB && !symtab) {
			symtab = scn;
			symsh = sh;
		}
	}
	if (!go || !symtab || !symsh.sh_entsize)
		return 0;
	Elf_Data *d = elf_getdata(symtab, NULL);
	size_t n = symsh.sh_size / symsh.sh_entsize;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym sym;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		if (is_async_preempt(elf_strptr(elf, symsh.sh_link, sym.st_name)))
			return sym.st_value;
	}
	return 0;
}

/* Read mod's file once and remember the answer with the module. */
static void resolve(struct module *mod)
{
	struct unw_cache *uc = &mod->unw;
	const char *path = mod->open_path ? mod->open_path : mod->path;
	int h, fd;
	Elf *elf;
	uint64_t vaddr;

	uc->go_state = -1;
	if (!path || mod->vdso_self || elf_version(EV_CURRENT) == EV_NONE)
		return;
	h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	fd = sprobe_fd__get(h);
	if (fd < 0) {
		sprobe_fd__close(h);
		return;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	vaddr = elf && elf_kind(elf) == ELF_K_ELF ? find_async_preempt(elf) : 0;
	if (elf)
		elf_end(elf);
	sprobe_fd__put(h);
	sprobe_fd__close(h);
	if (!vaddr)
		return;
	uc->go_preempt = vaddr + mod->pub.bias;
	uc->go_state = 1;
}

bool sprobe_unw__go_preempt_entry(struct module *mod, uint64_t ip)
{
	if (!mod)
		return false;
	if (mod->unw.go_state == 0)
		resolve(mod);
	return mod->unw.go_state == 1 && ip == mod->unw.go_preempt;
}
#else
bool sprobe_unw__go_preempt_entry(struct module *mod, uint64_t ip)
{
	/* aarch64: pushCall puts the interrupted pc in LR, where the
	 * frame-pointer walk already looks for a leaf's caller
	 * (unwind_fp.c). */
	(void)mod;
	(void)ip;
	return false;
}
#endif
