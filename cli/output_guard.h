// An output file that is also an input would be truncated before it is read
// (`rdmadiag analyze --json capture.pcap capture.pcap` emptied the capture):
// refused up front, as cp refuses to copy a file onto itself. Files are
// compared by device and inode, so a symbolic link or another path to the same
// file counts too. Standard input ("-") is never compared with outputs.
//
// Two outputs on the same file, or both on standard output ("-"), would leave
// one report or a mix of both (`--json r --csv r` kept only the CSV; `--json -
// --jsonl -` interleaved two formats): refused as well.
#pragma once
#include <initializer_list>
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
// one of `inputs`, two outputs are the same file or both standard output, or
// "-" is given to an output not among `to_stdout` (the options that can write
// to standard output; "-" made the others a file named "-").
bool outputs_apart(std::string_view command, const std::vector<std::string>& inputs, const NamedOutputs& outputs,
                   std::initializer_list<std::string_view> to_stdout);

}  // namespace rdmadiag::cli
