#include "cache/replay_cache.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace {
using idem::cache::CachedRecord;
using idem::cache::ReplayCache;
using namespace std::chrono_literals;

std::shared_ptr<CachedRecord> record(std::string body, std::chrono::steady_clock::duration ttl = 1h) {
  auto r = std::make_shared<CachedRecord>();
  r->fingerprint = "v1:abc";
  r->response.status = 201;
  r->response.headers = {{"Content-Type", "application/json"}};
  r->response.body = std::move(body);
  r->expires_at = std::chrono::steady_clock::now() + ttl;
  return r;
}

TEST(ReplayCache, HitReturnsTheStoredRecordAndCountsIt) {
  ReplayCache cache(1 << 20);
  cache.insert("orders/-", "k1", record("{\"id\":1}"));
  const auto hit = cache.find("orders/-", "k1");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->response.status, 201);
  EXPECT_EQ(hit->response.body, "{\"id\":1}");
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 0u);
}

TEST(ReplayCache, ScopeAndKeyAreBothPartOfTheIdentity) {
  ReplayCache cache(1 << 20);
  cache.insert("orders/v1:tenant-a", "k", record("a"));
  EXPECT_EQ(cache.find("orders/v1:tenant-b", "k"), nullptr);
  EXPECT_EQ(cache.find("refunds/v1:tenant-a", "k"), nullptr);
  EXPECT_EQ(cache.find("orders/v1:tenant-a", "k2"), nullptr);
  EXPECT_EQ(cache.misses(), 3u);
  EXPECT_NE(cache.find("orders/v1:tenant-a", "k"), nullptr);
}

TEST(ReplayCache, EntryNeverOutlivesTheRecordsExpiry) {
  ReplayCache cache(1 << 20);
  cache.insert("s", "short", record("x", 30ms));
  EXPECT_NE(cache.find("s", "short"), nullptr);
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(cache.find("s", "short"), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);  // dropped on the expired lookup
}

TEST(ReplayCache, AlreadyExpiredRecordsAreNotCached) {
  ReplayCache cache(1 << 20);
  cache.insert("s", "k", record("x", -1s));
  EXPECT_EQ(cache.find("s", "k"), nullptr);
}

TEST(ReplayCache, StaysWithinItsByteBudgetByEvictingLeastRecentlyUsed) {
  const std::size_t budget = 64 * 1024;
  ReplayCache cache(budget);
  for (int i = 0; i < 200; ++i) cache.insert("s", "k" + std::to_string(i), record(std::string(1000, 'x')));
  EXPECT_LE(cache.bytes(), budget);
  EXPECT_GT(cache.bytes(), budget / 4);
  int present = 0;
  for (int i = 0; i < 200; ++i) present += cache.find("s", "k" + std::to_string(i)) != nullptr;
  EXPECT_GT(present, 0);
  EXPECT_LT(present, 200);
  EXPECT_NE(cache.find("s", "k199"), nullptr);  // the newest survives
}

TEST(ReplayCache, AnEntryLargerThanAShardsShareIsNotCached) {
  ReplayCache cache(16 * 1024);  // 1 KiB per shard
  cache.insert("s", "big", record(std::string(4096, 'x')));
  EXPECT_EQ(cache.find("s", "big"), nullptr);
}

TEST(ReplayCache, ZeroBytesDisablesIt) {
  ReplayCache cache(0);
  EXPECT_FALSE(cache.enabled());
  cache.insert("s", "k", record("x"));
  EXPECT_EQ(cache.find("s", "k"), nullptr);
}

TEST(ReplayCache, ReinsertReplacesWithoutLeakingBytes) {
  ReplayCache cache(1 << 20);
  cache.insert("s", "k", record(std::string(100, 'a')));
  const auto before = cache.bytes();
  cache.insert("s", "k", record(std::string(100, 'b')));
  EXPECT_EQ(cache.bytes(), before);
  EXPECT_EQ(cache.find("s", "k")->response.body, std::string(100, 'b'));
}

TEST(ReplayCache, ConcurrentReadersAndWritersAgree) {
  ReplayCache cache(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = "k" + std::to_string(i % 50);
        if ((i + t) % 3 == 0) cache.insert("s", key, record(key));
        if (const auto hit = cache.find("s", key)) {
          EXPECT_EQ(hit->response.body, key);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(cache.bytes(), std::size_t{1} << 20);
}

}  // namespace
