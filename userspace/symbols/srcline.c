/* SPDX-License-Identifier: BSD-2-Clause */
/* One SRCLINE record from an inline chain (contract in srcline.h). */
#include <string.h>

#include "userspace/symbols/srcline.h"

bool sprobe_srcline__pack(const struct sprobe_src_frame *fr, int n, uint64_t pc, char *text,
			  size_t text_cap, uint32_t *lines, struct sprobe_df_record *rec)
{
	size_t len = 0;

	if (n <= 0 || (n == 1 && !fr[0].file))
		return false;
	for (int i = 0; i < n; i++) {
		const char *fn = fr[i].function ? fr[i].function : "";
		const char *file = fr[i].file ? fr[i].file : "";
		size_t a = strlen(fn) + 1, b = strlen(file) + 1;

		if (len + a + b > text_cap) {
			/* Keep the outer frames' order valid: drop the inner
			 * ones that did not fit, keep the real function last. */
			if (i == 0)
				return false;
			n = i;
			break;
		}
		memcpy(text + len, fn, a);
		memcpy(text + len + a, file, b);
		len += a + b;
		lines[i] = fr[i].line;
	}
	if (fr[n - 1].function) /* a truncated chain: the last must be the function */
		return false;
	memset(rec, 0, sizeof(*rec));
	rec->type = SPROBE_DF_SRCLINE;
	rec->srcline.pc = pc;
	rec->srcline.n = (uint32_t)n;
	rec->srcline.lines = lines;
	rec->srcline.text = text;
	rec->srcline.text_len = (uint32_t)len;
	return true;
}
