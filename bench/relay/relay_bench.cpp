// idemrelay benchmark: drives the real idemrelay binary against a Postgres outbox and Redis on this
// machine and prints a markdown report.
//   1. throughput: a pre-filled backlog drained with batch sizes 1, 100, 500 (rows/s), into Redis
//      Streams and (with --nats-url) into a JetStream stream, read back and checked: each event
//      exactly once, each aggregate in id order;
//   2. latency: rows inserted at a fixed rate (default 2,000/s, single-row autocommit INSERTs from
//      two writer threads) while the relay runs; commit-to-XADD lag = stream entry id (Redis clock,
//      ms) - created_at (the inserting transaction's now(), i.e. its commit within a millisecond);
//      retention runs meanwhile and the table's size and dead tuples are sampled (a mini soak);
//   3. the upper bound: the claim + mark SQL alone under pgbench, same batch sizes, same 2 clients;
//   4. bursts into an idle relay on a never-analyzed outbox: 30,000 rows committed at once, as
//      30,000 one-row aggregates and as 40 aggregates of 750 rows (rows/s from commit to drained),
//      into Redis Streams and (with --nats-url) into JetStream, each read back and checked;
//   5. a 1,000,000-row backlog over 100 aggregates drained by 1, 2 and 4 relays: rows/s, the claim
//      statement's server time (p50/p99, from the Postgres log: log_min_duration_statement = 0 on the
//      relays' sessions), and with one relay the commit-to-XADD lag of new rows inserted at
//      --rate rows/s into other aggregates meanwhile. Every run checks what reached the stream:
//      each event exactly once, each aggregate in id order.
// Usage: idemrelay-bench --pg DSN --pg-log FILE --redis-port P --relay BIN --work DIR [--rate N]
//        [--seconds S] [--nats-url nats://127.0.0.1:PORT] [--only throughput|latency|burst|backlog]
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <nats/nats.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "relay/sql.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::string pg;
  int redis_port = 0;
  std::string relay;
  std::filesystem::path work;
  int rate = 2'000;
  int seconds = 10;
  std::string only;  // "throughput" | "latency" | "burst" | "backlog": run that part alone
  std::filesystem::path pg_log;  // the server's log, for statement durations
  std::string nats_url;          // a nats-server with JetStream: the NATS sink's runs (none when empty)
};

struct PgDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};

class Pg {
 public:
  explicit Pg(const std::string& dsn) : conn_(PQconnectdb(dsn.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error(std::string("pg: ") + PQerrorMessage(conn_.get()));
    PQsetNoticeProcessor(conn_.get(), [](void*, const char*) {}, nullptr);
  }
  std::vector<std::vector<std::string>> query(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* raw = PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                                 nullptr, 0);
    std::unique_ptr<PGresult, decltype(&PQclear)> result(raw, &PQclear);
    const auto status = PQresultStatus(raw);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      throw std::runtime_error(sql.substr(0, 60) + ": " + PQerrorMessage(conn_.get()));
    }
    std::vector<std::vector<std::string>> rows;
    for (int r = 0; r < PQntuples(raw); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(raw); ++c) row.emplace_back(PQgetvalue(raw, r, c));
      rows.push_back(std::move(row));
    }
    return rows;
  }
  std::int64_t scalar(const std::string& sql) { return std::stoll(query(sql).at(0).at(0)); }

 private:
  std::unique_ptr<PGconn, PgDeleter> conn_;
};

std::string search_path_dsn(const std::string& dsn, const std::string& schema, const std::string& more_options = {}) {
  return dsn + " options='-c search_path=" + schema + (more_options.empty() ? "" : " " + more_options) + "'";
}

class Redis {
 public:
  explicit Redis(int port) : context_(redisConnect("127.0.0.1", port)) {
    if (context_ == nullptr || context_->err) throw std::runtime_error("redis connect failed");
  }
  ~Redis() { redisFree(context_); }
  redisReply* command(const std::vector<std::string>& argv) {
    std::vector<const char*> a;
    std::vector<size_t> l;
    for (const auto& s : argv) {
      a.push_back(s.data());
      l.push_back(s.size());
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(a.size()), a.data(), l.data()));
    if (reply == nullptr) throw std::runtime_error("redis command failed");
    return reply;
  }
  void run(const std::vector<std::string>& argv) { freeReplyObject(command(argv)); }

 private:
  redisContext* context_;
};

