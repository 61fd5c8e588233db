// Tests that run CPU ranks need c10d's Gloo backend, which a build without Gloo's
// headers lacks (CMakeLists.txt LOL_C10D_GLOO; Python torch wheels ship none): there
// they are reported SKIPPED, and Communicator::connect's error is tested instead.
#pragma once
#include <gtest/gtest.h>

#ifdef LOL_C10D_GLOO
#define LOL_REQUIRE_GLOO() (void)0
#else
#define LOL_REQUIRE_GLOO() GTEST_SKIP() << "this LibTorch build has no Gloo headers: no CPU process groups"
#endif
