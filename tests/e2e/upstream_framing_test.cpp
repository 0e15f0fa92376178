// The response side of framing, against an upstream that sends exactly the bytes each case
// scripts (support/raw_upstream.hpp). A response RFC 9112 says not to trust (two framings,
// malformed lengths or chunks, a bad status line, a body cut short) is never stored or passed on
// as the answer: the client gets 502 `upstream-bad-response`, and since the upstream read the
// request (its own counter says so), the outcome is unknown: the record is locked and a retry
// gets 502 `outcome-unknown`, never a second execution. Well-framed oddities (a body delimited by
// the close, a 204 that claims a length) are served, and never poison the pooled connection for
// the next request.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/raw_upstream.hpp"
#include "support/streaming_client.hpp"

namespace idem::test::e2e {
namespace {

// POST /orders/{id}/refunds: the "refunds" route (key required, lock on an unknown outcome).
std::string refunds_target(std::string_view id) { return "/orders/" + std::string(id) + "/refunds"; }

HttpRequest refund(std::string_view id, std::string_view key) {
  return HttpRequest::post(refunds_target(id), R"({"amount":1})")
      .with("Idempotency-Key", std::string(key))
      .with("X-Tenant-Id", "t1")
      .with("Content-Type", "application/json");
}

class UpstreamFraming : public ProxyTest {
 protected:
  // One worker: one upstream pool, so a request follows the previous one on its kept-alive
  // connection (with two, the next could land on the other worker's pool and prove nothing).
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    std::string text(default_config_template());
    const std::size_t workers = text.find("workers: 2");
    text.replace(workers, std::string_view("workers: 2").size(), "workers: 1");
    options.config_template = std::move(text);
    options.start_upstream = false;
    options.upstream_port = raw_.port();
    return options;
  }

