/* SPDX-License-Identifier: BSD-2-Clause */
/* Can the agent enter a program (contract in enterable.h). */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#endif

#include "userspace/common/enterable.h"

#ifdef __linux__
/* Does the file's capability set (security.capability) raise ours at its
 * exec? The kernel then runs it as secure execution (AT_SECURE), as a
 * set-ID program: an effective bit, or permitted capabilities we lack,
 * for anyone but real uid 0 (security/commoncap.c). */
static bool caps_elevate(int fd)
{
	struct vfs_ns_cap_data c;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct own[2];
	ssize_t n = fgetxattr(fd, "security.capability", &c, sizeof(c));

	if (n < (ssize_t)XATTR_CAPS_SZ_1 || getuid() == 0)
		return false;
	uint32_t rev = c.magic_etc & VFS_CAP_REVISION_MASK;
	uint64_t perm = c.data[0].permitted;
	if (rev != VFS_CAP_REVISION_1 && n >= (ssize_t)XATTR_CAPS_SZ_2)
		perm |= (uint64_t)c.data[1].permitted << 32;
	if (c.magic_etc & VFS_CAP_FLAGS_EFFECTIVE)
		return perm != 0;
	if (syscall(SYS_capget, &h, own) != 0)
		return perm != 0;
	return (perm & ~(own[0].permitted | (uint64_t)own[1].permitted << 32)) != 0;
}
#else
static bool caps_elevate(int fd)
{
	(void)fd;
	return false;
}
#endif

enum sprobe_enter sprobe_enter__check_fd(int fd, char *why, size_t len, char *interp,
					 size_t ilen)
{
	char buf[512];
	struct stat st;
	bool has_interp = false;
	Elf64_Ehdr eh;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) != 0)
		return SPROBE_ENTER_OK;
	/* Set-ID bits that change the credentials put the loader in secure-
	 * execution mode (AT_SECURE), where it ignores LD_PRELOAD. Bits that
	 * name the caller's own ids change nothing. */
	if (((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
	    ((st.st_mode & S_ISGID) && st.st_gid != getgid())) {
		snprintf(why, len, "set-user/group-ID: the loader ignores LD_PRELOAD there");
		return SPROBE_ENTER_SETID;
	}
	if (caps_elevate(fd)) {
		snprintf(why, len, "a file-capability program (security.capability): the loader "
				   "ignores LD_PRELOAD there");
		return SPROBE_ENTER_SETID;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n >= 2 && buf[0] == '#' && buf[1] == '!') {
		const char *q = buf + 2;
		size_t k = 0;

		buf[n] = '\0';
		while (*q == ' ' || *q == '\t')
			q++;
		while (*q && *q != ' ' && *q != '\t' && *q != '\n' && k + 1 < ilen)
			interp[k++] = *q++;
		if (!k || (*q && *q != ' ' && *q != '\t' && *q != '\n'))
			return SPROBE_ENTER_OK; /* none, or too long to be sure */
		interp[k] = '\0';
		return SPROBE_ENTER_SCRIPT;
	}
	if (n < (ssize_t)sizeof(eh) || memcmp(buf, ELFMAG, SELFMAG) != 0 ||
	    buf[EI_CLASS] != ELFCLASS64)
		return SPROBE_ENTER_OK;
	memcpy(&eh, buf, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			break;
		if (ph.p_type == PT_INTERP)
			has_interp = true;
	}
	if (!has_interp && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
		snprintf(why, len, "statically linked: the agent cannot be loaded into it");
		return SPROBE_ENTER_STATIC;
	}
	return SPROBE_ENTER_OK;
}

bool sprobe_enter__resolve(const char *file, const char *path_env, char *out, size_t len)
{
	if (strchr(file, '/'))
		return (size_t)snprintf(out, len, "%s", file) < len;
	for (const char *p = path_env ? path_env : "/bin:/usr/bin";;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);

		/* An empty PATH entry means the current directory. */
		if ((size_t)snprintf(out, len, "%.*s%s%s", (int)n, p, n ? "/" : "", file) < len &&
		    access(out, X_OK) == 0)
			return true;
		if (!c)
			return false;
		p = c + 1;
	}
}