// A child process with its output in files; SIGTERM and reap on stop().
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> args;
      for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string random_suffix() {
  std::mt19937_64 random(std::random_device{}());
  return std::to_string(random() % 1'000'000'000ULL);
}

struct Schema {
  Schema(const std::string& server_dsn, const std::string& relay_bin, const std::filesystem::path& work)
      : server(server_dsn), name("bench_" + random_suffix()), dsn(search_path_dsn(server_dsn, name)) {
    Pg(server).query("CREATE SCHEMA " + name);
    std::ofstream(work / "migrate.yaml") << "postgres: { dsn: \"" << dsn << "\" }\nsink: { type: redis_streams }\n";
    const std::string command = relay_bin + " --config " + (work / "migrate.yaml").string() + " --migrate > /dev/null";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("idemrelay --migrate failed");
  }
  ~Schema() {
    try {
      Pg(server).query("DROP SCHEMA " + name + " CASCADE");
    } catch (...) {
    }
  }
  std::string server;
  std::string name;
  std::string dsn;
};

// `rows` rows over `aggregates` aggregates, committed at once; analyzed unless `analyze` is false
// (a table the planner knows nothing about, as after a deploy).
void fill(const std::string& dsn, int rows, int aggregates, bool analyze = true) {
  Pg(dsn).query("INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
                "SELECT 'order', 'agg-' || (g % " + std::to_string(aggregates) + "), 'order.created', "
                "jsonb_build_object('n', g, 'note', 'a payload of about a hundred bytes, like a small domain event') "
                "FROM generate_series(1, " + std::to_string(rows) + ") AS g");
  if (analyze) Pg(dsn).query("ANALYZE outbox");
}

enum class Sink { redis, nats };

// Redis: streams "<stream>.<aggregate_type>"; NATS: JetStream stream `stream`, subjects
// "<stream>.<aggregate_type>".
std::filesystem::path write_config(const Options& o, const std::string& dsn, const std::string& stream, int batch,
                                   const std::string& extra, const std::string& name = {}, Sink sink = Sink::redis) {
  const auto path = o.work / ("relay-" + stream + name + ".yaml");
  std::ofstream out(path);
  out << "postgres: { dsn: \"" << dsn << "\" }\n"
      << "relay: { batch_size: " << batch << ", concurrency: 2, poll_interval: 1s, lease: 30s, stats_interval: 1s }\n"
      << extra;
  if (sink == Sink::nats) {
    out << "sink:\n  type: nats_jetstream\n  nats_jetstream:\n    url: \"" << o.nats_url << "\"\n"
        << "    stream: \"" << stream << "\"\n    subject: \"" << stream << ".{aggregate_type}\"\n";
  } else {
    out << "sink:\n  type: redis_streams\n  redis_streams:\n    address: 127.0.0.1:" << o.redis_port << "\n"
        << "    stream: \"" << stream << ".{aggregate_type}\"\n    dedup_prefix: \"" << stream << ":pub:\"\n";
  }
  return path;
}

// A libnats connection and JetStream context for the bench's own calls (the stream's creation,
// reading it back, deleting it).
class JetStream {
 public:
  explicit JetStream(const std::string& url) {
    check(natsConnection_ConnectTo(&connection_, url.c_str()), "connect " + url);
    check(natsConnection_JetStream(&js_, connection_, nullptr), "JetStream context");
  }
  ~JetStream() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
  }
  JetStream(const JetStream&) = delete;
  JetStream& operator=(const JetStream&) = delete;

  // File storage; a duplicate window of 10 minutes, over the relay's lease (30 s) + backoff max (5 m).
  void add_stream(const std::string& name) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name.c_str();
    const std::string subjects = name + ".>";
    const char* subject_list[] = {subjects.c_str()};
    config.Subjects = subject_list;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::minutes(10)).count();
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    check(js_AddStream(&info, js_, &config, nullptr, &code), "add stream " + name);
    jsStreamInfo_Destroy(info);
  }
  void delete_stream(const std::string& name) {
    jsErrCode code = static_cast<jsErrCode>(0);
    js_DeleteStream(js_, name.c_str(), nullptr, &code);
  }
  // Calls `each(event id, aggregate id)` for every message of `name`, in stream order.
  void for_each_message(const std::string& name, const std::function<void(std::int64_t, const std::string&)>& each) {
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    check(js_GetStreamInfo(&info, js_, name.c_str(), nullptr, &code), "stream info " + name);
    const std::uint64_t first = info->State.FirstSeq;
    const std::uint64_t last = info->State.LastSeq;
    jsStreamInfo_Destroy(info);
    for (std::uint64_t seq = first; seq != 0 && seq <= last; ++seq) {
      natsMsg* msg = nullptr;
      check(js_GetMsg(&msg, js_, name.c_str(), seq, nullptr, &code), "get message " + std::to_string(seq));
      const char* id = nullptr;
      const bool has_id = natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr;
      const std::string body(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
      const std::string event = has_id ? id : "";
      natsMsg_Destroy(msg);
      // The body is the webhook body: {..., "aggregate_id":"<id>", ...}; the bench's ids need no escaping.
      const std::string key = "\"aggregate_id\":\"";
      const std::size_t at = body.find(key);
      if (event.empty() || at == std::string::npos) {
        throw std::runtime_error("message " + std::to_string(seq) + " unreadable");
      }
      const std::size_t from = at + key.size();
      // Nats-Msg-Id is "<event_id>:<event fingerprint>".
      each(std::stoll(event.substr(0, event.find(':'))), body.substr(from, body.find('"', from) - from));
    }
  }

 private:
  static void check(natsStatus status, const std::string& what) {
    if (status != NATS_OK) throw std::runtime_error("nats: " + what + ": " + natsStatus_GetText(status));
  }
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

void drop_stream(Redis& redis, const std::string& prefix) {
  // Markers expire on their own (24 h); the bench removes its streams and markers right away.
  std::string cursor = "0";
  do {
    redisReply* page = redis.command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "10000"});
    cursor = page->element[0]->str;
    std::vector<std::string> del = {"UNLINK"};
    for (size_t i = 0; i < page->element[1]->elements; ++i) del.emplace_back(page->element[1]->element[i]->str);
    freeReplyObject(page);
    if (del.size() > 1) redis.run(del);
  } while (cursor != "0");
}

