// tests/redis/redis_cluster_store_test.cpp — litetx::RedisClusterStore on a cluster the tests
// start themselves (tests/redis/redis_cluster.h).
