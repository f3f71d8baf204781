// What turns the flight recorder into dumps and peer reports, per process:
//
//  - dumps (trace_dump.h) to DDPX_TRACE_DIR/rank<R>.jsonl when an op fails
//    (before the caller sees the error, waiting at most kDumpWait), on
//    SIGUSR1 (the handler only sets a flag and writes a byte to a pipe; a
//    thread writes the file), and when any rank asks through the store;
//  - on a failure that names silent peers, asks every rank through the
//    store to dump and to publish what it is doing in the failed op's
//    group, and waits at most kPeerStateWait for the silent peers' answers,
//    so the error says "rank 3: in allreduce #1233 for 31.2 s" or "rank 3:
//    no answer (stopped, hung or dead)".
//
// Two threads, started by attach_world (init_process_group): one writes
// dumps and never touches the store; the other polls the store for dump
// requests every kPollEvery on a connection of its own and runs the peer
// exchanges. A store that stops answering (its host stopped) holds up only
// that thread. A dump never blocks training and never throws; a dump that
// cannot be written (full disk, no folder) is reported on stderr.
//
// Store keys: "ddpx_trace/dump_requests" (a counter, in the world's store)
// and "ddpx_trace/state/<rank>" = "<request> <state>" in each group's store.
#ifndef DDPX_PROCESS_GROUP_TRACING_TRACE_SERVICE_H_
#define DDPX_PROCESS_GROUP_TRACING_TRACE_SERVICE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "process_group/tracing/flight_recorder.h"
#include "store/store.h"

namespace ddpx {

class TraceService : public FailureListener {
 public:
  static constexpr std::chrono::milliseconds kPollEvery{200};
  static constexpr std::chrono::milliseconds kPeerStateWait{1200};
  static constexpr std::chrono::milliseconds kDumpWait{2000};
  static constexpr char kRequestKey[] = "ddpx_trace/dump_requests";
  static constexpr char kStatePrefix[] = "ddpx_trace/state/";

  // The process's service (leaked), listening to FlightRecorder::get().
  static TraceService& get();

  // init_process_group: the job's store, this process's place in it.
  // Reads DDPX_TRACE_DIR (unless set_trace_dir was called), starts the
  // threads, and installs the SIGUSR1 handler when dumps have somewhere to
  // go and SIGUSR1 still has its default action.
  void attach_world(std::shared_ptr<Store> store, int rank, int world_size);
  // destroy_process_group: stops using the store (never waits for it).
  void detach_world();

  // Where dumps go ("" = nowhere).
  std::string trace_dir() const;
  void set_trace_dir(const std::string& dir);
  // This process's dump file: <dir>/rank<R>.jsonl (pid<P> before a rank is
  // known).
  std::string dump_path() const;

  // Writes a dump on the dump thread and waits up to `wait` for it: the
  // write's error, DeadlineExceeded if it took longer, FailedPrecondition
  // without a trace dir.
  absl::Status dump(const std::string& reason, std::chrono::milliseconds wait);

  // FailureListener.
  std::vector<std::string> peer_states(const TraceGroupInfo& group,
                                       const Culprits& culprits) override;
  void on_failure(const TraceError& error) override;

  struct Impl;

 private:
  TraceService();
  Impl* impl_;  // leaked with the service: its threads outlive main()
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_TRACING_TRACE_SERVICE_H_
