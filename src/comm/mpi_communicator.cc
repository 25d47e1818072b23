// Open MPI backend: non-blocking MPI calls polled against a deadline; see mpi_communicator.h.
#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

// Checks the return code of an MPI call; MPI's default handler aborts first on most errors.
#define PM_MPI_CHECK(call)                                                      \
  do {                                                                          \
    const int pm_mpi_rc_ = (call);                                              \
    PM_CHECK(pm_mpi_rc_ == MPI_SUCCESS) << #call << " returned " << pm_mpi_rc_; \
  } while (false)

namespace pentamesh::comm {
namespace {

MPI_Datatype ToMpi(core::Dtype dtype) {
  switch (dtype) {
    case core::Dtype::kF32:
      return MPI_FLOAT;
    case core::Dtype::kBF16:
      return MPI_UINT16_T;  // moved as bits; never reduced
    case core::Dtype::kF16:
      return MPI_UINT16_T;
    case core::Dtype::kI32:
      return MPI_INT32_T;
    case core::Dtype::kI64:
      return MPI_INT64_T;
    case core::Dtype::kU8:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

int ToInt(int64_t count, const char* what) {
  PM_CHECK(count >= 0 && count <= INT_MAX) << what << "=" << count << " exceeds MPI's int range";
  return static_cast<int>(count);
}

// The MPI communicator of one group with more than one rank.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::string name, std::vector<int> world_ranks, MPI_Comm comm, double timeout_s)
      : Communicator(std::move(name), std::move(world_ranks), RankIn(comm)),
        comm_(comm),
        timeout_s_(timeout_s) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

 protected:
  void DoAllReduce(void* buffer, int64_t count, core::Dtype dtype) override;
  void DoAllGather(void* output, const void* input, int64_t count_per_rank,
                   core::Dtype dtype) override;
  void DoReduceScatter(void* output, const void* input, int64_t count_per_rank,
                       core::Dtype dtype) override;
  void DoAllToAllV(void* recv, std::span<const int64_t> recv_counts, const void* send,
                   std::span<const int64_t> send_counts, core::Dtype dtype) override;
  void DoSend(const void* buffer, int64_t count, core::Dtype dtype, int peer) override;
  void DoRecv(void* buffer, int64_t count, core::Dtype dtype, int peer) override;
  void DoSendRecv(void* recv_buffer, int64_t recv_count, int src, const void* send_buffer,
                  int64_t send_count, int dst, core::Dtype dtype) override;
  void DoBroadcast(void* buffer, int64_t count, core::Dtype dtype, int root) override;
  void DoBarrier() override;
  void DoPostSend(const void* buffer, int64_t count, core::Dtype dtype, int peer, int tag) override;
  void DoRecvTagged(void* buffer, int64_t count, core::Dtype dtype, int peer, int tag) override;
  void DoWaitSends() override;
  int TagBound() const override;

 private:
  static int RankIn(MPI_Comm comm) {
    int rank = -1;
    PM_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    return rank;
  }
  // Polls the requests until all complete; past the deadline, reports and aborts the job.
  void Wait(MPI_Request* requests, int count, Op op, int64_t bytes, core::Dtype dtype);
  [[noreturn]] void AbortOnTimeout(Op op, int64_t bytes, core::Dtype dtype) const;

  // Frees the staging buffers of completed posted sends.
  void ReapSends();

  MPI_Comm comm_;
  double timeout_s_;
  // Posted sends: requests and their staging copies, in posting order.
  std::vector<MPI_Request> send_requests_;
  std::vector<std::vector<char>> send_staging_;
};

void MpiCommunicator::Wait(MPI_Request* requests, int count, Op op, int64_t bytes,
                           core::Dtype dtype) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s_));
  for (int polls = 0;; ++polls) {
    int done = 0;
    PM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (polls < 64) continue;  // short operations finish while spinning
    const auto now = Clock::now();
    if (now > deadline) AbortOnTimeout(op, bytes, dtype);
    // Give the core to the peers we wait for (ranks are oversubscribed in tests and CI).
    if (now - start < std::chrono::microseconds(500)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void MpiCommunicator::AbortOnTimeout(Op op, int64_t bytes, core::Dtype dtype) const {
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const std::string message = fmt::format(
      "pentamesh comm: timeout: world rank {} (rank {} of group {}) did not complete {} ({} "
      "bytes, {}) within {} s; aborting the job (set {} to change the limit)",
      world_rank, rank(), Describe(), OpName(op), bytes, core::DtypeName(dtype), timeout_s_,
      kCommTimeoutEnv);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

void MpiCommunicator::DoAllReduce(void* buffer, int64_t count, core::Dtype dtype) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, ToInt(count, "count"), ToMpi(dtype), MPI_SUM,
                              comm_, &request));
  Wait(&request, 1, Op::kAllReduce, count * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

void MpiCommunicator::DoAllGather(void* output, const void* input, int64_t count_per_rank,
                                  core::Dtype dtype) {
  const int64_t shard_bytes = count_per_rank * static_cast<int64_t>(core::DtypeSize(dtype));
  const bool in_place = input == static_cast<const char*>(output) + rank() * shard_bytes;
  const int count = ToInt(count_per_rank, "count_per_rank");
  MPI_Request request;
  PM_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : input, count, ToMpi(dtype), output, count,
                              ToMpi(dtype), comm_, &request));
  Wait(&request, 1, Op::kAllGather, shard_bytes * size(), dtype);
}

void MpiCommunicator::DoReduceScatter(void* output, const void* input, int64_t count_per_rank,
                                      core::Dtype dtype) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Ireduce_scatter_block(input, output, ToInt(count_per_rank, "count_per_rank"),
                                         ToMpi(dtype), MPI_SUM, comm_, &request));
  Wait(&request, 1, Op::kReduceScatter,
       count_per_rank * size() * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

void MpiCommunicator::DoAllToAllV(void* recv, std::span<const int64_t> recv_counts,
                                  const void* send, std::span<const int64_t> send_counts,
                                  core::Dtype dtype) {
  const auto n = static_cast<size_t>(size());
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int64_t send_offset = 0;
  int64_t recv_offset = 0;
  for (size_t p = 0; p < n; ++p) {
    sc[p] = ToInt(send_counts[p], "send_count");
    rc[p] = ToInt(recv_counts[p], "recv_count");
    sd[p] = ToInt(send_offset, "send displacement");
    rd[p] = ToInt(recv_offset, "recv displacement");
    send_offset += send_counts[p];
    recv_offset += recv_counts[p];
  }
  MPI_Request request;
  PM_MPI_CHECK(MPI_Ialltoallv(send, sc.data(), sd.data(), ToMpi(dtype), recv, rc.data(), rd.data(),
                              ToMpi(dtype), comm_, &request));
  Wait(&request, 1, Op::kAllToAllV, send_offset * static_cast<int64_t>(core::DtypeSize(dtype)),
       dtype);
}

void MpiCommunicator::DoSend(const void* buffer, int64_t count, core::Dtype dtype, int peer) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Isend(buffer, ToInt(count, "count"), ToMpi(dtype), peer, 0, comm_, &request));
  Wait(&request, 1, Op::kSend, count * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

void MpiCommunicator::DoRecv(void* buffer, int64_t count, core::Dtype dtype, int peer) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Irecv(buffer, ToInt(count, "count"), ToMpi(dtype), peer, 0, comm_, &request));
  Wait(&request, 1, Op::kRecv, count * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

void MpiCommunicator::DoSendRecv(void* recv_buffer, int64_t recv_count, int src,
                                 const void* send_buffer, int64_t send_count, int dst,
                                 core::Dtype dtype) {
  MPI_Request requests[2];
  PM_MPI_CHECK(MPI_Irecv(recv_buffer, ToInt(recv_count, "recv_count"), ToMpi(dtype), src, 0, comm_,
                         &requests[0]));
  PM_MPI_CHECK(MPI_Isend(send_buffer, ToInt(send_count, "send_count"), ToMpi(dtype), dst, 0, comm_,
                         &requests[1]));
  Wait(requests, 2, Op::kSendRecv,
       (send_count + recv_count) * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

int MpiCommunicator::TagBound() const {
  void* value = nullptr;
  int found = 0;
  PM_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found));
  return found ? *static_cast<int*>(value) : 32767;
}

void MpiCommunicator::DoPostSend(const void* buffer, int64_t count, core::Dtype dtype, int peer,
                                 int tag) {
  ReapSends();
  const size_t bytes = static_cast<size_t>(count) * core::DtypeSize(dtype);
  send_staging_.emplace_back(static_cast<const char*>(buffer),
                             static_cast<const char*>(buffer) + bytes);
  send_requests_.emplace_back();
  PM_MPI_CHECK(MPI_Isend(send_staging_.back().data(), ToInt(count, "count"), ToMpi(dtype), peer,
                         tag, comm_, &send_requests_.back()));
}

void MpiCommunicator::DoRecvTagged(void* buffer, int64_t count, core::Dtype dtype, int peer,
                                   int tag) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Irecv(buffer, ToInt(count, "count"), ToMpi(dtype), peer, tag, comm_, &request));
  Wait(&request, 1, Op::kRecv, count * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
  ReapSends();
}

