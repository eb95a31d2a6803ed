#include "redis/redis_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>

namespace ltxtest {
namespace {

using Clock = std::chrono::steady_clock;

void Nap() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

bool IsOk(const RawReply& r) {
  return r != nullptr && r->type == REDIS_REPLY_STATUS && ReplyText(r.get()) == "OK";
}

std::string Describe(const RawReply& r) {
  if (r == nullptr) return "no reply";
  if (r->type == REDIS_REPLY_ERROR) return "error: " + ReplyText(r.get());
  return ReplyText(r.get());
}

std::string MapText(const std::vector<SlotRange>& map) {
  std::ostringstream o;
  for (const auto& r : map) o << r.start << "-" << r.end << "@" << r.master_port << " ";
  return o.str();
}

bool SameOwners(const std::vector<SlotRange>& a, const std::vector<SlotRange>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].start != b[i].start || a[i].end != b[i].end || a[i].master_port != b[i].master_port) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<SlotRange> ClusterSlots(const RedisServer& node) {
  std::vector<SlotRange> out;
  RawReply r = node.Command({"CLUSTER", "SLOTS"});
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
    SlotRange s;
    s.start = static_cast<int>(e->element[0]->integer);
    s.end = static_cast<int>(e->element[1]->integer);
    for (std::size_t j = 2; j < e->elements; ++j) {
      const redisReply* n = e->element[j];
      if (n->type != REDIS_REPLY_ARRAY || n->elements < 2) continue;
      const int port = static_cast<int>(n->element[1]->integer);
      if (j == 2) {
        s.master_port = port;
      } else {
        s.replica_ports.push_back(port);
      }
    }
    std::sort(s.replica_ports.begin(), s.replica_ports.end());
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const SlotRange& a, const SlotRange& b) { return a.start < b.start; });
  return out;
}

std::string RedisCluster::RunRedisCli(const std::vector<std::string>& args,
                                      const std::string& log, std::chrono::milliseconds timeout) {
  const std::string exe = RedisCliPath();
  if (exe.empty()) return "redis-cli not found in PATH (Debian: apt-get install redis-tools)";
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = SpawnLogged(std::move(all), log);
  if (pid < 0) return "fork failed";
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) return "waitpid failed";
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "redis-cli did not finish within " + std::to_string(timeout.count()) +
             " ms (see " + log + ")";
    }
    Nap();
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "redis-cli failed (see " + log + ")";
  }
  return {};
}

std::string RedisCluster::Start(int masters, int replicas_per, int node_timeout_ms,
                                RedisServerOptions base) {
  if (!nodes_.empty()) return "RedisCluster::Start called twice";
  if (masters < 3) return "a Redis cluster needs at least 3 masters";
  if (replicas_per < 0) return "replicas_per < 0";
  if (RedisServerPath().empty()) {
    return "redis-server not found in PATH (Debian: apt-get install redis-server)";
  }
  if (RedisCliPath().empty()) {
    return "redis-cli not found in PATH (Debian: apt-get install redis-tools)";
  }
  replicas_per_ = replicas_per;
  base.cluster = true;
  base.cluster_node_timeout_ms = node_timeout_ms;
  std::set<int> used;
  const int count = masters * (1 + replicas_per);
  for (int i = 0; i < count; ++i) {
    auto node = std::make_unique<RedisServer>();
    std::string why;
    // FreePort may hand out a port another node of this cluster already took for its bus.
    for (int attempt = 0; attempt < 3; ++attempt) {
      why = node->Start(base);
      if (!why.empty()) break;
      if (used.count(node->port()) == 0 && used.count(node->bus_port()) == 0) break;
      node = std::make_unique<RedisServer>();
      why = "no distinct free ports";
    }
    if (!why.empty()) {
      Stop();
      return "node " + std::to_string(i) + ": " + why;
    }
    used.insert(node->port());
    used.insert(node->bus_port());
    order_.push_back(node->port());
    nodes_[node->port()] = std::move(node);
  }

  std::vector<std::string> args = {"--cluster", "create"};
  for (int p : order_) args.push_back("127.0.0.1:" + std::to_string(p));
  args.insert(args.end(),
              {"--cluster-replicas", std::to_string(replicas_per), "--cluster-yes"});
  std::string why = RunRedisCli(args, Node(order_[0]).dir() + "/cluster-create.log",
                                std::chrono::seconds(20));
  if (!why.empty()) return why;

  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::string last;
  while (true) {
    last = Converged();
    if (last.empty()) {
      const std::vector<int> m = MasterPorts();
      if (static_cast<int>(m.size()) != masters) {
        last = std::to_string(m.size()) + " masters in the slot map, want " +
               std::to_string(masters);
      } else {
        for (int p : m) {
          const std::string n = Node(p).InfoField("replication", "connected_slaves");
          if (n != std::to_string(replicas_per)) {
            last = "master " + std::to_string(p) + " has connected_slaves:" + n;
            break;
          }
        }
      }
      if (last.empty()) return {};
    }
    if (Clock::now() >= deadline) return "cluster did not come up within 20 s: " + last;
    Nap();
  }
}

