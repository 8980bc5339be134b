// doctest for suites that include LibTorch: LibTorch's glog defines CHECK* macros, and
// doctest's are the ones meant in the tests. Include after every LibTorch header.
#pragma once

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#include <doctest/doctest.h>
