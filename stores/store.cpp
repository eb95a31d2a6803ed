// stores/store.cpp — the default Store::Batch: the operations one after another.
#include "litetx/store.h"

namespace litetx {

std::vector<BatchResult> Store::Batch(std::span<const BatchOp> ops) {
  std::vector<BatchResult> out(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const BatchOp& op = ops[i];
    BatchResult& res = out[i];
    switch (op.type) {
      case BatchOp::Type::kGet: {
        auto r = Get(op.key);
        if (r.ok()) {
          res.document = std::move(r).value();
        } else {
          res.status = r.status();
        }
        break;
      }
      case BatchOp::Type::kCreate:
      case BatchOp::Type::kReplace: {
        if (op.value == nullptr) {
          res.status = Status::InvalidArgument("batch operation without a value");
          break;
        }
        auto r = op.type == BatchOp::Type::kCreate ? Create(op.key, *op.value)
                                                   : Replace(op.key, op.expected, *op.value);
        if (r.ok()) {
          res.revision = *r;
        } else {
          res.status = r.status();
        }
        break;
      }
      case BatchOp::Type::kErase:
        res.status = Erase(op.key, op.expected);
        break;
    }
  }
  return out;
}

}  // namespace litetx
