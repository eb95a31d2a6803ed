#include "engine/meta.h"

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

void EncodeMeta(json::object& stored, const Meta& meta) {
  json::object m;
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
    for (const LockEntry& e : meta.locks) {
      lk.push_back(json::object{{"o", e.owner}, {"m", e.write ? "w" : "r"},
                                {"x", e.expires_ms}, {"p", e.priority_ms}});
    }
    m["lk"] = std::move(lk);
  }
  stored[kMetaField] = std::move(m);
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

json::object MakeStored(json::object body, const Meta& meta) {
  body.erase(kMetaField);
  EncodeMeta(body, meta);
  return body;
}

}  // namespace litetx::engine
