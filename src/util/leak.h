// Intentional leaks, told to LeakSanitizer.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define LOL_HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOL_HAVE_LSAN 1
#endif
#endif
#ifdef LOL_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace lol::util {

/// Marks the heap object at `p` (and what it alone references) as leaked on purpose, so
/// that an AddressSanitizer build (-DLOL_SANITIZE=ON; LeakSanitizer at exit) does not
/// report it. A no-op in other builds. For objects whose destructor may block or crash,
/// left behind by a process that is about to exit with an error.
inline void leak_on_purpose(const void* p) {
#ifdef LOL_HAVE_LSAN
  if (p) __lsan_ignore_object(p);
#else
  (void)p;
#endif
}

}  // namespace lol::util
