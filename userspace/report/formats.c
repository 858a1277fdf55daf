/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one file that knows every report format: its name (what the CLI's
 * --format and sprobe_report_format__parse() take) and its writer. A new
 * format is a writer file of its own plus one row here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackprobe/report.h>

#include "userspace/report/outputs.h"
#include "userspace/report/report_internal.h"

static const struct report_format {
	const char *name;
	int (*write)(struct sprobe_report *r, FILE *out);
} formats[] = {
	[SPROBE_REPORT_TEXT] = { "text", sprobe_rep__write_text },
	[SPROBE_REPORT_FOLDED] = { "folded", sprobe_rep__write_folded },
	[SPROBE_REPORT_JSON] = { "json", sprobe_rep__write_json },
	[SPROBE_REPORT_PPROF] = { "pprof", sprobe_report__write_pprof },
	[SPROBE_REPORT_SPEEDSCOPE] = { "speedscope", sprobe_report__write_speedscope },
	[SPROBE_REPORT_SVG] = { "svg", sprobe_report__write_svg },
	[SPROBE_REPORT_TRACE] = { "trace", sprobe_rep__write_trace },
	[SPROBE_REPORT_HTML] = { "html", sprobe_rep__write_html },
};

#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

int sprobe_report__write(struct sprobe_report *r, FILE *out, enum sprobe_report_format fmt)
{
	int err;

	if (!r || !out)
		return -EINVAL;
	err = sprobe_rep__aggregate(r);
	if (err)
		return err;
	/* Unsigned: a negative fmt is out of range too. */
	if ((unsigned)fmt >= NFORMATS || !formats[fmt].write)
		return -EINVAL;
	err = formats[fmt].write(r, out);
	if (err)
		return err;
	if (fflush(out) != 0 || ferror(out))
		return -EIO;
	return 0;
}

int sprobe_report_format__parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < NFORMATS; i++)
		if (formats[i].name && !strcmp(name, formats[i].name))
			return (int)i;
	return -EINVAL;
}
