/*
 * malloc_trim(0) for keyrelay's idle memory reclaim (src/cli/memory.ts). glibc keeps memory that Node's
 * native allocations (socket read buffers, Buffers' backing stores, SQLite) freed during a burst: a free
 * chunk below the top of an arena is never given back by free(), and after 1,000 streams the main arena
 * holds ~50 MB of such holes. Only malloc_trim returns them (madvise of every free page in every arena);
 * Node exposes no way to call it. Other C libraries have no such call, and the function reports that.
 */
#include <node_api.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* trim(): true if memory went back to the system, false if none did, null where the C library has no trim. */
static napi_value Trim(napi_env env, napi_callback_info info) {
  napi_value result;
  (void)info;
#if defined(__GLIBC__)
  if (napi_get_boolean(env, malloc_trim(0) == 1, &result) != napi_ok) return NULL;
#else
  if (napi_get_null(env, &result) != napi_ok) return NULL;
#endif
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
