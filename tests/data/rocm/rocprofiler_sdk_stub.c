/* A C stand-in for librocprofiler-sdk, compiled by tests/test_rocprof_stub.py.
 *
 * It exports the functions the backend declares, with the signatures of the
 * rocprofiler-sdk 0.5.0 headers (types re-declared here from the header text, so no
 * HSA/HIP headers are needed), so that the backend's ctypes declarations are exercised
 * through a real C ABI: handles passed by value, the callback tracing record passed by
 * value (56 bytes), rocprofiler_record_header_t** arrays, user-data out-pointers.
 * Test hooks: stub_load_kernel, stub_launch, stub_calls. Delivery is synchronous on
 * the flushing thread (the Python fake covers the SDK thread). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

typedef struct { uint64_t handle; } handle_t;               /* context / buffer / agent ids */
typedef struct { uint64_t internal; uint64_t external; } corr_t;
typedef struct { uint32_t category, kind; void* payload; } header_t;
typedef struct { const char* name; uint32_t handle; } client_id_t;
typedef struct { uint64_t context, thread; corr_t corr; uint32_t kind; int32_t op; uint32_t phase;
                 void* payload; } cb_record_t;              /* rocprofiler_callback_tracing_record_t, 56 B */
typedef struct { uint64_t size, kernel_id, code_object_id; const char* kernel_name; uint64_t kernel_object;
                 uint32_t u32[7]; } symbol_t;                /* kernel_symbol_register_data_t, 72 B */
typedef struct { uint64_t size; uint32_t kind; int32_t op; corr_t corr; uint64_t start, end, tid; } hip_api_t;
typedef struct { uint64_t size; uint32_t kind, op; corr_t corr; uint64_t tid, start, end;
                 uint64_t info_size, agent, queue, kernel_id, dispatch_id; uint32_t priv, group;
                 uint32_t wg[3], grid[3]; uint8_t pad[56]; } dispatch_t;   /* 184 B */
typedef struct { size_t size; int (*initialize)(void*, void*); void (*finalize)(void*); void* data; } result_t;
typedef result_t* (*configure_t)(uint32_t, const char*, uint32_t, client_id_t*);
typedef void (*buffer_cb_t)(handle_t, handle_t, header_t**, size_t, void*, uint64_t);
typedef void (*tracing_cb_t)(cb_record_t, uint64_t*, void*);
typedef int (*extcorr_cb_t)(uint64_t, handle_t, uint32_t, int32_t, uint64_t, uint64_t*, void*);
typedef int (*agents_cb_t)(uint32_t, const void**, size_t, void*);
typedef int (*ops_cb_t)(uint32_t, int32_t, void*);

enum { OK = 0, LOCKED = 15, NOT_FOUND = 5 };
static int phase;                     /* 0 fresh, 1 configuring, 2 locked */
static uint64_t next_id = 1, corr_id = 1, calls;
static struct { uint64_t id; int active, hip_ops_n; int32_t hip_ops[64]; uint64_t kd_buf, hip_buf;
                tracing_cb_t co_cb; void* co_data; extcorr_cb_t ext_cb; } ctx[8];
static struct { uint64_t id, ctx; buffer_cb_t cb; void* data; size_t n; header_t hdr[256]; header_t* ptr[256];
                uint64_t ring[256 * 24]; size_t used; } buf[8];
static uint8_t agent[2][296];
static const char* kname[16]; static uint64_t kid[16]; static int nk;

static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_BOOTTIME, &t);
                            return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec; }
static int find_ctx(handle_t h) { for (int i = 0; i < 8; i++) if (ctx[i].id == h.handle) return i; return -1; }
static int find_buf(handle_t h) { for (int i = 0; i < 8; i++) if (buf[i].id == h.handle) return i; return -1; }

