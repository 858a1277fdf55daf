/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Protobuf encoding and gzip for the pprof writers (protobuf.c). Each
 * function appends to an ro_buf (outputs.h), which records running out of
 * memory in ->oom instead of failing the call.
 */
#ifndef SPROBE_REPORT_PROTOBUF_H
#define SPROBE_REPORT_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct ro_buf;

void sprobe_rep__pb_varint(struct ro_buf *b, uint64_t v);
/* Varint field; zero (proto3's default) is omitted. */
void sprobe_rep__pb_uint(struct ro_buf *b, uint32_t field, uint64_t v);
void sprobe_rep__pb_bytes(struct ro_buf *b, uint32_t field, const void *p, size_t len);
/* Embedded message: sub's bytes as a length-delimited field. */
void sprobe_rep__pb_msg(struct ro_buf *b, uint32_t field, const struct ro_buf *sub);
/* Packed repeated varints (tmp is scratch space). */
void sprobe_rep__pb_packed(struct ro_buf *b, struct ro_buf *tmp, uint32_t field, const uint64_t *v,
			   size_t n);
/* gzip (RFC 1952) of buf[0..len) to out: 0, -ENOMEM or -EIO. */
int sprobe_rep__gzip_write(FILE *out, const uint8_t *buf, size_t len);

#endif
