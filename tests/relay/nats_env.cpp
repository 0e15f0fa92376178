#include "relay/nats_env.hpp"

#include <nats/nats.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "support/config_text.hpp"
#include "support/ports.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

void check(natsStatus status, const std::string& what) {
  if (status != NATS_OK) throw std::runtime_error("nats test client: " + what + ": " + natsStatus_GetText(status));
}

// One connection and JetStream context for a test call.
struct Client {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  explicit Client(const std::string& url) {
    check(natsConnection_ConnectTo(&connection, url.c_str()), "connect " + url);
    check(natsConnection_JetStream(&js, connection, nullptr), "JetStream");
  }
  ~Client() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (connection != nullptr) natsConnection_Destroy(connection);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
};

std::string header(natsMsg* msg, const char* name) {
  const char* value = nullptr;
  return natsMsgHeader_Get(msg, name, &value) == NATS_OK && value != nullptr ? value : "";
}

std::vector<std::string> header_names(natsMsg* msg) {
  const char** keys = nullptr;
  int count = 0;
  std::vector<std::string> names;
  if (natsMsgHeader_Keys(msg, &keys, &count) != NATS_OK) return names;  // NATS_NOT_FOUND: no headers
  for (int i = 0; i < count; ++i) names.emplace_back(keys[i]);
  free(static_cast<void*>(keys));
  return names;
}

}  // namespace

NatsServer::NatsServer(const std::filesystem::path& dir, std::size_t max_payload)
    : dir_(dir / "nats"), port_(free_port()) {
  std::filesystem::create_directories(dir_ / "store");
  write_file(dir_ / "nats.conf", "listen: 127.0.0.1:" + std::to_string(port_) +
                                     "\nmax_payload: " + std::to_string(max_payload) + "\njetstream { store_dir: \"" +
                                     (dir_ / "store").string() + "\" }\n");
  start();
}

NatsServer::~NatsServer() { stop(); }

void NatsServer::start() {
  process_ = std::make_unique<Process>(
      Process::start(ProcessSpec{"/usr/sbin/nats-server", {"-c", (dir_ / "nats.conf").string()}, {}, dir_, "nats"}));
  if (!wait_for_port(port_, 10s)) throw std::runtime_error("nats-server did not listen: " + process_->describe());
}

void NatsServer::stop() {
  if (process_ && process_->running()) process_->terminate(10s);
}

std::string NatsServer::describe() { return process_ ? process_->describe() : "nats-server not started"; }

void create_stream(const std::string& url, const std::string& stream, const std::string& subjects,
                   std::chrono::milliseconds duplicates) {
  Client client(url);
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = stream.c_str();
  const char* subject_list[] = {subjects.c_str()};
  config.Subjects = subject_list;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  config.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(duplicates).count();
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  check(js_AddStream(&info, client.js, &config, nullptr, &code), "add stream " + stream);
  jsStreamInfo_Destroy(info);
}

void set_stream_subjects(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects) {
  Client client(url);
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  check(js_GetStreamInfo(&info, client.js, stream.c_str(), nullptr, &code), "stream info");
  std::vector<const char*> list;
  for (const std::string& subject : subjects) list.push_back(subject.c_str());
  jsStreamConfig config = *info->Config;
  config.Subjects = list.data();
  config.SubjectsLen = static_cast<int>(list.size());
  jsStreamInfo* updated = nullptr;
  const natsStatus status = js_UpdateStream(&updated, client.js, &config, nullptr, &code);
  jsStreamInfo_Destroy(info);
  if (updated != nullptr) jsStreamInfo_Destroy(updated);
  check(status, "update stream " + stream);
}

void publish_message(const std::string& url, const std::string& subject, const std::string& msg_id,
                     const std::string& body) {
  Client client(url);
  natsMsg* msg = nullptr;
  check(natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size())), "message");
  natsStatus status = natsMsgHeader_Set(msg, "Nats-Msg-Id", msg_id.c_str());
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  if (status == NATS_OK) status = js_PublishMsg(&ack, client.js, msg, nullptr, &code);
  natsMsg_Destroy(msg);
  const bool stored = status == NATS_OK && ack != nullptr && !ack->Duplicate;
  if (ack != nullptr) jsPubAck_Destroy(ack);
  check(status, "publish on " + subject);
  if (!stored) throw std::runtime_error("nats test client: " + msg_id + " was answered duplicate");
}

std::vector<NatsMessage> read_stream_messages(const std::string& url, const std::string& stream) {
  Client client(url);
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  check(js_GetStreamInfo(&info, client.js, stream.c_str(), nullptr, &code), "stream info");
  const std::uint64_t first = info->State.FirstSeq;
  const std::uint64_t last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  std::vector<NatsMessage> messages;
  for (std::uint64_t seq = first; seq != 0 && seq <= last; ++seq) {
    natsMsg* msg = nullptr;
    if (js_GetMsg(&msg, client.js, stream.c_str(), seq, nullptr, &code) != NATS_OK) continue;  // deleted
    messages.push_back(NatsMessage{.subject = natsMsg_GetSubject(msg),
                                   .msg_id = header(msg, "Nats-Msg-Id"),
                                   .traceparent = header(msg, "traceparent"),
                                   .tracestate = header(msg, "tracestate"),
                                   .header_names = header_names(msg),
                                   .body = std::string(natsMsg_GetData(msg), natsMsg_GetDataLength(msg))});
    natsMsg_Destroy(msg);
  }
  return messages;
}

}  // namespace idem::test::relay
