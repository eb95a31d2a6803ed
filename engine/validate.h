// engine/validate.h — input validation of a whole transaction, before anything is written.
#pragma once

#include <cstddef>

#include <boost/json/object.hpp>

#include "litetx/options.h"
#include "litetx/status.h"
#include "litetx/transaction.h"

namespace litetx::engine {

// OK, or kInvalidArgument naming the first problem ("action 2 (update c/x): ..."): empty or
// oversized transaction, bad collection or id, a document named twice, reserved fields,
// set/unset overlap, non-numeric adjust deltas, a check without expected version, fields on
// a delete or check, and the problems of ValidateFields. Nothing in it recurses on the
// documents, so a document nested arbitrarily deep is refused without exhausting the stack.
Status ValidateTransaction(const Transaction& txn, const Options& options);

// OK, or kInvalidArgument naming the problem: one action checked as ValidateTransaction checks
// each of its actions (names, reserved fields, field values, deltas, versions).
Status ValidateAction(const Action& action, const Options& options);

// The nesting limit in force: Options::max_nesting_depth, raised to 1 if lower and lowered to
// kMaxNestingDepth (litetx/document.h) if higher.
std::size_t MaxNestingDepth(const Options& options);

// OK, or kInvalidArgument naming the field: the values of `fields` (an inserted document or
// the fields an update sets; `fields` itself is level 1) nest objects and arrays deeper than
// MaxNestingDepth(options), or hold a NaN or an infinity (JSON text cannot hold them). Checked
// with an explicit stack, before anything copies the fields.
Status ValidateFields(const boost::json::object& fields, const Options& options);

}  // namespace litetx::engine
