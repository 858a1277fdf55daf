/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Compiled on a real macOS host only (`make macos-ci`): checks that the
 * values and layouts tests/macos_sdk_standin.h declares for the syntax check
 * on Linux agree with the real SDK. Compiling is the test: every
 * _Static_assert below names a claim the stand-in makes. When one fails,
 * fix the stand-in (the SDK is right).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>
#include <mach/mach.h>
#include <mach/mach_time.h>
#include <mach/mach_vm.h>
#include <mach-o/dyld.h>
#include <mach-o/loader.h>

#define SAME(a, b) _Static_assert((a) == (b), #a " == " #b)

/* errno numbers the stand-in defines. */
SAME(EPERM, 1); SAME(ENOENT, 2); SAME(ESRCH, 3); SAME(EINTR, 4); SAME(EIO, 5);
SAME(ENOMEM, 12); SAME(EACCES, 13); SAME(EFAULT, 14); SAME(EBUSY, 16);
SAME(EEXIST, 17); SAME(EINVAL, 22); SAME(EMFILE, 24); SAME(ENOSPC, 28);
SAME(ERANGE, 34); SAME(EAGAIN, 35); SAME(ENOTSUP, 45); SAME(ETIMEDOUT, 60);
SAME(EOVERFLOW, 84); SAME(ENODATA, 96); SAME(EPROTO, 100);
SAME(CLOCK_REALTIME, 0); SAME(CLOCK_MONOTONIC, 6);

/* Mach scalar types and return codes. */
SAME(sizeof(mach_port_t), 4); SAME(sizeof(natural_t), 4);
SAME(sizeof(kern_return_t), 4); SAME(sizeof(mach_msg_type_number_t), 4);
SAME(sizeof(vm_address_t), 8); SAME(sizeof(mach_vm_address_t), 8);
SAME(sizeof(thread_state_flavor_t), 4); SAME(sizeof(pid_t), 4);
SAME(KERN_SUCCESS, 0); SAME(KERN_INVALID_ADDRESS, 1); SAME(KERN_PROTECTION_FAILURE, 2);
SAME(KERN_INVALID_ARGUMENT, 4); SAME(KERN_FAILURE, 5); SAME(KERN_RESOURCE_SHORTAGE, 6);
SAME(KERN_NO_ACCESS, 8); SAME(KERN_TERMINATED, 37); SAME(MACH_SEND_INVALID_DEST, 0x10000003);
SAME(MACH_PORT_NULL, 0);

/* thread_info(THREAD_IDENTIFIER_INFO). */
SAME(THREAD_IDENTIFIER_INFO, 4);
SAME(sizeof(thread_identifier_info_data_t), 24);
SAME(offsetof(thread_identifier_info_data_t, thread_id), 0);
SAME(THREAD_IDENTIFIER_INFO_COUNT, 6);

/* Thread state layouts. */
#if defined(__x86_64__)
SAME(x86_THREAD_STATE64, 4);
SAME(sizeof(x86_thread_state64_t), 21 * 8);
SAME(x86_THREAD_STATE64_COUNT, 42);
SAME(offsetof(x86_thread_state64_t, __rbp), 6 * 8);
SAME(offsetof(x86_thread_state64_t, __rsp), 7 * 8);
SAME(offsetof(x86_thread_state64_t, __rip), 16 * 8);
#else
SAME(ARM_THREAD_STATE64, 6);
SAME(sizeof(arm_thread_state64_t), 29 * 8 + 4 * 8 + 8);
SAME(ARM_THREAD_STATE64_COUNT, 68);
#endif

/* timebase, pthread, dyld. */
SAME(sizeof(mach_timebase_info_data_t), 8);
SAME(sizeof(pthread_mutex_t), 64);
SAME(sizeof(struct mach_header), 28);
SAME(sizeof(struct mach_header_64), 32);
SAME(MH_MAGIC_64, 0xfeedfacf);
SAME(LC_SEGMENT_64, 0x19); SAME(LC_SYMTAB, 0x2); SAME(LC_UUID, 0x1b);
SAME(LC_FUNCTION_STARTS, 0x26);
SAME(sizeof(struct segment_command_64), 72);
SAME(sizeof(struct symtab_command), 24);
SAME(sizeof(struct uuid_command), 24);
SAME(sizeof(struct linkedit_data_command), 16);

/* The signatures the stand-in declares, as function pointer types. */
static kern_return_t (*const p_task_threads)(task_inspect_t, thread_act_array_t *,
					     mach_msg_type_number_t *) = task_threads;
static kern_return_t (*const p_get_state)(thread_read_t, thread_state_flavor_t, thread_state_t,
					  mach_msg_type_number_t *) = thread_get_state;
static kern_return_t (*const p_read)(vm_map_read_t, mach_vm_address_t, mach_vm_size_t,
				     mach_vm_address_t, mach_vm_size_t *) = mach_vm_read_overwrite;
static pthread_t (*const p_from_port)(mach_port_t) = pthread_from_mach_thread_np;
static void *(*const p_stackaddr)(pthread_t) = pthread_get_stackaddr_np;
static intptr_t (*const p_slide)(uint32_t) = _dyld_get_image_vmaddr_slide;
static const struct mach_header *(*const p_header)(uint32_t) = _dyld_get_image_header;

int main(void)
{
	/* Referenced so the pointers are not unused; never called. */
	return !(p_task_threads && p_get_state && p_read && p_from_port && p_stackaddr &&
		 p_slide && p_header);
}
