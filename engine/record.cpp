#include "engine/record.h"

#include <boost/json.hpp>

#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

const char* PriorName(Prior p) {
  switch (p) {
    case Prior::kAbsent: return "absent";
    case Prior::kGone: return "gone";
    case Prior::kDeleted: return "deleted";
    case Prior::kLive: return "live";
  }
  return "?";
}

std::optional<Prior> ParsePrior(std::string_view s) {
  if (s == "absent") return Prior::kAbsent;
  if (s == "gone") return Prior::kGone;
  if (s == "deleted") return Prior::kDeleted;
  if (s == "live") return Prior::kLive;
  return std::nullopt;
}

namespace {

json::array StringArray(const std::vector<std::string>& v) {
  json::array a;
  a.reserve(v.size());
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

bool ReadStringArray(const json::object& o, std::string_view name, std::vector<std::string>& out) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return true;
  if (!v->is_array()) return false;
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) return false;
    out.emplace_back(e.get_string().data(), e.get_string().size());
  }
  return true;
}

bool ReadObject(const json::object& o, std::string_view name, json::object& out) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return true;
  if (!v->is_object()) return false;
  out = v->get_object();
  return true;
}

Result<WorkAction> DecodeAction(const json::value& v) {
  auto bad = [](const char* what) { return Status::Corruption(std::string("worklist action: ") + what); };
  if (!v.is_object()) return bad("not an object");
  const json::object& o = v.get_object();
  WorkAction a;
  const json::value* op = o.if_contains("op");
  const json::value* c = o.if_contains("c");
  const json::value* id = o.if_contains("id");
  const json::value* prior = o.if_contains("prior");
  if (op == nullptr || !op->is_string() || c == nullptr || !c->is_string() || id == nullptr ||
      !id->is_string() || prior == nullptr || !prior->is_string()) {
    return bad("missing op, c, id or prior");
  }
  std::string_view ops = op->get_string();
  if (ops == "insert") a.type = ActionType::kInsert;
  else if (ops == "update") a.type = ActionType::kUpdate;
  else if (ops == "adjust") a.type = ActionType::kAdjust;
  else if (ops == "delete") a.type = ActionType::kDelete;
  else return bad("unknown op");
  a.key = {std::string(c->get_string()), std::string(id->get_string())};
  // A worklist only ever names user documents: a damaged or hand-made record must not make a
  // repairer write into litetx's own collections (or under a name no commit accepts).
  if (!ValidateCollection(a.key.collection).ok() || !ValidateId(a.key.id).ok()) {
    return bad("names an invalid or reserved collection or id");
  }
  auto parsed_prior = ParsePrior(prior->get_string());
  if (!parsed_prior) return bad("unknown prior state");
  a.prior = *parsed_prior;
  const json::value* pv = o.if_contains("pv");
  const json::value* psv = o.if_contains("psv");
  if (pv == nullptr || psv == nullptr) return bad("missing pv or psv");
  auto pv_n = json::try_value_to<std::uint64_t>(*pv);
  auto psv_n = json::try_value_to<std::uint32_t>(*psv);
  if (!pv_n || !psv_n) return bad("pv/psv are not unsigned integers");
  a.prior_version = *pv_n;
  a.prior_schema = *psv_n;
  if (const json::value* sv = o.if_contains("sv")) {
    auto sv_n = json::try_value_to<std::uint32_t>(*sv);
    if (!sv_n) return bad("sv is not an unsigned integer");
    a.schema_version = *sv_n;
  }
  if (!ReadObject(o, "fields", a.fields) || !ReadObject(o, "restore", a.restore) ||
      !ReadStringArray(o, "unset", a.unset) || !ReadStringArray(o, "remove", a.remove)) {
    return bad("fields/restore/unset/remove have the wrong type");
  }
  if (const json::value* rev = o.if_contains("rev")) {
    auto rev_n = json::try_value_to<std::uint64_t>(*rev);
    if (!rev_n) return bad("rev is not an unsigned integer");
    a.existed = true;
    a.read_revision = *rev_n;
  }
  return a;
}

}  // namespace

const char* TxnStateName(TxnState state) {
  switch (state) {
    case TxnState::kPending: return "pending";
    case TxnState::kCommitted: return "committed";
    case TxnState::kAborted: return "aborted";
    case TxnState::kStaging: return "staging";
  }
  return "?";
}

const WorkAction* TxnRecord::Find(const Key& key) const {
  for (const auto& a : actions) {
    if (a.key == key) return &a;
  }
  return nullptr;
}

