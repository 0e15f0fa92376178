// wire/body_pump.hpp and wire/response_head.hpp in process, over a scripted source and a
// recording sink (no sockets): bytes and framing kept, what a read brings written before the next
// read (backpressure, and an event flushed at once), a body cut short never finished, a head
// sent alone while the body is awaited.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "http/client_request.hpp"
#include "http/streamed_forwarding.hpp"
#include "wire/body_pump.hpp"
#include "wire/response_head.hpp"

namespace idem::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

// What happened, in order: a read that brought bytes ("r:<n>") or a write ("w:<bytes>").
using Events = std::vector<std::string>;

struct ScriptedSource {
  using Step = std::variant<std::string, boost::system::error_code>;
  ScriptedSource(std::initializer_list<Step> steps, Events* events) : script(steps), events(events) {}
  std::deque<Step> script;
  Events* events;
  std::uint64_t bytes_read = 0;
  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    if (script.empty()) co_return wire::IoResult{asio::error::eof, 0};
    if (auto* ec = std::get_if<boost::system::error_code>(&script.front())) {
      const auto error = *ec;
      script.pop_front();
      co_return wire::IoResult{error, 0};
    }
    std::string& bytes = std::get<std::string>(script.front());
    const std::size_t n = asio::buffer_copy(buffer, asio::buffer(bytes));
    bytes.erase(0, n);
    if (bytes.empty()) script.pop_front();
    bytes_read += n;
    events->push_back("r:" + std::to_string(n));
    co_return wire::IoResult{boost::system::error_code{}, n};
  }
};

struct RecordingSink {
  explicit RecordingSink(Events* events, std::optional<boost::system::error_code> fail_next = std::nullopt)
      : events(events), fail_next(fail_next) {}
  Events* events;
  std::string taken;
  std::optional<boost::system::error_code> fail_next;
  template <class Buffers>
  asio::awaitable<wire::IoResult> write(Buffers buffers) {
    if (fail_next) co_return wire::IoResult{*fail_next, 0};
    const std::string bytes = beast::buffers_to_string(buffers);
    taken += bytes;
    events->push_back("w:" + bytes);
    co_return wire::IoResult{boost::system::error_code{}, bytes.size()};
  }
};

template <class Awaitable>
auto run(Awaitable awaitable) {
  asio::io_context io;
  std::optional<typename Awaitable::value_type> result;
  asio::co_spawn(io, std::move(awaitable), [&](std::exception_ptr error, auto value) {
    if (error) std::rethrow_exception(error);
    result = std::move(value);
  });
  io.run();
  return *result;
}

// A response parser made to read `head`, left as the pump finds it.
void read_head(wire::StreamedResponseParser& parser, std::string_view head) {
  parser.body_limit(boost::none);
  boost::system::error_code ec;
  parser.put(asio::buffer(head.data(), head.size()), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
}

TEST(BodyPump, ALengthBodyGoesOutAsItComesAndNeverMoreIsReadThanTheSinkTook) {
  Events events;
  const std::string body(100'000, 'x');
  ScriptedSource source{{body.substr(0, 7), body.substr(7, 50'000), body.substr(50'007)}, &events};
  RecordingSink sink{&events};
  wire::StreamedResponseParser parser;
  read_head(parser, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
  beast::flat_buffer in;
  std::vector<char> window(wire::kBodyWindow);
  std::uint64_t most_held = 0;
  struct Watching {
    ScriptedSource& source;
    RecordingSink& sink;
    std::uint64_t& most_held;
    asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
      const std::uint64_t body_taken = sink.taken.size() > 4 ? sink.taken.size() - 4 : 0;
      most_held = std::max<std::uint64_t>(most_held, source.bytes_read - body_taken);
      co_return co_await source.read_some(buffer);
    }
  } watching{source, sink, most_held};
  const wire::PumpResult result =
      run(wire::pump_body(parser, in, watching, sink, wire::OutFraming::raw, window, "HEAD"));
  EXPECT_EQ(result.end, wire::PumpEnd::complete);
  EXPECT_EQ(result.body_bytes, body.size());
  EXPECT_EQ(sink.taken, "HEAD" + body);
  EXPECT_LE(most_held, wire::kBodyWindow) << "read on while the sink had not taken the last window";
  // The head went alone while the body was awaited; the first read brought 7 bytes, and they went
  // out before the next read.
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0], "w:HEAD");
  EXPECT_EQ(events[1], "r:7");
  EXPECT_EQ(events[2], "w:xxxxxxx");
}

