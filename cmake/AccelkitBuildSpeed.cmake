# How accelkit's own build avoids paying for LibTorch's headers over and over: nearly every unit
# includes LibTorch headers that take 3-15 s to parse (torch/types.h, torch/nn/module.h), often
# more than the unit's own code. Measured levers (bench/results/build-time.md):
#
# accelkit_unity(<target>): the target's sources compiled in combined units of up to 8 (CMake's
#   unity build), so the headers are parsed once per batch. For the core, the applications'
#   libraries and the plugins, whose sources are written to combine (no clashing file-local
#   names; a unit with definitions of its own sets SKIP_UNITY_BUILD_INCLUSION).
#   Off with -DACCELKIT_UNITY=OFF. -DACCELKIT_UNITY_BATCH=N sets the batch (0: each target's
#   sources in one unit: fewest parses, the quick start's choice; 8 keeps a developer's
#   rebuild after an edit short).
# accelkit_test_code(<target>): a test suite's own code at -O1 - its speed does not matter, the
#   code it tests keeps the build's optimisation.
# The test suites that parse LibTorch are compiled together, in unity batches, into two
#   executables (tests/CMakeLists.txt: accelkit_add_test(... GROUP g)); ctest still runs each
#   suite by name. ACCELKIT_TEST_BATCH sets the batch size.
#
# A precompiled <torch/torch.h> was measured too and left out: loading the 570 MB header costs
# about 6 s a unit on this hardware, as much as it saves for all but the heaviest units.
include_guard(GLOBAL)
option(ACCELKIT_UNITY "Compile accelkit's libraries and plugins as unity builds" ON)
set(ACCELKIT_UNITY_BATCH 8 CACHE STRING "Sources per unity unit (0: all of a target's sources in one)")
if(NOT ACCELKIT_UNITY_BATCH MATCHES "^[0-9]+$")
  message(FATAL_ERROR "ACCELKIT_UNITY_BATCH is '${ACCELKIT_UNITY_BATCH}': a number of sources (0 = all in one unit)")
endif()

function(accelkit_unity target)
  if(ACCELKIT_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ACCELKIT_UNITY_BATCH})
  endif()
endfunction()

function(accelkit_test_code target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  endif()
endfunction()
