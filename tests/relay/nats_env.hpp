#pragma once
// A private nats-server (Debian's 2.9, JetStream on, 127.0.0.1, a port the test picks) and a
// small libnats client to create the stream and read back what the relay published.
// Blocking: test threads only.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace idem::test::relay {

class NatsServer {
 public:
  // Starts at once; waits until it accepts connections. `max_payload` in bytes.
  NatsServer(const std::filesystem::path& dir, std::size_t max_payload = 1024 * 1024);
  ~NatsServer();
  std::uint16_t port() const { return port_; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  void stop();   // SIGTERM, waits (JetStream's store stays on disk)
  void start();  // again, on the same port and store
  std::string describe();

 private:
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<Process> process_;
};

struct NatsMessage {
  std::string subject;
  std::string msg_id;  // Nats-Msg-Id
  std::string traceparent;
  std::string tracestate;
  std::vector<std::string> header_names;  // every header the message carries, as stored
  std::string body;
};

// Creates `stream` on `subjects` (e.g. "outbox.>") with a duplicate window of `duplicates`.
void create_stream(const std::string& url, const std::string& stream, const std::string& subjects,
                   std::chrono::milliseconds duplicates);
// Gives `stream` these subjects (its other settings kept), as an operator editing it would.
void set_stream_subjects(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects);
// Publishes one message to JetStream and waits for its ack (playing an earlier relay version);
// throws unless it was stored.
void publish_message(const std::string& url, const std::string& subject, const std::string& msg_id,
                     const std::string& body);
// Every message in `stream`, in stream order.
std::vector<NatsMessage> read_stream_messages(const std::string& url, const std::string& stream);

}  // namespace idem::test::relay