json::object EncodeRecord(const TxnRecord& r) {
  json::object o;
  o.reserve(11);
  o["state"] = TxnStateName(r.state);
  o["created"] = r.created_ms;
  o["gc_at"] = r.gc_at_ms;
  if (r.priority_ms != r.created_ms) o["prio"] = r.priority_ms;
  if (!r.aborted_by.empty()) o["by"] = r.aborted_by;
  if (r.done) {
    o["done"] = true;
    o["done_at"] = r.done_at_ms;
  }
  if (r.fence) o["fence"] = true;
  if (!r.tomb_keys.empty()) {
    json::array tk;
    tk.reserve(r.tomb_keys.size());
    for (const Key& k : r.tomb_keys) {
      tk.emplace_back(json::array{json::string(k.collection), json::string(k.id)});
    }
    o["tk"] = std::move(tk);
  }
  if (r.large) {
    o["large"] = true;
    o["chunks"] = r.chunks;
  }
  json::array actions;
  actions.reserve(r.actions.size());
  for (const auto& a : r.actions) {
    json::object e;
    e.reserve(12);
    e["op"] = ActionTypeName(a.type);
    e["c"] = a.key.collection;
    e["id"] = a.key.id;
    e["prior"] = PriorName(a.prior);
    e["pv"] = a.prior_version;
    e["psv"] = a.prior_schema;
    if (!a.fields.empty()) e["fields"] = a.fields;
    if (!a.unset.empty()) e["unset"] = StringArray(a.unset);
    if (a.schema_version) e["sv"] = *a.schema_version;
    if (!a.restore.empty()) e["restore"] = a.restore;
    if (!a.remove.empty()) e["remove"] = StringArray(a.remove);
    if (a.existed) e["rev"] = a.read_revision;
    actions.emplace_back(std::move(e));
  }
  o["actions"] = std::move(actions);
  return o;
}

void DropReversingData(json::object& encoded) {
  json::value* actions = encoded.if_contains("actions");
  if (actions == nullptr || !actions->is_array()) return;
  for (json::value& a : actions->get_array()) {
    json::object* o = a.if_object();
    if (o == nullptr) continue;
    for (std::string_view name : {"fields", "unset", "restore", "remove"}) o->erase(name);
  }
}

Result<TxnRecord> DecodeRecord(const json::object& o) {
  TxnRecord r;
  const json::value* state = o.if_contains("state");
  if (state == nullptr || !state->is_string()) return Status::Corruption("record has no state");
  std::string_view s = state->get_string();
  if (s == "pending") r.state = TxnState::kPending;
  else if (s == "committed") r.state = TxnState::kCommitted;
  else if (s == "aborted") r.state = TxnState::kAborted;
  else if (s == "staging") r.state = TxnState::kStaging;
  else return Status::Corruption("record has an unknown state");
  const json::value* created = o.if_contains("created");
  const json::value* gc_at = o.if_contains("gc_at");
  if (created == nullptr || gc_at == nullptr) return Status::Corruption("record lacks timestamps");
  auto c = json::try_value_to<std::int64_t>(*created);
  auto g = json::try_value_to<std::int64_t>(*gc_at);
  if (!c || !g) return Status::Corruption("record timestamps are not integers");
  r.created_ms = *c;
  r.gc_at_ms = *g;
  r.priority_ms = r.created_ms;
  if (const json::value* prio = o.if_contains("prio")) {
    auto p = json::try_value_to<std::int64_t>(*prio);
    if (!p) return Status::Corruption("record prio is not an integer");
    r.priority_ms = *p;
  }
  if (const json::value* by = o.if_contains("by")) {
    if (!by->is_string()) return Status::Corruption("record field by is not a string");
    r.aborted_by = std::string(by->get_string());
  }
  if (const json::value* done = o.if_contains("done")) {
    const json::value* done_at = o.if_contains("done_at");
    if (!done->is_bool() || done_at == nullptr) return Status::Corruption("record done marker is malformed");
    auto t = json::try_value_to<std::int64_t>(*done_at);
    if (!t) return Status::Corruption("record done_at is not an integer");
    r.done = done->get_bool();
    r.done_at_ms = *t;
  }
  if (const json::value* fence = o.if_contains("fence")) {
    if (!fence->is_bool()) return Status::Corruption("record field fence is not a boolean");
    r.fence = fence->get_bool();
  }
  if (const json::value* tk = o.if_contains("tk")) {
    if (!tk->is_array()) return Status::Corruption("record field tk is not an array");
    for (const json::value& e : tk->get_array()) {
      const json::array* pair = e.if_array();
      if (pair == nullptr || pair->size() != 2 || !(*pair)[0].is_string() ||
          !(*pair)[1].is_string()) {
        return Status::Corruption("record field tk holds a malformed key");
      }
      r.tomb_keys.push_back(
          Key{std::string((*pair)[0].get_string()), std::string((*pair)[1].get_string())});
    }
  }
  if (const json::value* large = o.if_contains("large")) {
    const json::value* chunks = o.if_contains("chunks");
    if (!large->is_bool() || chunks == nullptr) {
      return Status::Corruption("record large marker is malformed");
    }
    auto n = json::try_value_to<std::uint64_t>(*chunks);
    if (!n) return Status::Corruption("record chunks is not an unsigned integer");
    r.large = large->get_bool();
    r.chunks = *n;
  }
  const json::value* actions = o.if_contains("actions");
  if (actions == nullptr || !actions->is_array()) return Status::Corruption("record has no actions");
  for (const auto& v : actions->get_array()) {
    auto a = DecodeAction(v);
    if (!a.ok()) return a.status();
    r.actions.push_back(std::move(a).value());
  }
  return r;
}

}  // namespace litetx::engine
