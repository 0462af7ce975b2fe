// The communicator of a run that is one process: every collective is a copy or nothing.
#pragma once

#include <memory>

#include "mixp/dist/communicator.h"

namespace mixp::dist {

std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace mixp::dist
