#include "proc_stat.hpp"

#include "fs.hpp"

#include <sstream>

namespace unbounded {

ProcStat parse_proc_stat(std::string_view line)
{
	ProcStat st;
	const auto paren = line.rfind(')');
	if (paren == std::string_view::npos || paren + 2 >= line.size())
		return st;
	std::istringstream fields{std::string(line.substr(paren + 2))};
	std::string state;
	if ((fields >> state) && state.size() == 1)
		st.state = state[0];
	return st;
}

std::optional<ProcStat> read_proc_stat(std::uint32_t pid)
{
	if (pid == 0)
		return std::nullopt;
	auto line = fs::read_file("/proc/" + std::to_string(pid) + "/stat", 4096);
	if (!line)
		return std::nullopt;
	return parse_proc_stat(*line);
}

}  // namespace unbounded
