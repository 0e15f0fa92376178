// W3C trace context from the outbox row's headers to the consumer: the writer puts traceparent
// (and tracestate) in `headers`; the relay copies them, checked, to the stream entry's fields, the
// webhook's headers and the JetStream message's headers. A malformed one is dropped (counted, logged), never passed on,
// and the event is published all the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "relay/nats_env.hpp"
#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/raw_upstream.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

const std::string kTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const std::string kTracestate = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

class RelayTraceContext : public RelayFixture {
 protected:
  // One row of aggregate `id` with `headers` (JSON) as the legacy writer would insert it.
  std::int64_t insert_with_headers(const std::string& aggregate_id, const std::string& headers) {
    const auto rows = schema_->client().query(
        "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers) "
        "VALUES ('order', $1, 'paid', '{\"amount\": 5}', $2::jsonb) RETURNING id",
        {aggregate_id, headers});
    return std::stoll(*rows.at(0)[0]);
  }

  // A traced row, one with a malformed traceparent (and a tracestate, dropped with it), one with a
  // tracestate carrying a header injection, one with a tracestate alone, one without any.
  struct Rows {
    std::int64_t traced, bad_parent, bad_state, state_alone, untraced;
  };
  Rows insert_rows() {
    Rows rows{};
    rows.traced = insert_with_headers(
        "t1", R"({"traceparent": ")" + kTraceparent + R"(", "tracestate": ")" + kTracestate + R"(", "x": 1})");
    rows.bad_parent = insert_with_headers(
        "t2", R"({"traceparent": "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "tracestate": "a=b"})");
    rows.bad_state = insert_with_headers(
        "t3", R"({"traceparent": ")" + kTraceparent + R"(", "tracestate": "a=b\r\nX-Injected: 1"})");
    rows.state_alone = insert_with_headers("t4", R"({"tracestate": "a=b"})");
    rows.untraced = insert_with_headers("t5", R"({})");
    return rows;
  }
};

TEST_F(RelayTraceContext, StreamEntriesCarryTheWritersTraceContextAndNeverAMalformedOne) {
  settings_.admin_port = free_port();
  const Rows rows = insert_rows();
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();

  const auto entries = read_stream(*redis_, stream("order"));
  ASSERT_EQ(entries.size(), 5u) << "every event is published, traced or not";
  std::map<std::int64_t, const StreamEntry*> by_id;
  for (const StreamEntry& entry : entries) by_id[entry.event_id()] = &entry;
  const auto field = [&](std::int64_t id, const std::string& name) -> std::string {
    const auto& fields = by_id.at(id)->fields;
    const auto it = fields.find(name);
    return it == fields.end() ? "<absent>" : it->second;
  };
  EXPECT_EQ(field(rows.traced, "traceparent"), kTraceparent);
  EXPECT_EQ(field(rows.traced, "tracestate"), kTracestate);
  EXPECT_NE(field(rows.traced, "headers").find(kTraceparent), std::string::npos) << "headers kept as written";
  EXPECT_EQ(field(rows.bad_parent, "traceparent"), "<absent>");
  EXPECT_EQ(field(rows.bad_parent, "tracestate"), "<absent>") << "dropped with its traceparent";
  EXPECT_EQ(field(rows.bad_state, "traceparent"), kTraceparent);
  EXPECT_EQ(field(rows.bad_state, "tracestate"), "<absent>");
  EXPECT_EQ(field(rows.state_alone, "tracestate"), "<absent>");
  EXPECT_EQ(field(rows.untraced, "traceparent"), "<absent>");

  const HttpResponse metrics = send(settings_.admin_port, HttpRequest::get("/metrics"));
  EXPECT_NE(metrics.body.find("\nidemrelay_trace_context_dropped_total 3\n"), std::string::npos) << metrics.body;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();
  EXPECT_NE(log.find(R"("event":"trace_context_dropped","event_id":)" + std::to_string(rows.bad_parent) +
                     R"(,"why":"malformed traceparent")"),
            std::string::npos)
      << log;
}

TEST_F(RelayTraceContext, WebhooksCarryTheWritersTraceContextAndNeverAMalformedOne) {
  RawUpstream consumer;
  settings_.http = true;
  settings_.http_url = "http://127.0.0.1:" + std::to_string(consumer.port()) + "/hooks/{aggregate_id}";
  insert_rows();
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();

  // The request heads as they arrived, one per aggregate.
  const std::string received = consumer.received();
  const auto head_of = [&](const std::string& aggregate) {
    const std::size_t at = received.find("POST /hooks/" + aggregate + " ");
    if (at == std::string::npos) return std::string("<none>");
    return received.substr(at, received.find("\r\n\r\n", at) - at);
  };
  EXPECT_NE(head_of("t1").find("\r\ntraceparent: " + kTraceparent + "\r\n"), std::string::npos) << head_of("t1");
  EXPECT_NE(head_of("t1").find("\r\ntracestate: " + kTracestate), std::string::npos) << head_of("t1");
  for (const std::string aggregate : {"t2", "t4", "t5"}) {
    EXPECT_NE(head_of(aggregate), "<none>") << aggregate << " is delivered";
    EXPECT_EQ(head_of(aggregate).find("\r\ntrace"), std::string::npos) << head_of(aggregate);
  }
  EXPECT_NE(head_of("t3").find("\r\ntraceparent: " + kTraceparent + "\r\n"), std::string::npos) << head_of("t3");
  EXPECT_EQ(head_of("t3").find("tracestate"), std::string::npos) << head_of("t3");
  EXPECT_EQ(received.find("\r\nX-Injected"), std::string::npos) << "no header line injected";
}

// Read back from the stream with libnats: the headers a JetStream consumer sees on each message.
TEST_F(RelayTraceContext, NatsMessagesCarryTheWritersTraceContextAndNeverAMalformedOne) {
  NatsServer server(dir_->path());
  settings_.nats_url = server.url();
  settings_.nats_stream = "S" + prefix_;
  create_stream(server.url(), settings_.nats_stream, prefix_ + ".>", 60s);
  const Rows rows = insert_rows();
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();

  const std::vector<NatsMessage> messages = read_stream_messages(server.url(), settings_.nats_stream);
  ASSERT_EQ(messages.size(), 5u) << "every event is published, traced or not";
  std::map<std::int64_t, const NatsMessage*> by_id;
  for (const NatsMessage& message : messages) by_id[std::stoll(message.msg_id)] = &message;
  const auto names = [&](std::int64_t id) {
    std::vector<std::string> sorted = by_id.at(id)->header_names;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(by_id.at(rows.traced)->traceparent, kTraceparent);
  EXPECT_EQ(by_id.at(rows.traced)->tracestate, kTracestate);
  EXPECT_EQ(names(rows.traced), (Names{"Nats-Msg-Id", "traceparent", "tracestate"}));
  EXPECT_EQ(names(rows.bad_parent), Names{"Nats-Msg-Id"}) << "a malformed traceparent and its tracestate dropped";
  EXPECT_EQ(by_id.at(rows.bad_state)->traceparent, kTraceparent);
  EXPECT_EQ(names(rows.bad_state), (Names{"Nats-Msg-Id", "traceparent"})) << "no tracestate, no injected header";
  EXPECT_EQ(names(rows.state_alone), Names{"Nats-Msg-Id"});
  EXPECT_EQ(names(rows.untraced), Names{"Nats-Msg-Id"});
  EXPECT_NE(by_id.at(rows.traced)->body.find(kTraceparent), std::string::npos) << "headers kept as written in the body";
}

}  // namespace
}  // namespace idem::test::relay
