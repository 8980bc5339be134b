# accelkit_bench_prefetch: accelkit::Prefetcher vs producing each batch in the step.
add_executable(accelkit_bench_prefetch "${CMAKE_CURRENT_LIST_DIR}/prefetch_bench.cpp")
target_link_libraries(accelkit_bench_prefetch PRIVATE accelkit_torch)
target_include_directories(accelkit_bench_prefetch PRIVATE "${PROJECT_SOURCE_DIR}/core/data/include")
accelkit_warnings(accelkit_bench_prefetch)
set_target_properties(accelkit_bench_prefetch PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")

# accelkit_bench_mnist_prefetch: pytorch/examples' C++ MNIST loop with and without prefetch_loader.
add_executable(accelkit_bench_mnist_prefetch "${CMAKE_CURRENT_LIST_DIR}/mnist_prefetch_bench.cpp")
target_link_libraries(accelkit_bench_mnist_prefetch PRIVATE accelkit_torch)
target_include_directories(accelkit_bench_mnist_prefetch PRIVATE "${PROJECT_SOURCE_DIR}/core/data/include")
accelkit_warnings(accelkit_bench_mnist_prefetch)
# LibTorch's DataLoader headers trip gcc's -Wmaybe-uninitialized (as in tests/prefetch.cmake).
target_compile_options(accelkit_bench_mnist_prefetch PRIVATE "$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
set_target_properties(accelkit_bench_mnist_prefetch PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")

# accelkit_bench_mnist_program: pytorch/examples' C++ MNIST program as written, hand-tuned, and
# ported with the README's API on the default settings (accuracy compared).
add_executable(accelkit_bench_mnist_program "${CMAKE_CURRENT_LIST_DIR}/mnist_program_bench.cpp")
target_link_libraries(accelkit_bench_mnist_program PRIVATE accelkit::core)
accelkit_warnings(accelkit_bench_mnist_program)
target_compile_options(accelkit_bench_mnist_program PRIVATE "$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
set_target_properties(accelkit_bench_mnist_program PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
# accelkit_bench_resnet_program: a ResNet-20 CIFAR program (Adam, StepLR, flips in the loop) as
# written, hand-tuned, and ported with Runtime::prepare(model, optimizer) and Runtime::step.
add_executable(accelkit_bench_resnet_program "${CMAKE_CURRENT_LIST_DIR}/resnet_program_bench.cpp")
target_link_libraries(accelkit_bench_resnet_program PRIVATE accelkit::core)
accelkit_warnings(accelkit_bench_resnet_program)
set_target_properties(accelkit_bench_resnet_program PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
# accelkit_bench_dcgan_program: pytorch/examples' C++ DCGAN program (two networks, two Adam) as
# written, hand-tuned, and ported with Runtime::prepare(model, optimizer) and Runtime::step.
add_executable(accelkit_bench_dcgan_program "${CMAKE_CURRENT_LIST_DIR}/dcgan_program_bench.cpp")
target_link_libraries(accelkit_bench_dcgan_program PRIVATE accelkit::core)
accelkit_warnings(accelkit_bench_dcgan_program)
set_target_properties(accelkit_bench_dcgan_program PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
