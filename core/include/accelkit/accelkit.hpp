// The application API: include this one header. Everything a training or inference program
// uses from accelkit's core is reachable from here; plugin authors include the SDK's headers
// (accelkit/sdk/plugin.hpp and what it names) instead.
#pragma once

#include "accelkit/adamw_choice.hpp"
#include "accelkit/alignment.hpp"
#include "accelkit/atomic_file.hpp"
#include "accelkit/autotune.hpp"
#include "accelkit/context.hpp"
#include "accelkit/inference.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/log.hpp"
#include "accelkit/loss_scaler.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/negotiation.hpp"
#include "accelkit/pci.hpp"
#include "accelkit/memory_scope.hpp"
#include "accelkit/prefetch.hpp"
#include "accelkit/quantize.hpp"
#include "accelkit/readings.hpp"
#include "accelkit/tensor_cache.hpp"
#include "accelkit/trace.hpp"
#include "accelkit/routing.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/step_runner.hpp"
#include "accelkit/train_config.hpp"
#include "accelkit/version.hpp"
