// engine/validate.h — input validation of a whole transaction, before anything is written.
#pragma once

#include "litetx/options.h"
#include "litetx/status.h"
#include "litetx/transaction.h"

namespace litetx::engine {

// OK, or kInvalidArgument naming the first problem ("action 2 (update c/x): ..."): empty or
// oversized transaction, bad collection or id, a document named twice, reserved fields,
// set/unset overlap, non-numeric adjust deltas, a check without expected version, fields on
// a delete or check.
Status ValidateTransaction(const Transaction& txn, const Options& options);

}  // namespace litetx::engine