void RedisCluster::Stop() {
  nodes_.clear();
  order_.clear();
}

RedisServer& RedisCluster::Node(int port) {
  auto it = nodes_.find(port);
  if (it == nodes_.end()) {
    std::fprintf(stderr, "RedisCluster: no node on port %d\n", port);
    std::abort();
  }
  return *it->second;
}

const RedisServer& RedisCluster::Node(int port) const {
  return const_cast<RedisCluster*>(this)->Node(port);
}

const RedisServer* RedisCluster::AnyLiveNode() const {
  for (int p : order_) {
    const RedisServer& n = Node(p);
    if (n.running()) return &n;
  }
  return nullptr;
}

std::vector<int> RedisCluster::MasterPorts() const {
  std::vector<int> out;
  const RedisServer* n = AnyLiveNode();
  if (n == nullptr) return out;
  for (const auto& r : ClusterSlots(*n)) {
    if (std::find(out.begin(), out.end(), r.master_port) == out.end()) {
      out.push_back(r.master_port);
    }
  }
  return out;
}

int RedisCluster::ReplicaOf(int master_port) const {
  auto it = nodes_.find(master_port);
  if (it != nodes_.end() && it->second->running()) {
    const std::string s = it->second->InfoField("replication", "slave0");
    const std::string key = "port=";
    const std::size_t at = s.find(key);
    if (at != std::string::npos) return std::atoi(s.c_str() + at + key.size());
  }
  // The master is down: ask a live node's CLUSTER NODES for a replica of its id.
  const std::string id = NodeId(master_port);
  const RedisServer* n = AnyLiveNode();
  if (id.empty() || n == nullptr) return -1;
  RawReply r = n->Command({"CLUSTER", "NODES"});
  std::istringstream in(ReplyText(r.get()));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string node_id, addr, flags, master;
    f >> node_id >> addr >> flags >> master;
    if (master != id || flags.find("fail") != std::string::npos) continue;
    const std::size_t colon = addr.find(':');
    if (colon != std::string::npos) return std::atoi(addr.c_str() + colon + 1);
  }
  return -1;
}

int RedisCluster::MasterOfSlot(int slot) const {
  const RedisServer* n = AnyLiveNode();
  if (n == nullptr) return -1;
  for (const auto& r : ClusterSlots(*n)) {
    if (slot >= r.start && slot <= r.end) return r.master_port;
  }
  return -1;
}

int RedisCluster::KeySlot(const std::string& key) const {
  const RedisServer* n = AnyLiveNode();
  if (n == nullptr) return -1;
  RawReply r = n->Command({"CLUSTER", "KEYSLOT", key});
  if (r == nullptr || r->type != REDIS_REPLY_INTEGER) return -1;
  return static_cast<int>(r->integer);
}

std::string RedisCluster::NodeId(int port) const {
  auto it = nodes_.find(port);
  if (it == nodes_.end()) return {};
  if (it->second->running()) {
    RawReply r = it->second->Command({"CLUSTER", "MYID"});
    if (r != nullptr && r->type == REDIS_REPLY_STRING) return ReplyText(r.get());
  }
  // Stopped: the id is the one nodes.conf marks "myself".
  std::FILE* f = std::fopen((it->second->dir() + "/nodes.conf").c_str(), "r");
  if (f == nullptr) return {};
  char buf[4096];
  std::string id;
  while (std::fgets(buf, sizeof buf, f) != nullptr) {
    std::istringstream in(buf);
    std::string node_id, addr, flags;
    in >> node_id >> addr >> flags;
    if (flags.find("myself") != std::string::npos) {
      id = node_id;
      break;
    }
  }
  std::fclose(f);
  return id;
}

