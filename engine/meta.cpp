#include "engine/meta.h"

#include <iterator>
#include <string_view>

#include <boost/json.hpp>

#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

namespace {

bool ReadBool(const json::value* v, bool& out) {
  if (v == nullptr) {
    out = false;
    return true;
  }
  if (!v->is_bool()) return false;
  out = v->get_bool();
  return true;
}

bool ReadString(const json::value* v, std::string& out) {
  if (v == nullptr) {
    out.clear();
    return true;
  }
  if (!v->is_string()) return false;
  out.assign(v->get_string().data(), v->get_string().size());
  return true;
}

bool ReadString(const json::object& m, std::string_view name, std::string& out) {
  return ReadString(m.if_contains(name), out);
}

// The fields of an "_ltx" object, found in one pass over it (unknown names are ignored).
struct MetaFields {
  const json::value* v = nullptr;
  const json::value* sv = nullptr;
  const json::value* tx = nullptr;
  const json::value* dlg = nullptr;
  const json::value* del = nullptr;
  const json::value* gone = nullptr;
  const json::value* lw = nullptr;
  const json::value* at = nullptr;
  const json::value* lk = nullptr;
  const json::value* u = nullptr;

  explicit MetaFields(const json::object& m) {
    for (const json::key_value_pair& kv : m) {
      const std::string_view k = kv.key();
      const json::value* p = &kv.value();
      if (k == "v") v = p;
      else if (k == "sv") sv = p;
      else if (k == "tx") tx = p;
      else if (k == "lw") lw = p;
      else if (k == "dlg") dlg = p;
      else if (k == "del") del = p;
      else if (k == "gone") gone = p;
      else if (k == "at") at = p;
      else if (k == "lk") lk = p;
      else if (k == "u") u = p;
    }
  }
};

}  // namespace

Result<Meta> DecodeMeta(const json::object& stored) {
  const json::value* mv = stored.if_contains(kMetaField);
  if (mv == nullptr || !mv->is_object()) {
    return Status::Corruption("stored document has no \"_ltx\" metadata object");
  }
  const json::object& m = mv->get_object();
  const MetaFields f(m);
  Meta meta;
  const json::value* v = f.v;
  const json::value* sv = f.sv;
  if (v == nullptr || sv == nullptr) return Status::Corruption("metadata lacks v or sv");
  auto version = json::try_value_to<std::uint64_t>(*v);
  auto schema = json::try_value_to<std::uint32_t>(*sv);
  if (!version || !schema) return Status::Corruption("metadata v/sv are not unsigned integers");
  meta.version = *version;
  meta.schema_version = *schema;
  if (!ReadBool(f.dlg, meta.deleting) || !ReadBool(f.del, meta.deleted) ||
      !ReadBool(f.gone, meta.gone) || !ReadString(f.tx, meta.txn) ||
      !ReadString(f.lw, meta.last_writer)) {
    return Status::Corruption("metadata field has the wrong type");
  }
  if (const json::value* at = f.at) {
    auto at_ms = json::try_value_to<std::int64_t>(*at);
    if (!at_ms) return Status::Corruption("metadata at is not an integer");
    meta.at_ms = *at_ms;
  }
  if (const json::value* lk = f.lk) {
    if (!lk->is_array()) return Status::Corruption("metadata lk is not an array");
    for (const json::value& e : lk->get_array()) {
      const json::object* o = e.if_object();
      if (o == nullptr) return Status::Corruption("metadata lock entry is not an object");
      LockEntry entry;
      std::string mode;
      if (!ReadString(*o, "o", entry.owner) || !ReadString(*o, "m", mode) ||
          entry.owner.empty() || (mode != "r" && mode != "w")) {
        return Status::Corruption("metadata lock entry lacks its owner or mode");
      }
      entry.write = mode == "w";
      const json::value* x = o->if_contains("x");
      const json::value* p = o->if_contains("p");
      if (x == nullptr || p == nullptr) return Status::Corruption("metadata lock entry lacks x or p");
      auto xv = json::try_value_to<std::int64_t>(*x);
      auto pv = json::try_value_to<std::int64_t>(*p);
      if (!xv || !pv) return Status::Corruption("metadata lock entry x or p is not an integer");
      entry.expires_ms = *xv;
      entry.priority_ms = *pv;
      meta.locks.push_back(std::move(entry));
    }
  }
  if (const json::value* u = f.u) {
    // The hold's undo data (engine/worklist.h UndoOf): only on a held document.
    if (!u->is_object() || meta.txn.empty()) {
      return Status::Corruption("metadata u is not an object on a held document");
    }
  }
  if (meta.deleted && meta.gone) return Status::Corruption("metadata is both deleted and gone");
  return meta;
}

