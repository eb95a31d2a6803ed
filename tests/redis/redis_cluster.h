// tests/redis/redis_cluster.h — a local Redis Cluster for tests: masters and replicas, each a
// RedisServer in cluster mode on free 127.0.0.1 ports, created with `redis-cli --cluster
// create`, and the faults tests want to run traffic through (a master killed and replaced by
// its replica, a manual failover, a slot moved key batch by key batch). Every wait is bounded;
// every function that can fail returns "" or why not.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/redis_server.h"

namespace ltxtest {

// One range of CLUSTER SLOTS: [start, end] served by master_port, with the replicas it lists
// (Redis lists a replica only once its replication offset is non-zero, so a fresh cluster may
// show none: INFO replication of the master is the reliable source).
struct SlotRange {
  int start = 0;
  int end = 0;
  int master_port = -1;
  std::vector<int> replica_ports;
};

// The slot map as `port` reports it (CLUSTER SLOTS), sorted by start; empty if unreachable.
std::vector<SlotRange> ClusterSlots(const RedisServer& node);

// The steps at which MoveSlot calls its hook.
enum MoveSlotStep : int {
  kSlotMarked = 0,          // IMPORTING set on the target, MIGRATING on the source; no key moved
  kKeysBatchMoved = 1,      // after each MIGRATE of a batch (up to 100 keys)
  kBeforeSetSlotNode = 2,   // every key moved, the slot still owned by the source
};

class RedisCluster {
 public:
  static constexpr int kSlots = 16384;

  RedisCluster() = default;
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;
  ~RedisCluster() { Stop(); }

  // Starts masters * (1 + replicas_per) cluster-mode servers on free ports, runs
  // `redis-cli --cluster create ... --cluster-replicas replicas_per --cluster-yes`, and waits
  // (at most 20 s) until every node reports cluster_state:ok, all agree on the slot map, the
  // map covers all 16384 slots with `masters` masters, and each master has `replicas_per`
  // replicas attached (INFO replication connected_slaves, master_link_status:up). `base`
  // supplies persistence and extra arguments (its cluster fields are overridden).
  std::string Start(int masters = 3, int replicas_per = 1, int node_timeout_ms = 1000,
                    RedisServerOptions base = {});
  // Kills every node and removes their directories.
  void Stop();

  // Every node's port, in start order (what a client may take as seeds).
  std::vector<int> SeedPorts() const { return order_; }
  // The ports of the masters in the current slot map, in slot order (each once).
  std::vector<int> MasterPorts() const;
  // The port of a replica attached to the master on `master_port` (INFO replication of the
  // master, else CLUSTER NODES of another node), or -1.
  int ReplicaOf(int master_port) const;
  // The master that owns `slot` in the slot map of the first live node, or -1.
  int MasterOfSlot(int slot) const;
  // CLUSTER KEYSLOT of `key`, asked of a live node; -1 if none answers.
  int KeySlot(const std::string& key) const;
  // CLUSTER MYID of the node (kept across restarts: nodes.conf stays in its directory).
  std::string NodeId(int port) const;
  // The node on `port`; aborts the test program if there is none.
  RedisServer& Node(int port);
  const RedisServer& Node(int port) const;
  // A live node (the first in start order that runs), or null.
  const RedisServer* AnyLiveNode() const;

  // Every live node: cluster_state:ok, the same slot map covering every slot, each master in
  // it role:master and no slot owned by a stopped node, every other live node role:slave with
  // master_link_status:up, and every live node seen by every live node (CLUSTER NODES) in
  // that role and not flagged fail or fail?. "" if so, else what is not (yet) so.
  std::string Converged() const;
  // Waits (bounded) until Converged() is "", returning its last answer otherwise.
  std::string WaitConverged(std::chrono::milliseconds timeout) const;

  // SIGKILLs the master on `master_port` and waits (at most 15 s) until its replica reports
  // role:master and the live nodes have converged without it. With `restart_as_replica`, then
  // RestartAsReplica(master_port). `promoted`, if given, receives the replica's port.
  std::string KillMasterAndWaitForFailover(int master_port, bool restart_as_replica = false,
                                           int* promoted = nullptr);
  // Restarts a stopped node (same port, directory, nodes.conf) and waits (at most 10 s) until
  // it reports role:slave with master_link_status:up and the cluster has converged.
  std::string RestartAsReplica(int port);
  // CLUSTER FAILOVER on the replica; waits (at most 10 s) until it is master, its old master a
  // replica with its link up, and the cluster has converged.
  std::string ManualFailover(int replica_port);
  // Moves `slot` from the master on from_port to the master on to_port with the steps of a
  // manual resharding: target SETSLOT IMPORTING, source SETSLOT MIGRATING, batches of
  // GETKEYSINSLOT 100 + MIGRATE ... KEYS, then SETSLOT NODE on the target, the source and the
  // other masters. `hook` (may be empty) is called with each MoveSlotStep. Waits (at most
  // 10 s) until every live node sees the slot on to_port and the cluster has converged.
  std::string MoveSlot(int slot, int from_port, int to_port,
                       const std::function<void(int step)>& hook = {});
  // CLIENT PAUSE ms WRITE on the node.
  std::string PauseNode(int port, int ms);

 private:
  std::string RunRedisCli(const std::vector<std::string>& args, const std::string& log,
                          std::chrono::milliseconds timeout);

  std::map<int, std::unique_ptr<RedisServer>> nodes_;
  std::vector<int> order_;
  int replicas_per_ = 0;
};

}  // namespace ltxtest
