#include "engine/worklist.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include <boost/json.hpp>

namespace litetx::engine {
namespace json = boost::json;

namespace {

__extension__ typedef __int128 Int128;

std::string Where(const Key& k) { return k.collection + "/" + k.id; }

// a + b for JSON numbers: integers stay exact (int64, or uint64 when positive and large);
// otherwise double. kFailedPrecondition on overflow or a non-finite result.
Result<json::value> AddNumbers(const json::value& a, const json::value& b, const Key& key,
                               std::string_view field) {
  auto fail = [&](const char* why) {
    return Status::FailedPrecondition("adjust of " + Where(key) + " field \"" +
                                      std::string(field) + "\": " + why);
  };
  if (!a.is_number()) return fail("the field is not a number");
  if (a.is_double() || b.is_double()) {
    double sum = a.to_number<double>() + b.to_number<double>();
    if (!std::isfinite(sum)) return fail("the result is not finite");
    return json::value(sum);
  }
  auto wide = [](const json::value& v) -> Int128 {
    return v.is_int64() ? static_cast<Int128>(v.get_int64())
                        : static_cast<Int128>(v.get_uint64());
  };
  Int128 sum = wide(a) + wide(b);
  if (sum >= std::numeric_limits<std::int64_t>::min() &&
      sum <= std::numeric_limits<std::int64_t>::max()) {
    return json::value(static_cast<std::int64_t>(sum));
  }
  if (sum > 0 && sum <= static_cast<Int128>(std::numeric_limits<std::uint64_t>::max())) {
    return json::value(static_cast<std::uint64_t>(sum));
  }
  return fail("the result overflows a 64-bit integer");
}

// Stores `w`'s reversing data in the held image (see UndoOf).
void AttachUndo(json::object& held, const WorkAction& w) {
  json::object u;
  u.reserve(5);
  u["p"] = PriorName(w.prior);
  u["pv"] = w.prior_version;
  u["psv"] = w.prior_schema;
  if (!w.restore.empty()) u["r"] = w.restore;
  if (!w.remove.empty()) {
    json::array m;
    for (const auto& f : w.remove) m.emplace_back(f);
    u["m"] = std::move(m);
  }
  held[kMetaField].as_object()["u"] = std::move(u);
}

}  // namespace

std::uint64_t FirstVersion(std::int64_t now_ms) {
  constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max() / 1000;
  return now_ms > 0 ? static_cast<std::uint64_t>(std::min(now_ms, kMaxMs)) * 1000 : 1;
}

namespace {

// Prepare, which takes the body of `current` from *take (current's own value, or null: copied).
Result<Prepared> PrepareFrom(const Action& action, const std::optional<StoredDocument>& current,
                             json::object* take, const std::string& txn,
                             std::uint32_t default_schema, std::uint64_t first_version,
                             bool final_only) {
  Meta meta;
  Prior prior = Prior::kAbsent;
  if (current) {
    auto m = DecodeMeta(current->value);
    if (!m.ok()) return Status::Corruption(Where(action.key) + ": " + m.status().message());
    meta = std::move(m).value();
    prior = meta.deleted ? Prior::kDeleted : meta.gone ? Prior::kGone : Prior::kLive;
  }

  Prepared p;
  WorkAction& w = p.work;
  w.type = action.type;
  w.key = action.key;
  w.prior = prior;
  w.prior_version = meta.version;
  w.prior_schema = meta.schema_version;

  if (action.type == ActionType::kInsert) {
    if (prior == Prior::kLive) {
      return Status::Conflict("insert of " + Where(action.key) + ": the document exists")
          .WithCurrentVersion(meta.version);
    }
  } else {
    if (prior == Prior::kAbsent || prior == Prior::kGone) {
      return Status::NotFound(std::string(ActionTypeName(action.type)) + " of " +
                              Where(action.key) + ": no such document");
    }
    if (prior == Prior::kDeleted) {
      return Status::Deleted(std::string(ActionTypeName(action.type)) + " of " +
                             Where(action.key) + ": the document is deleted");
    }
    if (action.expected_version && *action.expected_version != meta.version) {
      return Status::Conflict(std::string(ActionTypeName(action.type)) + " of " +
                              Where(action.key) + ": expected version " +
                              std::to_string(*action.expected_version) + ", found " +
                              std::to_string(meta.version))
          .WithCurrentVersion(meta.version);
    }
  }
  if (action.type == ActionType::kCheck) {
    p.final_version = meta.version;
    return p;
  }

  // A write adds at most 2 to the version (a delete's tombstone, a rollback): refuse to wrap.
  if (meta.version > std::numeric_limits<std::uint64_t>::max() - 2) {
    return Status::FailedPrecondition(Where(action.key) + ": its version counter is exhausted");
  }
  // Taken over, the body is not copied: only "_ltx" is dropped. (Boost.JSON's erase moves the
  // last field into the gap, so the field order is kept only when "_ltx" is last, as the engine
  // writes it; otherwise the body is copied in order.)
  json::object body;
  json::object old_meta;  // the taken-over "_ltx": the new one is written over its memory
  if (current && action.type != ActionType::kInsert) {
    if (take != nullptr && !take->empty() && std::prev(take->end())->key() == kMetaField) {
      body = std::move(*take);
      old_meta = TakeMeta(body);
    } else {
      body = UserFields(current->value);
    }
  }
  Meta held;
  // An insert with no version to continue from (absent, or a placeholder at 0) starts at
  // first_version, above anything the id had before its history was purged.
  held.version = action.type == ActionType::kInsert && meta.version == 0
                     ? std::max<std::uint64_t>(first_version, 1)
                     : meta.version + 1;
  held.schema_version = meta.schema_version;
  held.txn = txn;
  held.last_writer = txn;

  switch (action.type) {
    case ActionType::kInsert:
      body = action.fields;
      if (!final_only) w.fields = action.fields;
      w.schema_version = action.schema_version.value_or(default_schema);
      held.schema_version = *w.schema_version;
      break;
    case ActionType::kUpdate:
      if (!final_only) {
        w.fields = action.fields;
        w.unset = action.unset;
      }
      w.schema_version = action.schema_version;
      for (const auto& kv : action.fields) {
        if (const json::value* old = body.if_contains(kv.key())) {
          if (!final_only) w.restore[kv.key()] = *old;
        } else if (!final_only) {
          w.remove.emplace_back(kv.key());
        }
        body[kv.key()] = kv.value();
      }
      for (const auto& f : action.unset) {
        if (const json::value* old = body.if_contains(f)) {
          if (!final_only) w.restore[f] = *old;
          body.erase(f);
        }
      }
      if (action.schema_version) held.schema_version = *action.schema_version;
      break;
    case ActionType::kAdjust:
      if (!final_only) w.fields = action.fields;
      for (const auto& kv : action.fields) {
        json::value* old = body.if_contains(kv.key());
        if (old == nullptr) {
          return Status::FailedPrecondition("adjust of " + Where(action.key) + ": field \"" +
                                            std::string(kv.key()) + "\" does not exist");
        }
        auto sum = AddNumbers(*old, kv.value(), action.key, kv.key());
        if (!sum.ok()) return sum.status();
        if (!final_only) w.restore[kv.key()] = *old;
        *old = std::move(sum).value();
      }
      break;
    case ActionType::kDelete:
      held.deleting = true;
      break;
    case ActionType::kCheck:
      break;
  }
  p.final_version = action.type == ActionType::kDelete ? held.version + 1 : held.version;
  if (final_only) {
    Meta m = held;
    m.txn.clear();
    if (m.deleting) {
      m.deleting = false;
      m.deleted = true;
      m.version = p.final_version;
      body = json::object{};
    }
    p.final = MakeStored(std::move(body), m, std::move(old_meta));
    p.work = WorkAction{};
    return p;
  }
  p.held = MakeStored(std::move(body), held, std::move(old_meta));
  p.meta = std::move(held);
  AttachUndo(p.held, w);
  return p;
}

}  // namespace

Result<Prepared> Prepare(const Action& action, const std::optional<StoredDocument>& current,
                         const std::string& txn, std::uint32_t default_schema,
                         std::uint64_t first_version, bool final_only) {
  return PrepareFrom(action, current, nullptr, txn, default_schema, first_version, final_only);
}

Result<Prepared> Prepare(const Action& action, std::optional<StoredDocument>&& current,
                         const std::string& txn, std::uint32_t default_schema,
                         std::uint64_t first_version, bool final_only) {
  json::object* take = current ? &current->value : nullptr;
  return PrepareFrom(action, current, take, txn, default_schema, first_version, final_only);
}

std::int64_t HoldDeadline(const json::object& held) {
  const json::value* mv = held.if_contains(kMetaField);
  if (mv == nullptr || !mv->is_object()) return 0;
  const json::value* u = mv->get_object().if_contains("u");
  if (u == nullptr || !u->is_object()) return 0;
  const json::value* x = u->get_object().if_contains("x");
  if (x == nullptr) return 0;
  auto n = json::try_value_to<std::int64_t>(*x);
  return n ? *n : 0;
}

void SetHoldDeadline(json::object& held, std::int64_t deadline_ms) {
  held[kMetaField].as_object()["u"].as_object()["x"] = deadline_ms;
}

Result<WorkAction> UndoOf(const Key& key, const json::object& held) {
  auto bad = [&](const char* why) {
    return Status::Corruption(Where(key) + ": undo data " + why);
  };
  const json::value* mv = held.if_contains(kMetaField);
  const json::value* u = mv != nullptr && mv->is_object() ? mv->get_object().if_contains("u") : nullptr;
  if (u == nullptr) return bad("missing (written by an older litetx)");
  if (!u->is_object()) return bad("is not an object");
  const json::object& o = u->get_object();
  WorkAction w;
  w.key = key;
  const json::value* p = o.if_contains("p");
  std::optional<Prior> prior;
  if (p != nullptr && p->is_string()) prior = ParsePrior(p->get_string());
  if (!prior) return bad("has no valid prior state");
  w.prior = *prior;
  w.type = w.prior == Prior::kLive ? ActionType::kUpdate : ActionType::kInsert;
  const json::value* pv = o.if_contains("pv");
  const json::value* psv = o.if_contains("psv");
  if (pv == nullptr || psv == nullptr) return bad("has no prior version");
  auto pv_n = json::try_value_to<std::uint64_t>(*pv);
  auto psv_n = json::try_value_to<std::uint32_t>(*psv);
  if (!pv_n || !psv_n) return bad("has no valid prior version");
  w.prior_version = *pv_n;
  w.prior_schema = *psv_n;
  if (const json::value* r = o.if_contains("r")) {
    if (!r->is_object()) return bad("restore is not an object");
    for (const auto& kv : r->get_object()) {
      if (IsReservedField(kv.key())) return bad("restore names a reserved field");
    }
    w.restore = r->get_object();
  }
  if (const json::value* m = o.if_contains("m")) {
    if (!m->is_array()) return bad("remove is not an array");
    for (const json::value& f : m->get_array()) {
      if (!f.is_string()) return bad("remove names a non-string");
      if (IsReservedField(f.get_string())) return bad("remove names a reserved field");
      w.remove.emplace_back(f.get_string());
    }
  }
  return w;
}

namespace {

// The metadata of Finished.
Meta FinishedMeta(const Meta& meta) {
  Meta m = meta;
  m.txn.clear();
  if (meta.deleting) {
    m.deleting = false;
    m.deleted = true;
    m.version = meta.version + 1;
  }
  return m;
}

// The metadata of Reversed; sets *keep_body if the body stays (with `work`'s restores).
Meta ReversedMeta(const Meta& meta, const WorkAction& work, bool* keep_body) {
  Meta m;
  m.version = meta.version + 1;
  m.schema_version = work.prior_schema;
  *keep_body = true;
  if (work.type == ActionType::kInsert) {
    *keep_body = false;
    if (work.prior == Prior::kDeleted) {
      m.deleted = true;
    } else {
      m.gone = true;
    }
  }
  return m;
}

// `body` (user fields, or a held image) with `work`'s removed fields erased and restored ones
// written back, when `work` is an update or adjust.
void Restore(json::object& body, const WorkAction& work) {
  if (work.type != ActionType::kUpdate && work.type != ActionType::kAdjust) return;
  for (const auto& f : work.remove) body.erase(f);
  for (const auto& kv : work.restore) body[kv.key()] = kv.value();
}

}  // namespace

json::object Finished(const json::object& held, const Meta& meta) {
  const Meta m = FinishedMeta(meta);
  if (meta.deleting) return MakeStored(json::object{}, m);
  return MakeStored(UserFields(held), m);
}

json::object Finished(json::object&& held, const Meta& meta) {
  const Meta m = FinishedMeta(meta);
  json::object reuse = TakeMeta(held);
  if (meta.deleting) return MakeStored(json::object{}, m, std::move(reuse));
  return MakeStored(UserFields(std::move(held)), m, std::move(reuse));
}

json::object Reversed(const json::object& held, const Meta& meta, const WorkAction& work) {
  bool keep_body = true;
  const Meta m = ReversedMeta(meta, work, &keep_body);
  if (!keep_body) return MakeStored(json::object{}, m);
  json::object body = UserFields(held);
  Restore(body, work);
  return MakeStored(std::move(body), m);
}

json::object Reversed(json::object&& held, const Meta& meta, const WorkAction& work) {
  bool keep_body = true;
  const Meta m = ReversedMeta(meta, work, &keep_body);
  json::object reuse = TakeMeta(held);
  if (!keep_body) return MakeStored(json::object{}, m, std::move(reuse));
  json::object body = UserFields(std::move(held));
  Restore(body, work);
  return MakeStored(std::move(body), m, std::move(reuse));
}

ReadResult PreImage(const json::object& held, const WorkAction& work) {
  ReadResult r;
  r.version = work.prior_version;
  r.schema_version = work.prior_schema;
  switch (work.prior) {
    case Prior::kAbsent:
    case Prior::kGone:
      r.state = DocumentState::kNotFound;
      r.version = 0;
      r.schema_version = 0;
      return r;
    case Prior::kDeleted:
      r.state = DocumentState::kDeleted;
      r.schema_version = 0;
      return r;
    case Prior::kLive:
      break;
  }
  r.state = DocumentState::kFound;
  r.doc = UserFields(held);
  for (const auto& f : work.remove) r.doc.erase(f);
  for (const auto& kv : work.restore) r.doc[kv.key()] = kv.value();
  return r;
}

ReadResult CommittedImage(const json::object& stored, const Meta& meta) {
  ReadResult r;
  if (meta.gone) return r;  // not found
  if (meta.deleted || meta.deleting) {
    r.state = DocumentState::kDeleted;
    // A committed delete not yet turned into a tombstone reads as the tombstone will.
    r.version = meta.deleted ? meta.version : meta.version + 1;
    r.last_writer = meta.last_writer;
    return r;
  }
  r.state = DocumentState::kFound;
  r.version = meta.version;
  r.schema_version = meta.schema_version;
  r.doc = UserFields(stored);
  r.last_writer = meta.last_writer;
  return r;
}

}  // namespace litetx::engine