int rocprofiler_get_version(uint32_t* a, uint32_t* b, uint32_t* c) { *a = 0; *b = 5; *c = 0; return OK; }
const char* rocprofiler_get_status_string(int s) { return s == LOCKED ? "configuration locked" : "stub error"; }
const char* rocprofiler_get_status_name(int s) { return "ROCPROFILER_STATUS_STUB"; }
int rocprofiler_get_timestamp(uint64_t* ts) { *ts = now(); return OK; }
uint64_t stub_calls(void) { return calls; }

int rocprofiler_force_configure(configure_t fn) {
  if (phase) return LOCKED;
  static client_id_t client = {0, 3};
  result_t* r = fn(500, "0.5.0 (stub)", 0, &client);
  if (!r || r->size != sizeof(result_t)) return 1;
  phase = 1;
  int rc = r->initialize ? r->initialize(0, r->data) : 0;
  phase = 2;
  return rc == 0 ? OK : 1;
}
int rocprofiler_create_context(handle_t* out) {
  calls++;
  if (phase != 1) return LOCKED;
  if (out->handle) return 18;
  for (int i = 0; i < 8; i++) if (!ctx[i].id) { ctx[i].id = out->handle = next_id++; return OK; }
  return 1;
}
int rocprofiler_start_context(handle_t h) { int i = find_ctx(h); if (i < 0) return 2; ctx[i].active = 1; return OK; }
int rocprofiler_stop_context(handle_t h) { int i = find_ctx(h); if (i < 0) return 2; ctx[i].active = 0; return OK; }
int rocprofiler_create_buffer(handle_t c, size_t size, size_t wm, int policy, buffer_cb_t cb, void* data,
                              handle_t* out) {
  if (find_ctx(c) < 0 || policy != 2 || wm > size) return 18;
  for (int i = 0; i < 8; i++) if (!buf[i].id) {
    buf[i].id = out->handle = next_id++; buf[i].ctx = c.handle; buf[i].cb = cb; buf[i].data = data; return OK; }
  return 1;
}
int rocprofiler_configure_buffer_tracing_service(handle_t c, int kind, const int32_t* ops, size_t n, handle_t b) {
  int i = find_ctx(c);
  if (phase != 1) return LOCKED;
  if (i < 0 || find_buf(b) < 0) return 2;
  if (kind == 11) ctx[i].kd_buf = b.handle;
  else if (kind == 5) { ctx[i].hip_buf = b.handle; ctx[i].hip_ops_n = (int)n;
                        for (size_t k = 0; k < n && k < 64; k++) ctx[i].hip_ops[k] = ops[k]; }
  else return 4;
  return OK;
}
int rocprofiler_configure_callback_tracing_service(handle_t c, int kind, const int32_t* ops, size_t n,
                                                   tracing_cb_t cb, void* data) {
  int i = find_ctx(c);
  if (phase != 1) return LOCKED;
  if (i < 0 || kind != 10 || n != 2 || ops[1] != 2) return 18;
  ctx[i].co_cb = cb; ctx[i].co_data = data; return OK;
}
int rocprofiler_configure_external_correlation_id_request_service(handle_t c, const int* kinds, size_t n,
                                                                  extcorr_cb_t cb, void* data) {
  int i = find_ctx(c);
  if (phase != 1) return LOCKED;
  if (i < 0 || n != 1 || kinds[0] != 5) return 18;
  ctx[i].ext_cb = cb; return OK;
}
int rocprofiler_query_available_agents(int version, agents_cb_t cb, size_t size, void* data) {
  static char name[] = "gfx942", product[] = "stub GPU";
  static const void* list[2];
  if (version != 1 || size > 296) return 17;
  for (int a = 0; a < 2; a++) {
    uint8_t* p = agent[a]; memset(p, 0, 296);
    *(uint64_t*)(p + 0) = 296; *(uint64_t*)(p + 8) = 0xA6E0 + a; *(uint32_t*)(p + 16) = a ? 2 : 1;
    *(uint32_t*)(p + 72) = a ? 304 : 0; *(uint32_t*)(p + 140) = a ? 2100 : 0;
    *(const char**)(p + 248) = a ? name : "cpu"; *(const char**)(p + 264) = product;
    *(int32_t*)(p + 288) = 0; list[a] = p;
  }
  return cb(1, list, 2, data);
}
int rocprofiler_iterate_buffer_tracing_kind_operations(int kind, ops_cb_t cb, void* data) {
  static const int32_t ops[] = {66, 214, 308};
  if (kind != 5) return 4;
  for (int i = 0; i < 3; i++) if (cb(5, ops[i], data)) break;
  return OK;
}
int rocprofiler_query_buffer_tracing_kind_operation_name(int kind, int32_t op, const char** name, uint64_t* len) {
  const char* s = op == 66 ? "hipDeviceSynchronize" : op == 214 ? "hipLaunchKernel" : op == 308 ?
                  "hipModuleLaunchKernel" : 0;
  if (!s) return NOT_FOUND;
  *name = s; if (len) *len = strlen(s); return OK;
}