void MpiCommunicator::ReapSends() {
  size_t kept = 0;
  for (size_t i = 0; i < send_requests_.size(); ++i) {
    int done = 0;
    PM_MPI_CHECK(MPI_Test(&send_requests_[i], &done, MPI_STATUS_IGNORE));
    if (done) continue;
    if (kept != i) {
      send_requests_[kept] = send_requests_[i];
      send_staging_[kept] = std::move(send_staging_[i]);
    }
    ++kept;
  }
  send_requests_.resize(kept);
  send_staging_.resize(kept);
}

void MpiCommunicator::DoWaitSends() {
  if (send_requests_.empty()) return;
  int64_t bytes = 0;
  for (const auto& s : send_staging_) bytes += static_cast<int64_t>(s.size());
  Wait(send_requests_.data(), static_cast<int>(send_requests_.size()), Op::kSend, bytes,
       core::Dtype::kU8);
  send_requests_.clear();
  send_staging_.clear();
}

void MpiCommunicator::DoBroadcast(void* buffer, int64_t count, core::Dtype dtype, int root) {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Ibcast(buffer, ToInt(count, "count"), ToMpi(dtype), root, comm_, &request));
  Wait(&request, 1, Op::kBroadcast, count * static_cast<int64_t>(core::DtypeSize(dtype)), dtype);
}