std::string RedisCluster::Converged() const {
  std::vector<SlotRange> first;
  int first_port = -1;
  std::vector<const RedisServer*> live;
  for (int p : order_) {
    const RedisServer& n = Node(p);
    if (!n.running()) continue;
    live.push_back(&n);
    RawReply info = n.Command({"CLUSTER", "INFO"});
    const std::string text = ReplyText(info.get());
    if (text.find("cluster_state:ok") == std::string::npos) {
      return "node " + std::to_string(p) + " is not cluster_state:ok";
    }
    std::vector<SlotRange> map = ClusterSlots(n);
    if (first_port < 0) {
      first = std::move(map);
      first_port = p;
    } else if (!SameOwners(first, map)) {
      return "nodes " + std::to_string(first_port) + " and " + std::to_string(p) +
             " disagree on the slot map: " + MapText(first) + "/ " + MapText(map);
    }
  }
  if (live.empty()) return "no live node";
  int covered = 0;
  int next = 0;
  std::set<int> masters;
  for (const auto& r : first) {
    if (r.start != next) return "slot " + std::to_string(next) + " is not covered";
    next = r.end + 1;
    covered += r.end - r.start + 1;
    masters.insert(r.master_port);
  }
  if (covered != kSlots) return "the slot map covers " + std::to_string(covered) + " slots";
  for (int m : masters) {
    auto it = nodes_.find(m);
    if (it == nodes_.end()) return "slot owner " + std::to_string(m) + " is not a node";
    if (!it->second->running()) return "slots owned by stopped node " + std::to_string(m);
    if (it->second->InfoField("replication", "role") != "master") {
      return "slot owner " + std::to_string(m) + " is not role:master";
    }
  }
  std::map<int, bool> is_master;  // live node -> its own role
  for (const RedisServer* n : live) {
    is_master[n->port()] = masters.count(n->port()) != 0;
    if (masters.count(n->port()) != 0) continue;
    if (n->InfoField("replication", "role") != "slave") {
      return "node " + std::to_string(n->port()) + " owns no slot and is not a replica";
    }
    if (n->InfoField("replication", "master_link_status") != "up") {
      return "replica " + std::to_string(n->port()) + " has its master link down";
    }
  }
  // Every live node sees every live node in its role and not failing (a node just restarted
  // as a replica is seen as a failed master until gossip has reached everyone; the masters
  // refuse to vote for its failover until then).
  for (const RedisServer* n : live) {
    RawReply r = n->Command({"CLUSTER", "NODES"});
    std::istringstream in(ReplyText(r.get()));
    std::string line;
    int seen = 0;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string node_id, addr, flags;
      f >> node_id >> addr >> flags;
      const std::size_t colon = addr.find(':');
      if (colon == std::string::npos) continue;
      const int port = std::atoi(addr.c_str() + colon + 1);
      auto it = is_master.find(port);
      if (it == is_master.end()) continue;
      ++seen;
      const bool fail = flags.find("fail") != std::string::npos;
      const bool master = flags.find("master") != std::string::npos;
      if (fail || master != it->second) {
        return "node " + std::to_string(n->port()) + " sees " + std::to_string(port) + " as " +
               flags;
      }
    }
    if (seen != static_cast<int>(live.size())) {
      return "node " + std::to_string(n->port()) + " knows " + std::to_string(seen) + " of " +
             std::to_string(live.size()) + " live nodes";
    }
  }
  return {};
}

std::string RedisCluster::WaitConverged(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    std::string why = Converged();
    if (why.empty()) return why;
    if (Clock::now() >= deadline) {
      return "not converged within " + std::to_string(timeout.count()) + " ms: " + why;
    }
    Nap();
  }
}

std::string RedisCluster::KillMasterAndWaitForFailover(int master_port, bool restart_as_replica,
                                                       int* promoted) {
  auto it = nodes_.find(master_port);
  if (it == nodes_.end() || !it->second->running()) {
    return "no running node on port " + std::to_string(master_port);
  }
  if (it->second->InfoField("replication", "role") != "master") {
    return "node " + std::to_string(master_port) + " is not a master";
  }
  const int replica = ReplicaOf(master_port);
  if (replica < 0 || nodes_.count(replica) == 0) {
    return "master " + std::to_string(master_port) + " has no replica";
  }
  it->second->Kill9();
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  std::string last;
  while (true) {
    if (Node(replica).InfoField("replication", "role") != "master") {
      last = "replica " + std::to_string(replica) + " is not role:master";
    } else {
      last = Converged();
    }
    if (last.empty()) break;
    if (Clock::now() >= deadline) return "no failover within 15 s: " + last;
    Nap();
  }
  if (promoted != nullptr) *promoted = replica;
  if (restart_as_replica) return RestartAsReplica(master_port);
  return {};
}

std::string RedisCluster::RestartAsReplica(int port) {
  if (nodes_.count(port) == 0) return "no node on port " + std::to_string(port);
  RedisServer& n = Node(port);
  std::string why = n.Restart();
  if (!why.empty()) return why;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string last;
  while (true) {
    if (n.InfoField("replication", "role") != "slave") {
      last = "node " + std::to_string(port) + " is not role:slave";
    } else {
      last = Converged();
    }
    if (last.empty()) return {};
    if (Clock::now() >= deadline) return "restarted node did not rejoin within 10 s: " + last;
    Nap();
  }
}

