/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of tests/macos_sdk_standin.h -- a STAND-IN for the macOS SDK, NOT the
 * SDK (see that file): the sections for
 * <zlib.h>, the Mach headers (<mach/mach.h>, <mach/mach_vm.h>,
 * <mach/mach_time.h>), and those that use Mach types: <pthread.h>,
 * <dlfcn.h>, <mach-o/dyld.h>.
 * Included by macos_sdk_standin.h only, once per generated forwarding
 * header: no include guard, each section is guarded by its own
 * SPROBE_STANDIN_WANT_/HAVE_ pair.
 */

/* ---- <zlib.h> (the SDK's libz, zlib 1.2.11 API) ---------------------------- */
#if defined(SPROBE_STANDIN_WANT_zlib_h) && !defined(SPROBE_STANDIN_HAVE_zlib_h)
#define SPROBE_STANDIN_HAVE_zlib_h
#define ZLIB_VERSION "1.2.11"
typedef unsigned char Bytef;
typedef unsigned int uInt;
typedef unsigned long uLong;
typedef void *voidpf;
typedef voidpf (*alloc_func)(voidpf opaque, uInt items, uInt size);
typedef void (*free_func)(voidpf opaque, voidpf address);
struct internal_state;
typedef struct z_stream_s {
	const Bytef *next_in;
	uInt avail_in;
	uLong total_in;
	Bytef *next_out;
	uInt avail_out;
	uLong total_out;
	const char *msg;
	struct internal_state *state;
	alloc_func zalloc;
	free_func zfree;
	voidpf opaque;
	int data_type;
	uLong adler;
	uLong reserved;
} z_stream;
typedef z_stream *z_streamp;
#define Z_NO_FLUSH 0
#define Z_FINISH 4
#define Z_OK 0
#define Z_STREAM_END 1
#define Z_STREAM_ERROR (-2)
#define Z_BUF_ERROR (-5)
#define Z_BEST_COMPRESSION 9
#define Z_DEFAULT_COMPRESSION (-1)
#define Z_DEFAULT_STRATEGY 0
#define Z_DEFLATED 8
#define Z_NULL 0
#define MAX_WBITS 15
#define MAX_MEM_LEVEL 9
int deflate(z_streamp strm, int flush);
int deflateEnd(z_streamp strm);
int deflateInit2_(z_streamp strm, int level, int method, int windowBits, int memLevel,
		  int strategy, const char *version, int stream_size);
#define deflateInit2(strm, level, method, windowBits, memLevel, strategy) \
	deflateInit2_((strm), (level), (method), (windowBits), (memLevel), (strategy), \
		      ZLIB_VERSION, (int)sizeof(z_stream))
uLong crc32(uLong crc, const Bytef *buf, uInt len);
#endif

/* ---- <mach/...>: types (any mach header) ------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_mach_mach_types) && !defined(SPROBE_STANDIN_HAVE_mach_types)
#define SPROBE_STANDIN_HAVE_mach_types
typedef int integer_t;
typedef mach_port_t ipc_space_t;
typedef mach_port_t task_t;
typedef mach_port_t task_inspect_t;
typedef mach_port_t thread_t;
typedef mach_port_t thread_act_t;
typedef mach_port_t thread_inspect_t;
typedef mach_port_t thread_read_t;
typedef mach_port_t vm_map_t;
typedef mach_port_t vm_map_read_t;
typedef thread_act_t *thread_act_array_t;
typedef int kern_return_t;
typedef natural_t mach_msg_type_number_t;
typedef uintptr_t vm_offset_t;
typedef vm_offset_t vm_address_t;
typedef uintptr_t vm_size_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
typedef int thread_state_flavor_t;
typedef natural_t *thread_state_t;
typedef natural_t thread_flavor_t;
typedef integer_t *thread_info_t;
typedef integer_t cpu_type_t;
typedef integer_t cpu_subtype_t;

#define MACH_PORT_NULL 0
#define KERN_SUCCESS 0
#define KERN_INVALID_ADDRESS 1
#define KERN_PROTECTION_FAILURE 2
#define KERN_INVALID_ARGUMENT 4
#define KERN_FAILURE 5
#define KERN_RESOURCE_SHORTAGE 6
#define KERN_NO_ACCESS 8
#define KERN_TERMINATED 37
#define MACH_SEND_INVALID_DEST 0x10000003

#endif

/* ---- <mach/mach.h> ------------------------------------------------------------ */
#if defined(SPROBE_STANDIN_WANT_mach_mach_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_h)
#define SPROBE_STANDIN_HAVE_mach_mach_h
extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_
mach_port_t mach_thread_self(void);
kern_return_t task_threads(task_inspect_t target_task, thread_act_array_t *act_list,
			   mach_msg_type_number_t *act_listCnt);
kern_return_t thread_suspend(thread_read_t target_act);
kern_return_t thread_resume(thread_read_t target_act);
kern_return_t thread_get_state(thread_read_t target_act, thread_state_flavor_t flavor,
			       thread_state_t old_state, mach_msg_type_number_t *old_stateCnt);
kern_return_t thread_info(thread_inspect_t target_act, thread_flavor_t flavor,
			  thread_info_t thread_info_out, mach_msg_type_number_t *thread_info_outCnt);
kern_return_t mach_port_deallocate(ipc_space_t task, mach_port_name_t name);
kern_return_t vm_deallocate(vm_map_t target_task, vm_address_t address, vm_size_t size);