// Every event once, each aggregate in id order, `expected` in all; throws otherwise.
class OrderCheck {
 public:
  void see(std::int64_t event, const std::string& aggregate) {
    if (event < 0) throw std::runtime_error("an entry without event_id");
    const auto index = static_cast<std::size_t>(event);
    if (index >= seen_.size()) seen_.resize(index * 2 + 1);
    if (seen_[index]++ != 0) throw std::runtime_error("event " + std::to_string(event) + " twice");
    auto [at, inserted] = last_.try_emplace(aggregate, event);
    if (!inserted) {
      if (event < at->second) throw std::runtime_error("aggregate " + aggregate + " out of order");
      at->second = event;
    }
    ++entries_;
  }
  void expect(const std::string& where, std::int64_t expected) const {
    if (entries_ != expected) {
      throw std::runtime_error(where + ": " + std::to_string(entries_) + " entries, expected " +
                               std::to_string(expected));
    }
  }

 private:
  std::vector<std::uint8_t> seen_;
  std::map<std::string, std::int64_t> last_;
  std::int64_t entries_ = 0;
};

// What reached JetStream stream `name`: every event once, each aggregate in id order, `expected`
// in all (throws otherwise); then the stream is deleted.
void verify_nats_stream(JetStream& nats, const std::string& name, std::int64_t expected) {
  OrderCheck check;
  nats.for_each_message(name, [&](std::int64_t event, const std::string& aggregate) { check.see(event, aggregate); });
  check.expect("JetStream stream " + name, expected);
  nats.delete_stream(name);
}

