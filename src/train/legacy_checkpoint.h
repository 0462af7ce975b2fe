// Checkpoints of format version 1, which resume as version 2's.
#pragma once

#include "mixp/io/checkpoint.h"
#include "mixp/state_dict.h"

namespace mixp::train {

/// The state of a version 1 checkpoint under version 2's part prefixes. Version 1 did not save
/// the schedule's settings: `schedule` (the resuming run's own) stands in for them. Throws
/// mixp::Error naming what is missing or malformed.
StateDict legacy_checkpoint_state(const io::Checkpoint& checkpoint, const StateDict& schedule);

}  // namespace mixp::train
