#include "examples/launcher/elastic_launch.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "elastic/elastic_group.h"
#include "elastic/membership_keys.h"
#include "examples/launcher/child_process.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"

namespace ddpx::launcher {
namespace {

constexpr std::chrono::milliseconds kPollInterval{10};

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

LaunchResult launch_elastic_ranks(const ElasticLaunchOptions& e) {
  const LaunchOptions& o = e.ranks;
  LaunchResult result;
  const int port = o.master_port > 0 ? o.master_port : pick_free_port();
  if (port <= 0) {
    result.exit_code = 1;
    result.message = "launcher: could not find a free TCP port";
    return result;
  }
  TCPStoreServerOptions server_options;
  server_options.port = static_cast<uint16_t>(port);
  absl::StatusOr<std::unique_ptr<TCPStoreServer>> server = TCPStoreServer::start(server_options);
  if (!server.ok()) {
    result.exit_code = 1;
    result.message = "launcher: serving the job's store on port " + std::to_string(port) +
                     ": " + std::string(server.status().message());
    return result;
  }
  TCPStoreOptions client_options;
  client_options.port = static_cast<uint16_t>(port);
  absl::StatusOr<std::unique_ptr<TCPStore>> client = TCPStore::create(o.master_addr, client_options);
  if (!client.ok()) {
    result.exit_code = 1;
    result.message = "launcher: connecting to its own store: " + std::string(client.status().message());
    return result;
  }
  PrefixStore job_store(e.store_prefix, std::shared_ptr<Store>(*std::move(client)));
  const std::string host = host_name();

  auto spawn = [&](int slot) -> absl::StatusOr<ChildProcess> {
    SpawnOptions s;
    s.argv = {o.program};
    s.argv.insert(s.argv.end(), o.args.begin(), o.args.end());
    s.env = {{"RANK", std::to_string(slot)},
             {"WORLD_SIZE", std::to_string(o.nproc)},
             {"LOCAL_RANK", std::to_string(slot)},
             {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
             {"GROUP_RANK", "0"},
             {"MASTER_ADDR", o.master_addr},
             {"MASTER_PORT", std::to_string(port)}};
    for (const auto& kv : o.env) s.env.push_back(kv);
    s.die_with_parent = true;
    return ChildProcess::spawn(s);
  };

  std::vector<std::optional<ChildProcess>> slots(static_cast<size_t>(o.nproc));
  for (int slot = 0; slot < o.nproc; ++slot) {
    absl::StatusOr<ChildProcess> child = spawn(slot);
    if (!child.ok()) {
      result.exit_code = 1;
      result.message = "launcher: rank " + std::to_string(slot) + ": " +
                       std::string(child.status().message());
      return result;
    }
    slots[slot].emplace(*std::move(child));
  }
  int restarts = 0;
  bool any_finished = false;
  int first_failure = 0;
  std::string first_message;
  for (;;) {
    int running = 0;
    for (int slot = 0; slot < o.nproc; ++slot) {
      if (!slots[slot].has_value()) continue;
      std::optional<ExitStatus> status = slots[slot]->try_wait();
      if (!status.has_value()) {
        ++running;
        continue;
      }
      const pid_t pid = slots[slot]->pid();
      slots[slot].reset();
      (void)elastic::mark_gone(job_store, host, pid);
      if (status->success()) {
        any_finished = true;
        continue;
      }
      const std::string what = "rank slot " + std::to_string(slot) + " (pid " +
                               std::to_string(pid) + ") " + status->describe();
      if (first_failure == 0) {
        first_failure = status->shell_code();
        first_message = "launcher: " + what;
      }
      absl::StatusOr<bool> finished = job_store.check({elastic::keys::kFinished});
      if (restarts < e.max_restarts && !(finished.ok() && *finished)) {
        ++restarts;
        absl::StatusOr<ChildProcess> child = spawn(slot);
        if (child.ok()) {
          const double now = std::chrono::duration<double>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
          fprintf(stderr, "launcher: %s; starting a replacement (restart %d of %d) at unix %.3f\n",
                  what.c_str(), restarts, e.max_restarts, now);
          slots[slot].emplace(*std::move(child));
          ++running;
          continue;
        }
        fprintf(stderr, "launcher: %s; its replacement failed to start: %s\n", what.c_str(),
                std::string(child.status().message()).c_str());
      } else {
        fprintf(stderr, "launcher: %s; the job goes on without it\n", what.c_str());
      }
    }
    if (running == 0) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  (*server)->stop();
  if (!any_finished && first_failure != 0) {
    result.exit_code = first_failure;
    result.message = first_message + " (no rank finished)";
  }
  return result;
}

}  // namespace ddpx::launcher
