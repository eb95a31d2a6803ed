// litetx/batch.h — chunk-oriented batch processing on litetx transactions (component
// litetx::batch): steps with retry, skip and recover, restartable exactly once.
// See docs/batch.md.
#pragma once

#include "litetx/batch/item.h"     // IWYU pragma: export
#include "litetx/batch/policy.h"   // IWYU pragma: export
#include "litetx/batch/readers.h"  // IWYU pragma: export
#include "litetx/batch/step.h"     // IWYU pragma: export