/* <mach/thread_info.h> */
#define THREAD_IDENTIFIER_INFO 4
struct thread_identifier_info {
	uint64_t thread_id;
	uint64_t thread_handle;
	uint64_t dispatch_qaddr;
};
typedef struct thread_identifier_info thread_identifier_info_data_t;
typedef struct thread_identifier_info *thread_identifier_info_t;
#define THREAD_IDENTIFIER_INFO_COUNT \
	((mach_msg_type_number_t)(sizeof(thread_identifier_info_data_t) / sizeof(natural_t)))

/* <mach/{i386,arm}/_structs.h>, <mach/{i386,arm}/thread_status.h> */
#if defined(__x86_64__)
typedef struct {
	uint64_t __rax, __rbx, __rcx, __rdx, __rdi, __rsi, __rbp, __rsp;
	uint64_t __r8, __r9, __r10, __r11, __r12, __r13, __r14, __r15;
	uint64_t __rip, __rflags, __cs, __fs, __gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64 4
#define x86_THREAD_STATE64_COUNT \
	((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(int)))
#else
/* The non-arm64e layout (arm64e makes fp/lr/sp/pc opaque: use the macros). */
typedef struct {
	uint64_t __x[29];
	uint64_t __fp;
	uint64_t __lr;
	uint64_t __sp;
	uint64_t __pc;
	uint32_t __cpsr;
	uint32_t __pad;
} arm_thread_state64_t;
#define ARM_THREAD_STATE64 6
#define ARM_THREAD_STATE64_COUNT \
	((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(uint32_t)))
#define arm_thread_state64_get_pc(ts) ((uintptr_t)((ts).__pc))
#define arm_thread_state64_get_lr(ts) ((uintptr_t)((ts).__lr))
#define arm_thread_state64_get_sp(ts) ((uintptr_t)((ts).__sp))
#define arm_thread_state64_get_fp(ts) ((uintptr_t)((ts).__fp))
#endif

#endif

/* ---- <mach/mach_vm.h> --------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_mach_vm_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_vm_h)
#define SPROBE_STANDIN_HAVE_mach_mach_vm_h
kern_return_t mach_vm_read_overwrite(vm_map_read_t target_task, mach_vm_address_t address,
				     mach_vm_size_t size, mach_vm_address_t data,
				     mach_vm_size_t *outsize);

#endif

/* ---- <mach/mach_time.h> ------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_mach_time_h) && !defined(SPROBE_STANDIN_HAVE_mach_mach_time_h)
#define SPROBE_STANDIN_HAVE_mach_mach_time_h
struct mach_timebase_info {
	uint32_t numer;
	uint32_t denom;
};
typedef struct mach_timebase_info *mach_timebase_info_t;
typedef struct mach_timebase_info mach_timebase_info_data_t;
kern_return_t mach_timebase_info(mach_timebase_info_t info);
uint64_t mach_absolute_time(void);

#endif

/* ---- <pthread.h> -------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_pthread_h) && !defined(SPROBE_STANDIN_HAVE_pthread_h)
#define SPROBE_STANDIN_HAVE_pthread_h
typedef struct _opaque_pthread_t *pthread_t;
typedef struct { long __sig; char __opaque[56]; } pthread_attr_t;
typedef struct { long __sig; char __opaque[56]; } pthread_mutex_t;
typedef struct { long __sig; char __opaque[8]; } pthread_mutexattr_t;
#define PTHREAD_MUTEX_INITIALIZER { 0x32AAABA7, { 0 } }
int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
		   void *arg);
int pthread_join(pthread_t thread, void **value);
pthread_t pthread_self(void);
int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
int pthread_mutex_destroy(pthread_mutex_t *m);
int pthread_mutex_lock(pthread_mutex_t *m);
int pthread_mutex_unlock(pthread_mutex_t *m);
/* The _np ("not portable") calls macOS documents in <pthread.h>. */
pthread_t pthread_from_mach_thread_np(mach_port_t port);
mach_port_t pthread_mach_thread_np(pthread_t thread);
void *pthread_get_stackaddr_np(pthread_t thread);
size_t pthread_get_stacksize_np(pthread_t thread);
int pthread_threadid_np(pthread_t thread, uint64_t *thread_id);

/* One argument: names the calling thread only (glibc's takes a thread). */
int pthread_setname_np(const char *name);
#endif

/* ---- <dlfcn.h> ---------------------------------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_dlfcn_h) && !defined(SPROBE_STANDIN_HAVE_dlfcn_h)
#define SPROBE_STANDIN_HAVE_dlfcn_h
typedef struct dl_info {
	const char *dli_fname;
	void *dli_fbase;
	const char *dli_sname;
	void *dli_saddr;
} Dl_info;
int dladdr(const void *addr, Dl_info *info);

#endif

/* ---- <mach-o/loader.h>, <mach-o/dyld.h> ------------------------------------- */
#if defined(SPROBE_STANDIN_WANT_mach_o_dyld_h) && !defined(SPROBE_STANDIN_HAVE_mach_o_dyld_h)
#define SPROBE_STANDIN_HAVE_mach_o_dyld_h
struct mach_header {
	uint32_t magic;
	cpu_type_t cputype;
	cpu_subtype_t cpusubtype;
	uint32_t filetype;
	uint32_t ncmds;
	uint32_t sizeofcmds;
	uint32_t flags;
};
uint32_t _dyld_image_count(void);
const struct mach_header *_dyld_get_image_header(uint32_t image_index);
intptr_t _dyld_get_image_vmaddr_slide(uint32_t image_index);
const char *_dyld_get_image_name(uint32_t image_index);

#endif
