// doctest for suites that include LibTorch: LibTorch's logging header defines CHECK* macros
// (glog's, or c10's copy of them), and doctest's are the ones meant in the tests. That header
// is included here first, so its include guard keeps any LibTorch header included later from
// defining them again: this file may come before or after the suite's LibTorch headers.
#pragma once

#include <c10/util/Logging.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#include <doctest/doctest.h>