void MpiCommunicator::DoBarrier() {
  MPI_Request request;
  PM_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  Wait(&request, 1, Op::kBarrier, 0, core::Dtype::kU8);
}

// MpiWorld objects alive in this process (at most one).
std::atomic<int> g_live_worlds{0};

}  // namespace

std::string MpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<size_t>(std::max(0, length)));
  return version.substr(0, version.find('\n'));
}

core::Result<double> ResolveCommTimeout(std::optional<double> option_s, const char* env_text) {
  if (option_s.has_value()) {
    if (!std::isfinite(*option_s) || *option_s <= 0) {
      return core::Status::Error(
          fmt::format("comm: timeout_s={} must be a positive number of seconds", *option_s));
    }
    return *option_s;
  }
  if (env_text == nullptr) return kDefaultCommTimeoutS;
  char* end = nullptr;
  const double value = std::strtod(env_text, &end);
  if (end == env_text || *end != '\0' || !std::isfinite(value) || value <= 0) {
    return core::Status::Error(fmt::format("comm: {}='{}' must be a positive number of seconds",
                                           kCommTimeoutEnv, env_text));
  }
  return value;
}

core::Result<std::unique_ptr<MpiWorld>> MpiWorld::Create(const MpiOptions& options) {
  PM_ASSIGN_OR_RETURN(const double timeout_s,
                      ResolveCommTimeout(options.timeout_s, std::getenv(kCommTimeoutEnv)));
  if (g_live_worlds > 0) {
    return core::Status::Error("comm: an MpiWorld exists already; one MpiWorld per process");
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return core::Status::Error("comm: MPI was already finalized; one MpiWorld per process");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      return core::Status::Error("comm: MPI_Init_thread failed");
    }
  }
  int rank = 0;
  int size = 0;
  PM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::unique_ptr<MpiWorld> world(new MpiWorld(!initialized, rank, size, timeout_s));
  MPI_Comm host;
  PM_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  PM_MPI_CHECK(MPI_Comm_size(host, &world->local_size_));
  PM_MPI_CHECK(MPI_Comm_free(&host));
  std::vector<int> all(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) all[static_cast<size_t>(r)] = r;
  if (size == 1) {
    world->world_ = std::make_unique<SelfCommunicator>("world", rank);
  } else {
    MPI_Comm dup;
    PM_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));  // our traffic never meets the caller's
    world->world_ = std::make_unique<MpiCommunicator>("world", all, dup, timeout_s);
  }
  return world;
}

MpiWorld::MpiWorld(bool owns_mpi, int rank, int size, double timeout_s)
    : owns_mpi_(owns_mpi), rank_(rank), size_(size), timeout_s_(timeout_s) {
  ++g_live_worlds;
}

MpiWorld::~MpiWorld() {
  --g_live_worlds;
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiWorld::CreateGroup(const std::string& name,
                                                    const std::vector<int>& world_ranks) {
  const int tag = next_group_tag_++;  // every rank counts every call, so members agree
  PM_CHECK(!world_ranks.empty()) << "group '" << name << "' has no ranks";
  bool member = false;
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    PM_CHECK(world_ranks[i] >= 0 && world_ranks[i] < size_)
        << "group '" << name << "' names rank " << world_ranks[i] << " of a world of " << size_;
    PM_CHECK(i == 0 || world_ranks[i - 1] < world_ranks[i])
        << "group '" << name << "' ranks must be ascending";
    member = member || world_ranks[i] == rank_;
  }
  PM_CHECK(member) << "rank " << rank_ << " creates group '" << name << "' without being in it";
  if (world_ranks.size() == 1) return std::make_unique<SelfCommunicator>(name, rank_);
  MPI_Group world_group;
  MPI_Group group;
  MPI_Comm comm;
  PM_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  PM_MPI_CHECK(MPI_Group_incl(world_group, static_cast<int>(world_ranks.size()), world_ranks.data(),
                              &group));
  PM_MPI_CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm));
  PM_MPI_CHECK(MPI_Group_free(&group));
  PM_MPI_CHECK(MPI_Group_free(&world_group));
  return std::make_unique<MpiCommunicator>(name, world_ranks, comm, timeout_s_);
}

}  // namespace pentamesh::comm
