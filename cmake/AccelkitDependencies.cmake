# Third-party packages, all from the distribution. LibTorch is found once here; its include
# directories are marked SYSTEM so its own warnings stay out of ours.
find_package(Torch REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)

include(AccelkitTorch)
