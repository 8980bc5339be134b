// The application API: include this one header.
#pragma once

#include "accelkit/context.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/log.hpp"
#include "accelkit/negotiation.hpp"
#include "accelkit/pci.hpp"
#include "accelkit/routing.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/step_runner.hpp"
#include "accelkit/version.hpp"
