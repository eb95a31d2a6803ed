#include "engine/validate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <boost/json.hpp>

#include "engine/json_text.h"
#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

std::size_t MaxNestingDepth(const Options& options) {
  return std::clamp<std::size_t>(options.max_nesting_depth, 1, kMaxNestingDepth);
}

Status ValidateFields(const json::object& fields, const Options& options) {
  const std::size_t limit = MaxNestingDepth(options);
  for (const auto& kv : fields) {
    switch (CheckJson(kv.value(), 2, limit, /*finite_only=*/true)) {
      case JsonProblem::kNone:
        break;
      case JsonProblem::kTooDeep:
        return Status::InvalidArgument(
            "field \"" + std::string(kv.key()) + "\" nests objects and arrays deeper than " +
            std::to_string(limit) +
            " levels (the document is level 1; the limit is Options::max_nesting_depth)");
      case JsonProblem::kNotFinite:
        return Status::InvalidArgument("field \"" + std::string(kv.key()) +
                                       "\" holds a number that is not finite (NaN or an "
                                       "infinity, which JSON cannot store)");
    }
  }
  return Status::Ok();
}

namespace {

Status CheckAction(const Action& a, const Options& options) {
  if (Status s = ValidateCollection(a.key.collection); !s.ok()) return s;
  if (Status s = ValidateId(a.key.id); !s.ok()) return s;
  for (const auto& kv : a.fields) {
    if (IsReservedField(kv.key())) {
      return Status::InvalidArgument("field \"" + std::string(kv.key()) +
                                     "\" is reserved (names starting with _ltx belong to litetx)");
    }
  }
  for (const auto& f : a.unset) {
    if (IsReservedField(f)) {
      return Status::InvalidArgument("field \"" + f + "\" is reserved (names starting with _ltx "
                                     "belong to litetx)");
    }
  }
  if (a.type == ActionType::kInsert || a.type == ActionType::kUpdate) {
    if (Status s = ValidateFields(a.fields, options); !s.ok()) return s;
  }
  switch (a.type) {
    case ActionType::kInsert:
      if (!a.unset.empty()) return Status::InvalidArgument("an insert cannot unset fields");
      if (a.expected_version) {
        return Status::InvalidArgument("an insert takes no expected version");
      }
      break;
    case ActionType::kUpdate:
      for (const auto& f : a.unset) {
        if (a.fields.contains(f)) {
          return Status::InvalidArgument("field \"" + f + "\" is both set and unset");
        }
      }
      break;
    case ActionType::kAdjust:
      if (a.fields.empty()) return Status::InvalidArgument("an adjust needs at least one field");
      if (!a.unset.empty()) return Status::InvalidArgument("an adjust cannot unset fields");
      for (const auto& kv : a.fields) {
        const json::value& v = kv.value();
        if (!v.is_number() || (v.is_double() && !std::isfinite(v.get_double()))) {
          return Status::InvalidArgument("adjust delta for field \"" + std::string(kv.key()) +
                                         "\" is not a finite number");
        }
      }
      break;
    case ActionType::kDelete:
    case ActionType::kCheck:
      if (!a.fields.empty() || !a.unset.empty()) {
        return Status::InvalidArgument(std::string("a ") + ActionTypeName(a.type) +
                                       " takes no fields");
      }
      if (a.type == ActionType::kCheck && !a.expected_version) {
        return Status::InvalidArgument("a check needs an expected version");
      }
      break;
  }
  if (a.schema_version && a.type != ActionType::kInsert && a.type != ActionType::kUpdate) {
    return Status::InvalidArgument("only inserts and updates set a schema version");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateAction(const Action& action, const Options& options) {
  return CheckAction(action, options);
}

Status ValidateTransaction(const Transaction& txn, const Options& options) {
  if (txn.empty()) return Status::InvalidArgument("the transaction has no actions");
  if (txn.size() > options.max_actions) {
    return Status::InvalidArgument("the transaction has " + std::to_string(txn.size()) +
                                   " actions, over the limit of " +
                                   std::to_string(options.max_actions));
  }
  std::set<Key> seen;
  for (std::size_t i = 0; i < txn.size(); ++i) {
    const Action& a = txn.actions()[i];
    Status s = CheckAction(a, options);
    if (s.ok() && !seen.insert(a.key).second) {
      s = Status::InvalidArgument("the document is named by an earlier action; combine the "
                                  "changes into one action");
    }
    if (!s.ok()) {
      return Status::InvalidArgument("action " + std::to_string(i) + " (" +
                                     ActionTypeName(a.type) + " " + a.key.collection + "/" +
                                     a.key.id + "): " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace litetx::engine
