# The tensor cache (core/data/include/accelkit/tensor_cache.hpp): an executable of its own, outside
# the groups, since its cases fork writers and kill them.
accelkit_add_test(tensor_cache_test SOURCES core/data/tensor_cache_test.cpp LINK accelkit_core)
# lz4frame.h: the suite crafts entries of its own.
target_link_libraries(tensor_cache_test PRIVATE accelkit_lz4)
set_tests_properties(tensor_cache_test PROPERTIES TIMEOUT 300)