TEST(BodyPump, AHeadGoesAloneWhileTheBodyIsAwaitedAndEachReadIsWrittenAtOnce) {
  Events events;
  ScriptedSource source{{"5\r\nhello\r\n", "6\r\n world\r\n", "0\r\n\r\n"}, &events};
  RecordingSink sink{&events};
  wire::StreamedResponseParser parser;
  read_head(parser, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  beast::flat_buffer in;
  std::vector<char> window(wire::kBodyWindow);
  const wire::PumpResult result =
      run(wire::pump_body(parser, in, source, sink, wire::OutFraming::chunked, window, "HEAD"));
  EXPECT_EQ(result.end, wire::PumpEnd::complete);
  EXPECT_EQ(events, (Events{"w:HEAD", "r:10", "w:5\r\nhello\r\n", "r:11", "w:6\r\n world\r\n", "r:5", "w:0\r\n\r\n"}));
}

TEST(BodyPump, ABodyCutShortIsNeverFinished) {
  for (const bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "length");
    Events events;
    ScriptedSource source{{chunked ? std::string("a\r\n01234") : std::string("01234")}, &events};
    RecordingSink sink{&events};
    wire::StreamedResponseParser parser;
    read_head(parser, chunked ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              : "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    beast::flat_buffer in;
    std::vector<char> window(64);
    const wire::PumpResult result = run(wire::pump_body(
        parser, in, source, sink, chunked ? wire::OutFraming::chunked : wire::OutFraming::raw, window, ""));
    EXPECT_EQ(result.end, wire::PumpEnd::source_failed);
    EXPECT_EQ(result.ec, beast::http::error::partial_message);
    EXPECT_EQ(sink.taken.find("0\r\n\r\n"), std::string::npos) << "a last chunk after a body cut short";
    EXPECT_EQ(result.body_bytes, 5u);
  }
}

TEST(BodyPump, ABodyWithoutALengthEndsWithTheClose) {
  Events events;
  ScriptedSource source{{"abc", "def"}, &events};
  RecordingSink sink{&events};
  wire::StreamedResponseParser parser;
  read_head(parser, "HTTP/1.1 200 OK\r\n\r\n");
  beast::flat_buffer in;
  std::vector<char> window(64);
  const wire::PumpResult result = run(wire::pump_body(parser, in, source, sink, wire::OutFraming::raw, window, ""));
  EXPECT_EQ(result.end, wire::PumpEnd::complete);
  EXPECT_EQ(sink.taken, "abcdef");
}

TEST(BodyPump, AMalformedChunkAndAFailingSinkAreTold) {
  Events events;
  ScriptedSource bad{{"zz\r\nab\r\n"}, &events};
  RecordingSink sink{&events};
  wire::StreamedResponseParser parser;
  read_head(parser, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  beast::flat_buffer in;
  std::vector<char> window(64);
  EXPECT_EQ(run(wire::pump_body(parser, in, bad, sink, wire::OutFraming::chunked, window, "")).end,
            wire::PumpEnd::malformed);

  ScriptedSource good{{"0123456789"}, &events};
  RecordingSink failing{&events, asio::error::broken_pipe};
  wire::StreamedResponseParser length;
  read_head(length, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
  beast::flat_buffer in2;
  const wire::PumpResult failed = run(wire::pump_body(length, in2, good, failing, wire::OutFraming::raw, window, ""));
  EXPECT_EQ(failed.end, wire::PumpEnd::sink_failed);
  EXPECT_EQ(failed.ec, asio::error::broken_pipe);
  EXPECT_EQ(failed.unsent, 10u) << "what the failed write carried is still in the window";
  EXPECT_EQ(failed.bytes_written, 0u);
}

// The client's request body through ClientRequestParser's window: chunked in, chunked out,
// extensions and trailers dropped, never more than a window between a read and a write.
TEST(BodyPump, AClientsChunkedBodyGoesOnChunkByChunk) {
  ClientRequest request;
  ClientRequestParser parser(request);
  parser.body_limit(1024);
  const std::string head = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  boost::system::error_code ec;
  parser.put(asio::buffer(head), ec);
  ASSERT_TRUE(parser.is_header_done());
  Events events;
  ScriptedSource source{{"3;ext=1\r\nabc\r\n", "4\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n"}, &events};
  RecordingSink sink{&events};
  beast::flat_buffer in;
  std::vector<char> window(4);
  const wire::PumpResult result = run(wire::pump_body(parser, in, source, sink, wire::OutFraming::chunked, window, ""));
  EXPECT_EQ(result.end, wire::PumpEnd::complete);
  EXPECT_EQ(sink.taken, "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
  EXPECT_TRUE(request.parts().body.empty()) << "a streamed body is not kept";
}

TEST(BodyPump, TheBodyLimitCountsAStreamedChunkedBody) {
  ClientRequest request;
  ClientRequestParser parser(request);
  parser.body_limit(5);
  const std::string head = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  boost::system::error_code ec;
  parser.put(asio::buffer(head), ec);
  Events events;
  ScriptedSource source{{"3\r\nabc\r\n", "3\r\ndef\r\n0\r\n\r\n"}, &events};
  RecordingSink sink{&events};
  beast::flat_buffer in;
  std::vector<char> window(64);
  const wire::PumpResult result = run(wire::pump_body(parser, in, source, sink, wire::OutFraming::chunked, window, ""));
  EXPECT_EQ(result.end, wire::PumpEnd::malformed);
  EXPECT_EQ(result.ec, beast::http::error::body_limit);
  EXPECT_EQ(sink.taken, "3\r\nabc\r\n") << "what came within the limit went on; the rest never did";
}

// An answer to store is read while it fits the limit; one past it is known at once from its
// Content-Length (not a byte of its body read), or once limit + 1 bytes came without one.
TEST(ReadBodyUpTo, KeepsWhatFitsAndStopsAtOnceWhenTheBodyGoesPastTheLimit) {
  Events events;
  {
    ScriptedSource source{{"0123456789"}, &events};
    wire::StreamedResponseParser parser;
    read_head(parser, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    beast::flat_buffer in;
    std::string body;
    boost::system::error_code ec;
    EXPECT_EQ(run(wire::read_body_up_to(parser, in, source, body, 10, ec)), wire::BodyKept::whole);
    EXPECT_EQ(body, "0123456789");
  }
  {
    ScriptedSource source{{"0123456789"}, &events};
    wire::StreamedResponseParser parser;
    read_head(parser, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    beast::flat_buffer in;
    std::string body;
    boost::system::error_code ec;
    EXPECT_EQ(run(wire::read_body_up_to(parser, in, source, body, 9, ec)), wire::BodyKept::past_limit);
    EXPECT_TRUE(body.empty());
    EXPECT_EQ(source.bytes_read, 0u) << "a length past the limit is known before the body is read";
  }
  {
    ScriptedSource source{{"4\r\nabcd\r\n", "4\r\nefgh\r\n0\r\n\r\n"}, &events};
    wire::StreamedResponseParser parser;
    read_head(parser, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    beast::flat_buffer in;
    std::string body;
    boost::system::error_code ec;
    EXPECT_EQ(run(wire::read_body_up_to(parser, in, source, body, 5, ec)), wire::BodyKept::past_limit);
    EXPECT_EQ(body, "abcdef") << "limit + 1 bytes, then no more";
  }
  {
    ScriptedSource source{{"01234"}, &events};
    wire::StreamedResponseParser parser;
    read_head(parser, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    beast::flat_buffer in;
    std::string body;
    boost::system::error_code ec;
    EXPECT_EQ(run(wire::read_body_up_to(parser, in, source, body, 100, ec)), wire::BodyKept::failed);
    EXPECT_EQ(ec, beast::http::error::partial_message);
  }
}

TEST(ResponseHead, InterimAnswersAreReadPastAndTheBodyIsLeftForThePump) {
  Events events;
  ScriptedSource source{
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n",
       "Content-Length: 3\r\n\r\nabc"},
      &events};
  beast::flat_buffer in;
  std::optional<wire::StreamedResponseParser> parser;
  const auto [ec, bytes] = run(wire::read_response_head(source, in, parser, 64 * 1024, false));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser->get().result_int(), 200u);
  EXPECT_EQ(beast::buffers_to_string(in.data()), "abc");

  ScriptedSource closed{{}, &events};
  beast::flat_buffer empty;
  const auto [closed_ec, closed_bytes] = run(wire::read_response_head(closed, empty, parser, 64 * 1024, false));
  EXPECT_EQ(closed_ec, beast::http::error::end_of_stream);
  EXPECT_EQ(closed_bytes, 0u);
}

}  // namespace
}  // namespace idem::http
