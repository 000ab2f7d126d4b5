// An output file that is also an input would be truncated before it is read
// (`rdmadiag analyze --json capture.pcap capture.pcap` emptied the capture):
// refused up front, as cp refuses to copy a file onto itself. Files are
// compared by device and inode, so a symbolic link or another path to the same
// file counts too. Standard input and output ("-") are never compared.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporters/report_outputs.h"

namespace rdmadiag::cli {

// (option, path) of each output a command would write; empty paths are skipped.
using NamedOutputs = std::vector<std::pair<std::string_view, std::string>>;

// The report outputs of analyze and capture: --json and those of `o` (--jsonl, --csv, ...).
NamedOutputs report_outputs(const std::string& json_path, const exporters::OutputOptions& o);

// False (after a one-line error on stderr naming `command`) when an output is
// one of `inputs`.
bool outputs_apart_from_inputs(std::string_view command, const std::vector<std::string>& inputs,
                               const NamedOutputs& outputs);

}  // namespace rdmadiag::cli
