// The roles backends give their buffers, matched to memory records; the ledger of what cases
// leave allocated (sweep/buffer_roles.hpp).
#include <gtest/gtest.h>

#include "sweep/buffer_roles.hpp"

namespace attnprof {
namespace {

using trace::MemoryActivity;
using trace::MemoryOperation;

MemoryActivity record(MemoryOperation op, std::uint64_t t, std::uint64_t address, std::uint64_t bytes) {
  MemoryActivity m;
  m.operation = op;
  m.start_ns = t;
  m.address = address;
  m.bytes = bytes;
  m.memory_kind = "Device";
  return m;
}

TEST(BufferRoles, NotedRolesAreTakenOnceAndEmptyRolesAreNot) {
  take_buffer_roles();  // whatever an earlier test noted
  int a = 0, b = 0;
  note_buffer_role(&a, 64, "scores");
  note_buffer_role(&b, 32, "");
  note_buffer_role(nullptr, 32, "q");
  const std::vector<BufferRole> roles = take_buffer_roles();
  ASSERT_EQ(roles.size(), 1u);
  EXPECT_EQ(roles[0].address, reinterpret_cast<std::uint64_t>(&a));
  EXPECT_EQ(roles[0].bytes, 64u);
  EXPECT_EQ(roles[0].role, "scores");
  EXPECT_TRUE(take_buffer_roles().empty());
}

TEST(BufferRoles, AllocationsTakeTheirRoleByAddressAndSizeAndReleasesTheirAllocations) {
  trace::ActivityBatch batch;
  batch.memory = {record(MemoryOperation::release, 30, 0x1000, 256),     // frees the scores (records out of order)
                  record(MemoryOperation::allocation, 10, 0x1000, 256),  // the scores
                  record(MemoryOperation::allocation, 40, 0x1000, 256),  // the same address again: probabilities
                  record(MemoryOperation::allocation, 20, 0x2000, 128),  // unnamed
                  record(MemoryOperation::allocation, 50, 0x3000, 512),  // a different size at a named address
                  record(MemoryOperation::release, 60, 0x9000, 64)};     // allocated before the batch
  const std::vector<BufferRole> roles = {{0x1000, 256, "scores"}, {0x1000, 256, "probabilities"}, {0x3000, 64, "q"}};
  EXPECT_EQ(assign_buffer_roles(batch, roles), 3u);
  // The latest note for an address and size names both of its allocations; the release between them
  // takes the role of the allocation it frees.
  EXPECT_EQ(batch.memory[1].role, "probabilities");
  EXPECT_EQ(batch.memory[0].role, "probabilities");
  EXPECT_EQ(batch.memory[2].role, "probabilities");
  EXPECT_EQ(batch.memory[3].role, "");
  EXPECT_EQ(batch.memory[4].role, "");  // 512 bytes, not the 64 noted
  EXPECT_EQ(batch.memory[5].role, "");
  // A role the collector or a trace already gave stays.
  batch.memory[3].role = "workspace";
  assign_buffer_roles(batch, {{0x2000, 128, "scores"}});
  EXPECT_EQ(batch.memory[3].role, "workspace");
}

TEST(MemoryLedger, ACaseStartsHoldingWhatTheCasesBeforeItLeftAllocated) {
  MemoryLedger ledger;
  trace::ActivityBatch first;
  first.memory = {record(MemoryOperation::allocation, 1, 0x1000, 100), record(MemoryOperation::allocation, 2, 0x2000, 50),
                  record(MemoryOperation::release, 3, 0x2000, 50), record(MemoryOperation::release, 4, 0x7000, 8)};
  first.memory[0].role = "workspace";
  ledger.record(first);
  EXPECT_EQ(ledger.live_bytes(), 100u);

  trace::ActivityBatch second;
  second.memory = {record(MemoryOperation::release, 5, 0x1000, 100)};
  ledger.carry_into(second, 1);
  ASSERT_EQ(second.memory.size(), 2u);
  const MemoryActivity& carried = second.memory[1];
  EXPECT_TRUE(carried.carried);
  EXPECT_EQ(carried.start_ns, 0u);
  EXPECT_EQ(carried.bytes, 100u);
  EXPECT_EQ(carried.role, "workspace");
  EXPECT_EQ(carried.tag.case_index, 1);
  EXPECT_EQ(carried.tag.phase, trace::Phase::none);
  // The release finds the carried allocation's role; the carried record is not applied twice.
  assign_buffer_roles(second, {});
  EXPECT_EQ(second.memory[0].role, "workspace");
  ledger.record(second);
  EXPECT_EQ(ledger.live_bytes(), 0u);
}

}  // namespace
}  // namespace attnprof
