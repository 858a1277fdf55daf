/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target for the node table reader: the input bytes are the
 * content of a table file. Built by mk/table.mk with
 *   clang -fsanitize=fuzzer,address,undefined table/table.c ...
 * and run briefly by `make test` (lane test-fuzz-table).
 *
 * Random bytes almost never get past the magic and size checks, so when the
 * last header byte (reserved, offset 255) has its low bit set the harness
 * repairs the fixed header fields to match the input length: the fuzzer then
 * spends its time on links, generation, watermark, node contents and the
 * blocks nodes name.
 *
 * Properties checked (abort = finding): no crash or sanitizer report; an
 * iteration ends within 2 * capacity visits and returns each index at most
 * once, with nframes <= SPROBE_TABLE_MAX_FRAMES and a valid index.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/table.h>

/* docs/TABLE.md, format version 2. */
#define HDR 256u
#define NODE 256u
#define BLOCK 2048u
#define INLINE_FRAMES 12u

static void put32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

static size_t blocks_off(uint32_t cap)
{
	return (HDR + (size_t)cap * NODE + BLOCK - 1) / BLOCK * BLOCK;
}

static size_t file_size(uint32_t cap)
{
	return blocks_off(cap) + (size_t)cap * BLOCK;
}

static void repair_header(uint8_t *b, size_t *len)
{
	uint32_t cap = 0;
	int32_t pid;

	/* The largest table that fits in len. */
	while (file_size(cap + 1) <= *len)
		cap++;
	if (cap == 0)
		return;
	*len = file_size(cap);
	memcpy(b, "SPROBETB", 8);
	put32(b, 8, SPROBE_TABLE_VERSION);
	put32(b, 12, HDR);
	put32(b, 16, NODE);
	put32(b, 20, cap);
	put32(b, 24, SPROBE_TABLE_MAX_FRAMES);
	memcpy(&pid, b + 28, 4);
	if (pid <= 0)
		put32(b, 28, 1);
	put32(b, 88, INLINE_FRAMES);
	put32(b, 92, BLOCK);
	put64(b, 96, blocks_off(cap));
	put32(b, 104, cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sprobe_table_node node;
	struct sprobe_table_iter_stats st;
	struct sprobe_table_info info;
	struct sprobe_table *t;
	uint8_t *buf, *seen;
	char err[256];
	struct sprobe_table_open_opts o = {
		.sz = sizeof(o), .errbuf = err, .errbuf_len = sizeof(err)
	};
	size_t len = size;
	uint32_t count = 0;
	int ret;

	/* Exact-size heap copy: ASan flags any read past the end. */
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size >= file_size(1) && (buf[HDR - 1] & 1))
		repair_header(buf, &len);

	t = sprobe_table__open_mem(buf, len, &o);
	if (!t) {
		if (!err[0])
			abort();	/* every refusal must say why */
		free(buf);
		return 0;
	}
	if (sprobe_table__info(t, &info) || info.capacity == 0 ||
	    info.capacity > SPROBE_TABLE_MAX_CAPACITY)
		abort();
	seen = calloc(info.capacity + 1, 1);
	if (!seen)
		abort();
	for (int round = 0; round < 2; round++) {
		memset(seen, 0, info.capacity + 1);
		count = 0;
		if (sprobe_table__iter_begin(t))
			abort();
		while ((ret = sprobe_table__iter_next(t, &node)) == 1) {
			if (node.index == 0 || node.index > info.capacity ||
			    seen[node.index] ||
			    node.nframes > SPROBE_TABLE_MAX_FRAMES ||
			    node.tid <= 0)
				abort();
			seen[node.index] = 1;
			if (++count > info.capacity)
				abort();
		}
		if (ret != 0 && ret != -ELOOP && ret != -EBADMSG)
			abort();
		if (sprobe_table__iter_stats(t, &st) ||
		    st.visited > 2 * info.capacity || st.returned != count)
			abort();
	}
	ret = sprobe_table__check(t, err, sizeof(err));
	if (ret != 0 && ret != -ELOOP && ret != -EBADMSG && ret != -EAGAIN)
		abort();
	if (ret && !err[0])
		abort();
	free(seen);
	sprobe_table__close(t);
	free(buf);
	return 0;
}
