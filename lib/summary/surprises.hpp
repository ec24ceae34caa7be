// "Guess first": the config's expectations compared with what the trace showed. Each
// disagreement is a Surprise stored on the case.
#pragma once

#include <vector>

#include "config/config.hpp"
#include "summary/summary.hpp"

namespace attnprof {

// Does this expectation speak about this case (backend or family, and the optional filters)?
bool expectation_applies(const Expectation& e, const CaseSummary& c);

// Appends to c.surprises every checked field of every applicable expectation that the case
// contradicts. Cases that did not run are not judged.
void add_surprises(CaseSummary& c, const std::vector<Expectation>& expectations);

}  // namespace attnprof
