// engine/reads.h — reading one document at an isolation level.
#pragma once

#include "engine/env.h"
#include "litetx/document.h"
#include "litetx/options.h"

namespace litetx::engine {

// Reads `key`. Read committed resolves a document held by a transaction through its
// ActiveTransaction record: committed -> the new image; pending or aborted -> the pre-image
// rebuilt from the worklist's reversing data. Returns the ReadResult, or kUnavailable,
// kCorruption (undecodable document or record, or a reference to a record that is gone).
// REQUIRES: the key was validated.
Result<ReadResult> ReadDocument(const Env& env, const Key& key, Isolation isolation);

}  // namespace litetx::engine
