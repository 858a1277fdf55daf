/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Module inventory of the current Windows process: which image an address
 * belongs to, the CodeView record that names its PDB (GUID + age, the key a
 * symbol server uses), and the named exports as a minimal symbolizer.
 *
 * Everything is read from the images as mapped in memory (headers, debug
 * directory, export directory), never from the files on disk, so it
 * describes exactly the code that ran. Every RVA read from an image is
 * checked against SizeOfImage before it is followed: a damaged or unusual
 * header yields "no PDB"/"no exports", never a fault.
 */
#include <windows.h>
#include <tlhelp32.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/win.h>

struct export_sym {
	uint32_t rva;
	uint32_t name;	/* offset into the inventory's string pool */
};

struct mod_priv {
	struct sprobe_win_module pub;	/* first: get() returns &pub */
	struct export_sym *exports;	/* sorted by rva */
};

struct sprobe_win_modules {
	size_t n;
	struct mod_priv *mods;		/* sorted by base */
	char *pool;
	size_t pool_len, pool_cap;
};

static int win_errno(DWORD err)
{
	switch (err) {
	case ERROR_NOT_ENOUGH_MEMORY:
	case ERROR_OUTOFMEMORY: return ENOMEM;
	case ERROR_ACCESS_DENIED: return EACCES;
	case ERROR_INVALID_PARAMETER: return EINVAL;
	default: return EIO;
	}
}

/* rva..rva+len inside the image? */
static bool rva_ok(uint64_t size, uint64_t rva, uint64_t len)
{
	return rva < size && len <= size - rva;
}

static const IMAGE_NT_HEADERS *nt_headers(const uint8_t *base, uint64_t size)
{
	const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
	if (size < sizeof(*dos) || dos->e_magic != IMAGE_DOS_SIGNATURE)
		return NULL;
	if (dos->e_lfanew < 0 || !rva_ok(size, (uint64_t)dos->e_lfanew, sizeof(IMAGE_NT_HEADERS)))
		return NULL;
	const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + dos->e_lfanew);
	if (nt->Signature != IMAGE_NT_SIGNATURE ||
	    nt->OptionalHeader.Magic != IMAGE_NT_OPTIONAL_HDR_MAGIC)
		return NULL;
	return nt;
}

static const IMAGE_DATA_DIRECTORY *data_dir(const IMAGE_NT_HEADERS *nt, unsigned int idx)
{
	if (nt->OptionalHeader.NumberOfRvaAndSizes <= idx)
		return NULL;
	const IMAGE_DATA_DIRECTORY *d = &nt->OptionalHeader.DataDirectory[idx];
	return d->VirtualAddress && d->Size ? d : NULL;
}

/* CodeView "RSDS" record: signature, GUID, age, NUL-terminated PDB path. */
struct cv_rsds {
	uint32_t sig;
	uint8_t guid[16];
	uint32_t age;
	char path[1];
};

static void read_codeview(struct sprobe_win_module *m, const uint8_t *base,
			  const IMAGE_NT_HEADERS *nt)
{
	const IMAGE_DATA_DIRECTORY *d = data_dir(nt, IMAGE_DIRECTORY_ENTRY_DEBUG);
	if (!d || !rva_ok(m->size, d->VirtualAddress, d->Size))
		return;
	const IMAGE_DEBUG_DIRECTORY *dbg = (const IMAGE_DEBUG_DIRECTORY *)(base + d->VirtualAddress);
	size_t n = d->Size / sizeof(*dbg);
	for (size_t i = 0; i < n; i++) {
		if (dbg[i].Type != IMAGE_DEBUG_TYPE_CODEVIEW || !dbg[i].AddressOfRawData ||
		    dbg[i].SizeOfData < offsetof(struct cv_rsds, path) ||
		    !rva_ok(m->size, dbg[i].AddressOfRawData, dbg[i].SizeOfData))
			continue;
		const struct cv_rsds *cv = (const struct cv_rsds *)(base + dbg[i].AddressOfRawData);
		if (cv->sig != 0x53445352u) /* "RSDS" */
			continue;
		memcpy(m->pdb_guid, cv->guid, sizeof(m->pdb_guid));
		m->pdb_age = cv->age;
		size_t plen = dbg[i].SizeOfData - offsetof(struct cv_rsds, path);
		size_t k = 0;
		while (k < plen && k + 1 < sizeof(m->pdb_path) && cv->path[k]) {
			m->pdb_path[k] = cv->path[k];
			k++;
		}
		m->pdb_path[k] = '\0';
		m->has_pdb = true;
		return;
	}
}