  RawUpstream raw_;
};

TEST_F(UpstreamFraming, UntrustworthyResponsesAre502AndTheOutcomeStaysUnknownNeverRunTwice) {
  struct Case {
    std::string id;
    std::string reply;
  };
  const std::vector<Case> cases = {
      {"cl-and-te", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"te-and-cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      // A coding other than chunked beside a length: RFC 9112 §6.3 has the coding win, Beast the
      // length; passed on by either, the client would read coded bytes as plain.
      {"coding-and-cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"},
      {"two-lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"},
      {"signed-length", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab"},
      {"list-length", "HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nab"},
      {"bad-chunk-size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n"},
      {"overflowing-chunk",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nab\r\n0\r\n\r\n"},
      {"bad-status-code", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"},
      {"not-http", "SSH-2.0-OpenSSH_9.2\r\n\r\n"},
      {"space-before-colon", "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nab"},
  };
  for (const Case& c : cases) raw_.script(refunds_target(c.id), RawUpstream::Reply{c.reply, true});
  // Cut short: the length promises 10 bytes, the connection closes after 5.
  raw_.script(refunds_target("cut-short"),
              RawUpstream::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true});

  std::vector<std::string> ids;
  for (const Case& c : cases) ids.push_back(c.id);
  ids.emplace_back("cut-short");
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    const std::string key = unique_key(id);
    const HttpResponse first = send(refund(id, key));
    expect_problem(first, 502, "upstream-bad-response");
    EXPECT_EQ(raw_.executions(refunds_target(id)), 1u);
    const HttpResponse retry = send(refund(id, key));
    expect_problem(retry, 502, "outcome-unknown");
    EXPECT_EQ(raw_.executions(refunds_target(id)), 1u) << "the retry of an unknown outcome executed again";
  }
}

// A body delimited by the closing of the connection (HTTP/1.0 style) is a complete response:
// stored and replayed byte for byte, with the length the proxy now knows.
TEST_F(UpstreamFraming, ABodyEndedByTheCloseIsStoredWithItsLength) {
  raw_.script(refunds_target("close-delimited"),
              RawUpstream::Reply{"HTTP/1.0 201 Created\r\nContent-Type: text/plain\r\n\r\nall of it", true});
  const std::string key = unique_key("close-delimited");
  const HttpResponse first = send(refund("close-delimited", key));
  ASSERT_EQ(first.status, 201) << describe(first);
  EXPECT_EQ(first.body, "all of it");
  EXPECT_EQ(first.header("Content-Length"), "9");
  const HttpResponse replay = send(refund("close-delimited", key));
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.body, "all of it");
  EXPECT_EQ(raw_.executions(refunds_target("close-delimited")), 1u);
}

// A 204 has no body whatever its fields say (RFC 9110 §15.3.5): bytes after its head are not a
// body, and whatever they are, the next request on that upstream connection gets its own answer,
// even when they arrive after the proxy stopped reading (an upstream that sends a body anyway).
TEST_F(UpstreamFraming, BytesAfterABodilessResponseNeverBecomeTheNextAnswer) {
  const std::string forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
  raw_.script(refunds_target("no-content"), RawUpstream::Reply{"HTTP/1.1 204 No Content\r\nContent-Length: 40\r\n\r\n",
                                                               false, forged, std::chrono::milliseconds(100)});
  raw_.script(refunds_target("next"), RawUpstream::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal", false});
  const HttpResponse no_content = send(refund("no-content", unique_key("no-content")));
  EXPECT_EQ(no_content.status, 204) << describe(no_content);
  EXPECT_EQ(no_content.body, "");
  // The stray bytes are on that connection before the next request is sent.
  ASSERT_TRUE(eventually([&] { return raw_.late_writes() == 1; }, std::chrono::seconds(2)));
  for (int i = 0; i < 3; ++i) {
    const HttpResponse next = send(refund("next", unique_key("next")));
    EXPECT_EQ(next.status, 200) << describe(next);
    EXPECT_EQ(next.body, "real") << "an answer forged by the bytes after a 204 was taken for the next request";
  }
  EXPECT_EQ(raw_.executions(refunds_target("next")), 3u);
}

// Go's net/http answers a request whose body it will not read (past 256 KB unread) and closes:
// the unread body turns the close into a reset, which fails the proxy's write part-way through a
// request the upstream already ran. On a reused keep-alive connection that write error sent the
// request again on a fresh connection: a second execution. Only a request of which not one byte
// was written goes again; this one's outcome is unknown (502, the record locked, the retry 502
// outcome-unknown). The body (7 MiB) outgrows what the connection can hold unread: the proxy's
// send buffer (at most tcp_wmem's 4 MiB) and the upstream's receive window (tcp_rmem's 128 KiB,
// never grown since nothing reads it), so the write fails whatever the timing.
TEST_F(UpstreamFraming, AnUpstreamThatAnswersBeforeReadingTheBodyAndClosesRunsTheRequestOnce) {
  raw_.script("/orders", RawUpstream::Reply{.bytes = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n"
                                                     "Connection: close\r\n\r\n",
                                            .close_after = true,
                                            .answer_after_head = true});
  // A kept-alive connection in the pool, which the keyed request then reuses.
  const HttpResponse warm = send(HttpRequest::get("/plain/warm"));
  ASSERT_EQ(warm.status, 200) << describe(warm);
  ASSERT_EQ(raw_.connections(), 1u);

  const std::string key = unique_key("answered-before-the-body");
  const std::string body(7 * 1024 * 1024, 'x');
  const HttpRequest request = HttpRequest::post("/orders", body, "application/octet-stream")
                                  .with("Idempotency-Key", key)
                                  .with("X-Tenant-Id", "t1");
  const HttpResponse first = send(request, std::chrono::seconds(20));
  expect_problem(first, 502, "upstream-bad-response");
  EXPECT_EQ(raw_.executions("/orders"), 1u) << "the part-written request was sent again on a fresh connection";
  EXPECT_EQ(raw_.connections(), 1u) << "a second connection was opened for it";
  const HttpResponse retry = send(request, std::chrono::seconds(20));
  expect_problem(retry, 502, "outcome-unknown");
  EXPECT_EQ(raw_.executions("/orders"), 1u);
}

// The same upstream behaviour under a safe request whose body is streamed (a GET with a chunked
// body, unguarded): once one window of the body went out, a fresh connection could only carry
// the body without its start, which the upstream would take for the whole (a well-framed chunked
// body). So it is never sent again: the client gets 502 and the upstream sees one request.
TEST_F(UpstreamFraming, AStreamedBodyPartlySentIsNeverSentAgainWithoutItsStart) {
  raw_.script_next("/plain/search",
                   RawUpstream::Reply{.bytes = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n"
                                               "Connection: close\r\n\r\n",
                                      .close_after = true,
                                      .answer_after_head = true});
  const HttpResponse warm = send(HttpRequest::get("/plain/warm"));
  ASSERT_EQ(warm.status, 200) << describe(warm);
  ASSERT_EQ(raw_.connections(), 1u);

  StreamingConnection client(proxy().proxy_port());
  // The send fails part-way once the proxy gives up on the request: its outcome is not judged.
  (void)client.send_pattern_body("GET /plain/search HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n",
                                 7 * 1024 * 1024, true, std::chrono::seconds(20));
  const StreamedResponse answer = client.read_response(keeping_body());
  if (answer.error.empty()) {
    EXPECT_EQ(answer.status, 502);
  }
  EXPECT_EQ(raw_.executions("/plain/search"), 1u) << "the body's rest was sent again on a fresh connection";
  EXPECT_EQ(raw_.connections(), 1u) << "a second connection was opened for it";
}

// The same two framings on a streamed answer: 502, nothing of the body passed on.
TEST_F(UpstreamFraming, AStreamedAnswerWithACodingBesideALengthIs502) {
  raw_.script("/plain/coded",
              RawUpstream::Reply{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello", true});
  const HttpResponse coded = send(HttpRequest::get("/plain/coded"));
  expect_problem(coded, 502, "upstream-bad-response");
  EXPECT_EQ(raw_.executions("/plain/coded"), 1u);
}

}  // namespace
}  // namespace idem::test::e2e