// A pre-filled, analyzed backlog of `rows` over 1,000 aggregates drained by one relay into `sink`:
// rows/s from the relay's start until nothing is unpublished. The NATS run reads the stream back
// and checks it (each event once, in order per aggregate).
double throughput(const Options& o, Redis& redis, int batch, int rows, Sink sink = Sink::redis) {
  Schema schema(o.pg, o.relay, o.work);
  fill(schema.dsn, rows, 1'000);
  const std::string stream = (sink == Sink::nats ? "NATS" : "bench") + std::to_string(batch) + "x" + random_suffix();
  std::optional<JetStream> nats;
  if (sink == Sink::nats) {
    nats.emplace(o.nats_url);
    nats->add_stream(stream);
  }
  const auto config = write_config(o, schema.dsn, stream, batch, "retention: { max_age: 0 }\n", {}, sink);
  Pg pg(schema.dsn);
  const auto start = Clock::now();
  Child relay({o.relay, "--config", config.string()}, o.work / (stream + ".log"));
  const auto deadline = start + 120s;
  while (pg.scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL") > 0) {
    if (Clock::now() > deadline) throw std::runtime_error("throughput run did not drain in 120 s");
    std::this_thread::sleep_for(10ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  relay.stop();
  if (nats) {
    verify_nats_stream(*nats, stream, rows);
  } else {
    drop_stream(redis, stream);
  }
  return rows / seconds;
}

std::int64_t rfc3339_ms(const std::string& text) {  // "2026-01-02T03:04:05.123456Z"
  std::tm tm{};
  std::istringstream in(text.substr(0, 19));
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  const std::int64_t seconds = timegm(&tm);
  const std::int64_t micros = std::stoll(text.substr(20, 6));
  return seconds * 1000 + micros / 1000;
}

// One entry of a stream as the bench reads it back.
struct Entry {
  std::int64_t added_ms = 0;  // the entry id's time part (Redis clock)
  std::int64_t event = -1;
  std::string aggregate;
  std::string created_at;
};

// Calls `each` for every entry of `key`, oldest first (XRANGE in pages).
void for_each_entry(Redis& redis, const std::string& key, const std::function<void(const Entry&)>& each) {
  std::string from = "-";
  while (true) {
    redisReply* page = redis.command({"XRANGE", key, from, "+", "COUNT", "10000"});
    if (page->elements == 0) {
      freeReplyObject(page);
      return;
    }
    for (size_t i = 0; i < page->elements; ++i) {
      const redisReply* raw = page->element[i];
      const std::string id = raw->element[0]->str;
      Entry entry;
      entry.added_ms = std::stoll(id.substr(0, id.find('-')));
      const redisReply* fields = raw->element[1];
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        const std::string name = fields->element[f]->str;
        if (name == "event_id") entry.event = std::stoll(fields->element[f + 1]->str);
        if (name == "aggregate_id") entry.aggregate = fields->element[f + 1]->str;
        if (name == "created_at") entry.created_at = fields->element[f + 1]->str;
      }
      each(entry);
      from = "(" + id;
    }
    freeReplyObject(page);
  }
}

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
  std::size_t samples = 0;
  std::vector<std::string> soak;  // size / dead tuples samples
};

Latency latency(const Options& o, Redis& redis) {
  Schema schema(o.pg, o.relay, o.work);
  const std::string stream = "benchlag" + random_suffix();
  const auto config = write_config(o, schema.dsn, stream, 100, "retention: { max_age: 2s, batch: 1000, interval: 500ms }\n");
  Child relay({o.relay, "--config", config.string()}, o.work / (stream + ".log"));
  std::this_thread::sleep_for(500ms);

  Latency result;
  std::atomic<bool> writing{true};
  std::thread sampler([&] {
    Pg pg(schema.dsn);
    while (writing.load()) {
      std::this_thread::sleep_for(2s);
      const auto row = pg.query(
          "SELECT pg_total_relation_size('outbox'), n_live_tup, n_dead_tup, autovacuum_count FROM pg_stat_user_tables "
          "WHERE relid = 'outbox'::regclass")[0];
      result.soak.push_back("size " + std::to_string(std::stoll(row[0]) / 1024) + " KiB, live " + row[1] + ", dead " + row[2] +
                            ", autovacuums " + row[3]);
    }
  });
  constexpr int kWriters = 2;
  std::vector<std::thread> writers;
  const auto start = Clock::now() + 100ms;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      Pg pg(schema.dsn);
      const int per_writer = o.rate / kWriters;
      const auto interval = std::chrono::nanoseconds(1'000'000'000LL / per_writer);
      for (int n = 0; n < per_writer * o.seconds; ++n) {
        std::this_thread::sleep_until(start + n * interval);
        pg.query("INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES "
                 "('order', $1, 'order.created', '{\"n\": 1}')",
                 {"agg-" + std::to_string((n * kWriters + w) % 1'000)});
      }
    });
  }
  for (auto& t : writers) t.join();
  writing = false;
  sampler.join();
  std::this_thread::sleep_for(1s);
  relay.stop();

  std::vector<std::int64_t> lags;
  for_each_entry(redis, stream + ".order",
                 [&](const Entry& entry) { lags.push_back(entry.added_ms - rfc3339_ms(entry.created_at)); });
  drop_stream(redis, stream);
  std::sort(lags.begin(), lags.end());
  if (!lags.empty()) {
    result.samples = lags.size();
    result.p50 = static_cast<double>(lags[lags.size() / 2]);
    result.p99 = static_cast<double>(lags[std::min(lags.size() - 1, lags.size() * 99 / 100)]);
    result.max = static_cast<double>(lags.back());
  }
  return result;
}

// The claim + mark statements alone: 2 pgbench clients, each transaction claims `batch` rows and
// marks them published (what one relay batch costs in SQL, without the sink).
double sql_bound(const Options& o, int batch, int transactions_per_client) {
  Schema schema(o.pg, o.relay, o.work);
  fill(schema.dsn, 2 * transactions_per_client * batch + batch, 1'000);
  std::string claim = idem::relay::sql::kClaim;
  const auto replace = [&](const std::string& what, const std::string& with) {
    for (std::size_t at = claim.find(what); at != std::string::npos; at = claim.find(what, at + with.size())) {
      claim.replace(at, what.size(), with);
    }
  };
  replace("$1", std::to_string(batch));
  replace("$2", "'b' || :token");
  replace("$3", "30000");
  const auto script = o.work / ("claim_mark_" + std::to_string(batch) + ".sql");
  // The claim, then the mark as the relay's settle does it: the token's rows published and its lanes
  // handed back (the rows found through the lanes, as the claim found them).
  std::ofstream(script) << "\\set token random(1, 2000000000)\n"
                        << claim << ";\n"
                        << "WITH lanes AS (UPDATE outbox_lanes SET claimed_by = NULL, claimed_until = NULL, "
                           "version = version + 1 WHERE claimed_by = 'b' || :token RETURNING lane) "
                           "UPDATE outbox SET published_at = now(), claimed_by = NULL, claimed_until = NULL "
                           "WHERE lane IN (SELECT lane FROM lanes) AND claimed_by = 'b' || :token AND published_at IS NULL;\n";
  const std::string command = "PGOPTIONS='-c search_path=" + schema.name + "' pgbench -n -c 2 -j 2 -t " +
                              std::to_string(transactions_per_client) + " -f " + script.string() + " \"" + o.pg + "\" 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (pipe != nullptr && fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  if (pipe != nullptr) pclose(pipe);
  const std::size_t at = output.find("tps = ");
  if (at == std::string::npos || output.find("aborted") != std::string::npos) {
    throw std::runtime_error("pgbench failed:\n" + output);
  }
  const double tps = std::stod(output.substr(at + 6));
  const std::int64_t left = Pg(schema.dsn).scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL");
  // Each transaction moved up to `batch` rows; count what was actually moved.
  const std::int64_t moved = 2LL * transactions_per_client * batch + batch - left;
  return tps * static_cast<double>(moved) / (2.0 * transactions_per_client);
}

// What reached `key`: every event once, each aggregate in id order; throws otherwise. Returns the
// commit-to-XADD lags (ms) of the entries whose aggregate_id starts with `lag_prefix` (if given).
std::vector<std::int64_t> verify_stream(Redis& redis, const std::string& key, std::int64_t expected,
                                        const std::string& lag_prefix = {}) {
  OrderCheck check;
  std::vector<std::int64_t> lags;
  for_each_entry(redis, key, [&](const Entry& entry) {
    check.see(entry.event, entry.aggregate);
    if (!lag_prefix.empty() && entry.aggregate.rfind(lag_prefix, 0) == 0) {
      lags.push_back(entry.added_ms - rfc3339_ms(entry.created_at));
    }
  });
  check.expect(key, expected);
  return lags;
}

std::int64_t unpublished(Pg& pg) { return pg.scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"); }

// 30,000 rows committed at once into an idle relay's never-analyzed outbox: rows/s from the commit
// until the last row is marked published.
double burst(const Options& o, Redis& redis, int rows, int aggregates, int batch, Sink sink = Sink::redis) {
  Schema schema(o.pg, o.relay, o.work);
  const std::string stream =
      (sink == Sink::nats ? "NATSBURST" : "burst") + std::to_string(aggregates) + "x" + random_suffix();
  std::optional<JetStream> nats;
  if (sink == Sink::nats) {
    nats.emplace(o.nats_url);
    nats->add_stream(stream);
  }
  const auto config = write_config(o, schema.dsn, stream, batch, "retention: { max_age: 0 }\n", {}, sink);
  Child relay({o.relay, "--config", config.string()}, o.work / (stream + ".log"));
  std::this_thread::sleep_for(1s);  // idle: its claims found nothing
  Pg pg(schema.dsn);
  fill(schema.dsn, rows, aggregates, false);
  const auto committed = Clock::now();
  while (unpublished(pg) > 0) {
    if (Clock::now() - committed > 120s) throw std::runtime_error("burst did not drain in 120 s");
    std::this_thread::sleep_for(5ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - committed).count();
  relay.stop();
  if (nats) {
    verify_nats_stream(*nats, stream, rows);
  } else {
    verify_stream(redis, stream + ".order", rows);
    drop_stream(redis, stream);
  }
  return rows / seconds;
}

// Server times (ms) of the claim statement in the server's log since byte `from`: its parse, bind
// (planning: the relay sends unnamed statements) and execute, summed per claim. Each phase is a
// "duration: X ms  <phase> <unnamed>:" line of the backend [pid], the statement on the next lines
// (indented by a tab).
std::vector<double> claim_times(const std::filesystem::path& log, std::uintmax_t from) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(from));
  std::vector<double> times;
  std::map<std::string, double> phases_so_far;  // backend pid -> parse + bind of its current claim
  std::string line, pid, phase;
  double pending = -1;  // >= 0: a duration line whose statement starts on the next line
  while (std::getline(in, line)) {
    const std::size_t text = line.find_first_not_of(" \t");
    if (pending >= 0 && text != std::string::npos && line.compare(text, 26, "WITH lanes AS MATERIALIZED") == 0) {
      double& sum = phases_so_far[pid];
      sum += pending;
      if (phase == "execute") {
        times.push_back(sum);
        sum = 0;
      }
    }
    pending = -1;
    const std::size_t at = line.find("duration: ");
    if (at == std::string::npos) continue;
    const std::size_t open = line.find('[');
    const std::size_t close = line.find(']', open);
    pid = open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
    const std::size_t ms = line.find(" ms  ", at);
    if (ms == std::string::npos) continue;
    phase = line.substr(ms + 5, line.find(' ', ms + 5) - (ms + 5));
    pending = std::stod(line.substr(at + 10));
  }
  std::sort(times.begin(), times.end());
  return times;
}

double percentile(const std::vector<double>& sorted, int p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, sorted.size() * static_cast<std::size_t>(p) / 100)];
}

struct BacklogRun {
  double rows_per_second = 0;
  std::vector<double> claims;  // ms, sorted
  std::vector<std::int64_t> lags;
  int inserted = 0;
};

// A 1,000,000-row backlog over 100 aggregates drained by `relays` relays (batch 500, concurrency 2
// each); with `rate` > 0, new rows go into 1,000 other aggregates at that rate meanwhile.
BacklogRun backlog(const Options& o, Redis& redis, int relays, int rate) {
  constexpr int kRows = 1'000'000;
  Schema schema(o.pg, o.relay, o.work);
  fill(schema.dsn, kRows, 100, false);
  const std::string stream = "backlog" + std::to_string(relays) + "x" + random_suffix();
  const std::string timed_dsn = search_path_dsn(o.pg, schema.name, "-c log_min_duration_statement=0");
  const std::uintmax_t log_from = std::filesystem::file_size(o.pg_log);
  BacklogRun run;
  const auto start = Clock::now();
  {
    std::vector<std::unique_ptr<Child>> children;
    for (int r = 0; r < relays; ++r) {
      const auto config = write_config(o, timed_dsn, stream, 500, "retention: { max_age: 0 }\n", "-" + std::to_string(r));
      children.push_back(std::make_unique<Child>(std::vector<std::string>{o.relay, "--config", config.string()},
                                                 o.work / (stream + "-" + std::to_string(r) + ".log")));
    }
    std::thread writer([&] {
      if (rate <= 0) return;
      Pg pg(schema.dsn);
      const auto interval = std::chrono::nanoseconds(1'000'000'000LL / rate);
      const auto first = Clock::now() + 2s;
      for (int n = 0; n < rate * o.seconds; ++n) {
        std::this_thread::sleep_until(first + n * interval);
        pg.query("INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES "
                 "('order', $1, 'order.created', '{\"n\": 1}')",
                 {"new-" + std::to_string(n % 1'000)});
        ++run.inserted;
      }
    });
    writer.join();
    Pg pg(schema.dsn);
    while (unpublished(pg) > 0) {
      if (Clock::now() - start > 600s) throw std::runtime_error("backlog did not drain in 600 s");
      std::this_thread::sleep_for(20ms);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.rows_per_second = (kRows + run.inserted) / seconds;
  run.claims = claim_times(o.pg_log, log_from);
  run.lags = verify_stream(redis, stream + ".order", kRows + run.inserted, rate > 0 ? "new-" : "");
  std::sort(run.lags.begin(), run.lags.end());
  drop_stream(redis, stream);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--pg") o.pg = value;
    else if (key == "--redis-port") o.redis_port = std::stoi(value);
    else if (key == "--relay") o.relay = value;
    else if (key == "--work") o.work = value;
    else if (key == "--rate") o.rate = std::stoi(value);
    else if (key == "--seconds") o.seconds = std::stoi(value);
    else if (key == "--only") o.only = value;
    else if (key == "--pg-log") o.pg_log = value;
    else if (key == "--nats-url") o.nats_url = value;
  }
  if (o.pg.empty() || o.redis_port == 0 || o.relay.empty() || o.work.empty()) {
    std::cerr << "usage: idemrelay-bench --pg DSN --pg-log FILE --redis-port P --relay BIN --work DIR [--rate N] "
                 "[--seconds S] [--nats-url URL] [--only throughput|latency|burst|backlog]\n";
    return 2;
  }
  std::filesystem::create_directories(o.work);
  try {
    Redis redis(o.redis_port);
    struct Row {
      int batch;
      int rows;
      int transactions;
    };
    const std::vector<Row> plan = {{1, 3'000, 1'500}, {100, 60'000, 300}, {500, 100'000, 100}};
    const auto runs = [&](const char* part) { return o.only.empty() || o.only == part; };
    if (runs("burst")) {
      std::cout << "## bursts into an idle relay, never-analyzed outbox (30,000 rows committed at once; concurrency 2)\n\n"
                << "| shape | batch | rows/s (commit to drained), Redis Streams | rows/s, NATS JetStream |\n"
                << "|---|---:|---:|---:|\n";
      const auto nats_burst = [&](int aggregates, int batch) {
        return o.nats_url.empty() ? std::string("-")
                                  : std::to_string(std::lround(burst(o, redis, 30'000, aggregates, batch, Sink::nats)));
      };
      for (const int batch : {100, 500}) {
        const double flat = burst(o, redis, 30'000, 30'000, batch);
        std::printf("| 30,000 aggregates x 1 row | %d | %.0f | %s |\n", batch, flat, nats_burst(30'000, batch).c_str());
        std::fflush(stdout);
        const double deep = burst(o, redis, 30'000, 40, batch);
        std::printf("| 40 aggregates x 750 rows | %d | %.0f (%.2fx the flat shape) | %s |\n", batch, deep, deep / flat,
                    nats_burst(40, batch).c_str());
        std::fflush(stdout);
      }
      const double deep = burst(o, redis, 30'000, 40, 1'000);
      std::printf("| 40 aggregates x 750 rows | 1000 | %.0f | %s |\n\n", deep, nats_burst(40, 1'000).c_str());
      std::fflush(stdout);
    }
    if (runs("backlog")) {
      if (o.pg_log.empty()) throw std::runtime_error("--pg-log is needed for the backlog runs");
      std::cout << "## a 1,000,000-row backlog over 100 aggregates (not analyzed by the bench: autovacuum may analyze it mid-run; batch 500, concurrency 2 per relay)\n\n"
                << "| relays | rows/s | claims | claim p50 ms | claim p99 ms | claim max ms | new rows | their lag p50 ms | p99 ms |\n"
                << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
      for (const int relays : {1, 2, 4}) {
        const BacklogRun run = backlog(o, redis, relays, relays == 1 ? o.rate : 0);
        const auto lag = [&](int p) {
          return run.lags.empty() ? std::string("-")
                                  : std::to_string(run.lags[std::min(run.lags.size() - 1, run.lags.size() * p / 100)]);
        };
        std::printf("| %d | %.0f | %zu | %.1f | %.1f | %.1f | %d | %s | %s |\n", relays, run.rows_per_second,
                    run.claims.size(), percentile(run.claims, 50), percentile(run.claims, 99),
                    run.claims.empty() ? 0.0 : run.claims.back(), run.inserted, lag(50).c_str(), lag(99).c_str());
        std::fflush(stdout);
      }
      std::cout << "\nClaim times: the server's parse + bind (planning) + execute of each claim statement, from its log "
                   "(log_min_duration_statement = 0 on the relays' sessions). New rows: inserted at --rate rows/s for "
                   "--seconds into 1,000 other aggregates while the backlog drains; lag = stream entry id - created_at.\n"
                   "Every run: each event exactly once in the stream, each aggregate in id order (checked).\n\n";
    }
    if (runs("throughput")) {
      std::cout << "## idemrelay throughput (backlog drained; 1,000 aggregates; analyzed; concurrency 2)\n\n"
                << "| batch | rows | relay rows/s, Redis Streams | relay rows/s, NATS JetStream "
                   "| claim+mark SQL alone rows/s (pgbench, 2 clients) | Redis / SQL | NATS / SQL |\n"
                << "|---:|---:|---:|---:|---:|---:|---:|\n";
      for (const Row& row : plan) {
        const double relay = throughput(o, redis, row.batch, row.rows);
        const double nats = o.nats_url.empty() ? 0 : throughput(o, redis, row.batch, row.rows, Sink::nats);
        const double bound = sql_bound(o, row.batch, row.transactions);
        const auto share = [&](double rate) {
          return rate > 0 ? std::to_string(static_cast<int>(100.0 * rate / bound + 0.5)) + "%" : std::string("-");
        };
        std::printf("| %d | %d | %.0f | %s | %.0f | %s | %s |\n", row.batch, row.rows, relay,
                    nats > 0 ? std::to_string(static_cast<long>(nats + 0.5)).c_str() : "-", bound, share(relay).c_str(),
                    share(nats).c_str());
        std::fflush(stdout);
      }
      if (!o.nats_url.empty()) {
        std::cout << "\nNATS: one JetStream stream per run (file storage, duplicate window 10 m), read back after the "
                     "drain: each event exactly once (Nats-Msg-Id), each aggregate in id order (checked).\n";
      }
    }
    if (runs("latency")) {
      const Latency lag = latency(o, redis);
      std::printf("\n## commit-to-XADD lag at %d rows/s for %d s (batch 100, NOTIFY on)\n\n", o.rate, o.seconds);
      std::printf("| samples | p50 ms | p99 ms | max ms |\n|---:|---:|---:|---:|\n| %zu | %.0f | %.0f | %.0f |\n", lag.samples,
                  lag.p50, lag.p99, lag.max);
      std::printf("\n## outbox table during that run (retention max_age 2s, batch 1000, every 500ms)\n\n");
      for (const auto& sample : lag.soak) std::printf("- %s\n", sample.c_str());
    }
  } catch (const std::exception& error) {
    std::cerr << "idemrelay-bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