static int pool_add(struct sprobe_win_modules *mods, const char *s, size_t len, uint32_t *off)
{
	if (mods->pool_len + len + 1 > mods->pool_cap) {
		size_t cap = mods->pool_cap ? mods->pool_cap * 2 : 65536;
		while (cap < mods->pool_len + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -E2BIG;
		char *p = realloc(mods->pool, cap);
		if (!p)
			return -ENOMEM;
		mods->pool = p;
		mods->pool_cap = cap;
	}
	*off = (uint32_t)mods->pool_len;
	memcpy(mods->pool + mods->pool_len, s, len);
	mods->pool[mods->pool_len + len] = '\0';
	mods->pool_len += len + 1;
	return 0;
}

static int cmp_export(const void *a, const void *b)
{
	const struct export_sym *x = a, *y = b;
	return x->rva < y->rva ? -1 : x->rva > y->rva;
}

static int read_exports(struct sprobe_win_modules *mods, struct mod_priv *mp,
			const uint8_t *base, const IMAGE_NT_HEADERS *nt)
{
	uint64_t size = mp->pub.size;
	const IMAGE_DATA_DIRECTORY *d = data_dir(nt, IMAGE_DIRECTORY_ENTRY_EXPORT);
	if (!d || !rva_ok(size, d->VirtualAddress, sizeof(IMAGE_EXPORT_DIRECTORY)))
		return 0;
	const IMAGE_EXPORT_DIRECTORY *ed = (const IMAGE_EXPORT_DIRECTORY *)(base + d->VirtualAddress);
	uint32_t nnames = ed->NumberOfNames, nfuncs = ed->NumberOfFunctions;
	if (!nnames || !rva_ok(size, ed->AddressOfNames, (uint64_t)nnames * 4) ||
	    !rva_ok(size, ed->AddressOfNameOrdinals, (uint64_t)nnames * 2) ||
	    !rva_ok(size, ed->AddressOfFunctions, (uint64_t)nfuncs * 4))
		return 0;
	const uint32_t *names = (const uint32_t *)(base + ed->AddressOfNames);
	const uint16_t *ords = (const uint16_t *)(base + ed->AddressOfNameOrdinals);
	const uint32_t *funcs = (const uint32_t *)(base + ed->AddressOfFunctions);

	mp->exports = calloc(nnames, sizeof(*mp->exports));
	if (!mp->exports)
		return -ENOMEM;
	uint32_t n = 0;
	for (uint32_t i = 0; i < nnames; i++) {
		if (ords[i] >= nfuncs)
			continue;
		uint32_t rva = funcs[ords[i]];
		/* A forwarder's "address" is a string inside the export
		 * directory, not code: skip it. */
		if (!rva || (rva >= d->VirtualAddress && rva - d->VirtualAddress < d->Size) ||
		    rva >= size || !rva_ok(size, names[i], 1))
			continue;
		const char *nm = (const char *)(base + names[i]);
		size_t len = strnlen(nm, size - names[i]);
		if (len == 0 || len == size - names[i])
			continue;
		int err = pool_add(mods, nm, len, &mp->exports[n].name);
		if (err)
			return err;
		mp->exports[n++].rva = rva;
	}
	qsort(mp->exports, n, sizeof(*mp->exports), cmp_export);
	mp->pub.nexports = n;
	return 0;
}

static int cmp_mod(const void *a, const void *b)
{
	const struct mod_priv *x = a, *y = b;
	return x->pub.base < y->pub.base ? -1 : x->pub.base > y->pub.base;
}

struct sprobe_win_modules *sprobe_win_modules__new(void)
{
	struct sprobe_win_modules *mods = calloc(1, sizeof(*mods));
	if (!mods)
		return NULL;

	HANDLE snap;
	/* ERROR_BAD_LENGTH: the module list changed while toolhelp read it
	 * (a load/unload raced us). Retrying is what the API asks for. */
	for (int tries = 0;; tries++) {
		snap = CreateToolhelp32Snapshot(TH32CS_SNAPMODULE, 0);
		if (snap != INVALID_HANDLE_VALUE || GetLastError() != ERROR_BAD_LENGTH || tries > 8)
			break;
	}
	if (snap == INVALID_HANDLE_VALUE) {
		int e = win_errno(GetLastError());
		free(mods);
		errno = e;
		return NULL;
	}

	size_t cap = 0;
	int err = 0;
	MODULEENTRY32W me;
	me.dwSize = sizeof(me);
	for (BOOL ok = Module32FirstW(snap, &me); ok; ok = Module32NextW(snap, &me)) {
		if (mods->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct mod_priv *p = realloc(mods->mods, ncap * sizeof(*p));
			if (!p) {
				err = ENOMEM;
				break;
			}
			mods->mods = p;
			cap = ncap;
		}
		struct mod_priv *mp = &mods->mods[mods->n];
		memset(mp, 0, sizeof(*mp));
		mp->pub.base = (uint64_t)(uintptr_t)me.modBaseAddr;
		mp->pub.size = me.modBaseSize;
		if (!WideCharToMultiByte(CP_UTF8, 0, me.szExePath, -1, mp->pub.path,
					 sizeof(mp->pub.path), NULL, NULL))
			mp->pub.path[0] = '\0';
		mods->n++;

		const uint8_t *base = me.modBaseAddr;
		const IMAGE_NT_HEADERS *nt = nt_headers(base, mp->pub.size);
		if (!nt)
			continue;
		read_codeview(&mp->pub, base, nt);
		int e = read_exports(mods, mp, base, nt);
		if (e) {
			err = -e;
			break;
		}
	}
	DWORD last = GetLastError();
	CloseHandle(snap);
	if (!err && mods->n == 0)
		err = last == ERROR_NO_MORE_FILES ? ENOENT : win_errno(last);
	if (err) {
		sprobe_win_modules__free(mods);
		errno = err;
		return NULL;
	}
	qsort(mods->mods, mods->n, sizeof(*mods->mods), cmp_mod);
	return mods;
}

void sprobe_win_modules__free(struct sprobe_win_modules *mods)
{
	if (!mods)
		return;
	for (size_t i = 0; i < mods->n; i++)
		free(mods->mods[i].exports);
	free(mods->mods);
	free(mods->pool);
	free(mods);
}

size_t sprobe_win_modules__count(const struct sprobe_win_modules *mods)
{
	return mods ? mods->n : 0;
}

const struct sprobe_win_module *
sprobe_win_modules__get(const struct sprobe_win_modules *mods, size_t i)
{
	if (!mods || i >= mods->n) {
		errno = ERANGE;
		return NULL;
	}
	return &mods->mods[i].pub;
}

static const struct mod_priv *find_priv(const struct sprobe_win_modules *mods, uint64_t addr)
{
	if (!mods)
		return NULL;
	size_t lo = 0, hi = mods->n;
	while (lo < hi) {	/* first module with base > addr */
		size_t mid = lo + (hi - lo) / 2;
		if (mods->mods[mid].pub.base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct mod_priv *mp = &mods->mods[lo - 1];
	return addr - mp->pub.base < mp->pub.size ? mp : NULL;
}

const struct sprobe_win_module *
sprobe_win_modules__find(const struct sprobe_win_modules *mods, uint64_t addr)
{
	const struct mod_priv *mp = find_priv(mods, addr);
	if (!mp) {
		errno = ENOENT;
		return NULL;
	}
	return &mp->pub;
}

int sprobe_win_modules__symbolize(const struct sprobe_win_modules *mods, uint64_t addr,
				  char *buf, size_t len, uint64_t *offset)
{
	if (!buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	const struct mod_priv *mp = find_priv(mods, addr);
	if (!mp || !mp->pub.nexports)
		return -ENOENT;
	uint64_t rva = addr - mp->pub.base;
	size_t lo = 0, hi = mp->pub.nexports;
	while (lo < hi) {	/* first export with rva > addr's */
		size_t mid = lo + (hi - lo) / 2;
		if (mp->exports[mid].rva <= rva)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	const struct export_sym *e = &mp->exports[lo - 1];
	const char *name = mods->pool + e->name;
	size_t n = strlen(name);
	if (n >= len)
		n = len - 1;
	memcpy(buf, name, n);
	buf[n] = '\0';
	if (offset)
		*offset = rva - e->rva;
	return 0;
}
