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
 * main.gospin (docs/PERFORMANCE.md, "A cgo Go program").
 *
 * Go code has no .eh_frame (its DWARF is .debug_frame, which the unwinder
 * does not read), so there is no CFI to say so. Instead this file finds
 * the address of runtime.asyncPreempt, once per module, in Go's function
 * table (.gopclntab, kept by stripped binaries too; Go >= 1.18's layout),
 * else in the ELF symbol table (.symtab), and unwind.c applies the
 * function-entry rule there. Modules without Go code (no .gopclntab) have
 * their section headers read, once, and nothing else.
 *
 * Not async-signal-safe (libelf, file reads): runs on the unwinder's
 * thread, outside any suspend window, like the rest of the unwinder.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
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

/* Little-endian reads from a section's bytes (x86_64 only: the build's
 * own byte order). */
static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * runtime.asyncPreempt's entry from Go's own function table, .gopclntab,
 * which even a stripped binary (-ldflags=-s) keeps: the runtime needs it
 * for its tracebacks. The layout of Go 1.18 and later (magic 0xfffffff0,
 * 0xfffffff1 since 1.20; runtime/symtab.go pcHeader): after the magic,
 * two pad bytes, minLC and ptrSize, eight words: nfunc, nfiles,
 * textStart, funcnameOffset, cuOffset, filetabOffset, pctabOffset,
 * pclnOffset (offsets from the header). At pclnOffset, nfunc + 1 pairs
 * {u32 entry offset from textStart, u32 offset of the function's _func
 * from pclnOffset}; a _func starts {u32 entryOff, i32 nameOff}, the name
 * NUL-terminated at funcnameOffset + nameOff. Every offset is checked
 * against the section. 0: another layout (older Go), no such function, or
 * a textStart that is not a link-time address (left for the dynamic
 * loader to fill: a PIE's).
 */
static uint64_t pclntab_async_preempt(const uint8_t *p, size_t n)
{
	const size_t hdr = 8 + 8 * 8;

	if (n < hdr || (rd32(p) != 0xfffffff0u && rd32(p) != 0xfffffff1u) || p[4] || p[5] ||
	    p[7] != 8)
		return 0;
	uint64_t nfunc = rd64(p + 8), text = rd64(p + 24), names = rd64(p + 32),
		 pcln = rd64(p + 64);

	/* nfunc + 1 pairs of 8 bytes from pcln */
	if (!text || names >= n || pcln >= n || nfunc >= (n - pcln) / 8)
		return 0;
	for (uint64_t i = 0; i < nfunc; i++) {
		const uint8_t *ft = p + pcln + i * 8;
		uint64_t fo = pcln + rd32(ft + 4);

		if (fo > n - 8)
			return 0;
		int32_t name_off = (int32_t)rd32(p + fo + 4);

		if (name_off < 0 || (uint64_t)name_off >= n - names)
			continue;
		const char *name = (const char *)p + names + name_off;

		if (memchr(name, '\0', n - names - (uint64_t)name_off) && is_async_preempt(name))
			return text + rd32(ft);
	}
	return 0;
}

/* Is vaddr inside one of elf's executable sections? */
static bool in_text(Elf *elf, uint64_t vaddr)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) && vaddr >= sh.sh_addr &&
		    vaddr - sh.sh_addr < sh.sh_size)
			return true;
	return false;
}

/* ELF virtual address of runtime.asyncPreempt in elf, or 0: no Go code
 * (no .gopclntab), or neither its .gopclntab (of a layout this reads) nor
 * its .symtab (stripped) knows the function. */
static uint64_t find_async_preempt(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL, *symtab = NULL, *pclntab = NULL;
	GElf_Shdr sh, symsh = { 0 };
	bool go = false;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return 0;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);

		if (name && strcmp(name, ".gopclntab") == 0 && sh.sh_type == SHT_PROGBITS) {
			go = true;
			pclntab = scn;
		}
		if (sh.sh_type == SHT_SYMTAB && !symtab) {
			symtab = scn;
			symsh = sh;
		}
	}
	if (!go)
		return 0;
	Elf_Data *pd = elf_getdata(pclntab, NULL);
	uint64_t v = pd && pd->d_buf ? pclntab_async_preempt(pd->d_buf, pd->d_size) : 0;

	if (v && in_text(elf, v))
		return v;
	if (!symtab || !symsh.sh_entsize)
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
	h = sprobe_fd__open_file(path);
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
