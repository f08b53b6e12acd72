// Test seams of io.cc. Internal to the planner library.
#ifndef REMAT_SRC_IO_INTERNAL_H_
#define REMAT_SRC_IO_INTERNAL_H_

#include <functional>
#include <string>

namespace remat::internal {

// Called by WriteOutputFile, when it replaces a file, with the temporary
// file's path after the content is written and synced, before the rename:
// lets tests interrupt a write at its most delicate moment. An empty
// function removes the hook.
void SetBeforeRenameHookForTesting(std::function<void(const std::string& temp_path)> hook);

}  // namespace remat::internal

#endif  // REMAT_SRC_IO_INTERNAL_H_
