/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The four protobuf wire constructs profile.proto uses (varint, bytes,
 * nested message, packed varints) and gzip, for the pprof writers
 * (pprof.c, diff_writers.c). Why hand-written: pprof.c's header.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "userspace/common/zlib_dl.h" /* zlib's names are macros from here on */
#include "userspace/report/outputs.h"
#include "userspace/report/protobuf.h"

enum { PB_VARINT = 0, PB_LEN = 2 };

void sprobe_rep__pb_varint(struct ro_buf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	ro_buf__put(b, tmp, n);
}

/* Varint field; proto3 omits zero (the default), so do we. */
void sprobe_rep__pb_uint(struct ro_buf *b, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	sprobe_rep__pb_varint(b, (uint64_t)field << 3 | PB_VARINT);
	sprobe_rep__pb_varint(b, v);
}

void sprobe_rep__pb_bytes(struct ro_buf *b, uint32_t field, const void *p, size_t len)
{
	sprobe_rep__pb_varint(b, (uint64_t)field << 3 | PB_LEN);
	sprobe_rep__pb_varint(b, len);
	ro_buf__put(b, p, len);
}

/* Embedded message: the encoded SUB as a length-delimited field. */
void sprobe_rep__pb_msg(struct ro_buf *b, uint32_t field, const struct ro_buf *sub)
{
	if (sub->oom)
		b->oom = true;
	sprobe_rep__pb_bytes(b, field, sub->p, sub->n);
}

/* Packed repeated uint64/int64 (an int64 cast: its ten-byte two's complement). */
void sprobe_rep__pb_packed(struct ro_buf *b, struct ro_buf *tmp, uint32_t field, const uint64_t *v,
		      size_t n)
{
	if (!n)
		return;
	tmp->n = 0;
	for (size_t i = 0; i < n; i++)
		sprobe_rep__pb_varint(tmp, v[i]);
	sprobe_rep__pb_msg(b, field, tmp);
}

/* gzip (RFC 1952) of buf[0..len) to OUT. */
int sprobe_rep__gzip_write(FILE *out, const uint8_t *buf, size_t len)
{
	z_stream zs = { 0 };
	uint8_t chunk[65536];
	int zr, err = 0;

	/* windowBits 15 + 16: a gzip header and trailer instead of zlib's. */
	if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)buf;
	do {
		/* avail_in is a uInt: feed at most 1 GiB per round. */
		size_t take = len > (1u << 30) ? (1u << 30) : len;

		zs.next_in = (Bytef *)buf;
		zs.avail_in = (uInt)take;
		buf += take;
		len -= take;
		do {
			zs.next_out = chunk;
			zs.avail_out = sizeof(chunk);
			zr = deflate(&zs, len ? Z_NO_FLUSH : Z_FINISH);
			if (zr == Z_STREAM_ERROR) {
				err = -EIO;
				goto out;
			}
			size_t have = sizeof(chunk) - zs.avail_out;

			if (have && fwrite(chunk, 1, have, out) != have) {
				err = -EIO;
				goto out;
			}
		} while (zs.avail_out == 0);
	} while (len);
	if (zr != Z_STREAM_END)
		err = -EIO;
out:
	deflateEnd(&zs);
	return err;
}