namespace {

// The names EncodeMeta writes for `meta` without locks, in its order; returns their count.
std::size_t MetaNames(const Meta& meta, std::string_view (&names)[8]) {
  std::size_t n = 0;
  names[n++] = "v";
  names[n++] = "sv";
  if (!meta.txn.empty()) names[n++] = "tx";
  if (meta.deleting) names[n++] = "dlg";
  if (meta.deleted) names[n++] = "del";
  if (meta.gone) names[n++] = "gone";
  if (!meta.last_writer.empty()) names[n++] = "lw";
  if (meta.at_ms != 0) names[n++] = "at";
  return n;
}

void SetString(json::value& v, const std::string& s) {
  if (json::string* str = v.if_string()) {
    str->assign(s.data(), s.size());  // keeps the buffer when it is large enough
  } else {
    v.emplace_string().assign(s.data(), s.size());
  }
}

// Overwrites the values of `m` with `meta` if `m` has exactly the names EncodeMeta would write,
// in its order (the common case: a document written again in the same state). No allocation.
bool Refill(json::object& m, const Meta& meta) {
  if (!meta.locks.empty()) return false;
  std::string_view names[8];
  const std::size_t n = MetaNames(meta, names);
  if (m.size() != n) return false;
  std::size_t i = 0;
  for (const json::key_value_pair& kv : m) {
    if (kv.key() != names[i++]) return false;
  }
  for (json::key_value_pair& kv : m) {
    const std::string_view k = kv.key();
    json::value& v = kv.value();
    if (k == "v") v.emplace_uint64() = meta.version;
    else if (k == "sv") v.emplace_uint64() = meta.schema_version;
    else if (k == "tx") SetString(v, meta.txn);
    else if (k == "lw") SetString(v, meta.last_writer);
    else if (k == "at") v.emplace_int64() = meta.at_ms;
    else v.emplace_bool() = true;  // dlg, del, gone: present only when set
  }
  return true;
}

// Clears `m` (keeping its table) and writes `meta` into it.
void Rebuild(json::object& m, const Meta& meta) {
  m.clear();
  std::string_view names[8];
  m.reserve(MetaNames(meta, names) + (meta.locks.empty() ? 0 : 1));
  m["v"] = meta.version;
  m["sv"] = meta.schema_version;
  if (!meta.txn.empty()) m["tx"] = meta.txn;
  if (meta.deleting) m["dlg"] = true;
  if (meta.deleted) m["del"] = true;
  if (meta.gone) m["gone"] = true;
  if (!meta.last_writer.empty()) m["lw"] = meta.last_writer;
  if (meta.at_ms != 0) m["at"] = meta.at_ms;
  if (!meta.locks.empty()) {
    json::array lk;
    lk.reserve(meta.locks.size());
    for (const LockEntry& e : meta.locks) {
      lk.push_back(json::object{{"o", e.owner}, {"m", e.write ? "w" : "r"},
                                {"x", e.expires_ms}, {"p", e.priority_ms}});
    }
    m["lk"] = std::move(lk);
  }
}

}  // namespace

void EncodeMeta(json::object& stored, const Meta& meta, json::object reuse) {
  json::value& slot = stored[kMetaField];
  if (json::object* cur = slot.if_object()) reuse = std::move(*cur);
  if (!Refill(reuse, meta)) Rebuild(reuse, meta);
  slot = std::move(reuse);
}

json::object TakeMeta(json::object& stored) {
  json::object meta;
  if (stored.empty() || std::prev(stored.end())->key() != kMetaField) return meta;
  auto last = std::prev(stored.end());
  if (json::object* o = last->value().if_object()) meta = std::move(*o);
  stored.erase(last);  // the last field: the others keep their order
  return meta;
}

void StampTombstoneTime(json::object& stored, std::int64_t now_ms) {
  json::value* mv = stored.if_contains(kMetaField);
  if (mv == nullptr || !mv->is_object()) return;
  json::object& m = mv->get_object();
  if (m.contains("del") || m.contains("gone")) m["at"] = now_ms;
}

json::object UserFields(const json::object& stored) {
  json::object out;
  out.reserve(stored.size());
  for (const auto& kv : stored) {
    if (kv.key() != kMetaField) out.emplace(kv.key(), kv.value());
  }
  return out;
}

json::object UserFields(json::object&& stored) {
  TakeMeta(stored);
  if (!stored.contains(kMetaField)) return std::move(stored);
  return UserFields(static_cast<const json::object&>(stored));  // "_ltx" not last: keep the order
}

json::object MakeStored(json::object body, const Meta& meta, json::object reuse) {
  if (json::object taken = TakeMeta(body); !taken.empty() || reuse.empty()) {
    reuse = std::move(taken);
  }
  body.erase(kMetaField);  // not last (never so in what the engine writes)
  EncodeMeta(body, meta, std::move(reuse));
  return body;
}

}  // namespace litetx::engine