static void deliver(int b) {
  if (!buf[b].n) return;
  for (size_t i = 0; i < buf[b].n; i++) buf[b].ptr[i] = &buf[b].hdr[i];
  buf[b].cb((handle_t){buf[b].ctx}, (handle_t){buf[b].id}, buf[b].ptr, buf[b].n, buf[b].data, 0);
  memset(buf[b].ring, 0xDD, sizeof buf[b].ring);         /* recycled after the callback */
  buf[b].n = 0; buf[b].used = 0;
}
int rocprofiler_flush_buffer(handle_t h) { int b = find_buf(h); if (b < 0) return 3; deliver(b); return OK; }
static void* put(int b, uint32_t kind, const void* rec, size_t size) {
  uint8_t* dst = (uint8_t*)buf[b].ring + buf[b].used;
  memcpy(dst, rec, size); buf[b].used += (size + 7) / 8 * 8;
  buf[b].hdr[buf[b].n++] = (header_t){1, kind, dst};
  return dst;
}

void stub_load_kernel(const char* name, uint64_t id) {
  static char names[16][64]; static symbol_t sym[16];
  strncpy(names[nk], name, 60); strcat(names[nk], ".kd");
  sym[nk] = (symbol_t){sizeof(symbol_t), id, 1, names[nk], 0xABC, {0}};
  kname[nk] = names[nk]; kid[nk] = id;
  for (int i = 0; i < 8; i++) if (ctx[i].active && ctx[i].co_cb) {
    cb_record_t r = {ctx[i].id, (uint64_t)syscall(SYS_gettid), {0, 0}, 10, 2, 1, &sym[nk]};
    uint64_t user = 0;
    ctx[i].co_cb(r, &user, ctx[i].co_data);
  }
  nk++;
}
uint64_t stub_launch(uint64_t kernel_id, uint64_t dur, int32_t op) {
  uint64_t c = corr_id++, tid = (uint64_t)syscall(SYS_gettid);
  for (int i = 0; i < 8; i++) if (ctx[i].active && (ctx[i].kd_buf || ctx[i].hip_buf)) {
    uint64_t ext = 0;
    if (ctx[i].ext_cb) ctx[i].ext_cb(tid, (handle_t){ctx[i].id}, 5, op, c, &ext, 0);
    uint64_t t0 = now(), t1 = t0 + 1500;
    for (int k = 0; k < ctx[i].hip_ops_n; k++) if (ctx[i].hip_ops[k] == op) {
      hip_api_t a = {sizeof a, 5, op, {c, ext}, t0, t1, tid};
      put(find_buf((handle_t){ctx[i].hip_buf}), 5, &a, sizeof a);
    }
    dispatch_t d; memset(&d, 0, sizeof d);
    d.size = sizeof d; d.kind = 11; d.op = 2; d.corr = (corr_t){c, ext}; d.tid = tid;
    d.start = t0 + 4000; d.end = d.start + dur; d.info_size = 72; d.agent = 0xA6E1; d.queue = 0x9; d.kernel_id = kernel_id;
    put(find_buf((handle_t){ctx[i].kd_buf}), 11, &d, sizeof d);
  }
  return c;
}