std::string RedisCluster::ManualFailover(int replica_port) {
  if (nodes_.count(replica_port) == 0) return "no node on port " + std::to_string(replica_port);
  RedisServer& replica = Node(replica_port);
  if (replica.InfoField("replication", "role") != "slave") {
    return "node " + std::to_string(replica_port) + " is not a replica";
  }
  const int master = std::atoi(replica.InfoField("replication", "master_port").c_str());
  if (nodes_.count(master) == 0) return "the replica's master is not a node of this cluster";
  RawReply r = replica.Command({"CLUSTER", "FAILOVER"});
  if (!IsOk(r)) return "CLUSTER FAILOVER: " + Describe(r);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string last;
  while (true) {
    if (replica.InfoField("replication", "role") != "master") {
      last = "node " + std::to_string(replica_port) + " is not role:master";
    } else if (Node(master).InfoField("replication", "role") != "slave") {
      last = "old master " + std::to_string(master) + " is not role:slave";
    } else {
      last = Converged();
    }
    if (last.empty()) return {};
    if (Clock::now() >= deadline) return "manual failover did not finish within 10 s: " + last;
    Nap();
  }
}

std::string RedisCluster::MoveSlot(int slot, int from_port, int to_port,
                                   const std::function<void(int step)>& hook) {
  if (slot < 0 || slot >= kSlots) return "slot out of range";
  if (nodes_.count(from_port) == 0 || nodes_.count(to_port) == 0) return "unknown port";
  if (MasterOfSlot(slot) != from_port) {
    return "slot " + std::to_string(slot) + " is not on " + std::to_string(from_port);
  }
  RedisServer& from = Node(from_port);
  RedisServer& to = Node(to_port);
  const std::string from_id = NodeId(from_port);
  const std::string to_id = NodeId(to_port);
  if (from_id.empty() || to_id.empty()) return "node ids unavailable";
  const std::string s = std::to_string(slot);

  RawReply r = to.Command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id});
  if (!IsOk(r)) return "SETSLOT IMPORTING: " + Describe(r);
  r = from.Command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id});
  if (!IsOk(r)) return "SETSLOT MIGRATING: " + Describe(r);
  if (hook) hook(kSlotMarked);

  // Batches until the source holds no key of the slot (bounded: keys only leave the source
  // while the slot is MIGRATING, new ones are redirected to the target with ASK).
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  bool hooked_before_assign = false;
  while (true) {
    if (Clock::now() >= deadline) return "keys of slot " + s + " still on the source after 10 s";
    RawReply keys = from.Command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (keys == nullptr || keys->type != REDIS_REPLY_ARRAY) {
      return "GETKEYSINSLOT: " + Describe(keys);
    }
    if (keys->elements == 0) {
      if (hooked_before_assign) break;
      if (hook) hook(kBeforeSetSlotNode);
      hooked_before_assign = true;
      continue;  // the hook may have written: look once more
    }
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0",
                                        "5000",    "KEYS"};
    for (std::size_t i = 0; i < keys->elements; ++i) {
      migrate.push_back(ReplyText(keys->element[i]));
    }
    r = from.Command(migrate);
    if (r == nullptr || r->type == REDIS_REPLY_ERROR) return "MIGRATE: " + Describe(r);
    if (hook) hook(kKeysBatchMoved);
  }

  r = to.Command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  if (!IsOk(r)) return "SETSLOT NODE on the target: " + Describe(r);
  r = from.Command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  if (!IsOk(r)) return "SETSLOT NODE on the source: " + Describe(r);
  for (int p : MasterPorts()) {
    if (p == from_port || p == to_port) continue;
    // The others learn it from the target's bumped epoch anyway; telling them is faster.
    Node(p).Command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }

  const auto agree_deadline = Clock::now() + std::chrono::seconds(10);
  std::string last;
  while (true) {
    last.clear();
    for (int p : order_) {
      const RedisServer& n = Node(p);
      if (!n.running()) continue;
      int owner = -1;
      for (const auto& range : ClusterSlots(n)) {
        if (slot >= range.start && slot <= range.end) owner = range.master_port;
      }
      if (owner != to_port) {
        last = "node " + std::to_string(p) + " sees slot " + s + " on " + std::to_string(owner);
        break;
      }
    }
    if (last.empty()) last = Converged();
    if (last.empty()) return {};
    if (Clock::now() >= agree_deadline) return "slot move not agreed within 10 s: " + last;
    Nap();
  }
}

std::string RedisCluster::PauseNode(int port, int ms) {
  if (nodes_.count(port) == 0) return "no node on port " + std::to_string(port);
  RawReply r = Node(port).Command({"CLIENT", "PAUSE", std::to_string(ms), "WRITE"});
  return IsOk(r) ? std::string() : "CLIENT PAUSE: " + Describe(r);
}

}  // namespace ltxtest
